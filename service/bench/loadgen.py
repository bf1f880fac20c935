"""Load for `make bench`: a real server process, h2load (or a grpc.aio fallback) and the figures they give.

h2load (Debian nghttp2-client) is a C HTTP/2 client that costs the 2-core machine little, so the server gets the
cores. It posts one body file per run, so distinct briefs are K concurrent h2load runs, one brief each (the server
computes every answer: its response cache is off). The fallback, when h2load is absent, is a grpc.aio client in
this process that sends a different brief on every call; it costs more CPU, so its figures are lower.
Neither client reads gRPC trailers' status: every body is checked once with a real stub before the load.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ..children import wait_or_kill

REPO = Path(__file__).parents[2]
HEALTH = "/grpc.health.v1.Health/Check"
RECOMMEND = "/gpuadvisor.v1.GpuAdvisor/Recommend"


@dataclass
class Load:
    rps: float
    latencies_ms: list[float]
    failed: int  # h2load: streams that got no HTTP/2 answer (see `h2load`); the fallback: calls that failed
    cpu_ms_per_call: float = float("nan")  # the server's CPU time (all its processes) per answered call
    grpc_errors: int = 0  # calls the server logged with a status other than OK (h2load sees only HTTP 200)

    def pct(self, q: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        s = sorted(self.latencies_ms)
        return s[min(len(s) - 1, int(q * len(s)))]


def frame(message: bytes) -> bytes:
    """One gRPC length-prefixed message: uncompressed flag, 4-byte big-endian length, the bytes."""
    return b"\0" + len(message).to_bytes(4, "big") + message


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """`python -m service` on 127.0.0.1 with INFO logs (the per-call log line is part of the cost).

    `--health-addr auto` in `extra` gives the server a probe port of its own (`health_port`; else the main one)."""

    def __init__(self, processes: int = 1, repo: Path = REPO, extra: tuple[str, ...] = (),
                 env: dict[str, str] | None = None, sync_server: bool = False):
        self.port = free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.health_port = self.port
        if "--health-addr" in extra and extra[extra.index("--health-addr") + 1] == "auto":
            self.health_port = free_port()
            at = extra.index("--health-addr") + 1
            extra = (*extra[:at], f"127.0.0.1:{self.health_port}", *extra[at + 1:])
        self.log = tempfile.NamedTemporaryFile(prefix="bench-server-", suffix=".log", delete=False)  # noqa: SIM115
        cmd = [sys.executable, "-m", "service", "--addr", self.addr, "--no-watch",
               "--rules", str(repo / "rules"), *extra]
        if sync_server:  # issue 27's option 3, measured only (service/bench/sync_server.py)
            cmd = [sys.executable, "-m", "service.bench.sync_server", self.addr, str(repo / "rules")]
        if processes > 1:
            cmd += ["--processes", str(processes)]
        # The response cache is on by default in a served process; the bench measures the answer, so it is off
        # unless a measurement asks for it (the RPC floor fills it on purpose).
        env = {**os.environ, "GPU_ADVISOR_LOG_LEVEL": "INFO", "PYTHONPATH": str(repo),
               "GPU_ADVISOR_RESPONSE_CACHE": "0", **(env or {})}
        env.pop("GPU_ADVISOR_PROCESSES", None)
        self.proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=self.log)
        try:
            self._wait_ready(processes)
        except BaseException:
            self.stop()  # never leave a server behind
            raise

    def _wait_ready(self, processes: int) -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {Path(self.log.name).read_text()[-2000:]}")
            if '"rules_invalid_at_start"' in Path(self.log.name).read_text():
                raise RuntimeError(f"server has no valid rules: {Path(self.log.name).read_text()[-2000:]}")
            if Path(self.log.name).read_text().count('"serving"') >= processes:
                with grpc.insecure_channel(self.addr) as ch, contextlib.suppress(grpc.RpcError):
                    reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=2)
                    if reply.status == health_pb2.HealthCheckResponse.SERVING:
                        return
            time.sleep(0.2)
        raise RuntimeError("server did not become ready")

    def pids(self) -> list[int]:
        for line in Path(self.log.name).read_text().splitlines():
            if '"workers"' in line:
                return [self.proc.pid, *json.loads(line)["pids"]]
        return [self.proc.pid]

    def grpc_errors(self) -> int:
        """Calls logged with a gRPC status other than OK so far (e.g. RESOURCE_EXHAUSTED from admission). Not
        CANCELLED: h2load hangs up with calls in flight when its time is up, and those are not errors."""
        return sum(1 for line in Path(self.log.name).read_text().splitlines()
                   if '"event": "rpc"' in line and '"code": "OK"' not in line and '"code": "CANCELLED"' not in line)

    def calls_per_worker(self) -> list[int]:
        """Calls each worker logged so far, most first (one entry without `--processes`)."""
        counts: dict[int, int] = {}
        for line in Path(self.log.name).read_text().splitlines():
            if '"event": "rpc"' in line:
                pid = json.loads(line).get("pid", 0)
                counts[pid] = counts.get(pid, 0) + 1
        return sorted(counts.values(), reverse=True)

    def cpu_seconds(self) -> float:
        """User + system CPU of the server and its workers so far (/proc; CPU time is what a noisy shared
        machine distorts least)."""
        total = 0
        for pid in self.pids():
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
        return total / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        wait_or_kill(self.proc, 60)
        self.log.close()
        os.unlink(self.log.name)


def have_h2load() -> bool:
    return shutil.which("h2load") is not None


_FINISHED = re.compile(r"finished in ([\d.]+)(m?s), ([\d.]+) req/s")
_REQUESTS = re.compile(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed")


def stagger(clients: int, rps: float) -> list[float]:
    """Start offsets (s) for `clients` paced clients sharing `rps`: each paces itself on its own timer, so clients
    started together send in bursts of `clients` at once (eight 3 ms answers queued behind each other put p50
    near 12 ms at half load). Spread one gap of the whole rate apart, their requests arrive evenly."""
    return [i / rps for i in range(clients)] if rps > 0 else [0.0] * clients


def h2load(port: int, path: str, bodies: list[bytes], seconds: float, streams: int, rps: float = 0) -> Load:
    """One h2load per body, each with one connection and `streams` concurrent streams, all at once; `rps` > 0
    paces each connection to rps / len(bodies) requests per second (for latency below saturation), the
    connections started `stagger`ed so the offered load arrives evenly.

    `failed` counts h2load's failed streams. Under the server's stream cap (`--max-streams`, default 2) a
    connection's first streams beyond it go out before h2load has read the server's SETTINGS and are refused
    (RST_STREAM; 0 to 2 per connection, none with the cap off); gRPC clients retry those transparently."""
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        began = time.monotonic()
        for i, (body, offset) in enumerate(zip(bodies, stagger(len(bodies), rps), strict=True)):
            time.sleep(max(0.0, began + offset - time.monotonic()))
            data, log = Path(tmp) / f"body{i}", Path(tmp) / f"log{i}"
            data.write_bytes(body)
            cmd = ["h2load", "-c", "1", "-m", str(streams), "-D", f"{seconds:g}",
                   "-d", str(data), "--log-file", str(log),
                   "-H", "content-type: application/grpc", "-H", "te: trailers",
                   f"http://127.0.0.1:{port}{path}"]
            if rps:
                cmd[1:1] = ["--rps", str(max(1, round(rps / len(bodies))))]
            procs.append((subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True), log))
        total, failed, lat = 0.0, 0, []
        for proc, log in procs:
            out, _ = proc.communicate(timeout=seconds + 60)
            done = _FINISHED.search(out)
            counts = _REQUESTS.search(out)
            if not done or not counts:
                raise RuntimeError(f"h2load output not understood:\n{out}")
            total += float(done.group(3))
            failed += int(counts.group(5))
            if log.exists():
                for line in log.read_text().splitlines():
                    cols = line.split("\t")
                    if len(cols) >= 3:
                        lat.append(int(cols[2]) / 1000)
        return Load(total, lat, failed)


def aio_load(addr: str, path: str, bodies: list[bytes], seconds: float, streams: int, rps: float = 0) -> Load:
    """The fallback: one connection per body as h2load has (so `--processes` can spread them), `streams`
    concurrent callers on each, every caller cycling through all the (unframed) bodies."""

    async def run() -> Load:
        lat: list[float] = []
        failed = 0
        opts = [("grpc.use_local_subchannel_pool", 1)]  # a connection of its own, not a shared one
        channels = [grpc.aio.insecure_channel(addr, options=opts) for _ in bodies]
        calls = [ch.unary_unary(path) for ch in channels]  # bytes in, bytes out: no client-side protobuf work
        callers = len(bodies) * streams
        end = time.perf_counter() + seconds
        gap = callers / rps if rps else 0.0
        offsets = stagger(callers, rps)

        async def caller(k: int) -> None:
            nonlocal failed
            i, call = k, calls[k % len(calls)]
            next_at = time.perf_counter() + offsets[k] - gap  # the first call at its offset
            while (now := time.perf_counter()) < end:
                if gap:
                    next_at += gap
                    await asyncio.sleep(max(0.0, next_at - now))
                t = time.perf_counter()
                try:
                    await call(bodies[i % len(bodies)][5:], timeout=10)
                    lat.append((time.perf_counter() - t) * 1000)
                except grpc.aio.AioRpcError:
                    failed += 1
                i += 1

        try:
            started = time.perf_counter()
            await asyncio.gather(*(caller(k) for k in range(callers)))
            took = time.perf_counter() - started
        finally:
            for ch in channels:
                await ch.close()
        return Load(len(lat) / took, lat, failed)

    return asyncio.run(run())


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def distinct_briefs(k: int, start: int = 0) -> list[bytes]:
    """The README's former 70B FP8 realtime brief (a 2 s p95 no GPU meets: the headline's path, kept so runs stay
    comparable across checkouts), made distinct by its traffic; each checked OK once by a real stub. `start`:
    the index of the first, so briefs of the same family that another list does not hold can be asked for."""
    from ..wire.api import pb

    out = []
    for i in range(start, start + k):
        req = pb.RecommendRequest(locale="en")
        b = req.brief
        b.workload = pb.WORKLOAD_TYPE_REALTIME_INFERENCE
        b.model.params_billion, b.model.precision, b.model.context_tokens = 70, pb.PRECISION_FP8, 8192
        b.traffic.concurrent_sessions = 32 + i
        b.traffic.avg_input_tokens, b.traffic.avg_output_tokens = 2000 + 10 * i, 500
        b.latency.p95_ms, b.latency.ttft_ms = 2000, 500
        b.success_unit = pb.SUCCESS_UNIT_RESPONSE
        e = b.economics
        e.hours_per_month, e.horizon_months, e.demand = 730, 12, pb.DEMAND_STEADY
        e.needs_hardware_control, e.has_platform_team, e.acceptance_rate = True, True, 0.9
        out.append(frame(req.SerializeToString()))
    return out


def _check(addr: str, bodies: list[bytes]) -> None:
    from ..wire.api import pb, pb_grpc

    with grpc.insecure_channel(addr) as ch:
        stub = pb_grpc.GpuAdvisorStub(ch)
        for body in bodies:
            reply = stub.Recommend(pb.RecommendRequest.FromString(body[5:]), timeout=30)
            assert reply.candidates, "a bench brief got no candidates"


def _drive(server: ServerProcess, path: str, bodies: list[bytes], seconds: float, streams: int,
           use_h2load: bool, rps: float = 0) -> Load:
    cpu, errors = server.cpu_seconds(), server.grpc_errors()
    if use_h2load:
        load = h2load(server.port, path, bodies, seconds, streams, rps)
    else:
        load = aio_load(server.addr, path, bodies, seconds, streams, rps)
    calls = len(load.latencies_ms)
    time.sleep(0.5)  # the server's log writer catches up before its lines are counted
    load.cpu_ms_per_call = (server.cpu_seconds() - cpu) * 1000 / calls if calls else float("nan")
    load.grpc_errors = server.grpc_errors() - errors
    return load


def answer_costs_ms(repo: Path, bodies: list[bytes], first_time: list[bytes],
                    rounds: int = 20) -> tuple[float, float]:
    """(CPU ms per answer of the servicer's own work, in a fresh process on `repo`'s code and rules: decode,
    validate, advise, build and encode the reply, no gRPC; next to the server's CPU per Recommend it tells what
    the server spends beyond the answer itself. Of `bodies` answered again and again; and per answer of
    `first_time`, each answered once after those, so nothing kept from an earlier answer to the same brief helps
    it: what a new brief costs). The second is NaN when `first_time` is empty. The loaded rules are frozen out of
    the collector's sight first, as the server does after every load."""
    script = (
        "import sys, time\n"
        "try:\n"  # this layout, or a baseline checkout from before service/ had packages
        "    from service.serving.logging import configure\n"
        "    from service.wire import api\n"
        "    from service.rulebook.folder import load_rulebook\n"
        "    from service.rulebook.version import Bundle\n"
        "    from service.wire.validate import validate\n"
        "except ImportError:\n"
        "    from service.logging import configure\n"
        "    from service import api\n"
        "    from service.rulebook import load_rulebook\n"
        "    from service.store import Bundle\n"
        "    from service.validate import validate\n"
        "configure('WARNING')\n"
        "book, _ = load_rulebook(sys.argv[1]); bundle = Bundle(book, loaded_at=None)\n"
        # As a served process does after each rules load (serving/interpreter.refreeze): the collector's full
        # passes then skip the loaded rules, or one such pass (~40 ms) lands inside the measured answers.
        "import gc; gc.collect(); gc.freeze()\n"
        "repeated, _, fresh = sys.stdin.read().partition('|')\n"
        "bodies = [bytes.fromhex(h) for h in repeated.split()]\n"
        "firsts = [bytes.fromhex(h) for h in fresh.split()]\n"
        "def one(b):\n"
        "    r = api.pb.RecommendRequest.FromString(b)\n"
        "    assert not validate(r, bundle.known_gpu_ids())\n"
        "    return api.advice_to_proto(bundle.advise(api.request_from_proto(r))).SerializeToString()\n"
        "for b in bodies: one(b)\n"
        f"t = time.process_time()\nfor _ in range({rounds}):\n    for b in bodies: one(b)\n"
        f"print((time.process_time() - t) * 1000 / ({rounds} * len(bodies)))\n"
        "t = time.process_time()\nfor b in firsts: one(b)\n"
        "print((time.process_time() - t) * 1000 / len(firsts) if firsts else float('nan'))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(repo)}
    out = subprocess.run([sys.executable, "-c", script, str(repo / "rules")],
                         input=" ".join(b[5:].hex() for b in bodies) + "|" + " ".join(b[5:].hex() for b in first_time),
                         capture_output=True, text=True, cwd=repo, env=env, timeout=600, check=True)
    repeated, first = out.stdout.strip().splitlines()[-2:]
    return float(repeated), float(first)


def pooled(loads: list[Load]) -> Load:
    """Several runs of one measurement as one: median rps and CPU per call, every latency, every failure."""
    return Load(median([x.rps for x in loads]), [ms for x in loads for ms in x.latencies_ms],
                sum(x.failed for x in loads), median([x.cpu_ms_per_call for x in loads]),
                sum(x.grpc_errors for x in loads))
