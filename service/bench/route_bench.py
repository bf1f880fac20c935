"""`make bench BENCH_ARGS="--routes --baseline DIR"`: what answering a reserve-route brief costs on this checkout
and on another (issue 34: one decision pass carrying every tier's prices, against the two-pass checkout that
answered a reserve route twice), side by side in one run.

Two sets of briefs, both steady, always-on serving on a 12- or 36-month horizon, the briefs a two-pass checkout
sent through its second (reserved-price) pass:
- the golden cases of that kind (tests/cases), answered again and again: the repeated cost;
- a family of the issue's own brief (Llama 3.3 70B FP8, 8 sessions, steady, 12 months, no latency target), made
  distinct by its traffic, each answered once in a fresh process: the first-time cost.
Each checkout answers in its own process (its code and rules, this interpreter), the checkouts in turn for
`--rounds` rounds; the table shows medians of CPU ms per answer, and the route each checkout gave each brief.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

from ruamel.yaml import YAML

from .loadgen import answer_costs_ms, frame

REPO = Path(__file__).resolve().parents[2]
# Steady, always-on serving golden cases whose route the two-pass checkout decided in its reserved-price pass.
RESERVE_CASES = ("money-70b-fp8-steady", "money-405b-reserve-gcp-36", "offers2-reserve-three-years",
                 "offers2-reserve-short-horizon", "realtime-70b-fp8")


def reserve_cases() -> list[bytes]:
    from google.protobuf.json_format import ParseDict

    from ..wire.api import pb

    yaml = YAML(typ="safe")
    out = []
    for name in RESERVE_CASES:
        case = yaml.load((REPO / "tests" / "cases" / f"{name}.yaml").read_text(encoding="utf-8"))
        out.append(frame(ParseDict(case["request"], pb.RecommendRequest()).SerializeToString()))
    return out


def steady_family(k: int, start: int = 0) -> list[bytes]:
    """The issue's first brief, made distinct by sessions and prompt length."""
    from ..wire.api import pb

    out = []
    for i in range(start, start + k):
        req = pb.RecommendRequest(locale="en")
        b = req.brief
        b.workload = pb.WORKLOAD_TYPE_REALTIME_INFERENCE
        b.model.name = "llama-3.3-70b"
        b.model.precision = pb.PRECISION_FP8
        b.traffic.concurrent_sessions = 8 + i
        b.traffic.avg_input_tokens, b.traffic.avg_output_tokens = 1000 + 10 * i, 500
        e = b.economics
        e.hours_per_month, e.horizon_months, e.demand = 730, 12, pb.DEMAND_STEADY
        out.append(frame(req.SerializeToString()))
    return out


_ROUTES = (
    "import sys\n"
    "try:\n"
    "    from service.wire import api\n"
    "    from service.rulebook.folder import load_rulebook\n"
    "    from service.rulebook.version import Bundle\n"
    "except ImportError:\n"
    "    from service import api\n"
    "    from service.rulebook import load_rulebook\n"
    "    from service.store import Bundle\n"
    "book, _ = load_rulebook(sys.argv[1]); bundle = Bundle(book, loaded_at=None)\n"
    "for h in sys.stdin.read().split():\n"
    "    r = api.pb.RecommendRequest.FromString(bytes.fromhex(h))\n"
    "    a = api.advice_to_proto(bundle.advise(api.request_from_proto(r)))\n"
    "    top = a.candidates[0] if a.candidates else None\n"
    "    print(api.pb.RouteKind.Name(a.route.kind), top.gpu if top else '-', top.count if top else 0,\n"
    "          round(top.cost.usd_per_hour, 2) if top else 0)\n"
)


def routes(repo: Path, bodies: list[bytes]) -> list[str]:
    """Each brief's route and top pick on `repo`'s code and rules."""
    out = subprocess.run([sys.executable, "-c", _ROUTES, str(repo / "rules")],
                         input=" ".join(b[5:].hex() for b in bodies), capture_output=True, text=True, cwd=repo,
                         env={**os.environ, "PYTHONPATH": str(repo)}, timeout=600, check=True)
    return out.stdout.split("\n")[: len(bodies)]


def run_routes(baseline: str, rounds: int, k: int) -> int:
    sides = [Path(baseline).resolve(), REPO] if baseline else [REPO]
    repeated, first = reserve_cases(), steady_family(k)
    names = [*RESERVE_CASES, *(f"steady-70b-fp8-{8 + i}-sessions" for i in range(k))]
    print(f"reserve-route briefs: {len(repeated)} golden cases answered {20} times each, {k} first-time briefs")
    for side in sides:
        print(f"  routes on {side}:")
        for name, route in zip(names, routes(side, repeated + first), strict=True):
            print(f"    {name:34} {route}")
    costs: dict[Path, list[tuple[float, float]]] = {s: [] for s in sides}
    for n in range(rounds or (3 if baseline else 1)):
        for side in sides:
            costs[side].append(answer_costs_ms(side, repeated, steady_family(k, start=k * (n + 1))))
    print(f"  {'checkout':60} {'repeated ms':>12} {'first-time ms':>14}")
    medians = {}
    for side in sides:
        rep = statistics.median(c[0] for c in costs[side])
        fst = statistics.median(c[1] for c in costs[side])
        medians[side] = (rep, fst)
        print(f"  {str(side):60} {rep:12.2f} {fst:14.2f}")
    if baseline:
        (b_rep, b_fst), (t_rep, t_fst) = medians[sides[0]], medians[sides[1]]
        print(f"  this checkout / baseline: repeated {t_rep / b_rep:.2f}x, first-time {t_fst / b_fst:.2f}x")
        pairs = list(zip(costs[sides[0]], costs[sides[1]], strict=True))
        print("  per round, repeated: " + " ".join(f"{t[0] / b[0]:.2f}" for b, t in pairs)
              + "; first-time: " + " ".join(f"{t[1] / b[1]:.2f}" for b, t in pairs))
    return 0
