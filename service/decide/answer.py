"""The answer's parts as a reader sees them: each shown candidate with its memory, cost, ownership and
performance figures and the texts that explain them; warnings once each, most severe first; the benchmark
plan and procurement checklist for the workload.
"""

from __future__ import annotations

import math
from datetime import date
from typing import Any

from ..domain.accuracy import Band
from ..domain.advice import (
    BenchmarkStage,
    Candidate,
    ChecklistSection,
    Cost,
    MarketSpread,
    MemoryFit,
    Ownership,
    Performance,
    Placement,
    Reason,
    ScoreBreakdown,
    Warning,
)
from ..domain.frozen import build
from ..domain.offers import Offer
from ..memo import IdentityMemo, keep_held
from .accuracy import band_of, risk_caveats
from .book import Rulebook
from .run import Run, Said, Scored
from .sizing.common import Placed, Sizing

SEVERITY_ORDER = {"CRITICAL": 0, "WARNING": 1, "INFO": 2}


def cost_unit(unit: str) -> str:
    """The locale-independent CostUnit of a sizing's unit (a SUCCESS_UNIT name): tokens are per million."""
    return "MILLION_OUTPUT_TOKENS" if unit == "TOKEN" else unit


def candidate_of(c: Scored, run: Run, summary: bool = False) -> Candidate:
    """`summary` (VIEW_SUMMARY): without what the summary leaves out and nothing else reads (the reasons, the
    caveats, the score's rule points), so those texts are not made."""
    s, fact = c.sizing, c.fact
    training, workload = fact["is_training"], fact["workload"]
    mem = s.memory
    # One model copy's memory (its tensor x pipeline width); performance.replicas says how many copies run.
    copies = 1 if training else max(1, s.replicas)
    need = (mem.total_gb if mem else 0.0) / copies
    capacity = s.gpu.capacity_gb * max(1, s.per_replica) if copies > 1 else s.capacity_gb
    params = c.params
    if s.quote:
        price_src = run.text("price.from_quote", {"provider": s.quote.provider or "-", "as_of": s.quote.as_of or "-"})
        price_as_of = s.quote.as_of
    elif s.placement:
        placed = s.placement
        price_src, price_as_of = keep_held(_offer_prices, (id(run.msgs), run.locale, id(placed)), (run.msgs, placed),
                                           lambda: _offer_price(placed, run), _KEPT_TEXTS)
    else:
        price_src, price_as_of = "", ""
        if s.price:
            price_src = run.text("price.from_catalog",
                                 {"source": s.price.source_in(run.locale), "as_of": s.price.as_of})
            price_as_of = s.price.as_of
    interconnect = ""
    if s.count > 1:
        key = "interconnect.training" if training else "interconnect.inference"
        if training and s.count > params["domain_gpus"]:
            # Beyond the NVLink domain the GPUs talk over the cluster network, not NVLink; an MoE run's experts
            # exchange every token there (all-to-all), a dense run's gradients (all-reduce).
            moe = fact["active_params_billion"] < fact["params_billion"]
            key = "interconnect.training_cluster_moe" if moe else "interconnect.training_cluster"
        interconnect = run.text(key, params)
    throughput = ""
    if s.train_hours > 0:
        throughput = run.text("throughput.training", params)
    elif s.tokens_per_second > 0:
        key = _THROUGHPUT_KEYS.get(workload, "throughput.inference")
        throughput = run.text(key, params)
    formula = "" if summary else run.text("score.formula", {"score": c.score, "points": c.points, "basis": c.basis})
    band, _ = band_of(c, run)
    perf = performance(s, workload == "MEDIA_GENERATION", band)
    return build(
        Candidate,
        gpu=s.gpu.id,
        name=s.gpu.name,
        count=s.count,
        score=c.score,
        memory=build(
            MemoryFit,
            need_gb=round(need, 2),
            capacity_gb=round(capacity, 2),
            headroom=round(1.0 - need / capacity, 4) if copies > 1 and capacity > 0 else round(s.headroom, 4),
            breakdown=tuple([(n, round(v / copies, 2)) for n, v in mem.components]) if mem else (),
        ),
        cost=build(
            Cost,
            usd_per_hour=round(s.usd_per_hour, 4),
            usd_per_tflop_hour=sig(s.usd_per_tflop_hour),
            usd_per_unit=sig(s.usd_per_unit),
            unit=run.name(f"unit.{s.unit}"),
            price_source=price_src,
            price_as_of=price_as_of,
            unit_kind=cost_unit(s.unit),
            price_tier=s.price_tier,
            price_tier_fallback=s.price_tier_fallback,
        ),
        ownership=build(
            Ownership,
            annual_power_usd=round(s.annual_power_usd, 2),
            owned_usd_per_hour=round(s.owned_usd_per_hour, 4),
            break_even_hours=round(s.break_even_hours, 1) if math.isfinite(s.break_even_hours) else -1.0,
            break_even_months=round(s.break_even_months, 2) if math.isfinite(s.break_even_months) else -1.0,
            purchase_usd=round(s.purchase.usd * s.count, 2) if s.purchase else 0.0,
            purchase_source=s.purchase.source_in(run.locale) if s.purchase else "",
            purchase_as_of=s.purchase.as_of if s.purchase else "",
        ),
        reasons=() if summary else (build(Reason, rule_id="rank.score", text=formula),
                                    *ownership_reason(s, run, fact["utilization_given"]),
                                    *said_texts(c.reasons, c, run)),
        caveats=() if summary else said_texts(c.caveats, c, run) + risk_caveats(perf, band, run, fact),
        interconnect=interconnect,
        throughput=throughput,
        score_breakdown=build(
            ScoreBreakdown, basis=c.basis_kind, cost=sig(c.basis), best_cost=sig(c.best),
            cost_points=c.cost_points, rules=() if summary else tuple(c.parts),
        ),
        performance=perf,
        placements=placements_of(s),
        market=market_of(s),
        gpus_needed=s.gpus_needed or s.count,
        spare_gpus=s.spare_gpus,
        usd_per_month=round(s.usd_per_month, 2),
    )


