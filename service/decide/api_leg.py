"""The model-API leg: the named model's API offers (rules/api_offers) priced on the brief's own token mix, the
cheapest one the brief's scope allows, set against the first self-hosted candidate, and the facts the route rules
read (`API_FIELDS`).

Scope: a hosted API is out for on-prem, private-network and dedicated-cluster boundaries; with countries or
regions in the brief's placement (or a data-residency boundary) only offers whose provider names a matching place
count. An offer that names no place never satisfies a residency requirement.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from ..domain.api_offers import ApiLeg, ApiOffer, ApiOfferTable
from ..domain.assumptions import Assumptions
from ..domain.brief import Brief
from ..domain.models import Registry, find
from ..domain.offers import expand_countries
from ..engine.parse import FieldSpec
from ..money import api as money
from .sizing.common import Sizing
from .sizing.shape import Shape

SCOPES = ("IN_SCOPE", "UNNAMED", "NOT_HOSTED", "NOT_TEXT", "BOUNDARY", "RESIDENCY", "CONTEXT")
TEXT_UNITS = ("TOKEN", "RESPONSE", "TASK", "RECORD")
HOSTED_OUT = ("ON_PREM", "PRIVATE_NETWORK", "DEDICATED_CLUSTER")
# Work a hosted model API does per token (facts.API_WORKLOADS but media, which is billed per image or second).
API_WORKLOADS = ("BATCH_INFERENCE", "REALTIME_INFERENCE", "EMBEDDING", "EVALUATION")

API_FIELDS: dict[str, FieldSpec] = {
    "api_scope": FieldSpec("enum", "the model-API leg: IN_SCOPE (an API offer for the named model the brief may "
                           "use), UNNAMED (no registry model named), NOT_HOSTED (no API hosts it), NOT_TEXT (work "
                           "not billed per token), BOUNDARY (the boundary rules hosted APIs out), RESIDENCY (no offer "
                           "in the brief's countries or regions), CONTEXT (none takes the request's tokens)", SCOPES),
    "api_hosted": FieldSpec("enum", "some model API hosts the named model (UNKNOWN: no registry model named, or work "
                            "not billed per token)", ("YES", "NO", "UNKNOWN")),
    "api_model": FieldSpec("string", "the named model's registry name ('' when none)"),
    "api_provider": FieldSpec("string", "the cheapest API offer's provider (in scope, else anywhere; '' = none)"),
    "api_usd_per_unit": FieldSpec("number", "that offer's cost per accepted unit on the brief's token mix (-1 = none)"),
    "api_usd_per_million_input": FieldSpec("number", "that offer's USD per 1M input tokens"),
    "api_usd_per_million_output": FieldSpec("number", "that offer's USD per 1M output tokens"),
    "api_usd_per_month": FieldSpec("number", "that offer for the first candidate's monthly load, USD"),
    "api_saving_pct": FieldSpec("number", "how much less the API costs than the first candidate per accepted unit, "
                                "percent (negative: more; 0 when not compared)"),
    "api_dearer_pct": FieldSpec("number", "how much more the API costs than the first candidate, percent (0 when "
                                "it costs less or was not compared)"),
    "api_break_even_units": FieldSpec("number", "the monthly load (accepted units) above which self-hosting the first "
                                      "candidate costs less than the API (-1 = never, or not compared)"),
    "api_units_per_month": FieldSpec("number", "the load compared: accepted units a month"),
    "api_break_even_million_tokens": FieldSpec("number", "api_break_even_units in millions of input + output "
                                               "tokens billed a month (-1 = never, or not compared)"),
    "top_usd_per_unit": FieldSpec("number", "the first candidate's cost per accepted unit (-1 = n/a)"),
    "top_usd_per_month": FieldSpec("number", "the first candidate's cost for a month at the hours compared, USD"),
    "api_cheaper": FieldSpec("bool", "an API offer in scope costs less per accepted unit than the first candidate"),
    "api_price_age_days": FieldSpec("int", "days since the compared API offer's price was read (0 = none)"),
    "api_price_stale": FieldSpec("bool", "the compared API offer's price is older than stale_price_days"),
}

NO_API: dict[str, Any] = {
    "api_scope": "UNNAMED", "api_hosted": "UNKNOWN", "api_model": "", "api_provider": "", "api_usd_per_unit": -1.0,
    "api_usd_per_million_input": 0.0, "api_usd_per_million_output": 0.0, "api_usd_per_month": 0.0,
    "api_saving_pct": 0.0, "api_dearer_pct": 0.0, "api_break_even_units": -1.0, "api_units_per_month": 0.0,
    "api_break_even_million_tokens": -1.0,
    "top_usd_per_unit": -1.0, "top_usd_per_month": 0.0, "api_cheaper": False, "api_price_age_days": 0,
    "api_price_stale": False,
}


@dataclass(frozen=True)
class Priced:
    """What the leg found: its scope verdict, the model's name, and the leg when an offer was priced."""

    scope: str
    model: str = ""
    leg: ApiLeg | None = None
    hosted: str = "UNKNOWN"  # YES, NO, UNKNOWN (no registry model named, or work no API bills per token)


def _in_place(o: ApiOffer, brief: Brief) -> bool:
    p = brief.placement
    if p.regions and o.region.lower() not in {r.lower() for r in p.regions}:
        return False
    if p.countries:
        wanted = [c.upper() for c in p.countries]
        if o.country == "EU":
            return "EU" in wanted
        return bool(o.country) and o.country in expand_countries(wanted)
    # A residency boundary with no place named: nothing is known to comply.
    return not (brief.boundary == "DATA_RESIDENCY" and not p.regions)


