"""The order of the candidates no rule excluded: a score from the cost every candidate has, plus rule points."""

from __future__ import annotations

import math

from .run import Scored
from .sizing.common import Sizing


def rank(items: list[Scored]) -> None:
    """Score = 100 x (best cost / own cost) + rule points. The cost compared is the first that every candidate
    has: per accepted unit of work; else per million output tokens (inference); else dollars per effective
    TFLOP-hour of the configuration (peak x utilization this work can reach: the seeds' price/performance)."""
    if not items:
        return
    # An unpriced candidate ($0/h) has no cost in any basis: it neither picks the basis nor sets the best cost,
    # and gets no cost points (rules exclude it before ranking; the order must not depend on that alone).
    priced = [c for c in items if c.sizing.usd_per_hour > 0]
    if priced and all(c.sizing.usd_per_unit > 0 for c in priced):
        kind = "usd_per_unit"

        def basis(s: Sizing) -> float:
            return s.usd_per_unit
    elif priced and all(c.sizing.tokens_per_second > 0 for c in priced):
        kind = "usd_per_million_output_tokens"

        def basis(s: Sizing) -> float:
            return s.usd_per_hour / (s.tokens_per_second * s.replicas * 3600) * 1e6
    else:
        kind = "usd_per_effective_tflop_hour"

        def basis(s: Sizing) -> float:
            delivered = s.count * s.effective_tflops
            return s.usd_per_hour / delivered if delivered > 0 else math.inf

    for c in items:
        c.basis = basis(c.sizing) if c.sizing.usd_per_hour > 0 else math.inf
    best = min(c.basis for c in items)
    for c in items:
        c.basis_kind, c.best = kind, best
        relative = 100.0 * best / c.basis if math.isfinite(c.basis) and c.basis > 0 else 0.0
        c.score = round(relative + c.points, 2)
        c.cost_points = round(relative, 2)
    # Equal scores: one with a cost compared before one without (an unpriced $0/h is not the cheaper), then the
    # smaller commitment ($/h), then the id.
    items.sort(key=lambda c: (-c.score, not math.isfinite(c.basis), c.sizing.usd_per_hour, c.sizing.gpu.id))