_THROUGHPUT_KEYS = {"EMBEDDING": "throughput.embedding", "MEDIA_GENERATION": "throughput.media"}


def _offer_price(placed: Placed, run: Run) -> tuple[str, str]:
    """Where a candidate's price comes from, in words, and the price's date, when an offer prices it."""
    o = placed.offer
    return run.text("price.from_offer", {
        "instances": placed.instances, "provider": o.provider, "instance_type": o.instance_type,
        "region": o.region, "tier": run.name(f"tier.{placed.offer_tier}"), "source": o.source,
        "as_of": o.as_of.isoformat(),
    }), o.as_of.isoformat()


# Texts a candidate's sizing reads from objects a rules version keeps (its placement, its purchase price) and from
# a few figures, the same for every brief that lands on that GPU's configuration whatever its traffic: kept by all
# they read, the rules' messages and the locale included (tests/test_reply_parts.py compares them with texts
# made afresh). Bounded: a store holding _KEPT_TEXTS entries is emptied before the next goes in.
_KEPT_TEXTS = 4096
_offer_prices: dict[tuple[int, str, int], tuple[tuple[object, ...], tuple[str, str]]] = {}
_break_evens: dict[tuple[Any, ...], tuple[tuple[object, ...], tuple[Reason, ...]]] = {}


def _placement(p: Placed) -> Placement:
    return build(Placement, offer=p.offer, instances=p.instances, usd_per_hour=p.usd_per_hour,
                 usd_per_month=round(p.usd_per_month, 2))


# A placement as the answer shows it, by the Placed it shows (kept with the placement options of a rules version,
# placement.options, so the same few come back in answer after answer); both are immutable.
_placement_of: IdentityMemo[Placed, Placement] = IdentityMemo(_placement, limit=4096)


