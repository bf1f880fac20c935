"""Placement: each sized GPU on the instance shapes a team can rent (rules/offers/*.csv).

A sizing says how many GPUs of a type the work needs and how they group (GPUs per model copy, copies). An offer
rents them by the instance: 1, 2, 4 or 8 GPUs of one provider, region and tier. A placement is whole instances
of one offer: a model copy's tensor-parallel group stays inside one instance (a copy wider than an instance takes
whole nodes, as pipeline stages), copies and data-parallel groups spread over instances. The cost is the
instances'. GPUs an instance brings beyond the need shorten a training run (data parallelism uses them all); for
serving they stay spare capacity, so the memory need and the copies stay as sized.

Which offers a brief may use is decided twice: by the brief's own allow-lists (placement.providers, regions,
countries), and by the rules with `fact: offer` (rules/placement.yaml), one fact per scope (provider, country,
tier), so an author can rule out a tier or a provider for some work without Python. Their verdicts depend only
on a few brief fields and the scopes, so they are kept per rules version and brief shape.

Candidates are compared at one tier (sizing.common.compared_tier): the cheapest placement in that tier prices
the candidate; when the GPU has no allowed offer in that tier the next tier stands in (as for catalog prices)
and the answer says so; with no allowed offer at all the catalog prices it, and a caveat says that too.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from datetime import date
from typing import Any

from ..domain.brief import TRAINING_WORKLOADS, UNSPECIFIED, Brief
from ..domain.catalog import tier_preference
from ..domain.offers import EU_MEMBERS, Offer, OfferTable, expand_countries
from ..memo import keep, keep_held
from ..money import cost as money
from ..money import ownership as own
from .sizing.common import Placed, Sizing, size_unit_cost
from .sizing.shape import Shape

# Offer tables name tiers in lower case, as rule authors write them; the answer uses the PriceTier names.
TIER_OF_OFFER = {"on_demand": "ON_DEMAND", "reserved": "RESERVED", "spot": "SPOT", "marketplace": "MARKETPLACE"}
MAX_PROVIDERS_SHOWN = 3  # besides the cheapest placement of each tier: the cheapest of a few other providers

Scope = tuple[str, str, str]  # (provider, country, tier as in the offer tables)


def scopes_of(table: OfferTable, day: date) -> tuple[Scope, ...]:
    """Distinct (provider, country, tier) among the offers valid on `day`: what placement rules decide on."""
    return tuple(sorted({(o.provider, o.country, o.tier) for rows in table.shapes(day).values() for o in rows}))


def _brief_part(brief: Brief) -> dict[str, Any]:
    """The brief fields an offer fact holds: briefs alike in these get the same verdicts (brief_key)."""
    lat = brief.latency
    return {
        "workload": brief.workload,
        "run_cycle": brief.run_cycle,
        "boundary": brief.boundary,
        "is_training": brief.workload in TRAINING_WORKLOADS,
        "latency_target": lat.p95_ms > 0 or lat.p99_ms > 0 or lat.ttft_ms > 0,
        "interruptible_ok": brief.placement.interruptible_ok,
    }


def offer_fact(brief: Brief, scope: Scope, index: int) -> dict[str, Any]:
    provider, country, tier = scope
    return {
        "id": f"offer:{index}",
        **_brief_part(brief),
        "provider": provider,
        "country": country,
        "country_known": bool(country),
        "in_eu": country in EU_MEMBERS,
        "tier": TIER_OF_OFFER.get(tier, UNSPECIFIED),
    }


def brief_key(brief: Brief) -> tuple[Any, ...]:
    """The brief fields an offer fact holds: briefs alike in these get the same verdicts."""
    return tuple(_brief_part(brief).values())


def reserve_term(brief: Brief, a: Any, tier: str | None = None) -> int:  # noqa: ANN401 - Assumptions
    """The longest reserved term (months) this brief may be priced on: its horizon; without one, the rules'
    `reserve_term_months_default` when the brief compares at reserved prices, else none (0). `tier`: the
    brief's price tier read as this one (the term the same brief would have at that tier)."""
    horizon = brief.economics.horizon_months
    if horizon > 0:
        return int(horizon)
    if (brief.economics.price_tier if tier is None else tier) == "RESERVED":
        return int(a.values.get("reserve_term_months_default", 12))
    return 0


