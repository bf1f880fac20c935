"""proto ⇄ domain, and nothing else. The only module that imports generated code.

Enum numbers become the domain's prefix-less names (WORKLOAD_TYPE_REALTIME_INFERENCE → "REALTIME_INFERENCE",
0 → "UNSPECIFIED") and back; optional bools keep "not given" apart from false.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Any

_GEN = Path(__file__).parents[1] / "gen"  # service/gen, made by `make gen`
if not (_GEN / "gpuadvisor" / "v1" / "advisor_pb2.py").exists():
    raise ImportError(f"generated code is missing in {_GEN}: run `make gen`")
if str(_GEN) not in sys.path:
    sys.path.insert(0, str(_GEN))  # generated modules import each other as gpuadvisor.v1.*

from google.protobuf.json_format import MessageToDict  # noqa: E402
from gpuadvisor.v1 import advisor_pb2 as pb  # noqa: E402
from gpuadvisor.v1 import advisor_pb2_grpc as pb_grpc  # noqa: E402

from ..domain import advice as domain  # noqa: E402
from ..domain.accuracy import WIRE_FIELDS as ACCURACY_FIELDS  # noqa: E402
from ..domain.advice import Advice  # noqa: E402
from ..domain.api_offers import ApiLeg, ApiOffer, ApiOfferQuery  # noqa: E402
from ..domain.brief import (  # noqa: E402
    DEFAULT_PRICE_TIER,
    AdviceRequest,
    Brief,
    Economics,
    Latency,
    Media,
    Model,
    Parallelism,
    PlacementPolicy,
    Quote,
    Traffic,
    Training,
)
from ..domain.catalog import Gpu, tier_preference  # noqa: E402
from ..domain.frozen import build  # noqa: E402
from ..domain.models import ModelEntry, find  # noqa: E402
from ..domain.offers import Offer, OfferQuery, OfferTable  # noqa: E402
from ..engine.parse import did_you_mean  # noqa: E402
from ..memo import IdentityMemo, keep  # noqa: E402
from .proto_schema import field_at, json_type  # noqa: E402
from .validate import is_country_code  # noqa: E402

__all__ = ["pb", "pb_grpc", "request_from_proto", "request_to_proto", "advice_to_proto", "gpu_to_proto",
           "model_to_proto", "models_matching", "response_to_dict", "enum_name", "enum_number", "SERVICE_NAME"]

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["GpuAdvisor"].full_name

_PREFIX = {
    "WorkloadType": "WORKLOAD_TYPE_",
    "Precision": "PRECISION_",
    "RunCycle": "RUN_CYCLE_",
    "Boundary": "BOUNDARY_",
    "SuccessUnit": "SUCCESS_UNIT_",
    "Demand": "DEMAND_",
    "RouteKind": "ROUTE_KIND_",
    "Severity": "SEVERITY_",
    "AttentionKind": "ATTENTION_KIND_",
    "PriceTier": "PRICE_TIER_",
    "CostUnit": "COST_UNIT_",
    "MetricKind": "METRIC_KIND_",
    "ModelKind": "MODEL_KIND_",
    "ChartKind": "CHART_KIND_",
}


@lru_cache(maxsize=1024)
def enum_name(enum: str, number: int) -> str:
    """Domain name of an enum number; unknown numbers map to UNSPECIFIED (validate.py rejects them first)."""
    desc = pb.DESCRIPTOR.enum_types_by_name[enum]
    value = desc.values_by_number.get(number)
    return value.name.removeprefix(_PREFIX[enum]) if value else "UNSPECIFIED"


@lru_cache(maxsize=1024)
def enum_number(enum: str, name: str) -> int:
    """Proto number of a domain name; an unknown name maps to 0 (UNSPECIFIED) rather than failing a reply."""
    desc = pb.DESCRIPTOR.enum_types_by_name[enum]
    value = desc.values_by_name.get(_PREFIX[enum] + name)
    return value.number if value else 0


def _opt(msg: Any, field: str) -> bool | None:
    # proto3 `optional`: presence is what separates "not said" (a question) from an explicit false.
    return getattr(msg, field) if msg.HasField(field) else None


def parse_date(text: str) -> date | None:
    return date.fromisoformat(text) if text else None


def request_from_proto(r: pb.RecommendRequest) -> AdviceRequest:
    # The brief's frozen parts are built with every field given (frozen.build: no guarded setattr per field, the
    # same objects; tests/test_lean_paths.py checks each holds all its fields): ~90 fields a request.
    b = r.brief
    m, t, lat, tr, e, pl = b.model, b.traffic, b.latency, b.training, b.economics, b.placement
    brief = build(Brief,
        workload=enum_name("WorkloadType", b.workload),
        model=build(Model,
            params_billion=m.params_billion,
            active_params_billion=m.active_params_billion,
            precision=enum_name("Precision", m.precision),
            context_tokens=m.context_tokens,
            layers=m.layers,
            kv_heads=m.kv_heads,
            head_dim=m.head_dim,
            hidden_size=m.hidden_size,
            attention=enum_name("AttentionKind", m.attention),
            kv_lora_rank=m.kv_lora_rank,
            rope_head_dim=m.rope_head_dim,
            sliding_window_tokens=m.sliding_window_tokens,
            name=m.name,
            sliding_window_layers=m.sliding_window_layers,
            experts=m.experts,
            experts_per_token=m.experts_per_token,
            shared_params_billion=m.shared_params_billion,
            kv_cache_precision=enum_name("Precision", m.kv_cache_precision),
        ),
        traffic=build(Traffic,
            concurrent_sessions=t.concurrent_sessions,
            batch_size=t.batch_size,
            avg_input_tokens=t.avg_input_tokens,
            p95_input_tokens=t.p95_input_tokens,
            avg_output_tokens=t.avg_output_tokens,
            requests_per_second=t.requests_per_second,
            requests_per_month=t.requests_per_month,
            window_hours=t.window_hours,
            cached_input_share=t.cached_input_share,
        ),
        latency=build(Latency, p95_ms=lat.p95_ms, p99_ms=lat.p99_ms, ttft_ms=lat.ttft_ms,
                      no_target=lat.no_latency_target),
        run_cycle=enum_name("RunCycle", b.run_cycle),
        boundary=enum_name("Boundary", b.boundary),
        success_unit=enum_name("SuccessUnit", b.success_unit),
        toolchain=tuple(b.toolchain),
        training=build(Training, tokens_billion=tr.tokens_billion, target_days=tr.target_days,
                       global_batch_tokens=tr.global_batch_tokens),
        economics=build(Economics,
            hours_per_month=e.hours_per_month,
            horizon_months=e.horizon_months,
            utilization=e.utilization,
            budget_usd_per_hour=e.budget_usd_per_hour,
            electricity_usd_per_kwh=e.electricity_usd_per_kwh,
            needs_hardware_control=_opt(e, "needs_hardware_control"),
            demand=enum_name("Demand", e.demand),
            has_platform_team=_opt(e, "has_platform_team"),
            acceptance_rate=e.acceptance_rate,
            price_tier=enum_name("PriceTier", e.price_tier),
            no_budget_cap=e.no_budget_cap,
        ),
        placement=build(PlacementPolicy,
            providers=tuple(pl.providers), regions=tuple(pl.regions),
            countries=tuple(pl.countries), interruptible_ok=pl.interruptible_ok,
        ),
        media=build(Media, denoising_steps=b.media.denoising_steps, width_px=b.media.width_px,
                    height_px=b.media.height_px, guidance_scale=b.media.guidance_scale, frames=b.media.frames),
        parallelism=build(Parallelism, tensor_parallel=b.parallelism.tensor_parallel,
                          pipeline_parallel=b.parallelism.pipeline_parallel,
                          expert_parallel=b.parallelism.expert_parallel),
        gpus=tuple(b.gpus),
    )
    return AdviceRequest(
        brief=brief,
        quotes=tuple(
            Quote(q.gpu, q.usd_per_hour, q.provider, q.as_of, enum_name("PriceTier", q.tier)) for q in r.quotes
        ),
        locale=r.locale or "en",
        max_candidates=r.max_candidates,
        # A summary drops the trace (wire/views.py): not made at all, it costs nothing.
        include_trace=r.include_trace and r.view != pb.VIEW_SUMMARY,
        as_of=parse_date(r.as_of),
        summary_view=r.view == pb.VIEW_SUMMARY,
        include_charts=r.include_charts,
    )


def request_to_proto(r: AdviceRequest) -> pb.RecommendRequest:
    """The inverse of request_from_proto (clients, tests): unset optional bools stay unset."""
    b = r.brief
    m, t, lat, tr, e = b.model, b.traffic, b.latency, b.training, b.economics
    econ = pb.Economics(
        hours_per_month=e.hours_per_month, horizon_months=e.horizon_months, utilization=e.utilization,
        budget_usd_per_hour=e.budget_usd_per_hour, electricity_usd_per_kwh=e.electricity_usd_per_kwh,
        demand=enum_number("Demand", e.demand), acceptance_rate=e.acceptance_rate,
        price_tier=enum_number("PriceTier", e.price_tier), no_budget_cap=e.no_budget_cap,
    )
    if e.needs_hardware_control is not None:
        econ.needs_hardware_control = e.needs_hardware_control
    if e.has_platform_team is not None:
        econ.has_platform_team = e.has_platform_team
    brief = pb.WorkloadBrief(
        workload=enum_number("WorkloadType", b.workload),
        model=pb.Model(
            params_billion=m.params_billion, active_params_billion=m.active_params_billion,
            precision=enum_number("Precision", m.precision), context_tokens=m.context_tokens, layers=m.layers,
            kv_heads=m.kv_heads, head_dim=m.head_dim, hidden_size=m.hidden_size,
            attention=enum_number("AttentionKind", m.attention), kv_lora_rank=m.kv_lora_rank,
            rope_head_dim=m.rope_head_dim, sliding_window_tokens=m.sliding_window_tokens, name=m.name,
            sliding_window_layers=m.sliding_window_layers, experts=m.experts, experts_per_token=m.experts_per_token,
            shared_params_billion=m.shared_params_billion,
            kv_cache_precision=enum_number("Precision", m.kv_cache_precision),
        ),
        traffic=pb.Traffic(
            concurrent_sessions=t.concurrent_sessions, batch_size=t.batch_size,
            avg_input_tokens=t.avg_input_tokens, p95_input_tokens=t.p95_input_tokens,
            avg_output_tokens=t.avg_output_tokens, requests_per_second=t.requests_per_second,
            requests_per_month=t.requests_per_month, window_hours=t.window_hours,
            cached_input_share=t.cached_input_share,
        ),
        latency=pb.Latency(p95_ms=lat.p95_ms, p99_ms=lat.p99_ms, ttft_ms=lat.ttft_ms,
                           no_latency_target=lat.no_target),
        run_cycle=enum_number("RunCycle", b.run_cycle),
        boundary=enum_number("Boundary", b.boundary),
        success_unit=enum_number("SuccessUnit", b.success_unit),
        toolchain=list(b.toolchain),
        training=pb.Training(tokens_billion=tr.tokens_billion, target_days=tr.target_days,
                             global_batch_tokens=tr.global_batch_tokens),
        economics=econ,
        gpus=list(b.gpus),
    )
    if b.parallelism != Parallelism():  # an unset message stays unset
        brief.parallelism.CopyFrom(pb.Parallelism(
            tensor_parallel=b.parallelism.tensor_parallel, pipeline_parallel=b.parallelism.pipeline_parallel,
            expert_parallel=b.parallelism.expert_parallel))
    if b.placement != PlacementPolicy():  # an empty policy stays unset, as it came
        brief.placement.CopyFrom(pb.PlacementPolicy(
            providers=list(b.placement.providers), regions=list(b.placement.regions),
            countries=list(b.placement.countries), interruptible_ok=b.placement.interruptible_ok))
    if b.media != Media():  # an unset message stays unset
        brief.media.CopyFrom(pb.Media(
            denoising_steps=b.media.denoising_steps, width_px=b.media.width_px, height_px=b.media.height_px,
            guidance_scale=b.media.guidance_scale, frames=b.media.frames,
        ))
    return pb.RecommendRequest(
        brief=brief,
        quotes=[pb.PriceQuote(gpu=q.gpu, usd_per_hour=q.usd_per_hour, provider=q.provider, as_of=q.as_of,
                              tier=enum_number("PriceTier", q.tier))
                for q in r.quotes],
        locale=r.locale, max_candidates=r.max_candidates, include_trace=r.include_trace,
        as_of=r.as_of.isoformat() if r.as_of else "",
        view=pb.VIEW_SUMMARY if r.summary_view else pb.VIEW_UNSPECIFIED, include_charts=r.include_charts,
    )


# The answer is built as plain dicts handed to the message constructors (and `.add`): upb fills them in place,
# where intermediate messages would each be built and then copied into their parent (~2x slower per answer).


# Reason, Ownership and Performance have exactly their message's fields, by name (tests/test_fast_paths.py
# checks): an object's __dict__ is the dict its message is filled from, without building another.


def _reasons(items: Iterable[domain.Reason]) -> list[dict[str, str]]:
    return [x.__dict__ for x in items]


def _score_breakdown(b: domain.ScoreBreakdown | None) -> dict[str, Any] | None:
    if b is None:
        return None
    return {"basis": b.basis, "cost": b.cost, "best_cost": b.best_cost, "cost_points": b.cost_points,
            "rules": [{"rule_id": r, "points": p} for r, p in b.rules]}


def _performance(p: domain.Performance | None) -> dict[str, Any] | None:
    if p is None:
        return None
    acc = p.accuracy
    if acc is None:
        return p.__dict__  # an unset message field: upb takes None as absent
    return {**p.__dict__, "accuracy": _band_fields(acc)}


# A class's accuracy band is the rules version's own object, cited by every candidate of that class: its fields
# as the message's dict are read once per band (upb only reads the dict).
_band_fields: IdentityMemo[Any, dict[str, Any]] = IdentityMemo(
    lambda acc: {k: getattr(acc, k) for k in ACCURACY_FIELDS}, limit=4096)


def _market_fields(m: domain.MarketSpread) -> dict[str, Any]:
    return {"tier": enum_number("PriceTier", m.tier), "min_usd_per_gpu_hour": m.min_usd_per_gpu_hour,
            "median_usd_per_gpu_hour": m.median_usd_per_gpu_hour, "max_usd_per_gpu_hour": m.max_usd_per_gpu_hour,
            "offers": m.offers, "providers": m.providers}


# A GPU's market spread is kept per rules version and scope (answer._spread_of): the same few objects in answer
# after answer, each read into its message's dict once rather than built into a message and copied per candidate.
_market_dict: IdentityMemo[domain.MarketSpread, dict[str, Any]] = IdentityMemo(_market_fields, limit=4096)


def _placement_field(p: domain.Placement) -> bytes:
    """One placement as a Candidate's `placements` field on the wire (tag, length, message): a candidate's
    placements go in with one parse of their bytes joined, in order, rather than three calls per placement."""
    holder = pb.Candidate()
    holder.placements.add(instances=p.instances, usd_per_hour=p.usd_per_hour,
                          usd_per_month=p.usd_per_month).offer.MergeFromString(
        _offer_bytes(p.offer))
    return holder.SerializeToString()


# A shown placement is kept per Placed (answer._placement_of), itself kept with a rules version's placement
# options, so the same few come back in answer after answer (a caller's quote makes the rare one per answer).
_placement_bytes: IdentityMemo[domain.Placement, bytes] = IdentityMemo(_placement_field, limit=4096)


def advice_to_proto(a: Advice) -> pb.RecommendResponse:
    out = pb.RecommendResponse(summary=a.summary, provisional=a.provisional, not_shown_count=len(a.not_shown),
                               not_shown=list(a.not_shown), price_tier=enum_number("PriceTier", a.price_tier),
                               assumed=[path for path, _ in a.assumed], unmet_targets=[u.field for u in a.unmet])
    for c in a.candidates:
        m, cost, own = c.memory, c.cost, c.ownership
        cand = out.candidates.add(
            gpu=c.gpu, name=c.name, count=c.count, score=c.score,
            memory={"need_gb": m.need_gb, "capacity_gb": m.capacity_gb, "headroom": m.headroom,
                    "breakdown": [{"component": n, "gb": v} for n, v in m.breakdown]},
            cost={"usd_per_hour": cost.usd_per_hour, "usd_per_tflop_hour": cost.usd_per_tflop_hour,
                  "usd_per_unit": cost.usd_per_unit, "unit": cost.unit, "price_source": cost.price_source,
                  "price_as_of": cost.price_as_of, "unit_kind": enum_number("CostUnit", cost.unit_kind),
                  "price_tier": enum_number("PriceTier", cost.price_tier),
                  "price_tier_fallback": cost.price_tier_fallback},
            ownership=own.__dict__,
            reasons=_reasons(c.reasons), caveats=_reasons(c.caveats), interconnect=c.interconnect,
            throughput=c.throughput, performance=_performance(c.performance),
            score_breakdown=_score_breakdown(c.score_breakdown),
            market=None if c.market is None else _market_dict(c.market), gpus_needed=c.gpus_needed,
            usd_per_month=c.usd_per_month,
        )
        if c.placements:
            # A repeated field's entries parsed from the wire append in order, as add() would have.
            cand.MergeFromString(b"".join([_placement_bytes(p) for p in c.placements]))
    for x in a.excluded:
        out.excluded.add(gpu=x.gpu, reasons=_reasons(x.reasons))
    if a.route:
        out.route.SetInParent()  # present even when every field is at its default, as before
        out.route.kind = enum_number("RouteKind", a.route.kind)
        out.route.rationale.extend(pb.Reason(rule_id=x.rule_id, text=x.text) for x in a.route.rationale)
        out.route.provisional = a.route.provisional
        out.route.depends_on.extend(a.route.depends_on)
    for w in a.warnings:
        out.warnings.add(code=w.code, severity=enum_number("Severity", w.severity), text=w.text,
                         rule_id=w.rule_id, title=w.title)
    if a.questions:
        out.MergeFromString(b"".join([_question_field(q) for q in a.questions]))
    if a.metric:
        out.metric.CopyFrom(pb.Metric(name=a.metric.name, formula=a.metric.formula, rule_id=a.metric.rule_id,
                                      kind=enum_number("MetricKind", a.metric.kind)))
    out.MergeFromString(_plan_and_checklist(a.benchmark_plan, a.procurement_checklist))
    if a.ruleset:
        out.ruleset.CopyFrom(pb.RulesetRef(revision=a.ruleset.revision, content_hash=a.ruleset.content_hash))
    for t in a.trace:
        out.trace.add(rule_id=t.rule_id, location=t.location, fact=t.fact, fired=t.fired, detail=t.detail)
    for x in a.notes:
        out.notes.add(rule_id=x.rule_id, text=x.text)
    for ch in a.charts:
        out.charts.add(kind=enum_number("ChartKind", ch.kind), title=ch.title, x_label=ch.x_label,
                       y_label=ch.y_label, marks=[{"x": m.x, "label": m.label} for m in ch.marks],
                       series=[{"name": se.name, "points": [{"x": x, "y": y} for x, y in se.points]}
                               for se in ch.series])
    if a.api is not None:
        out.api.CopyFrom(api_leg_to_proto(a.api))
    return out


def api_offer_to_proto(o: ApiOffer) -> pb.ApiOffer:
    return pb.ApiOffer(
        provider=o.provider, model=o.model, registry_model=o.registry_model,
        usd_per_million_input=o.usd_per_million_input, usd_per_million_output=o.usd_per_million_output,
        usd_per_million_cached_input=o.usd_per_million_cached_input, context_tokens=o.context_tokens,
        region=o.region, country=o.country, as_of=o.as_of.isoformat(), source=o.source,
    )


def _day_asked(as_of: str, bad: list[tuple[str, str]]) -> date:
    """The day a listing is for: `as_of` (YYYY-MM-DD), else today; a malformed one is a violation (and today)."""
    if as_of:
        try:
            return date.fromisoformat(as_of)
        except ValueError:
            bad.append(("as_of", "must be a date YYYY-MM-DD"))
    return date.today()


def api_offer_query_from_proto(r: pb.ListApiOffersRequest, registry: Any) -> tuple[ApiOfferQuery, list[Any]]:  # noqa: ANN401
    """ListApiOffers' query (the model resolved to its registry id) and its violations (field path, description)."""
    bad: list[tuple[str, str]] = []
    day = _day_asked(r.as_of, bad)
    entry = find(registry, r.model[:256]) if r.model else None
    if r.model and entry is None:
        bad.append(("model", f"unknown model '{r.model[:40]}' (ListModels lists the registry)"))
    if r.country and not is_country_code(r.country):
        bad.append(("country", "must be an ISO 3166-1 alpha-2 code or EU"))
    for name in ("provider", "page_token"):
        if len(getattr(r, name)) > 256:
            bad.append((name, "must be at most 256 characters"))
    if not 0 <= r.page_size <= MAX_OFFER_PAGE:
        bad.append(("page_size", f"must be between 0 and {MAX_OFFER_PAGE}"))
    return ApiOfferQuery(model=entry.id if entry else "", provider=r.provider, country=r.country, day=day,
                         page_size=r.page_size or DEFAULT_OFFER_PAGE, page_token=r.page_token), bad