def _scope(offers: tuple[ApiOffer, ...], brief: Brief, tokens: int) -> tuple[str, list[ApiOffer]]:
    if brief.boundary in HOSTED_OUT:
        return "BOUNDARY", []
    placed = [o for o in offers if _in_place(o, brief)]
    if not placed:
        return "RESIDENCY", []
    fits = [o for o in placed if not o.context_tokens or o.context_tokens >= tokens]
    return ("IN_SCOPE", fits) if fits else ("CONTEXT", [])


def price(table: ApiOfferTable, models: Registry, brief: Brief, shape: Shape | None, top: Sizing | None,
          a: Assumptions) -> Priced:
    """The leg for this brief: the cheapest offer in scope (or, when the scope rules every offer out, the cheapest
    anywhere, marked out of scope, so the answer can say what it rules out)."""
    entry = find(models, brief.model.name)
    if entry is None:
        return Priced("UNNAMED")
    if brief.workload not in API_WORKLOADS:
        return Priced("NOT_TEXT", entry.name)
    offers = table.for_model(entry.id)
    if not offers:
        return Priced("NOT_HOSTED", entry.name, hosted="NO")
    unit = top.unit if top is not None else ""
    if shape is None or top is None or unit not in TEXT_UNITS or top.usd_per_unit <= 0 or top.units_per_hour <= 0:
        return Priced("NOT_TEXT", entry.name, hosted="YES")  # nothing self-hosted priced per unit to set it against
    embedding = brief.workload == "EMBEDDING"
    tin, tout = shape.input_tokens, (0 if embedding else shape.output_tokens)
    billed = shape.input_tokens if embedding else shape.output_tokens  # what a unit counts (sizing.common)
    share = brief.traffic.cached_input_share or a.num("default_cached_input_share")
    per_request_units = billed / 1e6 if unit == "TOKEN" else 1.0
    acc = brief.economics.acceptance_rate

    def per_unit(o: ApiOffer) -> float:
        bill = money.usd_per_request(tin, tout, share, o.usd_per_million_input, o.usd_per_million_output,
                                     o.usd_per_million_cached_input)
        return money.usd_per_accepted_unit(bill, per_request_units, acc)

    scope, usable = _scope(offers, brief, tin + tout)
    pool = usable or list(offers)
    ranked = sorted(pool, key=lambda o: (per_unit(o), o.provider, o.model, o.region))
    best = ranked[0]
    hours = brief.economics.hours_per_month or a.num("hours_per_month")
    accepted = top.units_per_hour * (acc if acc > 0 else 1.0)
    units_month = accepted * hours
    self_month = top.usd_per_hour * hours
    capacity = top.tokens_per_second * top.replicas / max(billed, 1) * 3600 * per_request_units
    capacity_month = capacity * (acc if acc > 0 else 1.0) * hours
    cost = per_unit(best)
    leg = ApiLeg(
        offer=best, usd_per_unit=cost, usd_per_month=cost * units_month,
        saving_pct=money.saving_pct(cost, top.usd_per_unit),
        break_even_units_per_month=money.break_even_units_per_month(self_month, cost, capacity_month)
        if cost > 0 else -1.0,
        unit=unit, self_usd_per_month=self_month, units_per_month=units_month,
        providers=len({o.provider for o in pool}), max_usd_per_unit=per_unit(ranked[-1]),
        cached_input_share=share, in_scope=scope == "IN_SCOPE",
        tokens_per_unit=(tin + tout) / per_request_units / (acc if acc > 0 else 1.0),
    )
    return Priced(scope, entry.name, leg, "YES")


def cheaper(fact: dict[str, Any]) -> bool:
    """An API offer in scope costs less per accepted unit than the first candidate (the plan fact's api_cheaper;
    decide/provisional.py recomputes it on its counterfactual facts)."""
    api, top = fact["api_usd_per_unit"], fact["top_usd_per_unit"]
    return fact["api_scope"] == "IN_SCOPE" and top > 0 and 0 < api < top


def plan_fields(p: Priced, top: Sizing | None, hours: float, day: date | None = None,
                stale_days: int = 0) -> dict[str, Any]:
    """The plan fact's API fields (API_FIELDS) for what `price` found; `day` and `stale_days` (the assumptions'
    stale_price_days) date the compared price, as decide/freshness.py dates the candidates'."""
    out = dict(NO_API, api_scope=p.scope, api_model=p.model, api_hosted=p.hosted)
    if top is not None and top.usd_per_unit > 0:
        out["top_usd_per_unit"] = round(top.usd_per_unit, 8)
        out["top_usd_per_month"] = round(top.usd_per_hour * hours, 2)
    leg = p.leg
    if leg is None:
        return out
    out.update(
        api_provider=leg.offer.provider, api_usd_per_unit=round(leg.usd_per_unit, 8),
        api_usd_per_million_input=leg.offer.usd_per_million_input,
        api_usd_per_million_output=leg.offer.usd_per_million_output,
        api_usd_per_month=round(leg.usd_per_month, 2), api_saving_pct=round(leg.saving_pct, 1),
        api_dearer_pct=round(max(0.0, -leg.saving_pct), 1),
        api_break_even_units=round(leg.break_even_units_per_month, 1),
        api_units_per_month=round(leg.units_per_month, 1),
        api_break_even_million_tokens=round(leg.break_even_units_per_month * leg.tokens_per_unit / 1e6, 1)
        if leg.break_even_units_per_month > 0 else -1.0,
        top_usd_per_month=round(leg.self_usd_per_month, 2),
    )
    out["api_cheaper"] = cheaper(out)
    if day is not None:
        out["api_price_age_days"] = age = max(0, (day - leg.offer.as_of).days)
        out["api_price_stale"] = stale_days > 0 and age > stale_days
    return out
