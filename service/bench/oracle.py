"""Answers' bytes, to hold a speed change to "the same answers": every brief in examples/, tests/cases and the
shared golden cases, plus seeded random briefs over the loaded rules' models, GPUs, providers, regions and
countries (and, when the test helpers import, the hostile-value requests of tests/fuzz_requests.py), each
answered in-process with the trace on and off in both locales, its reply (cut to the summary when the request
asks for VIEW_SUMMARY, as the server sends it) serialized deterministically and hashed.
The whole set is answered twice, the second time in reverse order on warm caches; a reply that moved is reported.

    python -m service.bench.oracle                         # this checkout: the digest and counts
    python -m service.bench.oracle --baseline /other/checkout   # the same requests on both; differences listed

The baseline runs this file on its own code (PYTHONPATH), so a checkout from before this file existed works.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SHARED_CASES = REPO / ".." / "shared" / "cases"


def fuzzer(book: Any, pb: Any, seed: int) -> Any:  # noqa: ANN401, C901 - one request's fields, drawn in turn
    """A seeded generator of RecommendRequests: realistic values over the rules' own names, most fields optional."""
    gpus = sorted(g.id for g in book.catalog)
    models = sorted(book.models)
    rows = book.offers.rows
    providers = sorted({o.provider for o in rows})
    regions = sorted({o.region for o in rows})
    countries = [*sorted({o.country for o in rows if o.country}), "EU"]
    rng = random.Random(seed)

    def some(xs: list[Any], k: int) -> list[Any]:
        return rng.sample(xs, min(k, len(xs)))

    def chance(p: float) -> bool:
        return rng.random() < p

    def one() -> Any:  # noqa: ANN401
        r = pb.RecommendRequest()
        b = r.brief
        b.workload = rng.choice([0, 1, 2, 3, 3, 4, 4, 5, 5, 5, 5, 6, 7, 8, 9])
        m = b.model
        if chance(0.3):
            m.name = rng.choice(models)
        else:
            m.params_billion = rng.choice([0.5, 1, 3, 7, 8, 13, 14, 32, 34, 70, 70, 72, 120, 180, 235, 405, 671])
            if chance(0.2):
                m.experts, m.experts_per_token = rng.choice([8, 16, 64, 128, 256]), rng.choice([1, 2, 4, 8])
                m.active_params_billion = round(m.params_billion * rng.choice([0.05, 0.1, 0.25]), 2)
        if chance(0.8):
            m.precision = rng.choice([1, 2, 3, 4, 5, 6, 7, 2, 4])
        if chance(0.7):
            m.context_tokens = rng.choice([2048, 4096, 8192, 16384, 32768, 131072])
        if chance(0.15):
            m.kv_cache_precision = rng.choice([2, 4])
        t = b.traffic
        if chance(0.85):
            t.concurrent_sessions = rng.choice([1, 4, 8, 16, 32, 33, 64, 100, 256, 1000])
        if chance(0.3):
            t.batch_size = rng.choice([1, 8, 16, 64])
        if chance(0.85):
            t.avg_input_tokens = rng.choice([100, 500, 1000, 2000, 2030, 4000])
        if chance(0.2):
            t.p95_input_tokens = t.avg_input_tokens * 2
        if chance(0.85):
            t.avg_output_tokens = rng.choice([50, 200, 300, 500, 1000, 2000])
        if chance(0.3):
            t.requests_per_second = rng.choice([0.5, 2, 10, 50])
        if chance(0.6):
            b.latency.p95_ms = rng.choice([300, 1000, 2000, 5000, 20000])
        if chance(0.2):
            b.latency.p99_ms = b.latency.p95_ms * 2
        if chance(0.5):
            b.latency.ttft_ms = rng.choice([100, 200, 500, 2000])
        b.run_cycle = rng.choice([0, 1, 2, 3, 4])
        b.boundary = rng.choice([0, 1, 1, 1, 2, 3, 4, 5])
        b.success_unit = rng.choice(range(10))
        if chance(0.3):
            b.toolchain.extend(some(["vllm", "sglang", "tensorrt-llm", "ray", "slurm", "kubernetes"], 2))
        if b.workload in (1, 2, 3) or chance(0.1):
            b.training.tokens_billion = rng.choice([0.01, 0.1, 1, 10, 100, 2000])
            if chance(0.5):
                b.training.target_days = rng.choice([1, 7, 14, 30])
        e = b.economics
        e.hours_per_month, e.horizon_months = rng.choice([0, 40, 200, 730]), rng.choice([0, 1, 3, 6, 12, 36])
        if chance(0.3):
            e.utilization = rng.choice([0.3, 0.7, 0.9])
        if chance(0.2):
            e.budget_usd_per_hour = rng.choice([5, 20, 100])
        if chance(0.8):
            e.needs_hardware_control = chance(0.5)
        e.demand = rng.choice([0, 1, 2, 3, 3])
        if chance(0.8):
            e.has_platform_team = chance(0.6)
        if chance(0.3):
            e.acceptance_rate = rng.choice([0.5, 0.9])
        e.price_tier = rng.choice([0, 0, 0, 1, 2, 3])
        p = b.placement
        if chance(0.25):
            p.providers.extend(some(providers, rng.randint(1, 3)))
        if chance(0.15):
            p.regions.extend(some(regions, rng.randint(1, 4)))
        if chance(0.15):
            p.countries.extend(some(countries, rng.randint(1, 2)))
        p.interruptible_ok = chance(0.3)
        if chance(0.25):
            b.gpus.extend(some(gpus, rng.randint(1, 5)))
        if chance(0.15):
            b.parallelism.tensor_parallel = rng.choice([1, 2, 4, 8])
            if chance(0.3):
                b.parallelism.pipeline_parallel = rng.choice([1, 2])
        if b.workload == 7:
            b.media.denoising_steps = rng.choice([0, 20, 50])
            b.media.width_px, b.media.height_px = rng.choice([0, 512, 1024, 1280]), rng.choice([0, 512, 1024, 720])
            if chance(0.4):
                b.media.frames = rng.choice([16, 49, 129])
        if chance(0.1):
            q = r.quotes.add()
            q.gpu, q.usd_per_hour = rng.choice(gpus), rng.choice([1.0, 2.5, 4.0])
            q.provider, q.as_of = "acme", "2026-10-01"
        if chance(0.2):
            r.max_candidates = rng.choice([1, 3, 10, 20])
        return r

    return one