def api_leg_to_proto(leg: ApiLeg) -> pb.ApiLeg:
    return pb.ApiLeg(
        offer=api_offer_to_proto(leg.offer), usd_per_unit=leg.usd_per_unit, usd_per_month=leg.usd_per_month,
        saving_pct=leg.saving_pct, break_even_units_per_month=leg.break_even_units_per_month, unit=leg.unit,
        self_usd_per_month=leg.self_usd_per_month, units_per_month=leg.units_per_month, providers=leg.providers,
        max_usd_per_unit=leg.max_usd_per_unit, cached_input_share=leg.cached_input_share,
    )


_PARTS: dict[tuple[int, int], tuple[Any, Any, bytes]] = {}


def _plan_and_checklist(plan: tuple[domain.BenchmarkStage, ...],
                        checklist: tuple[domain.ChecklistSection, ...]) -> bytes:
    """The benchmark plan and the checklist as answer fields, serialized once per pair of tuples: the advisor
    renders them once per rules version, locale and workload and hands every answer the same tuples, and
    parsing their ~50 strings costs a fifth of building them from dicts."""
    key = (id(plan), id(checklist))
    found = _PARTS.get(key)
    if found is not None and found[0] is plan and found[1] is checklist:  # the entry keeps both alive
        return found[2]
    part = pb.RecommendResponse()
    for st in plan:
        part.benchmark_plan.add(name=st.name, steps=st.steps, record=st.record)
    for sec in checklist:
        part.procurement_checklist.add(name=sec.name, items=sec.items)
    data = part.SerializeToString()
    if len(_PARTS) >= 64:  # locales x workloads x the rules versions alive at once
        _PARTS.clear()
    _PARTS[key] = (plan, checklist, data)
    return data


