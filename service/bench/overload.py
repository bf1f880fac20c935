"""`make bench BENCH_ARGS=--overload`: is health Check still answered fast while Recommend is flooded?

A real server process gets a Recommend flood from h2load (250 concurrent streams by default, on one connection
and then spread over several), and at the same time a Kubernetes-like probe: health Check on a connection of its
own, 100 a second (one every 10 ms), also from h2load so the probe costs the 2-core machine little. Printed: the
probe's p50/p99, the flood's answered rate and how many calls the server refused. Each server setting in
`SETTINGS` is measured in the same run, so the figures compare (the machine is shared and noisy).
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

from grpc_health.v1 import health_pb2

from .loadgen import _REQUESTS, HEALTH, RECOMMEND, REPO, Load, ServerProcess, distinct_briefs, frame, have_h2load

# (label, extra server flags): the old defaults first, then what the server ships with now.
SETTINGS: list[tuple[str, tuple[str, ...]]] = [
    ("before: 4 running, 32 queued, no stream cap",
     ("--max-concurrent", "4", "--max-queue", "32", "--max-streams", "0")),
    ("one lever: 1 running, no stream cap", ("--max-concurrent", "1", "--max-streams", "0")),
    ("the other: 4 running, stream cap 2", ("--max-concurrent", "4", "--max-streams", "2")),
    ("defaults", ()),
    ("defaults, probed on a health port of its own", ("--health-addr", "auto")),
]


def _h2load(port: int, path: str, body: Path, seconds: float, connections: int, streams: int, rps: int = 0,
            log: Path | None = None) -> subprocess.Popen[str]:
    cmd = ["h2load", "-c", str(connections), "-m", str(streams), "-D", f"{seconds:g}", "-d", str(body),
           "-H", "content-type: application/grpc", "-H", "te: trailers"]
    if rps:
        cmd += ["--rps", str(rps)]
    if log is not None:
        cmd += ["--log-file", str(log)]
    cmd.append(f"http://127.0.0.1:{port}{path}")
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _done(proc: subprocess.Popen[str], seconds: float) -> tuple[int, int]:
    out, _ = proc.communicate(timeout=seconds + 60)
    counts = _REQUESTS.search(out)
    if not counts:
        raise RuntimeError(f"h2load output not understood:\n{out}")
    return int(counts.group(4)), int(counts.group(5))  # succeeded (HTTP 200: any gRPC status), failed


def flood_with_probe(server: ServerProcess, seconds: float, connections: int, streams: int,
                     probe_rps: int = 100) -> tuple[Load, float, float]:
    """(the probe's latencies, flood calls answered OK a second, flood calls refused or failed a second).

    When all 4 probe connections are busy, h2load skips a beat rather than queue it: n below 100/s x seconds
    means answers took over 40 ms and the printed p99 flatters the server."""
    with tempfile.TemporaryDirectory() as tmp:
        rec, chk, log = Path(tmp) / "recommend", Path(tmp) / "check", Path(tmp) / "probe.log"
        rec.write_bytes(distinct_briefs(1)[0])
        chk.write_bytes(frame(health_pb2.HealthCheckRequest().SerializeToString()))
        errors = server.grpc_errors()
        flood = _h2load(server.port, RECOMMEND, rec, seconds + 1, connections, streams)
        time.sleep(1)  # the flood is at full pressure before the probe starts
        # Like kubelet, one Check at a time per connection; 4 connections at 25/s each keep the 10 ms beat
        # even when an answer takes up to 40 ms.
        probe = _h2load(server.health_port, HEALTH, chk, seconds, 4, 1, probe_rps // 4, log)
        ok_probe, failed_probe = _done(probe, seconds)
        answered, failed = _done(flood, seconds)
        lat = [int(line.split("\t")[2]) / 1000 for line in log.read_text().splitlines()
               if len(line.split("\t")) >= 3]
    time.sleep(0.5)  # the server's log writer catches up before its lines are counted
    refused = server.grpc_errors() - errors
    flood_seconds = seconds + 1
    return (Load(ok_probe / seconds, lat, failed_probe), (answered - refused) / flood_seconds,
            (refused + failed) / flood_seconds)


def run_overload(seconds: float, streams: int, spread: tuple[int, ...] = (5, 25), baseline: str = "") -> int:
    if not have_h2load():
        print("overload: h2load (Debian nghttp2-client) is needed for this section; skipped")
        return 0
    print(f"Overload: Recommend flooded by h2load at {streams} concurrent streams, on 1 connection and spread "
          f"over {' and '.join(map(str, spread))} connections; health Check probed 100/s on connections of its "
          f"own; {seconds:g} s each")
    targets = [("baseline " + baseline, Path(baseline).resolve(), ((),))] if baseline else []
    targets.append(("this checkout", REPO, tuple(flags for _, flags in SETTINGS)))
    labels = {flags: label for label, flags in SETTINGS}
    for name, repo, variants in targets:
        for flags in variants:
            print(f"  [{name}{': ' + labels[flags] if repo == REPO else ''}]")
            for connections in (1, *spread):
                per_connection = streams // connections
                server = ServerProcess(1, repo, flags)
                try:
                    probe, ok, refused = flood_with_probe(server, seconds, connections, per_connection)
                finally:
                    server.stop()
                print(f"    {connections:2} connection(s) x {per_connection:3} streams: health p50 "
                      f"{probe.pct(0.5):6.1f} ms  p99 {probe.pct(0.99):6.1f} ms  max {probe.pct(1):6.1f} ms "
                      f"(n={len(probe.latencies_ms)}, failed {probe.failed})   Recommend {ok:5.0f} "
                      f"OK/s, {refused:6.0f} refused/s")
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse
    import shlex

    parser = argparse.ArgumentParser(prog="python -m service.bench.overload", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--streams", type=int, default=250)
    parser.add_argument("--spread", type=int, nargs="*", default=[5, 25],
                        help="connection counts of the spread-out floods")
    parser.add_argument("--baseline", default="", help="another checkout to flood the same way first")
    parser.add_argument("--server-flags", action="append", default=[], metavar="FLAGS",
                        help="measure these server flags instead of the built-in settings (repeatable)")
    args = parser.parse_args(argv)
    if args.server_flags:
        SETTINGS[:] = [(f, tuple(shlex.split(f))) for f in args.server_flags]
    return run_overload(args.seconds, args.streams, tuple(args.spread), args.baseline)


if __name__ == "__main__":
    raise SystemExit(main())