def instances_needed(s: Sizing, gpi: int, training: bool) -> int | None:
    """Whole instances of `gpi` GPUs that hold this configuration, or None when the shape cannot: a model copy's
    tensor-parallel group must fit inside one instance; a copy wider than the scale-up domain (pipeline stages)
    or a training job beyond one instance takes whole nodes."""
    node = max(1, s.gpu.gpus_per_node)
    if training:
        if s.count <= gpi:
            return 1
        return math.ceil(s.count / gpi) if gpi >= min(node, 8) else None
    per = max(1, s.per_replica)
    if per <= gpi:
        return math.ceil(max(1, s.replicas) / (gpi // per))
    if per % gpi == 0 and gpi >= node:
        return max(1, s.replicas) * (per // gpi)
    return None


# Per instance shape, the first offer of each provider (in price order) that the brief may use: the cheapest
# placement of a shape is its first, and only a few providers of the compared tier are shown: if a provider is not
# among a shape's first LEADERS, that many cheaper providers are, so it would not be shown anyway.
LEADERS = MAX_PROVIDERS_SHOWN + 1  # the tier's cheapest, and a few more providers
# (gpu, offer tier) -> ((gpus per instance, that shape's leaders), ...), narrowest shape first
Leaders = dict[tuple[str, str], tuple[tuple[int, tuple[Offer, ...]], ...]]
# gpu -> (min, median, max $/GPU-hour, offers, providers) of its on-demand offers in the brief's scope
Markets = dict[str, tuple[float, float, float, int, int]]


def markets_of(table: OfferTable, day: date, allowed: set[int]) -> Markets:
    """Each GPU's on-demand spread over the offers `allowed` (by id: the brief's scope), kept with the leaders: an
    EU brief's cheapest is not a host outside the EU that its placement refuses."""
    prices: dict[str, list[float]] = {}
    providers: dict[str, set[str]] = {}
    for (gpu, tier, _gpi), rows in table.shapes(day).items():
        if tier != "on_demand":
            continue
        for o in rows:
            if id(o) in allowed:
                prices.setdefault(gpu, []).append(o.usd_per_gpu_hour)
                providers.setdefault(gpu, set()).add(o.provider)
    out: Markets = {}
    for gpu, p in prices.items():
        p.sort()
        out[gpu] = (p[0], statistics.median(p), p[-1], len(p), len(providers[gpu]))
    return out


def leaders_of(table: OfferTable, day: date, allowed: set[int]) -> Leaders:
    """(gpu, tier) -> per shape the allowed providers' cheapest offers (`allowed`: their ids), cheapest first.
    Built once per rules version, day and allowed scope (advisor.py keeps it), so an answer's cost does not grow
    with the table."""
    out: dict[tuple[str, str], list[tuple[int, tuple[Offer, ...]]]] = {}
    for (gpu, tier, gpi), rows in table.shapes(day).items():
        seen: set[str] = set()
        kept: list[Offer] = []
        for o in rows:
            if o.provider in seen or id(o) not in allowed:
                continue
            seen.add(o.provider)
            kept.append(o)
            if len(kept) >= LEADERS:
                break
        if kept:
            out.setdefault((gpu, tier), []).append((gpi, tuple(kept)))
    return {k: tuple(sorted(v, key=lambda x: x[0])) for k, v in out.items()}


# Offers valid on a day by scope, the ones a host too small for its GPUs refuses left out: (offer, reserved, term).
ByScope = dict[Scope, list[tuple[Offer, bool, int]]]


def by_scope(table: OfferTable, day: date, host_ok: Callable[[Offer], bool]) -> ByScope:
    """What every brief's allowed offers are picked from on `day`; kept per rules version (advisor.py)."""
    out: ByScope = {}
    for rows in table.shapes(day).values():
        for o in rows:
            if host_ok(o):
                out.setdefault((o.provider, o.country, o.tier), []).append((o, o.tier == "reserved", o.term_months))
    return out


def allowed_ids(rows: ByScope, scopes: frozenset[Scope], term: int, brief: Brief) -> set[int]:
    """Ids of the offers a brief may use: in a scope no placement rule excludes, on a reserved term its horizon
    covers (none without one), and through the brief's own allow-lists (providers in any
    case and countries, "EU" the member states, decided once per scope; regions per offer)."""
    p = brief.placement
    providers = {x.lower() for x in p.providers} if p.providers else None
    countries = expand_countries(p.countries) if p.countries else None
    regions = set(p.regions) if p.regions else None
    out: set[int] = set()
    for sc in scopes:
        if (providers is not None and sc[0].lower() not in providers) or (countries is not None
                                                                          and sc[1] not in countries):
            continue
        for o, reserved, months in rows.get(sc, ()):
            # A reserved rate binds for its term: only terms the brief's horizon covers.
            if (not reserved or 0 < months <= term) and (regions is None or o.region in regions):
                out.add(id(o))
    return out


def scales_out(brief: Brief) -> bool:
    """Work that scales out over every GPU it rents: a training run (data parallel). Inference copies are sized to
    the work (the offered rate, or a batch's volume over its window; one copy when neither is given): a node's
    extra GPUs are spare, never copies the brief did not ask for."""
    return brief.workload in TRAINING_WORKLOADS


def month_hours(brief: Brief, a: Any) -> float:  # noqa: ANN401 - Assumptions
    """Hours an hourly tier bills in the brief's month: a volume's window when given, else hours_per_month, else
    the rules' full month (`hours_per_month` in assumptions)."""
    t, e = brief.traffic, brief.economics
    if t.requests_per_month > 0 and t.window_hours > 0:
        return float(t.window_hours)
    return float(e.hours_per_month) if e.hours_per_month > 0 else float(a.num("hours_per_month"))


# Demand that a commitment does not suit: a reserved term is priced only for use that stays.
NO_TERM_DEMANDS = ("VOLATILE", "UNCERTAIN")
NO_TERM_CYCLES = ("BURST", "EXPERIMENTAL")


def priced_tiers(brief: Brief) -> tuple[str, ...]:
    """The offer tiers that may price this brief's candidates, as the offer tables name them: the brief's own tier
    when it names one; else on-demand, a reserved term (one its horizon covers: allowed_ids) for steady use with
    its hours a month given, and spot or marketplace hosts when the work checkpoints (placement.interruptible_ok;
    the placement rules may still rule a scope out). Training prices its run on hourly tiers."""
    e = brief.economics
    if e.price_tier != UNSPECIFIED:
        return (_offer_tier(e.price_tier),)
    tiers = ["on_demand"]
    if (e.hours_per_month > 0 and brief.workload not in TRAINING_WORKLOADS and e.demand not in NO_TERM_DEMANDS
            and brief.run_cycle not in NO_TERM_CYCLES):
        tiers.append("reserved")
    if brief.placement.interruptible_ok:
        tiers += ["spot", "marketplace"]
    return tuple(tiers)


def _work(s: Sizing, gpus: int, training: bool, fills: bool) -> float:
    """Units of parallel work `gpus` GPUs carry: GPUs (training), else 1 (a fixed need: inference never fills a
    node with copies the brief did not ask for)."""
    if not fills:
        return 1
    if training and s.train_hours > 0:
        return 1.0 / s.hours_at(gpus)  # runs an hour: the key is the run's cost, start-up paid on every GPU
    return gpus if training else 1


def _key(s: Sizing, o: Offer, n: int, training: bool, fills: bool, hours: float) -> tuple[Any, ...]:
    """Orders placements: the brief's month per unit of parallel work (the whole configuration's month when the
    need is fixed), then that month, GPUs, provider, instance type, region; then the offer and instances."""
    total, gpus = n * o.usd_per_hour, n * o.gpus_per_instance
    month = money.month_usd(total, hours, o.tier == "reserved")
    return (month / _work(s, gpus, training, fills), month, gpus, o.provider, o.instance_type, o.region, o, n,
            total)


# What `options` found for a GPU type's grouping on one Leaders: (gpu id, GPUs per node, count, GPUs per copy,
# copies, tiers, hours, training, fills) -> its result, which readers must not change; and beside each, by
# ("shown", its ids), the placements `place` lists from it (with the objects, so ids stay theirs).
Options = dict[tuple[Any, ...], tuple[Any, ...]]
OPTIONS_KEPT = 256  # groupings and their lists kept per Leaders (64 at most are kept); all are dropped past it


def options(
    s: Sizing, leaders: Leaders, training: bool, fills: bool = False, kept: Options | None = None,
    tiers: tuple[str, ...] = ("on_demand",), hours: float = money.TERM_HOURS_PER_MONTH,
) -> tuple[dict[str, Placed], list[Placed]]:
    """The cheapest placement per offer tier (every tier the offers hold; `tiers` say which may price), and the
    cheapest of each of the first few providers in the tier of the cheapest of `tiers`, cheapest first, all by
    the brief's month (`hours` for an hourly tier, 730 for a term). `kept`: results for these `leaders` by what
    they read of the sizing (GPUs and copies, a run's hours, not the speed or the price), so another brief
    grouped alike looks them up."""
    if kept is None:
        return _options(s, leaders, training, fills, tiers, hours)
    # A training run's hours order its shapes by the run's cost (_work): two runs alike in GPUs differ in them.
    run = (s.train_hours, s.fixed_hours) if training else None
    key = (s.gpu.id, s.gpu.gpus_per_node, s.count, s.per_replica, s.replicas, tiers, hours, s.compared_tier,
           training, fills, run)
    return keep(kept, key, lambda: _options(s, leaders, training, fills, tiers, hours), OPTIONS_KEPT)


def _options(
    s: Sizing, leaders: Leaders, training: bool, fills: bool, tiers: tuple[str, ...], hours: float,
) -> tuple[dict[str, Placed], list[Placed]]:
    best: dict[str, tuple[Any, ...]] = {}
    fits: dict[str, list[tuple[int, int, tuple[Offer, ...]]]] = {}  # tier -> (gpus per instance, instances, offers)
    gpu = s.gpu.id
    for tier in TIER_OF_OFFER:
        for gpi, offers in leaders.get((gpu, tier), ()):
            n = instances_needed(s, gpi, training)
            if n is None:
                continue
            key = _key(s, offers[0], n, training, fills, hours)  # a shape's cheapest is its first
            cur = best.get(tier)
            if cur is None or key[:6] < cur[:6]:
                best[tier] = key
            fits.setdefault(tier, []).append((gpi, n, offers))
    priced = [t for t in tiers if t in best]
    if priced:
        compared = min(priced, key=lambda t: best[t][:6])
    else:  # no tier that may price it holds it: the next tier of the brief's preference stands in
        compared = next((_offer_tier(t) for t in tier_preference(s.compared_tier) if _offer_tier(t) in fits), "")
    keys = sorted((_key(s, o, n, training, fills, hours) for gpi, n, offers in fits.get(compared, ())
                   for o in offers), key=lambda k: k[:6])
    seen: set[str] = set()
    providers: list[Placed] = []
    for k in keys:
        if k[3] not in seen:
            seen.add(k[3])
            providers.append(_placed(k))
            if len(providers) >= LEADERS:
                break
    shown = {t: k for t, k in best.items() if t in tiers or t == compared}
    return {t: _placed(k) for t, k in sorted(shown.items(), key=lambda x: x[1][:6])}, providers


def _placed(key: tuple[Any, ...]) -> Placed:
    o, n = key[6], key[7]
    return Placed(o, n, key[8], TIER_OF_OFFER[o.tier], key[1])


def place(
    s: Sizing, brief: Brief, shape: Shape, a: Any, table: OfferTable, day: date,  # noqa: ANN401 - Assumptions
    leaders: Leaders, max_age_days: int, markets: Markets | None = None, kept: Options | None = None,
) -> None:
    """Price `s` on its cheapest placement for the brief's month over every tier that may price it (else the
    next tier that has one) and list the placements a team could take; a caller's quote keeps pricing it.
    Nothing changes without an allowed offer. `markets`: the on-demand spread of each GPU over the offers the
    brief may use (else over every offer); `kept`: `options`' results for these leaders."""
    training = brief.workload in TRAINING_WORKLOADS
    s.offers_loaded = bool(len(table))
    s.has_offers = bool(table.for_gpu(s.gpu.id))
    s.gpus_needed = s.count
    s.market = markets.get(s.gpu.id) if markets is not None else table.market(s.gpu.id, "on_demand", day)
    if not s.has_offers or not s.fits or s.count <= 0:
        return
    fills = scales_out(brief)
    tiers, hours = priced_tiers(brief), month_hours(brief, a)
    best, by_provider = options(s, leaders, training, fills, kept, tiers, hours)
    if not best:
        return
    chosen = next(iter(best.values()))  # cheapest first
    if _offer_tier(chosen.offer_tier) not in tiers and s.price is not None and s.price_tier == s.compared_tier:
        return  # the catalog's row in the brief's tier prices it, like for like; a caveat says no offer did
    if kept is None:
        s.placements = _shown(best, by_provider, chosen)
    else:
        # The list depends only on `options`' result (kept beside it in `kept`) and the offer chosen.
        s.placements = keep_held(kept, ("shown", id(by_provider), id(chosen)), (by_provider, chosen),
                                 lambda: _shown(best, by_provider, chosen), OPTIONS_KEPT)
    if s.quote is not None:
        return  # the caller's quote prices it (answer.py lists it first); the offers are there for reference
    _reprice(s, chosen, brief, shape, a, training, s.market, fills)
    s.placement = chosen
    s.tier_allowed = _offer_tier(chosen.offer_tier) in tiers
    s.offer_stale = (day - chosen.offer.as_of).days > max_age_days


def _shown(best: dict[str, Placed], by_provider: list[Placed], chosen: Placed) -> tuple[Placed, ...]:
    """The placements a candidate lists: each tier's cheapest for the month, cheapest first (the chosen is the
    first), then a few other providers of the chosen tier."""
    shown = [chosen, *(p for p in best.values() if p is not chosen)]
    for p in by_provider:
        if len(shown) >= len(best) + MAX_PROVIDERS_SHOWN:
            break
        if p not in shown and all(q.offer.provider != p.offer.provider for q in shown):
            shown.append(p)
    return tuple(shown)


def _offer_tier(tier: str) -> str:
    return tier.lower()


def _reprice(
    s: Sizing, p: Placed, brief: Brief, shape: Shape, a: Any, training: bool,  # noqa: ANN401
    table_market: tuple[float, float, float, int, int] | None, fills: bool = False,
) -> None:
    """The sizing on whole instances: the count the instances bring, the copies (or the run time) it allows, the
    instances' price, and every figure that follows from count and price. Work that scales out (`fills`) runs
    a model copy on every group of GPUs the instances bring; a fixed load leaves the extra GPUs spare."""
    new = p.gpus
    old = s.count
    gpi = p.offer.gpus_per_instance
    if training:
        if s.train_hours > 0 and new != old:
            s.train_hours = s.hours_at(new)  # compute linear in the count, the start-up not
        s.per_replica = new
    s.spare_gpus = 0 if training else max(0, new - max(1, s.replicas) * max(1, s.per_replica))
    s.count = new
    s.nodes = p.instances if gpi >= max(1, s.gpu.gpus_per_node) or p.instances > 1 else 1
    s.capacity_gb = s.count * s.gpu.capacity_gb
    need = s.memory.total_gb if s.memory else 0.0
    s.headroom = 1.0 - need / s.capacity_gb if s.capacity_gb > 0 else 0.0
    s.usd_per_hour = p.usd_per_hour
    s.usd_per_month = p.usd_per_month
    s.usd_per_gpu_hour = p.usd_per_hour / s.count
    s.price_tier = p.offer_tier
    s.usd_per_tflop_hour = (
        money.usd_per_tflop_hour(s.usd_per_gpu_hour, s.gpu.tflops_bf16) if s.gpu.tflops_bf16 else 0.0
    )
    s.units_per_hour = s.usd_per_unit = 0.0
    size_unit_cost(s, brief, shape, a)
    rent, basis = _reference_rent(s, table_market)
    _rescale_ownership(s, new / old if old > 0 else 1.0, rent, basis, a)


def _rescale_ownership(s: Sizing, k: float, rent: float, basis: str, a: Any) -> None:  # noqa: ANN401
    """size_ownership for `k` times the GPUs, from the figures it already made: power, running and owned cost
    are linear in the count, only the break-even needs the new rent (tests/test_placement.py holds the two
    equal)."""
    s.annual_power_usd *= k
    s.break_even_rent, s.break_even_basis = rent, basis
    s.break_even_hours = s.break_even_months = 0.0
    if s.purchase is None:
        return
    s.running_usd_per_busy_hour *= k
    s.owned_usd_per_hour *= k
    if rent > 0:
        s.break_even_hours = own.break_even_hours(s.purchase.usd * s.count, rent, s.running_usd_per_busy_hour)
        s.break_even_months = (
            own.break_even_months(s.break_even_hours, s.ownership_utilization, a.num("hours_per_month"))
            if math.isfinite(s.break_even_hours) else math.inf
        )


def _reference_rent(s: Sizing, market: tuple[float, float, float, int, int] | None) -> tuple[float, str]:
    """What buying is weighed against, for the whole configuration: the rules' reference rent in the compared
    tier (the catalog row, with its source), else the market's median offer in that tier, else this offer. Not
    simply the cheapest offer: one cheap listing is not the rent a team can count on for years. A pick priced on
    a reserved term (its cheapest month) is weighed against that term: a rent fixed for years already."""
    if s.price_tier == "RESERVED":
        return s.usd_per_hour, "own"
    if s.price is not None and s.price.tier == s.compared_tier and s.price.usd > 0:
        return s.price.usd * s.count, "catalog"
    if market is not None and s.compared_tier == "ON_DEMAND":
        return market[1] * s.count, "market"
    return s.usd_per_hour, "own"
