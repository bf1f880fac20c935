"""Two rows of `make bench BENCH_ARGS=--attack` (issue 26), each on a fresh server process:

- polite client under a flood: while 25 connections x 10 streams flood Recommend (h2load when installed, else
  the in-Python `RequestFlood`), one client makes one call at a time (3 s deadline) for `seconds`: a plain stub
  without retries, then the project's client (`gpu_advisor_client`, which retries RESOURCE_EXHAUSTED after the
  server's pushback). Printed: OK share and p99 of each.
- refused streams: one channel without retries keeping 4 calls in flight (health checks, then Recommend), and two
  channels of one process sharing a connection at 2 in flight each: UNAVAILABLE (refused streams) per 10,000.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from .attacks import Outcomes, RequestFlood
from .loadgen import ServerProcess, distinct_briefs


def _one_at_a_time(call: Callable[[], Any], seconds: float) -> Outcomes:
    out = Outcomes()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.perf_counter()
        try:
            call()
            out.ok += 1
            out.latencies_ms.append((time.perf_counter() - started) * 1000)
        except grpc.RpcError as err:
            name = err.code().name if err.code() else "UNKNOWN"
            out.codes[name] = out.codes.get(name, 0) + 1
    return out


Flood = Callable[[int, float], contextlib.AbstractContextManager[Any]]


def polite_row(repo: Path, seconds: float, h2load_flood: Flood | None = None) -> str:
    """`h2load_flood(port, seconds)`: the h2load flood when h2load is installed, else the in-Python one."""
    from ..wire.api import pb, pb_grpc

    body = distinct_briefs(1)[0][5:]
    request = pb.RecommendRequest.FromString(body)
    server = ServerProcess(1, repo)
    try:
        flood_of = h2load_flood or (lambda port, _s: RequestFlood("127.0.0.1", port, body, 25, 10))
        with flood_of(server.port, 2 * seconds + 5) as flood:
            ready = getattr(flood, "ready", None)
            if ready is not None:
                ready.wait(60)
            time.sleep(1.0)
            opts = [("grpc.use_local_subchannel_pool", 1)]
            with grpc.insecure_channel(server.addr, options=[*opts, ("grpc.enable_retries", 0)]) as ch:
                stub = pb_grpc.GpuAdvisorStub(ch)
                plain = _one_at_a_time(lambda: stub.Recommend(request, timeout=3), seconds)
            project = _project_client(server.addr, request, seconds, opts)
    finally:
        server.stop()
    tool = "h2load" if h2load_flood else "in-Python flood"
    return (f"    {'polite client, 25x10 flood (' + tool + ')':44} stub {_share(plain)}"
            f" | project client {_share(project)}")


def _project_client(addr: str, request: Any, seconds: float, opts: list[tuple[str, Any]]) -> Outcomes:
    try:
        import gpu_advisor_client as gac
    except ImportError:
        return Outcomes()
    with gac.Client(addr, timeout=3, options=opts) as client:
        return _one_at_a_time(lambda: client.stub.Recommend(request, timeout=3), seconds)


def _share(o: Outcomes) -> str:
    return f"{o.ok:4}/{o.total:<4} OK ({o.ok_share:6.1%}) p99 {o.pct(0.99):6.0f} ms"


def in_flight(calls: list[Callable[[], Any]], threads: int, total: int) -> Counter[str]:
    """`threads` threads making `total` calls in all, each thread on `calls[i % len(calls)]`: outcomes by code."""
    outcomes: Counter[str] = Counter()
    left, lock = [total], threading.Lock()

    def work(call: Callable[[], Any]) -> None:
        while True:
            with lock:
                if left[0] <= 0:
                    return
                left[0] -= 1
            try:
                call()
                code = "OK"
            except grpc.RpcError as err:
                code = err.code().name if err.code() else "UNKNOWN"
            with lock:
                outcomes[code] += 1

    pool = [threading.Thread(target=work, args=(calls[i % len(calls)],)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(300)  # bounded: a test or bench never hangs on a stuck call
    return outcomes


def refused_row(repo: Path, checks: int = 10_000, answers: int = 2_000) -> str:
    from ..wire.api import pb, pb_grpc

    request = pb.RecommendRequest.FromString(distinct_briefs(1)[0][5:])
    no_retries = [("grpc.enable_retries", 0)]
    server = ServerProcess(1, repo)
    try:
        with grpc.insecure_channel(server.addr, options=[("grpc.use_local_subchannel_pool", 1), *no_retries]) as ch:
            check, rec = health_pb2_grpc.HealthStub(ch).Check, pb_grpc.GpuAdvisorStub(ch).Recommend
            one_checks = in_flight([lambda: check(health_pb2.HealthCheckRequest(), timeout=30)], 4, checks)
            one_answers = in_flight([lambda: rec(request, timeout=30)], 4, answers)
        with grpc.insecure_channel(server.addr, options=no_retries) as a, \
                grpc.insecure_channel(server.addr, options=no_retries) as b:
            stubs = [health_pb2_grpc.HealthStub(a).Check, health_pb2_grpc.HealthStub(b).Check]
            shared = in_flight([lambda s=s: s(health_pb2.HealthCheckRequest(), timeout=30) for s in stubs], 4,
                                checks)
    finally:
        server.stop()

    def per_10k(c: Counter[str]) -> str:
        n = sum(c.values())
        return f"{c['UNAVAILABLE']}/{n} ({c['UNAVAILABLE'] * 10_000 / n:.1f} per 10,000)" if n else "none"

    return (f"    {'refused streams, no retries':44} 1 channel x 4 in flight: health {per_10k(one_checks)},"
            f" Recommend {per_10k(one_answers)} | 2 channels, 1 connection, 2 each: health {per_10k(shared)}")