def question_to_proto(q: domain.Question) -> pb.Question:
    """The rules say the unit, the assumed value and the priority; the contract says the type and the choices."""
    out = pb.Question(field=q.field, text=q.text, rule_id=q.rule_id, unit=q.unit, priority=q.priority)
    fd, kind, allowed = _question_path(q.field)
    if fd is None:
        return out  # rules-check rejects such a field; an old rules version still gets its text through
    out.type = kind
    if allowed:
        out.allowed_values.extend(allowed)
    if q.assumed is not None:
        out.assumed = _brief_json(fd, q.assumed)
    return out


# A question's message on the wire, kept by the question's value (and its assumed value's type: True == 1, but
# they print apart): the rules ask the same few questions, with the same words, of brief after brief.
_QUESTIONS: dict[tuple[domain.Question, type], bytes] = {}


def _question_field(q: domain.Question) -> bytes:
    """`q` as a RecommendResponse's `questions` field on the wire (tag, length, message)."""
    def made() -> bytes:
        holder = pb.RecommendResponse()
        holder.questions.append(question_to_proto(q))
        return holder.SerializeToString()
    return keep(_QUESTIONS, (q, type(q.assumed)), made, 1024)


@lru_cache(maxsize=256)
def _question_path(path: str) -> tuple[Any, Any, tuple[str, ...]]:
    """The brief field a question asks for, its JSON type and its enum choices: the contract's, never a brief's."""
    fd = field_at(pb.WorkloadBrief.DESCRIPTOR, path)
    if fd is None:
        return None, None, ()
    allowed = tuple(v.name for v in fd.enum_type.values if v.number != 0) if fd.enum_type is not None else ()
    return fd, json_type(fd), allowed


