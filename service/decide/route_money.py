"""What the route rules know of the money, for the first pick: its month on its cheapest placement, its best
on-demand and best reserved month (and the term), what the term saves, the discount a term would need to pay
when none in scope does, and how soon buying its GPUs would pay back against that cheapest rent.

The steady-use rule routes to RESERVE only when a reserved placement in scope is the first pick's cheapest month
(so the route and the pick agree); otherwise the answer says what a commitment would have to reach. A GPU with no
reserved price in scope has an unknown reserved price, never a reason to rank a larger shape that has one first.
"""

from __future__ import annotations

import math
from typing import Any

from ..domain.brief import RENT_TIERS, UNSPECIFIED, Brief
from ..engine.parse import FieldSpec
from ..money import cost as money
from .placement import month_hours
from .sizing.common import Sizing

MAX_QUOTE_TERM_MONTHS = 36  # the longest term providers publish (GCP, AWS, Azure: 1 or 3 years)

MONEY_FIELDS: dict[str, FieldSpec] = {
    "top_name": FieldSpec("string", "first candidate's GPU name ('' when none)"),
    "top_tier": FieldSpec("enum", "the tier of the first candidate's price (UNSPECIFIED when unpriced)",
                          (UNSPECIFIED, *RENT_TIERS)),
    "top_month_usd": FieldSpec("number", "first candidate's month on its cheapest placement, whole configuration"),
    "top_on_demand_month_usd": FieldSpec(
        "number", "first candidate's cheapest on-demand placement in scope for the brief's month (0 = none)"),
    "top_reserved_month_usd": FieldSpec(
        "number", "first candidate's cheapest reserved placement in scope for a month of 730 h (0 = none)"),
    "top_reserved_term_months": FieldSpec("int", "that reserved placement's term (0 = none)"),
    "reserved_cheaper": FieldSpec(
        "bool", "a reserved placement in scope is the first candidate's cheapest month (over any horizon: the "
        "term bills every month alike)"),
    "reserve_saving_usd": FieldSpec("number", "on-demand month less reserved month (0 when either is not known)"),
    "reserve_saving_pct": FieldSpec("number", "that saving as a share of the on-demand month, % (0 = not known)"),
    "reserve_discount_needed_pct": FieldSpec(
        "number", "the share off the on-demand rate at which a term billing 730 h costs no more than the hours "
        "used: 100 x (1 - hours a month / 730); 0 = any discount pays"),
    "quote_term_months": FieldSpec(
        "int", "the term to ask providers for: the reserved one in scope, else the horizon (at most 36), else 12"),
    "buy_break_even_months": FieldSpec(
        "number", "months until buying the first candidate's GPUs beats its cheapest rent month, power and upkeep "
        "counted (-1 = never or no purchase price)"),
}


# The MONEY_FIELDS with no first pick (plan_fact's own, which money_facts replaces for an answer's first pick).
NO_MONEY: dict[str, Any] = {
    "top_name": "", "top_tier": UNSPECIFIED, "top_month_usd": 0.0, "top_on_demand_month_usd": 0.0,
    "top_reserved_month_usd": 0.0, "top_reserved_term_months": 0, "reserved_cheaper": False,
    "reserve_saving_usd": 0.0, "reserve_saving_pct": 0.0, "reserve_discount_needed_pct": 0.0,
    "quote_term_months": 0, "buy_break_even_months": -1.0,
}


def money_facts(top: Sizing | None, brief: Brief, a: Any) -> dict[str, Any]:  # noqa: ANN401 - Assumptions
    """The MONEY_FIELDS of the plan fact."""
    hours = month_hours(brief, a)
    placements = top.placements if top else ()
    on_demand = min((p.usd_per_month for p in placements if p.offer.tier == "on_demand"), default=0.0)
    if not on_demand and top is not None and top.placement is None and top.price_tier == "ON_DEMAND":
        on_demand = top.usd_per_month  # the catalog's or a quote's on-demand price
    term = min((p for p in placements if p.offer.tier == "reserved"), key=lambda p: p.usd_per_month, default=None)
    reserved = term.usd_per_month if term else 0.0
    saving = on_demand - reserved if on_demand and reserved else 0.0
    horizon = int(brief.economics.horizon_months)
    quote_term = term.offer.term_months if term else (min(horizon, MAX_QUOTE_TERM_MONTHS) if horizon > 0
                                                      else int(a.values.get("reserve_term_months_default", 12)))
    return {
        "top_name": top.gpu.name if top else "",
        "top_tier": (top.price_tier or UNSPECIFIED) if top else UNSPECIFIED,
        "top_month_usd": round(top.usd_per_month, 2) if top else 0.0,
        "top_on_demand_month_usd": round(on_demand, 2),
        "top_reserved_month_usd": round(reserved, 2),
        "top_reserved_term_months": term.offer.term_months if term else 0,
        "reserved_cheaper": bool(top and term and top.placement is term and top.quote is None),
        "reserve_saving_usd": round(saving, 2),
        "reserve_saving_pct": round(100 * saving / on_demand, 1) if saving else 0.0,
        "reserve_discount_needed_pct": round(100 * money.term_discount_needed(hours), 1),
        "quote_term_months": int(quote_term),
        "buy_break_even_months": round(_buy_break_even(top, hours), 2),
    }


def _buy_break_even(top: Sizing | None, hours: float) -> float:
    """Months of the cheapest rent it takes to pay for the GPUs, less what running them costs (-1 = never)."""
    if top is None or top.purchase is None or top.usd_per_month <= 0:
        return -1.0
    running = top.running_usd_per_busy_hour * hours
    saved = top.usd_per_month - running
    if saved <= 0:
        return -1.0
    months = top.purchase.usd * top.count / saved
    return months if math.isfinite(months) else -1.0