def placements_of(s: Sizing) -> tuple[Placement, ...]:
    """Best first: a caller's quote (it prices the candidate) as an offer of its own, then the offers."""
    out = [_placement_of(p) for p in s.placements]
    if s.quote is not None:
        q = s.quote
        quoted = Offer(provider=q.provider or "quote", instance_type="quote", gpu=s.gpu.id, gpus_per_instance=1,
                       vcpus=None, memory_gib=None, region="", country="", tier=(q.tier or "ON_DEMAND").lower(),
                       usd_per_hour=q.usd_per_hour, as_of=_date(q.as_of), source="your quote",
                       valid_from=_date(q.as_of), valid_until=None)
        out.insert(0, build(Placement, offer=quoted, instances=s.count, usd_per_hour=round(s.usd_per_hour, 4),
                            usd_per_month=round(s.usd_per_month, 2)))
    return tuple(out)


def _date(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return date.min


def market_of(s: Sizing) -> MarketSpread | None:
    return None if s.market is None else _spread_of(s.market)


def _spread(market: tuple[float, float, float, int, int]) -> MarketSpread:
    lo, mid, hi, n, providers = market
    return build(MarketSpread, tier="ON_DEMAND", min_usd_per_gpu_hour=round(lo, 4),
                 median_usd_per_gpu_hour=round(mid, 4), max_usd_per_gpu_hour=round(hi, 4), offers=n,
                 providers=providers)


# A GPU's market spread as the answer shows it, by the spread it shows (kept per rules version with the leaders of
# a scope, advisor._place_every_gpu: the same tuple for every brief of that scope).
_spread_of: IdentityMemo[tuple[float, float, float, int, int], MarketSpread] = IdentityMemo(_spread, limit=4096)


def said_texts(items: list[Said], c: Scored, run: Run) -> tuple[Reason, ...]:
    text, params = run.text, c.params
    return tuple([build(Reason, rule_id=item[0], text=text(item[1], params)) if item else None  # type: ignore[misc]
                  for item in items])


def performance(s: Sizing, media: bool = False, accuracy: Band | None = None) -> Performance:
    """The estimates a program needs, as numbers (their units are in the proto's Performance comments), with the
    measured error of the candidate's class."""
    training = s.train_hours > 0
    return build(
        Performance,
        ttft_ms=round(s.est_ttft_ms, 1),
        itl_ms=round(s.itl_ms, 2),
        e2e_p95_ms=round(s.est_latency_ms, 1),
        # a video pipeline makes a few outputs an hour: keep their digits
        tokens_per_second_per_replica=round(s.tokens_per_second, 1 if s.tokens_per_second >= 10 else 5),
        # A training cluster is one data/tensor/pipeline-parallel job: GPUs per model copy do not apply.
        tensor_parallel=0 if training else s.per_replica,
        replicas=0 if training else s.replicas,
        nodes=s.nodes,
        training_days=round(s.train_hours / 24, 2) if training else 0.0,
        gpu_hours=round(s.gpu_hours, 1) if training else 0.0,
        cost_per_run_usd=round(s.usd_per_run, 2) if training else 0.0,
        power_kw_per_node=round(s.power_kw_per_node, 2),
        power_kw_per_rack=round(s.power_kw_per_rack, 1),
        racks=s.racks,
        spare_nodes=s.spare_nodes,
        restart_overhead_days=round(s.restart_overhead_days, 2),
        scale_out_gbs_per_gpu=s.gpu.scale_out_gbs if s.nodes > 1 or s.gpu.rack_gpus else 0.0,
        images_per_second_per_replica=round(s.tokens_per_second, 3) if media else 0.0,
        accuracy=accuracy,
    )


def ownership_reason(s: Sizing, run: Run, utilization_given: bool) -> tuple[Reason, ...]:
    """The break-even arithmetic, so a reader can redo it from the printed figures."""
    if s.purchase is None or s.usd_per_hour <= 0:
        return ()
    # Keyed by every figure the reason reads. `x or str(x)`: 0.0 and -0.0 are equal keys but print apart.
    own = s.placement if s.break_even_basis == "own" else None
    rent, running = s.break_even_rent, s.running_usd_per_busy_hour
    hours, months, use = s.break_even_hours, s.break_even_months, s.ownership_utilization
    key = (id(run.msgs), run.locale, id(s.purchase), id(own), s.count, s.break_even_basis, utilization_given,
           rent or str(rent), running or str(running), hours or str(hours), months or str(months), use or str(use))
    return keep_held(_break_evens, key, (run.msgs, s.purchase, own),
                     lambda: _ownership_reason(s, run, utilization_given), _KEPT_TEXTS)


def _ownership_reason(s: Sizing, run: Run, utilization_given: bool) -> tuple[Reason, ...]:
    assert s.purchase is not None  # ownership_reason's check
    params = {
        "purchase_usd": s.purchase.usd * s.count,
        "usd_per_hour": s.break_even_rent,
        "rent_basis": rent_basis(s, run),
        "running_usd_per_hour": s.running_usd_per_busy_hour,
        "break_even_hours": s.break_even_hours,
        "break_even_months": s.break_even_months,
        "utilization": s.ownership_utilization,
        "utilization_basis": "" if utilization_given else run.name("note.utilization_assumed"),
        "purchase_source": s.purchase.source,
    }
    key = "ownership.formula" if math.isfinite(s.break_even_hours) else "ownership.never"
    return (build(Reason, rule_id="ownership.break-even", text=run.text(key, params)),)


def rent_basis(s: Sizing, run: Run) -> str:
    """Which rent buying is weighed against, in words: the offer and tier when it is this configuration's own."""
    if s.break_even_basis == "own" and s.placement is not None:
        o = s.placement.offer
        tier = run.name(f"tier.{s.placement.offer_tier}")
        if o.term_months > 0:
            tier = run.text("summary.tier_term", {"tier": tier, "months": o.term_months})
        return run.text("rent_basis.offer", {"tier": tier, "provider": o.provider, "instance_type": o.instance_type})
    return run.name(f"rent_basis.{s.break_even_basis}")


def sig(x: float, digits: int = 6) -> float:
    """Round to significant digits: a cost per embedding record can be a few millionths of a dollar."""
    # A constant spec for the default: building ".6g" per call cost as much as the formatting (~40 per answer).
    spec = ".6g" if digits == 6 else f".{digits}g"
    return float(format(x, spec)) if x and math.isfinite(x) else 0.0


def dedupe_warnings(items: list[Warning]) -> tuple[Warning, ...]:
    best: dict[str, Warning] = {}
    for w in items:
        cur = best.get(w.code)
        if cur is None or SEVERITY_ORDER.get(w.severity, 9) < SEVERITY_ORDER.get(cur.severity, 9):
            best[w.code] = w
    return tuple(sorted(best.values(), key=lambda w: (SEVERITY_ORDER.get(w.severity, 9), w.code)))


def applies(step_workloads: tuple[str, ...], workload: str) -> bool:
    return not step_workloads or workload in step_workloads


def once(book: Rulebook, run: Run, kind: str, workload: str, render: Any) -> Any:  # noqa: ANN401
    """`render(book, run, workload)` once per rules, locale and workload: its texts have no placeholders."""
    # A locale without a table of its own reads the fallback's (Messages.text), so it shares its entry.
    locale = run.locale if run.locale in book.messages else run.msgs.fallback
    key = (kind, locale, workload)
    if key not in book.rendered:
        book.rendered[key] = render(book, run, workload)
    return book.rendered[key]


def benchmark(book: Rulebook, run: Run, workload: str) -> tuple[BenchmarkStage, ...]:
    return tuple(
        BenchmarkStage(
            run.text(st.name, {}),
            tuple(run.text(x.message, {}) for x in st.steps if applies(x.workloads, workload)),
            tuple(run.text(x.message, {}) for x in st.record if applies(x.workloads, workload)),
        )
        for st in book.benchmark_plan
    )


def checklist(book: Rulebook, run: Run, workload: str) -> tuple[ChecklistSection, ...]:
    return tuple(
        ChecklistSection(
            run.text(sec.name, {}),
            tuple(run.text(x.message, {}) for x in sec.items if applies(x.workloads, workload)),
        )
        for sec in book.checklist
    )
