"""`make bench BENCH_ARGS=--attack`: legitimate traffic while hostile clients press the server (issue 17).

For each attack (service/bench/attacks.py), on a fresh server process: the attack starts, and ordinary clients
on connections of their own measure Recommend (2 sequential callers, 3 s deadline) and health Check (every
20 ms, 2 s deadline, like a probe) for `seconds`. Printed side by side: Recommend OK share and p99, health OK
share and p99, the server's threads and RSS before the attack, at its end, and 5 s after it stopped. Then the
polite-client-under-flood and refused-streams rows (service/bench/polite_bench.py). With `--baseline DIR` the
same runs go against another checkout first (e.g. the code before this issue).
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .attacks import ConnectionFlood, IdleStreams, Legit, RapidReset, rss_mb, threads
from .loadgen import RECOMMEND, REPO, ServerProcess, distinct_briefs, have_h2load
from .polite_bench import polite_row, refused_row


def _h2load_flood(port: int, seconds: float) -> contextlib.AbstractContextManager[Any]:
    """25 connections x 10 streams of Recommend from h2load (the overload bench's widest flood)."""

    @contextlib.contextmanager
    def run() -> Any:
        with tempfile.TemporaryDirectory() as tmp:
            body = Path(tmp) / "recommend"
            body.write_bytes(distinct_briefs(1)[0])
            proc = subprocess.Popen(
                ["h2load", "-c", "25", "-m", "10", "-D", f"{seconds + 2:g}", "-d", str(body),
                 "-H", "content-type: application/grpc", "-H", "te: trailers",
                 f"http://127.0.0.1:{port}{RECOMMEND}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                time.sleep(1)
                yield proc
            finally:
                proc.terminate()
                proc.wait(30)

    return run()


ATTACKS: list[tuple[str, Callable[[int, float], Any]]] = [
    ("none", lambda port, s: contextlib.nullcontext()),
    ("71 conns x 2 idle reflection streams", lambda port, s: IdleStreams("127.0.0.1", port, 71, 2, "reflection")),
    ("200 conns x 2 header-only streams", lambda port, s: IdleStreams("127.0.0.1", port, 200, 2, "headers")),
    ("rapid reset, 1 connection", lambda port, s: RapidReset("127.0.0.1", port)),
    ("500 idle connections", lambda port, s: ConnectionFlood("127.0.0.1", port, 500)),
]


def _one(repo: Path, label: str, make: Callable[[int, float], Any], seconds: float) -> str:
    from ..wire.api import pb

    request = pb.RecommendRequest.FromString(distinct_briefs(1)[0][5:])
    server = ServerProcess(1, repo)
    try:
        pid = server.proc.pid
        with Legit(server.addr, request, callers=1, health_every=0.1):
            time.sleep(1.5)  # warm: caches and allocator pools settle before the memory is read
        before, threads_before = rss_mb(pid), threads(pid)
        with make(server.port, seconds) as attack:
            ready = getattr(attack, "ready", None)
            if ready is not None:
                ready.wait(60)
            time.sleep(0.5)
            with Legit(server.addr, request) as legit:
                time.sleep(seconds)
            during, threads_during = rss_mb(pid), threads(pid)
            extra = f" resets {attack.resets:,}" if isinstance(attack, RapidReset) else ""
        time.sleep(5)
        after = rss_mb(pid)
    finally:
        server.stop()
    rec, health = legit.recommend, legit.health
    return (f"    {label:38} Recommend {rec.ok:4}/{rec.total:<4} OK ({rec.ok_share:6.1%}) p99 {rec.pct(0.99):7.1f} ms"
            f" | health {health.ok:4}/{health.total:<4} ({health.ok_share:6.1%}) p99 {health.pct(0.99):7.1f} ms"
            f" | threads {threads_before}->{threads_during} | RSS {before:5.0f} -> {during:5.0f} -> {after:5.0f} MB"
            f"{extra}")


def run_attacks(seconds: float, baseline: str = "") -> int:
    attacks = list(ATTACKS)
    if have_h2load():
        attacks.append(("Recommend flood, 25 conns x 10 (h2load)", _h2load_flood))
    else:
        print("  (h2load not found: the 25-connection Recommend flood is skipped; Debian nghttp2-client has it)")
    print(f"Attack: legitimate Recommend (2 callers, 3 s deadline) and health (every 20 ms, 2 s deadline) on "
          f"connections of their own, {seconds:g} s per attack; RSS before -> at the end -> 5 s after")
    targets = [("baseline " + baseline, Path(baseline).resolve())] if baseline else []
    targets.append(("this checkout", REPO))
    for name, repo in targets:
        print(f"  [{name}]")
        for label, make in attacks:
            print(_one(repo, label, make, seconds), flush=True)
        print(polite_row(repo, seconds, _h2load_flood if have_h2load() else None), flush=True)
        print(refused_row(repo), flush=True)
    return 0
