"""The summary's sentences about where to rent: the offer the top pick is priced on (provider, instance type,
region and country, tier, $/h) and the next provider's, how many of the rented GPUs the work needs, a rent
answer with nothing rentable in scope, a reserved term beside the on-demand month it replaces, and the candidate
shown that costs less a month than the top pick, with why it ranks lower.

Each sentence is a message template (summary.* in rules/messages); this module only picks the figures.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..domain.advice import Advice, Candidate, Placement

HOURS_PER_MONTH = 730  # a reserved term bills every hour of the month, used or not
NO_OFFER_CODE = "NO_OFFER_IN_SCOPE"

Text = Callable[..., str]


def _place(p: Placement, t: Text) -> str:
    """"eu-north1 (FI)", or the region alone when the country is not known or is the region's name."""
    o = p.offer
    if not o.country or o.country == o.region:
        return o.region
    return t("summary.region_country", region=o.region, country=o.country)


def _tier(p: Placement, t: Text) -> str:
    o = p.offer
    name = t(f"tier.{o.tier.upper()}")
    return t("summary.tier_term", tier=name, months=o.term_months) if o.term_months > 0 else name


def where(c: Candidate, t: Text, offers_loaded: bool) -> str:
    """Where the candidate is rented and the next provider in the same tier; that no offer in scope prices it
    (offer tables loaded); "" when a quote or, with no offer tables, the catalog prices it."""
    if not c.placements:
        return t("summary.where_none") if offers_loaded else ""
    if c.placements[0].offer.instance_type == "quote":
        return ""
    first = c.placements[0]
    o = first.offer
    text = t("summary.where", count=c.count, name=c.name, provider=o.provider, instance_type=o.instance_type,
             place=_place(first, t), tier=_tier(first, t), usd_per_hour=first.usd_per_hour)
    nxt = next((p for p in c.placements[1:] if p.offer.tier == o.tier and p.offer.provider != o.provider), None)
    if nxt is not None:
        text += t("summary.where_next", provider=nxt.offer.provider, place=_place(nxt, t),
                  usd_per_hour=nxt.usd_per_hour)
    return text + needs(c, t)


def needs(c: Candidate, t: Text) -> str:
    """"needs 2, rents 8 (6 spare)" when whole instances bring more GPUs than the sizing needs."""
    if c.gpus_needed <= 0 or c.gpus_needed >= c.count:
        return ""
    if c.spare_gpus > 0:
        return t("summary.needs_spare", needed=c.gpus_needed, count=c.count, spare=c.spare_gpus)
    return t("summary.needs_filled", needed=c.gpus_needed, count=c.count)


def unplaced(c: Candidate, advice: Advice) -> bool:
    """Offer tables are loaded and none in the brief's scope prices this candidate (nor a quote)."""
    return advice.offers_loaded and not c.placements


def no_offer_line(advice: Advice, t: Text) -> str:
    """The rent answer's first line when nothing in scope is rentable (the outcome rule's warning)."""
    w = next((w for w in advice.warnings if w.code == NO_OFFER_CODE), None)
    return t("summary.no_offer_in_scope", text=w.text) if w is not None else ""


def reserved_line(advice: Advice, brief: dict[str, Any], t: Text) -> str:
    """A top pick priced on a reserved term, beside the on-demand placement of the same work: the month of each
    (the term bills every hour; on-demand only the brief's hours) and what the term saves."""
    if not advice.candidates:
        return ""
    c = advice.candidates[0]
    if not c.placements or c.placements[0].offer.tier != "reserved":
        return ""
    od = next((p for p in c.placements if p.offer.tier == "on_demand"), None)
    if od is None:
        return ""
    hours = brief.get("hours_per_month", 0.0) or HOURS_PER_MONTH
    reserved = c.placements[0].usd_per_hour * HOURS_PER_MONTH
    on_demand = od.usd_per_hour * hours
    saving = on_demand - reserved
    key = "summary.reserved_saves" if saving >= 0 else "summary.reserved_costs_more"
    return t(key, months=c.placements[0].offer.term_months,
             provider=c.placements[0].offer.provider, reserved=reserved, on_demand=on_demand,
             od_provider=od.offer.provider, od_instance_type=od.offer.instance_type, hours=hours,
             saving=abs(saving), saving_share=abs(saving) / on_demand if on_demand > 0 else 0.0)


CHEAPER_BY = 1.1  # a candidate whose month is below the top pick's by more than this share is named


def cheaper_line(advice: Advice, t: Text, points: dict[str, tuple[tuple[str, float], ...]]) -> str:
    """A candidate shown whose month (on an offer in scope) is under the top pick's by more than 10%, and why it
    ranks lower: the rule points that set it back (or lift the top pick) when on cost alone it would lead, else its
    higher cost per unit (it gets through less of the work for its money). `points`: each candidate's (rule id,
    points) by GPU id."""
    if not advice.candidates or advice.candidates[0].usd_per_month <= 0:
        return ""
    top = advice.candidates[0]
    placed = [c for c in advice.candidates[1:] if c.placements and c.usd_per_month > 0]
    c = min(placed, key=lambda x: x.usd_per_month, default=None)
    if c is None or c.usd_per_month * CHEAPER_BY >= top.usd_per_month:
        return ""
    rules = [(r, p) for r, p in points.get(c.gpu, ()) if p < 0]
    rules += [(r, p) for r, p in points.get(top.gpu, ()) if p > 0]
    cheaper_on_cost = (c.score_breakdown is not None and top.score_breakdown is not None
                       and c.score_breakdown.cost_points >= top.score_breakdown.cost_points)
    if rules and cheaper_on_cost:  # on cost alone it would lead: the rule points explain the order
        named = ", ".join(f"{r} ({p:+g})" for r, p in rules)
        return t("summary.cheaper_month_rules", count=c.count, name=c.name, month=c.usd_per_month, rules=named)
    if c.cost.usd_per_unit > top.cost.usd_per_unit > 0:
        return t("summary.cheaper_month_unit", count=c.count, name=c.name, month=c.usd_per_month,
                 unit_cost=c.cost.usd_per_unit, top_unit_cost=top.cost.usd_per_unit, unit=c.cost.unit)
    return ""