def _brief_json(fd: Any, value: Any) -> str:
    # The form a caller sends the value in: proto enum names, JSON true/false, numbers as numbers.
    if fd.enum_type is not None:
        return _PREFIX[fd.enum_type.name] + str(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # "0", not "0.0": the same number in JSON, and what a person would type
    return json.dumps(value)


MAX_OFFER_PAGE = 1000
DEFAULT_OFFER_PAGE = 100


def offer_query_from_proto(r: pb.ListOffersRequest, known_gpus: frozenset[str]) -> tuple[OfferQuery, list[Any]]:
    """The query and its violations (field path, description), as validate does for Recommend."""
    bad: list[tuple[str, str]] = []
    day = _day_asked(r.as_of, bad)
    if r.gpu and r.gpu not in known_gpus:
        bad.append(("gpu", f"unknown GPU id '{r.gpu[:40]}'" + did_you_mean(r.gpu[:40], sorted(known_gpus))))
    if r.country and not is_country_code(r.country):
        bad.append(("country", "must be an ISO 3166-1 alpha-2 code or EU"))
    for name in ("provider", "page_token"):
        if len(getattr(r, name)) > 256:
            bad.append((name, "must be at most 256 characters"))
    tier = ""
    if r.tier:
        name = enum_name("PriceTier", r.tier)
        if name not in ("ON_DEMAND", "RESERVED", "SPOT", "MARKETPLACE"):
            bad.append(("tier", "must be a rent tier: on-demand, reserved, spot or marketplace"))
        tier = name.lower()
    if not 0 <= r.page_size <= MAX_OFFER_PAGE:
        bad.append(("page_size", f"must be between 0 and {MAX_OFFER_PAGE}"))
    query = OfferQuery(gpu=r.gpu, provider=r.provider, country=r.country, tier=tier, day=day,
                       page_size=r.page_size or DEFAULT_OFFER_PAGE, page_token=r.page_token)
    return query, bad


def offer_to_proto(o: Offer) -> pb.Offer:
    return pb.Offer(
        provider=o.provider, instance_type=o.instance_type, gpu=o.gpu, gpus_per_instance=o.gpus_per_instance,
        region=o.region, country=o.country, tier=enum_number("PriceTier", o.tier.upper()),
        usd_per_hour=o.usd_per_hour, usd_per_gpu_hour=round(o.usd_per_gpu_hour, 6),
        as_of=o.as_of.isoformat() if o.as_of != date.min else "", source=o.source, term_months=o.term_months,
    )


# The offers an answer shows are the rules version's own (a caller's quote is the rare one made per answer).
_offer_bytes: IdentityMemo[Offer, bytes] = IdentityMemo(lambda o: offer_to_proto(o).SerializeToString(), limit=4096)


def gpu_to_proto(g: Gpu, day: date, offers: OfferTable | None = None) -> pb.GpuInfo:
    rent = g.rent_price(day, tier_preference(DEFAULT_PRICE_TIER))
    info = pb.GpuInfo(
        id=g.id, name=g.name, vendor=g.vendor, gpu_class=g.gpu_class, memory_gb=g.memory_gb,
        memory_type=g.memory_type, bandwidth_tbs=g.bandwidth_tbs, tflops_bf16=g.tflops_bf16,
        tflops_fp8=g.tflops_fp8, tflops_fp4=g.tflops_fp4, tdp_w=g.tdp_w, interconnect=g.interconnect_kind,
        interconnect_gbs=g.interconnect_gbs, gpus_per_node=g.gpus_per_node, mig=g.mig, software=g.software,
        notes=g.notes, spec_source=g.spec_source, spec_as_of=g.spec_as_of, nvlink_domain=g.nvlink_domain,
        matmul_efficiency=g.matmul_efficiency,
        # Full precision: rounding is the display's job (cli.py), not the wire's.
        usd_per_tflop_hour=rent.usd / g.tflops_bf16 if rent and g.tflops_bf16 else 0.0,
    )
    for p in g.prices:
        info.prices.append(pb.GpuPrice(
            kind=p.kind, usd=p.usd, as_of=str(p.as_of), source=p.source,
            valid_from=p.valid_from.isoformat() if p.valid_from else "",
            # Current: the row in effect for its kind and tier (of two valid rows, the newer), as answers price it.
            valid_until=p.valid_until.isoformat() if p.valid_until else "", current=g.price(p.kind, day, p.tier) is p,
            tier=enum_number("PriceTier", p.tier),
        ))
    if offers is not None:
        rows = offers.valid_for(g.id, day)
        info.offer_count = len(rows)
        if rows:
            info.offer_min_usd_per_gpu_hour = rows[0].usd_per_gpu_hour
            info.offer_max_usd_per_gpu_hour = rows[-1].usd_per_gpu_hour
    return info


def model_to_proto(m: ModelEntry) -> pb.ModelInfo:
    return pb.ModelInfo(
        id=m.id, name=m.name, aliases=list(m.aliases), kind=enum_number("ModelKind", m.kind.upper()),
        params_billion=m.params_billion, active_params_billion=m.active_params_billion, layers=m.layers,
        kv_heads=m.kv_heads, head_dim=m.head_dim, hidden_size=m.hidden_size,
        attention=enum_number("AttentionKind", m.attention), kv_lora_rank=m.kv_lora_rank,
        rope_head_dim=m.rope_head_dim, context_window_tokens=m.context_window_tokens,
        sliding_window_tokens=m.sliding_window_tokens, sliding_window_layers=m.sliding_window_layers,
        experts=m.experts, experts_per_token=m.experts_per_token, shared_params_billion=m.shared_params_billion,
        # A precision the enum does not have yet maps to 0 (unspecified); native_precision keeps the source's word.
        precision=enum_number("Precision", m.native_precision) if m.native_precision else 0,
        native_precision=m.native_precision, source=m.source, as_of=m.as_of, notes=m.notes,
    )


def models_matching(entries: Iterable[ModelEntry], r: pb.ListModelsRequest) -> list[pb.ModelInfo]:
    """ListModels' filters: the kind (unspecified = any) and a case-insensitive substring of id, name or alias."""
    kind = enum_name("ModelKind", r.kind).lower() if r.kind else ""
    query = r.query.strip().lower()
    return [
        model_to_proto(m) for m in entries
        if (not kind or m.kind == kind) and (not query or any(query in n.lower() for n in (*m.names(), m.name)))
    ]


def response_to_dict(msg: Any) -> dict[str, Any]:
    """Protobuf JSON form with proto field names (the form golden cases are written in)."""
    return MessageToDict(msg, preserving_proto_field_name=True)
