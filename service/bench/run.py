"""`make bench`: speed and memory, measured side by side in one run (this machine is shared and noisy, so
compare the ratios, not the absolute numbers).

1. advise() in-process on the golden cases (tests/cases, or --cases DIR), with and without the trace;
2. the durable_rules engine against the reference evaluator on the same facts;
3. Recommend through a real gRPC server on 127.0.0.1;
4. N live reloads of the rules (default 1000), with resident memory before and after, each followed by the
   server's garbage-collector freeze pass (`--reloads-only`: just this, without and then with that pass);
5. load on a real server process: health Check rps vs Recommend rps on distinct briefs (the ratio to the same
   server's gRPC floor), p50/p99 at half of that saturation (offered evenly), Recommend from the response cache
   (the RPC's cost without the answer's), and Recommend rps with 1 vs 2 processes.
   `--load-only` runs just this; `--baseline DIR` runs the same load against another checkout (e.g. ../main)
   too, for before/after in one run: the two in turn for `--rounds` rounds (3 by default), medians shown;
   the server's CPU per Recommend split into the RPC, the answer and the rest; and VIEW_SUMMARY against the
   full reply (service/bench/split.py). `--answer-modes` loads this checkout once per way of answering
   (GPU_ADVISOR_ANSWER_ON=loop, queue, thread, and grpc's sync server) instead.
6. offers scale: the same answers with no offers, the 1,842-row reference table and 50,000 synthetic rows
   (CPU per answer and its ratio to no offers), the time to load 50,000 rows cold and by live reload, RSS.
   `--offers` runs just this.

`--attack` runs only service/bench/attack_bench.py instead: Recommend and health answered (share, p99) during each
hostile client (idle streams, rapid reset, connection flood, a 25-connection Recommend flood), with RSS before and
after (with `--baseline`, that checkout first).

`--overload` runs only service/bench/overload.py instead: health Check p50/p99 while Recommend is flooded at 250
streams on one connection and spread over several, old settings next to the defaults (with `--baseline`, that
checkout first).
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import tempfile
import time
from dataclasses import replace
from datetime import date
from pathlib import Path

from ruamel.yaml import YAML

REPO = Path(__file__).parents[2]


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def timed(fn, n: int) -> list[float]:  # noqa: ANN001
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1e6)
    return out


def show(name: str, samples: list[float]) -> float:
    med = statistics.median(samples)
    p95 = sorted(samples)[int(len(samples) * 0.95) - 1]
    print(f"  {name:44} median {med:10.0f} µs   p95 {p95:10.0f} µs   n={len(samples)}")
    return med


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench")
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--reloads", type=int, default=1000)
    parser.add_argument("--cases", default=str(REPO / "tests" / "cases"))  # the project's copy: a clone has it
    parser.add_argument("--load-only", action="store_true", help="only section 5 (load on a server process)")
    parser.add_argument("--load-seconds", type=float, default=5.0)
    parser.add_argument("--briefs", type=int, default=8, help="distinct Recommend briefs (one h2load each)")
    parser.add_argument("--streams", type=int, default=4, help="concurrent streams per connection")
    parser.add_argument("--baseline", default="", help="another checkout to load the same way first")
    parser.add_argument("--rounds", type=int, default=0,
                        help="load rounds, checkouts in turn, medians shown (default: 3 with --baseline, else 1)")
    parser.add_argument("--variant", action="append", default=[], metavar="LABEL:ENV=VALUE[,ENV=VALUE]",
                        help="with --load-only: also load this checkout with these environment variables set "
                             "(server settings), in turn with the others (repeatable)")
    parser.add_argument("--overload", action="store_true", help="only health under a Recommend flood")
    parser.add_argument("--answer-modes", action="store_true",
                        help="only section 5 on this checkout, once per way of answering (issue 27)")
    parser.add_argument("--offers", action="store_true", help="only section 6 (offers scale)")
    parser.add_argument("--reloads-only", action="store_true",
                        help="only section 4 (live reloads), without and then with the server's gc freeze pass")
    parser.add_argument("--attack", action="store_true",
                        help="only legitimate traffic under hostile clients (idle streams, rapid reset, floods)")
    parser.add_argument("--attack-seconds", type=float, default=8.0)
    parser.add_argument("--routes", action="store_true",
                        help="only reserve-route briefs' answer cost, repeated and first-time (issue 34)")
    args = parser.parse_args(argv)
    if args.routes:
        from .route_bench import run_routes

        return run_routes(args.baseline, args.rounds, args.briefs)
    if args.attack:
        from .attack_bench import run_attacks

        return run_attacks(args.attack_seconds, args.baseline)
    if args.overload:
        return _overload(args.load_seconds, args.baseline)
    if args.answer_modes:
        from .split import run_answer_modes

        return run_answer_modes(args.load_seconds, args.briefs, args.streams, args.rounds)
    if args.reloads_only:
        from ..serving.logging import configure

        configure("WARNING")
        reloads(args.reloads, frozen=False)
        reloads(args.reloads, frozen=True)
        return 0
    if args.load_only:
        from .split import run_load

        return run_load(args.load_seconds, args.briefs, args.streams, args.baseline, args.rounds,
                        tuple(args.variant))

    from google.protobuf.json_format import ParseDict

    from ..serving.logging import configure

    configure("WARNING")

    from ..engine.ir import apply_hit_policies
    from ..rulebook.folder import load_rulebook
    from ..rulebook.version import Bundle
    from ..serving.server import serve
    from ..wire import api

    book, problems = load_rulebook(REPO / "rules")
    assert book is not None, problems
    bundle = Bundle(book, loaded_at=None)  # type: ignore[arg-type]
    yaml = YAML(typ="safe")
    requests = []
    for f in sorted(Path(args.cases).glob("*.yaml")):
        case = yaml.load(f.read_text(encoding="utf-8"))
        if "status" in case.get("expect", {}):
            continue
        requests.append(api.request_from_proto(ParseDict(case["request"], api.pb.RecommendRequest())))
    print(
        f"rules {book.revision}: {len(book.program.rules)} rules, {len(book.catalog)} GPUs; {len(requests)} cases"
    )
    if args.offers:
        from .offers_scale import run_offers_scale

        run_offers_scale(requests)
        bundle.retire(None)
        return 0

    print("1. advise() in-process, all cases per sample")
    plain = show(
        "without trace",
        timed(lambda: [bundle.advise(replace(r, include_trace=False)) for r in requests], args.iterations),
    )
    traced = show(
        "with full trace",
        timed(lambda: [bundle.advise(replace(r, include_trace=True)) for r in requests], args.iterations),
    )
    print(f"  ratio trace/plain: {traced / plain:.2f}x")

    print("2. rule matching: durable_rules engine vs the reference evaluator, same facts")
    from ..decide import facts as F
    from ..decide.sizing.per_gpu import size
    from ..decide.sizing.shape import shape_of

    a = book.assumptions
    fact_sets = []
    for r in requests:
        shape = shape_of(r.brief, a)
        sizings = (
            [size(g, r.brief, shape, a, r.quotes, r.as_of or date.today()) for g in book.catalog]
            if shape
            else []
        )
        base = F.brief_fact(r.brief, a.num("default_utilization"), shape, sizings, 0)
        fact_sets.append([F.candidate_fact(base, s) for s in sizings])
    rules = book.program.for_fact("candidate")

    def engine_run() -> None:
        for facts in fact_sets:
            matched = bundle.engine.evaluate("candidate", facts)
            for f in facts:
                apply_hit_policies(rules, matched[f["id"]])

    def reference_run() -> None:
        for facts in fact_sets:
            for f in facts:
                apply_hit_policies(rules, {r.id for r in rules if r.matches(f)})

    e = show("durable_rules (C extension)", timed(engine_run, args.iterations))
    ref = show("reference evaluator (Python)", timed(reference_run, args.iterations))
    print(f"  ratio engine/reference: {e / ref:.2f}x")

    print("3. Recommend over gRPC on 127.0.0.1 (one client, sequential)")
    server, port, store = serve("127.0.0.1:0", str(REPO / "rules"), watch=False)
    import grpc

    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = api.pb_grpc.GpuAdvisorStub(channel)
    protos = [api.request_to_proto(r) for r in requests]
    rpc = show(
        "Recommend, all cases per sample", timed(lambda: [stub.Recommend(p) for p in protos], args.iterations)
    )
    print(f"  ratio gRPC/in-process: {rpc / plain:.2f}x")
    channel.close()
    server.stop(None).wait()
    store.close()

    reloads(args.reloads, frozen=True)
    bundle.retire(None)
    from .offers_scale import run_offers_scale

    run_offers_scale(requests)
    from .split import run_load

    return run_load(args.load_seconds, args.briefs, args.streams, args.baseline, args.rounds, tuple(args.variant))


def reloads(n: int, frozen: bool) -> None:
    """Section 4: `n` live reloads of a copy of the rules, RSS before and after. `frozen`: after each, what the
    server's garbage-collector pass does once a reload has settled (service/serving/interpreter.py), timed
    apart from the reload, so memory shows whether versions frozen and replaced are freed."""
    from ..rulebook.store import RuleStore
    from ..serving import interpreter

    print(f"4. {n} live reloads (a changed assumptions file each time; rule tests off to time the swap)"
          f"{'; the gc freeze pass after each' if frozen else ', no gc freeze'}")
    passes = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "rules"
        shutil.copytree(REPO / "rules", root)
        store = RuleStore(root)
        store.load()
        target = root / "assumptions.yaml"
        text = target.read_text(encoding="utf-8")
        for i in range(20):  # warm-up: caches and allocator pools settle
            target.write_text(text + f"\n# warm-up {i}\n", encoding="utf-8")
            store.reload()
            if frozen:
                interpreter.refreeze()
        before = rss_mb()
        took = 0.0
        for i in range(n):
            target.write_text(text + f"\n# reload {i}\n", encoding="utf-8")
            started = time.perf_counter()
            result = store.reload()
            took += time.perf_counter() - started
            assert result.ok and result.changed, result
            if frozen:
                passes.append(interpreter.refreeze())
        after = rss_mb()
        store.close()
        if frozen:
            gc.unfreeze()
    freeze = f"; gc freeze pass median {statistics.median(passes):.0f} ms" if passes else ""
    print(f"  {n} reloads in {took:.1f} s ({took / n * 1000:.0f} ms each{freeze}); "
          f"RSS {before:.1f} MB → {after:.1f} MB ({after - before:+.1f} MB)")


def _overload(seconds: float, baseline: str) -> int:
    from .overload import run_overload

    return run_overload(seconds, 250, baseline=baseline)


if __name__ == "__main__":
    raise SystemExit(main())
