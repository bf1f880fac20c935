"""The order of the candidates no rule excluded: a score from the cost every candidate has, plus rule points; and
on every route but BUY, the candidates a team can rent in the brief's scope before the others.

A route that takes its capacity from providers (every route but BUY: renting, reserving, a private cloud or a
dedicated cluster) cannot lead with a GPU no provider in the brief's scope rents: such a candidate keeps its
score, but ranks after every one an offer in scope (or the caller's quote) prices, and its line says so. When
none is rentable, the outcome rule `offers.no-offer-in-scope` warns (NO_OFFER_IN_SCOPE) and the summary says so
first."""

from __future__ import annotations

import math
from typing import Any

from .run import Scored
from .sizing.common import Sizing


def rank(items: list[Scored]) -> None:
    """Score = 100 x (best cost / own cost) + rule points. The cost compared is the first that every candidate
    has: per accepted unit of work; else per million output tokens (inference); else dollars per effective
    TFLOP-hour of the configuration (peak x utilization this work can reach: the seeds' price/performance). A
    fixed demand (a rate the brief states) with no unit cost compares the months before either of those."""
    if not items:
        return
    # An unpriced candidate ($0/h) has no cost in any basis: it neither picks the basis nor sets the best cost,
    # and gets no cost points (rules exclude it before ranking; the order must not depend on that alone).
    priced = [c for c in items if c.sizing.usd_per_hour > 0]
    if priced and all(c.sizing.usd_per_unit > 0 for c in priced):
        kind = "usd_per_unit"

        def basis(s: Sizing) -> float:
            return s.usd_per_unit
    elif priced and all(c.sizing.fixed_demand and c.sizing.usd_per_month > 0 for c in priced):
        # A demand stated as a rate with no unit to price (a video's seconds): every candidate serves the same
        # demand, so the cheaper month is the cheaper work.
        kind = "usd_per_month"

        def basis(s: Sizing) -> float:
            return s.usd_per_month
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
    _ties_to_the_smaller_commitment(items)


TIE_POINTS = 0.5  # scores closer than this are a tie: the smaller commitment ($/h) goes first


def _ties_to_the_smaller_commitment(items: list[Scored]) -> None:
    """Candidates whose scores differ by less than TIE_POINTS (half a percent of the best cost) are tied: the one
    that costs less an hour goes first (4x H200 at $16/h before 8x H100 at $24/h for the same cost per token).
    Adjacent swaps until none is left; a shown list is a few dozen candidates at most."""
    moved = True
    while moved:
        moved = False
        for i in range(len(items) - 1):
            a, b = items[i], items[i + 1]
            # an unpriced candidate ($0/h) is never the smaller commitment
            if a.score - b.score < TIE_POINTS and 0 < b.sizing.usd_per_hour < a.sizing.usd_per_hour:
                items[i], items[i + 1] = b, a
                moved = True


def rentable(s: Sizing) -> bool:
    """An offer in the brief's scope prices it, or the caller's own quote does."""
    return s.placement is not None or s.quote is not None


def placed_first(ranked: Any) -> bool:  # noqa: ANN401 - advisor._Ranked (imports this module)
    """Reorder `ranked` (survivors best first) so every rentable candidate comes before every other, keeping
    each group's order. True when the first pick changed (the route, decided on it, is then decided again)."""
    survivors = ranked.survivors
    if not any(c.sizing.offers_loaded for c in survivors):
        return False
    groups = [not rentable(c.sizing) for c in survivors]
    if groups == sorted(groups):
        return False
    order = [c for _, c in sorted(zip(groups, survivors, strict=True), key=lambda x: x[0])]  # stable
    top_changed = order[0] is not survivors[0]
    survivors[:] = order
    ranked.shown = survivors[:ranked.limit]
    return top_changed
