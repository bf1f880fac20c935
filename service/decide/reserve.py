"""What a rent route asks of the ranking and the prices: candidates a team can rent in the brief's scope first,
and a reserve route compared at reserved prices.

A route that rents from offers (on-demand, spot, marketplace, reserve; facts.RENT_ROUTES) cannot lead with a GPU
no provider in the brief's scope rents: such a candidate keeps its score, but ranks after every one an offer in
scope (or the caller's quote) prices, and its line says so. When none is rentable, the outcome rule
`placement.no-offer-in-scope` warns (NO_OFFER_IN_SCOPE) and the summary says so first.

A reserve route chosen for a brief that compares at on-demand prices is answered again at the RESERVED tier:
each candidate on its cheapest reserved offer whose term the brief's horizon covers (placement.reserve_term), so
the route and the prices agree; the on-demand placement stays in the list beside it for the saving.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..domain.advice import Advice
from ..domain.brief import UNSPECIFIED, AdviceRequest, Brief, Economics
from ..domain.offers import OfferTable
from ..memo import IdentityMemo
from .answer import build
from .placement import reserve_term
from .sizing.common import Sizing
from .sizing.shape import Shape


def rentable(s: Sizing) -> bool:
    """An offer in the brief's scope prices it, or the caller's own quote does."""
    return s.placement is not None or s.quote is not None


def placed_first(ranked: Any, route: str = "") -> bool:  # noqa: ANN401 - advisor._Ranked (imports this module)
    """Reorder `ranked` (survivors best first) so every rentable candidate comes before every other, keeping
    each group's order; on a reserve route at reserved prices, those a reserved term prices lead the rentable
    ones (the others stand in at another tier's price). True when the first pick changed (the route, decided on
    it, is then decided again)."""
    survivors = ranked.survivors
    if not any(c.sizing.offers_loaded for c in survivors):
        return False

    def group(c: Any) -> tuple[bool, bool]:  # noqa: ANN401 - run.Scored
        s = c.sizing
        return (not rentable(s), route == "RESERVE" and s.compared_tier == "RESERVED" and s.price_tier != "RESERVED")

    groups = [group(c) for c in survivors]
    if groups == sorted(groups):
        return False
    order = [c for _, c in sorted(zip(groups, survivors, strict=True), key=lambda x: x[0])]  # stable
    top_changed = order[0] is not survivors[0]
    survivors[:] = order
    ranked.shown = survivors[:ranked.limit]
    return top_changed


# The shortest reserved term in a table (0 = no reserved offer): a brief whose horizon is shorter has none to use.
_shortest_term: IdentityMemo[OfferTable, int] = IdentityMemo(
    lambda t: min((o.term_months for o in t.rows if o.tier == "reserved" and o.term_months > 0), default=0),
    limit=16)


def reserved_again(req: AdviceRequest, route: str, offers: OfferTable, a: Any) -> bool:  # noqa: ANN401
    """A reserve route on a brief that did not choose its tier, with a reserved term in the tables that its
    horizon covers: answer it again at reserved prices."""
    return route == "RESERVE" and may_reserve_again(req, offers, a)


def may_reserve_again(req: AdviceRequest, offers: OfferTable, a: Any) -> bool:  # noqa: ANN401 - Assumptions
    """`reserved_again` but the route: whether this brief would be answered again if its route were reserve (its
    first pass then keeps its sizings for the second, `Sized`)."""
    if req.brief.economics.price_tier != UNSPECIFIED:
        return False
    shortest = _shortest_term(offers)
    return 0 < shortest <= reserve_term(req.brief, a, "RESERVED")


@dataclass(frozen=True)
class Sized:
    """A first pass's shape and its sizings before placement (sizing/per_gpu.unplaced): the second pass at the
    reserved tier prices them again instead of sizing every GPU again (sizing/per_gpu.repriced)."""

    shape: Shape
    sizings: list[Sizing]


def with_price_tier(req: AdviceRequest, tier: str) -> AdviceRequest:
    """`replace(req, brief=replace(brief, economics=replace(brief.economics, price_tier=tier)))` without the
    frozen constructors' guarded setattr per field (none of the three has a __post_init__): the same request,
    equal with the same repr and hash (tests/test_decide_lean.py)."""
    brief = req.brief
    economics = build(Economics, **{**brief.economics.__dict__, "price_tier": tier})
    return build(AdviceRequest, **{**req.__dict__, "brief": build(Brief, **{**brief.__dict__, "economics": economics})})


def reserved_top(advice: Advice) -> bool:
    """The first pick is priced on a reserved offer (placed_first puts one first when any candidate has one)."""
    if not advice.candidates:
        return False
    top = advice.candidates[0]
    return bool(top.placements) and top.cost.price_tier == "RESERVED" and top.placements[0].offer.tier == "reserved"