def hashes(repo: Path, fuzzed: int, hostile: int, seed: int) -> dict[str, str]:
    """Request name | trace | locale -> the first 16 hex digits of its reply's SHA-256 (or of the refusal)."""
    from google.protobuf.json_format import ParseDict
    from ruamel.yaml import YAML

    from service.rulebook.folder import load_rulebook
    from service.rulebook.version import Bundle
    from service.wire import api
    from service.wire.validate import validate

    try:
        from service.wire import views
    except ImportError:  # a checkout from before RecommendRequest.view: every answer is the full one
        views = None

    book, problems = load_rulebook(repo / "rules")
    assert book is not None, problems
    bundle = Bundle(book, loaded_at=None)  # type: ignore[arg-type]
    pb, known, yaml = api.pb, bundle.known_gpu_ids(), YAML(typ="safe")
    named: list[tuple[str, Any]] = []
    for folder in (repo / "examples", repo / "tests" / "cases", SHARED_CASES.resolve()):
        for f in sorted(folder.glob("*.yaml")):
            d = yaml.load(f.read_text(encoding="utf-8"))
            d = d.get("request", d if "brief" in d else {"brief": d})  # a case, a request, or a brief file
            named.append((f"{folder.name}/{f.name}", ParseDict(d, pb.RecommendRequest())))
    draw = fuzzer(book, pb, seed)
    named += [(f"fuzz/{i}", draw()) for i in range(fuzzed)]
    if hostile:
        try:
            sys.path.insert(0, str(repo))
            from tests.fuzz_requests import request_from_seed  # a dev install's helper (hypothesis)
        except ImportError:
            print("tests/fuzz_requests.py does not import here: no hostile requests", file=sys.stderr)
        else:
            named += [(f"hostile/{i}", request_from_seed(i * 7919 + 1)) for i in range(hostile)]

    def answer(r: Any) -> bytes:  # noqa: ANN401
        errors = validate(r, known)
        if errors:
            return b"INVALID " + repr(errors).encode()
        try:
            reply = api.advice_to_proto(bundle.advise(api.request_from_proto(r)))
            if views is not None and views.wants_summary(r):
                # The reply the server sends: a summary's answer may be made without what the cut drops
                # (AdviceRequest.summary_view), so only the cut one is the same on every checkout.
                reply = views.summarize(reply)
            return reply.SerializeToString(deterministic=True)
        except Exception as exc:  # noqa: BLE001 - an answer that raises is an answer to compare too
            return b"RAISED " + repr(exc).encode()

    jobs = []
    for name, r in named:
        for trace in (False, True):
            for locale in ("en", "zh-CN"):
                x = pb.RecommendRequest()
                x.CopyFrom(r)
                x.include_trace, x.locale = trace, locale
                jobs.append((f"{name}|{int(trace)}|{locale}", x))
    out = {k: hashlib.sha256(answer(x)).hexdigest()[:16] for k, x in jobs}
    moved = [k for k, x in reversed(jobs) if hashlib.sha256(answer(x)).hexdigest()[:16] != out[k]]
    bundle.retire(None)
    if moved:
        out["!moved on warm caches"] = ",".join(moved)
    return out


def digest(h: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(h, sort_keys=True).encode()).hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="oracle", description=__doc__.split("\n\n")[0])
    parser.add_argument("--fuzzed", type=int, default=600, help="seeded random briefs")
    parser.add_argument("--hostile", type=int, default=300, help="hostile-value requests (tests/fuzz_requests)")
    parser.add_argument("--seed", type=int, default=2827)
    parser.add_argument("--baseline", default="", help="another checkout: the same requests on its code")
    parser.add_argument("--repo", default=str(REPO), help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from service.serving.logging import configure

    configure("ERROR")
    mine = hashes(Path(args.repo), args.fuzzed, args.hostile, args.seed)
    if args.json:
        print(json.dumps(mine))
        return 0
    print(f"{len(mine)} replies, digest {digest(mine)}")
    code = 0
    if "!moved on warm caches" in mine:
        print("replies that moved on warm caches:", mine["!moved on warm caches"][:2000])
        code = 1
    if args.baseline:
        base = Path(args.baseline).resolve()
        run = subprocess.run(
            [sys.executable, __file__, "--json", "--repo", str(base), "--fuzzed", str(args.fuzzed),
             "--hostile", str(args.hostile), "--seed", str(args.seed)],
            capture_output=True, text=True, check=True, cwd=base, env={**os.environ, "PYTHONPATH": str(base)},
        )
        theirs = json.loads(run.stdout.strip().splitlines()[-1])
        differ = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
        print(f"baseline {base}: {len(theirs)} replies, digest {digest(theirs)}; {len(differ)} differ"
              + (": " + ", ".join(differ[:20]) if differ else ""))
        code = code or (1 if differ else 0)
    return code


if __name__ == "__main__":
    sys.exit(main())
