"""`gpu-advisor explain`: the answer first, then how each candidate's score was made, then the rule trace, cut
down by filters so a rule author can ask one question at a time ("why not h100-pcie?", "did matrix.* fire?").

Works on a RecommendResponse asked for with `include_trace`; pure formatting, no I/O besides the output stream.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TextIO

from ..wire.api import enum_name, pb

BASIS_TEXT = {
    "usd_per_unit": "$ per {unit}",
    "usd_per_million_output_tokens": "$ per 1M output tokens",
    "usd_per_effective_tflop_hour": "$ per effective TFLOP-hour",
    "usd_per_month": "$ a month for the brief's demand",
}


@dataclass(frozen=True)
class Filters:
    rules: tuple[str, ...] = ()  # globs on rule ids; any may match
    gpu: str = ""  # only this GPU's candidate fact, score and exclusion
    fired: bool | None = None  # True: fired only; False: not fired only; None: both

    def keeps(self, t: pb.TraceEntry) -> bool:
        if self.rules and not any(fnmatchcase(t.rule_id, g) for g in self.rules):
            return False
        if self.gpu and t.fact != f"candidate:{self.gpu}":
            return False
        return self.fired is None or t.fired == self.fired

    def describe(self) -> str:
        parts = [f"rule {' or '.join(self.rules)}"] if self.rules else []
        parts += [f"gpu {self.gpu}"] if self.gpu else []
        parts += [] if self.fired is None else ["fired" if self.fired else "not fired"]
        return ", ".join(parts)


def _cost(v: float) -> str:
    return f"{v:.4g}" if v else "-"


def print_explanation(resp: pb.RecommendResponse, filters: Filters, out: TextIO | None = None) -> None:
    out = out or sys.stdout  # looked up per call, so redirection (tests, contextlib) is honoured
    where = {t.rule_id: t.location for t in resp.trace}
    _answer(resp, where, out)
    _scores(resp, filters, out)
    _excluded(resp, filters, out)
    _trace(resp, filters, out)
    if resp.HasField("ruleset"):
        print(f"\n(rules {resp.ruleset.revision})", file=out)


def _answer(resp: pb.RecommendResponse, where: dict[str, str], out: TextIO) -> None:
    print("Answer", file=out)
    if resp.candidates:
        c = resp.candidates[0]
        unit = f", ${c.cost.usd_per_unit:.4g} per {c.cost.unit}" if c.cost.usd_per_unit else ""
        print(f"  top pick: {c.count}x {c.name} ({c.gpu}), score {c.score:.1f}, ${c.cost.usd_per_hour:,.2f}/h{unit}",
              file=out)
    else:
        print("  top pick: none" + (" (the brief leaves questions open)" if resp.questions else ""), file=out)
    if resp.HasField("route"):
        print(f"  route: {enum_name('RouteKind', resp.route.kind)}", file=out)
        for r in resp.route.rationale:
            loc = where.get(r.rule_id, "")
            print(f"    [{r.rule_id}]{' ' + loc if loc else ''}  {r.text}", file=out)
    for w in resp.warnings:
        print(f"  warning {w.code} ({enum_name('Severity', w.severity)}) [{w.rule_id}]", file=out)
    for q in resp.questions:
        print(f"  question {q.field} [{q.rule_id}]", file=out)


def _scores(resp: pb.RecommendResponse, filters: Filters, out: TextIO) -> None:
    shown = [(i, c) for i, c in enumerate(resp.candidates, 1) if not filters.gpu or c.gpu == filters.gpu]
    if not shown:
        if filters.gpu and not any(x.gpu == filters.gpu for x in resp.excluded):
            print(f"\n{filters.gpu}: not among the {len(resp.candidates)} candidates shown nor excluded", file=out)
        return
    b0 = shown[0][1].score_breakdown
    unit = next((c.cost.unit for c in resp.candidates if c.cost.unit), "unit")
    basis = BASIS_TEXT.get(b0.basis, b0.basis).format(unit=unit)
    print(f"\nScores: 100 x best cost / own cost + rule points (cost = {basis}; best {_cost(b0.best_cost)})",
          file=out)
    for i, c in shown:
        b = c.score_breakdown
        points = sum(p.points for p in b.rules)
        print(f"  #{i} {c.gpu}: {c.score:.1f} = {b.cost_points:.1f} (100 x {_cost(b.best_cost)} / {_cost(b.cost)})"
              f" {points:+g} points", file=out)
        for p in b.rules:
            print(f"      {p.points:+g}  {p.rule_id}", file=out)


def _excluded(resp: pb.RecommendResponse, filters: Filters, out: TextIO) -> None:
    shown = [x for x in resp.excluded if not filters.gpu or x.gpu == filters.gpu]
    if shown:
        print("\nExcluded:", file=out)
    for x in shown:
        for r in x.reasons:
            print(f"  {x.gpu}: [{r.rule_id}] {r.text}", file=out)


def _trace(resp: pb.RecommendResponse, filters: Filters, out: TextIO) -> None:
    kept = [t for t in resp.trace if filters.keeps(t)]
    if filters.describe():
        print(f"\nTrace: {len(kept)} of {len(resp.trace)} entries match ({filters.describe()})", file=out)
    fired = [t for t in kept if t.fired]
    idle = [t for t in kept if not t.fired]
    if filters.fired is not False:
        print(f"\nFired ({len(fired)}):", file=out)
        for t in fired:
            print(f"  {t.rule_id}  {t.location}  on {t.fact}", file=out)
    if filters.fired is not True:
        print(f"\nNot fired ({len(idle)}):", file=out)
        for t in idle:
            print(f"  {t.rule_id}  {t.location}" + (f"  on {t.fact}" if t.fact else "")
                  + (f"  first failing: {t.detail}" if t.detail else ""), file=out)
