"""Section 5 of `make bench` (`--load-only`): Recommend against the health floor on a server process, with the
server's CPU per Recommend split into the RPC, the answer and the rest; and `--answer-modes`: the ways a
Recommend's answer can run (service/serving/answering.py, plus grpc's sync server) against each other.

Every figure comes from one run: the sides (checkouts, or ways of answering) are loaded in turn for `rounds`
rounds and each figure is the median of its rounds, so a slow spell of this shared machine falls on every side.

- RPC: the server's CPU per Recommend answered from its response cache (the same briefs, each answered once
  before): decode, admission, the cache look-up, encode, write, the log line, at this reply's size.
- answer: the same briefs answered in a plain process, no gRPC (decode, validate, advise, build and encode).
  Beside it, a first-time brief: briefs of the same family that process never answered before, once each (work
  kept per rules version for a brief's shape may still help them; nothing kept for that exact brief does).
- the rest: what the server spends beyond both (event loop, completion queue, hand-offs between threads).
  The reply's encoding is in both the RPC and the answer, so the rest is, if anything, understated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .loadgen import (
    HEALTH,
    RECOMMEND,
    REPO,
    Load,
    ServerProcess,
    _check,
    _drive,
    answer_costs_ms,
    distinct_briefs,
    frame,
    have_h2load,
    median,
    pooled,
)

RESPONSE_CACHE_ENV = "GPU_ADVISOR_RESPONSE_CACHE"
FIRST_TIME_BRIEFS = 24
ANSWER_ON_ENV = "GPU_ADVISOR_ANSWER_ON"


@dataclass
class Side:
    """One checkout, or one way of answering in this checkout, and what was measured on it."""

    name: str
    repo: Path
    env: dict[str, str] = field(default_factory=dict)
    sync_server: bool = False
    rounds: list[tuple[Load, Load, Load]] = field(default_factory=list)
    floors: list[Load] = field(default_factory=list)
    answers_ms: list[float] = field(default_factory=list)
    firsts_ms: list[float] = field(default_factory=list)
    twos: list[float] = field(default_factory=list)  # per round: Recommend rps on 2 processes / on 1

    @property
    def floor_ms(self) -> float:
        return median([x.cpu_ms_per_call for x in self.floors])

    @property
    def answer_ms(self) -> float:
        return median(self.answers_ms)

    def server(self, processes: int = 1, env: dict[str, str] | None = None) -> ServerProcess:
        return ServerProcess(processes, self.repo, env={**self.env, **(env or {})}, sync_server=self.sync_server)

    def medians(self) -> tuple[Load, Load, Load]:
        health, rec, half = (pooled(list(x)) for x in zip(*self.rounds, strict=True))
        return health, rec, half


class Bench:
    def __init__(self, seconds: float, k: int, streams: int):
        self.seconds, self.streams = seconds, streams
        self.h2load = have_h2load()
        self.briefs = distinct_briefs(k)
        self.first_time = distinct_briefs(FIRST_TIME_BRIEFS, start=k)  # never among the load's briefs
        self.health_bodies = [frame(_health_request())] * k

    def drive(self, server: ServerProcess, path: str, bodies: list[bytes], rps: float = 0) -> Load:
        return _drive(server, path, bodies, self.seconds, self.streams, self.h2load, rps)

    def round(self, side: Side) -> None:
        server = side.server()
        try:
            _check(server.addr, self.briefs)
            self.drive(server, RECOMMEND, self.briefs[:2])  # warm-up: caches and allocator pools
            health = self.drive(server, HEALTH, self.health_bodies)
            rec = self.drive(server, RECOMMEND, self.briefs)
            half = self.drive(server, RECOMMEND, self.briefs, rps=rec.rps / 2)
        finally:
            server.stop()
        side.rounds.append((health, rec, half))
        # The RPC and the answer in the same round, so the split compares figures of one spell of the machine.
        side.floors.append(self.floor(side))
        answer, first = answer_costs_ms(side.repo, self.briefs, self.first_time)
        side.answers_ms.append(answer)
        side.firsts_ms.append(first)
        rest = rec.cpu_ms_per_call - side.floors[-1].cpu_ms_per_call - side.answers_ms[-1]
        print(f"  round {len(side.rounds)} [{side.name}]: health {health.cpu_ms_per_call:.2f} ms, Recommend "
              f"{rec.cpu_ms_per_call:.2f} ms server CPU per call (RPC {side.floors[-1].cpu_ms_per_call:.2f}, "
              f"answer {side.answers_ms[-1]:.2f}, rest {rest:.2f}; a first-time brief {first:.2f}); ratio "
              f"{rec.rps / health.rps:.2f} in rps, {health.cpu_ms_per_call / rec.cpu_ms_per_call:.2f} in CPU; "
              f"p99 at half {half.pct(0.99):.1f} ms")

    def floor(self, side: Side, bodies: list[bytes] | None = None) -> Load:
        """Recommend with the answers already made (the server's response cache holds every brief)."""
        bodies = bodies or self.briefs
        server = side.server(env={RESPONSE_CACHE_ENV: str(len(bodies))})
        try:
            _check(server.addr, bodies)  # each answered once: from the cache from here on
            return self.drive(server, RECOMMEND, bodies)
        finally:
            server.stop()

    def two_processes(self, side: Side) -> Load:
        server = side.server(processes=2)
        try:
            _check(server.addr, self.briefs)
            self.drive(server, RECOMMEND, self.briefs[:2])
            return self.drive(server, RECOMMEND, self.briefs)
        finally:
            server.stop()


def _health_request() -> bytes:
    from grpc_health.v1 import health_pb2

    return health_pb2.HealthCheckRequest().SerializeToString()


def _table(sides: list[Side], with_two: bool) -> None:
    rows: list[tuple[str, list[str]]] = []
    cols = []
    for side in sides:
        health, rec, half = side.medians()
        floor = side.floor_ms
        round_p99s = [h.pct(0.99) for _, _, h in side.rounds]
        rest = median([r.cpu_ms_per_call - f.cpu_ms_per_call - a
                       for (_, r, _), f, a in zip(side.rounds, side.floors, side.answers_ms, strict=True)])
        cols.append({
            "health Check, server CPU per call": f"{health.cpu_ms_per_call:.2f} ms",
            "Recommend, server CPU per call": f"{rec.cpu_ms_per_call:.2f} ms",
            "  RPC at this reply's size (from the response cache)": f"{floor:.2f} ms",
            "  the answer (the same briefs in-process)": f"{side.answer_ms:.2f} ms",
            "  the rest (loop, completion queue, hand-off; median of rounds)": f"{rest:.2f} ms",
            "a first-time brief in-process (same family, once each)": f"{median(side.firsts_ms):.2f} ms",
            "health / Recommend rps": f"{health.rps:.0f} / {rec.rps:.0f}",
            "ratio Recommend / health (rps / CPU)":
                f"{rec.rps / health.rps:.2f} / {health.cpu_ms_per_call / rec.cpu_ms_per_call:.2f}",
            "p50 / p99 at half saturation": f"{half.pct(0.5):.1f} / {half.pct(0.99):.1f} ms",
            # One slow spell of the shared machine sets the p99 of every latency pooled; each round's own p99,
            # and their median, show whether that spell fell on one round or the side is slow in all of them.
            "  p99 at half, each round's (their median)":
                f"{'/'.join(f'{p:.0f}' for p in round_p99s)} ({median(round_p99s):.1f})",
            **({"2 processes / 1 (Recommend rps; each round's)":
                f"{median(side.twos):.2f}x ({'/'.join(f'{x:.2f}' for x in side.twos)})" if side.twos else ""}
               if with_two else {}),
        })
    for label in cols[0]:
        rows.append((label, [c[label] for c in cols]))
    width = max(len(label) for label, _ in rows)
    print(f"  {'':{width}} | " + " | ".join(f"{s.name:>22}" for s in sides))
    for label, values in rows:
        print(f"  {label:{width}} | " + " | ".join(f"{v:>22}" for v in values))
    print("  targets (issue 27): the rest <= 0.5 ms; CPU ratio >= 0.20; p99 at half <= 10 ms; 2 processes >= 1.7x")


def variant(spec: str) -> Side:
    """`LABEL:ENV=VALUE[,ENV=VALUE...]`: this checkout's server with those environment variables (its settings)."""
    label, _, assignments = spec.partition(":")
    env = dict(a.split("=", 1) for a in assignments.split(",") if a)
    if not label or not env:
        raise ValueError(f"a variant is LABEL:ENV=VALUE[,ENV=VALUE...], got {spec!r}")
    return Side(label, REPO, env)


def run_load(seconds: float, k: int, streams: int, baseline: str = "", rounds: int = 0,
             variants: tuple[str, ...] = ()) -> int:
    """This checkout (and `baseline`, another checkout, and `variants` of this one, in turn) under load; then
    Recommend's view."""
    bench = Bench(seconds, k, streams)
    rounds = rounds or (3 if baseline or variants else 1)
    sides = [Side("baseline " + Path(baseline).name, Path(baseline).resolve())] if baseline else []
    sides.append(Side("this checkout", REPO))
    sides += [variant(spec) for spec in variants]
    _header(bench, k, streams, seconds, rounds, "checkouts")
    for _ in range(rounds):
        for side in sides:
            bench.round(side)
            # Right after the round's 1-process load, so the ratio compares one spell of this shared machine (a
            # single 2-process run after all rounds once read 0.88x where three paired runs read 1.71-2.13x).
            side.twos.append(bench.two_processes(side).rps / side.rounds[-1][1].rps)
    _table(sides, with_two=True)
    _views(bench, sides[len(sides) - 1 - len(variants)])
    return 0


def run_answer_modes(seconds: float, k: int, streams: int, rounds: int = 0) -> int:
    """Where the answer runs (service/serving/answering.py) and grpc's sync server, this checkout each time."""
    bench = Bench(seconds, k, streams)
    rounds = rounds or 3
    sides = [Side(f"{mode}", REPO, {ANSWER_ON_ENV: mode}) for mode in ("loop", "queue", "thread")]
    sides.append(Side("sync server", REPO, sync_server=True))
    _header(bench, k, streams, seconds, rounds, "ways of answering")
    for _ in range(rounds):
        for side in sides:
            bench.round(side)
    _table(sides, with_two=False)
    return 0


def _views(bench: Bench, side: Side) -> None:
    """VIEW_SUMMARY against the full reply: the reply's size, the RPC at that size, Recommend as a whole."""
    from ..wire.api import pb

    summaries = []
    for body in bench.briefs:
        request = pb.RecommendRequest.FromString(body[5:])
        request.view = pb.VIEW_SUMMARY
        summaries.append(frame(request.SerializeToString()))
    floor = bench.floor(side, summaries)
    server = side.server()
    try:
        _check(server.addr, summaries)
        sizes = _reply_sizes(server.addr, bench.briefs), _reply_sizes(server.addr, summaries)
        bench.drive(server, RECOMMEND, summaries[:2])
        rec = bench.drive(server, RECOMMEND, summaries)
    finally:
        server.stop()
    full_rec = side.medians()[1]
    print(f"  RecommendRequest.view [{side.name}]: reply {sizes[0]:,} bytes full, {sizes[1]:,} summary; "
          f"RPC from the cache {side.floor_ms:.2f} ms full (median of the rounds), "
          f"{floor.cpu_ms_per_call:.2f} ms summary; Recommend {full_rec.cpu_ms_per_call:.2f} ms full "
          f"(median of the rounds), {rec.cpu_ms_per_call:.2f} ms summary ({rec.rps:.0f} rps)")


def _reply_sizes(addr: str, bodies: list[bytes]) -> int:
    """Median reply size in bytes."""
    import statistics

    import grpc

    from ..wire.api import pb, pb_grpc

    with grpc.insecure_channel(addr) as channel:
        stub = pb_grpc.GpuAdvisorStub(channel)
        return int(statistics.median(
            stub.Recommend(pb.RecommendRequest.FromString(b[5:]), timeout=30).ByteSize() for b in bodies))


def _header(bench: Bench, k: int, streams: int, seconds: float, rounds: int, what: str) -> None:
    tool = "h2load (nghttp2)" if bench.h2load else "grpc.aio fallback in the bench process (h2load not found)"
    print(f"5. Load on a server process: {tool}; {k} distinct Recommend briefs x {streams} streams each, "
          f"{seconds:g} s per run, response cache off (but for the RPC row), INFO logs; {rounds} rounds, "
          f"{what} in turn, medians")
