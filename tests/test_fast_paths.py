"""The fast paths compute what the plain code computed: each is compared with its reference on random inputs."""

from __future__ import annotations

import math
import string
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.bench.loadgen import distinct_briefs
from service.decide import answer, tables
from service.decide import facts as F
from service.decide import run as run_state
from service.decide.sizing import common, per_request, training
from service.decide.sizing.per_gpu import size, size_all
from service.decide.sizing.shape import shape_of
from service.domain import advice as advice_types
from service.domain.advice import Advice
from service.domain.brief import (
    PRECISIONS,
    PRICE_TIERS,
    RENT_TIERS,
    Brief,
    Latency,
    Model,
    Quote,
    Traffic,
    Training,
)
from service.domain.catalog import Price, tier_preference
from service.physics import compute
from service.render import messages as m
from service.rulebook.folder import load_rulebook
from service.rulebook.version import Bundle
from service.wire import views
from service.wire.api import (
    advice_to_proto,
    api_leg_to_proto,
    enum_number,
    offer_to_proto,
    pb,
    question_to_proto,
    request_from_proto,
)
from service.wire.validate import LIMITS, validate
from tests.fuzz_requests import request_from_seed, seeds
from tests.test_advisor import amount, brief_strategy

RULES = Path(__file__).parents[1] / "rules"

_FORMATTER = string.Formatter()


def reference_fill(template: str, params: Mapping[str, Any]) -> tuple[str, bool]:
    """The filler before templates were precompiled: every spec checked at every fill."""
    parts = tuple(_FORMATTER.parse(template))
    if len(parts) == 1 and parts[0][1] is None:
        return parts[0][0], False
    out = []
    wide = False
    for literal, name, spec, conv in parts:
        out.append(literal)
        if name is None:
            continue
        if name not in params:
            out.append("{" + name + "}")
            continue
        value = params[name]
        if conv:
            value = _FORMATTER.convert_field(value, conv)
        if spec and m.spec_problem(spec):
            spec = ""
        if isinstance(value, str) and m._WIDE_CHAR.search(value):
            wide = True
        try:
            if not spec:
                out.append(m.compact(value))
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                out.append(m.format_number(value, spec))
            else:
                out.append(format(value, spec))
        except (ValueError, TypeError):
            out.append(m.compact(value))
    return "".join(out), wide


class _Label(str):
    """A str subclass (an enum-like value) takes the general path."""


_NAMES = ("a", "b", "gpu", "missing")
_SPECS = ("", ".0%", ".2f", ",.0f", ".4g", "d", ">8", "<5.1f", "x", "s", "n", "0>41", ".13f", "+.3e", "=^10,.2f")
_VALUES = st.one_of(
    st.integers(-(10**12), 10**12), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
    st.text(alphabet="ab 中文，x", max_size=6), st.none(), st.text(alphabet="a中", max_size=3).map(_Label),
)


@st.composite
def templates(draw: st.DrawFn) -> str:
    pieces = []
    for _ in range(draw(st.integers(0, 4))):
        pieces.append(draw(st.sampled_from(("", "text ", "中文 ", "{{lit}} "))))
        name = draw(st.sampled_from(_NAMES))
        spec = draw(st.sampled_from(_SPECS))
        conv = draw(st.sampled_from(("", "", "!r", "!s")))
        pieces.append("{" + name + conv + (":" + spec if spec else "") + "}")
    return "".join(pieces) + draw(st.sampled_from(("", " end")))


def reference_format_number(value: float | int, spec: str) -> str:
    """format_number before its spec analysis was cached: the regex ran at every call."""
    if -1000 < value < 1000:
        out = format(value, spec)
        if "e" not in out and "E" not in out:
            return out
    match = m._NUMBER_SPEC.match(spec)
    if match and abs(value) >= 1000 and match.group("type") != "n":
        spec = f"{match.group('head')},{match.group('prec') or ''}{match.group('type')}"
    out = format(value, spec)
    if isinstance(value, float) and math.isfinite(value) and ("e" in out or "E" in out) and not spec.endswith("%"):
        prec = match.group("prec") if match else None
        return m.readable(value, int(prec[1:]) if prec and int(prec[1:]) > 0 else 6)
    return out


def _outcome(fn, value: float | int, spec: str) -> str:  # noqa: ANN001
    try:
        return fn(value, spec)
    except (ValueError, TypeError) as exc:
        return type(exc).__name__


@settings(max_examples=1500, deadline=None)
@given(st.one_of(st.floats(), st.integers(-(10**20), 10**20)),
       st.sampled_from((*_SPECS, ".0f", ",", ".3g", "%>5", "*^12.2f", ".2%", "g", "e", "08.3f", ".0e", ".10g")))
def test_cached_number_specs_format_as_before(value: float | int, spec: str) -> None:
    assert _outcome(m.format_number, value, spec) == _outcome(reference_format_number, value, spec)


@settings(max_examples=1000, deadline=None)
@given(templates(), st.dictionaries(st.sampled_from(_NAMES[:3]), _VALUES))
def test_precompiled_fill_matches_reference(template: str, params: dict[str, Any]) -> None:
    assert m._fill(template, params) == reference_fill(template, params)


@pytest.fixture(scope="module")
def book():  # noqa: ANN201
    book, problems = load_rulebook(RULES, today=date(2026, 11, 15))
    assert book is not None, problems
    return book


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(brief=brief_strategy(), day=st.sampled_from((date(2025, 6, 1), date(2026, 11, 15))))
def test_sizing_all_gpus_with_shared_memory_breakdowns_matches_sizing_each_alone(book, brief, day):  # noqa: ANN001
    if shape_of(brief, book.assumptions) is not None:
        assert_size_all_is_size_each(book, brief, day)


def assert_size_all_is_size_each(book, brief: Brief, day: date) -> None:  # noqa: ANN001
    """size_all (tables shared across the catalog, searches from bounds) gives what size gives GPU by GPU."""
    a = book.assumptions
    shape = shape_of(brief, a)
    alone = [size(g, brief, shape, a, (), day) for g in book.catalog]
    shared = size_all(book.catalog, brief, shape, a, (), day)
    assert [repr(s) for s in shared] == [repr(s) for s in alone]  # repr: a NaN equals itself


# advice_to_proto before it built the answer from dicts in place: intermediate messages copied into their parents.
def _ref_reasons(items: Iterable[advice_types.Reason]) -> list[pb.Reason]:
    return [pb.Reason(rule_id=x.rule_id, text=x.text) for x in items]


def _ref_score_breakdown(b: advice_types.ScoreBreakdown | None) -> pb.ScoreBreakdown | None:
    if b is None:
        return None
    return pb.ScoreBreakdown(basis=b.basis, cost=b.cost, best_cost=b.best_cost, cost_points=b.cost_points,
                             rules=[pb.ScorePoints(rule_id=r, points=p) for r, p in b.rules])


def _ref_performance(p: advice_types.Performance | None) -> pb.Performance | None:
    if p is None:
        return None
    return pb.Performance(
        ttft_ms=p.ttft_ms, itl_ms=p.itl_ms, e2e_p95_ms=p.e2e_p95_ms,
        tokens_per_second_per_replica=p.tokens_per_second_per_replica, tensor_parallel=p.tensor_parallel,
        replicas=p.replicas, nodes=p.nodes, training_days=p.training_days, gpu_hours=p.gpu_hours,
        cost_per_run_usd=p.cost_per_run_usd, power_kw_per_node=p.power_kw_per_node,
        power_kw_per_rack=p.power_kw_per_rack, racks=p.racks, spare_nodes=p.spare_nodes,
        restart_overhead_days=p.restart_overhead_days, scale_out_gbs_per_gpu=p.scale_out_gbs_per_gpu,
        images_per_second_per_replica=p.images_per_second_per_replica,
        accuracy=None if p.accuracy is None else pb.Accuracy(
            basis=p.accuracy.basis, points=p.accuracy.points, itl_error_pct=p.accuracy.itl_error_pct,
            ttft_error_pct=p.accuracy.ttft_error_pct, throughput_error_pct=p.accuracy.throughput_error_pct),
    )


def reference_advice_to_proto(a: Advice) -> pb.RecommendResponse:
    out = pb.RecommendResponse(summary=a.summary, provisional=a.provisional, not_shown_count=len(a.not_shown),
                               not_shown=list(a.not_shown), price_tier=enum_number("PriceTier", a.price_tier),
                               assumed=[path for path, _ in a.assumed], unmet_targets=[u.field for u in a.unmet])
    for c in a.candidates:
        out.candidates.append(pb.Candidate(
            gpu=c.gpu, name=c.name, count=c.count, score=c.score,
            memory=pb.MemoryFit(need_gb=c.memory.need_gb, capacity_gb=c.memory.capacity_gb,
                                headroom=c.memory.headroom,
                                breakdown=[pb.MemoryComponent(component=n, gb=v)
                                           for n, v in c.memory.breakdown]),
            cost=pb.Cost(usd_per_hour=c.cost.usd_per_hour, usd_per_tflop_hour=c.cost.usd_per_tflop_hour,
                         usd_per_unit=c.cost.usd_per_unit, unit=c.cost.unit, price_source=c.cost.price_source,
                         price_as_of=c.cost.price_as_of, unit_kind=enum_number("CostUnit", c.cost.unit_kind),
                         price_tier=enum_number("PriceTier", c.cost.price_tier),
                         price_tier_fallback=c.cost.price_tier_fallback),
            ownership=pb.Ownership(annual_power_usd=c.ownership.annual_power_usd,
                                   owned_usd_per_hour=c.ownership.owned_usd_per_hour,
                                   break_even_hours=c.ownership.break_even_hours,
                                   break_even_months=c.ownership.break_even_months,
                                   purchase_usd=c.ownership.purchase_usd,
                                   purchase_source=c.ownership.purchase_source,
                                   purchase_as_of=c.ownership.purchase_as_of),
            reasons=_ref_reasons(c.reasons), caveats=_ref_reasons(c.caveats), interconnect=c.interconnect,
            throughput=c.throughput, performance=_ref_performance(c.performance),
            score_breakdown=_ref_score_breakdown(c.score_breakdown),
            placements=[pb.Placement(offer=offer_to_proto(p.offer), instances=p.instances, usd_per_hour=p.usd_per_hour,
                                     usd_per_month=p.usd_per_month)
                        for p in c.placements],
            market=pb.MarketSpread(
                tier=enum_number("PriceTier", c.market.tier), min_usd_per_gpu_hour=c.market.min_usd_per_gpu_hour,
                median_usd_per_gpu_hour=c.market.median_usd_per_gpu_hour,
                max_usd_per_gpu_hour=c.market.max_usd_per_gpu_hour, offers=c.market.offers,
                providers=c.market.providers) if c.market else None,
            gpus_needed=c.gpus_needed,
            usd_per_month=c.usd_per_month,
        ))
    for x in a.excluded:
        out.excluded.append(pb.Exclusion(gpu=x.gpu, reasons=_ref_reasons(x.reasons)))
    if a.route:
        out.route.CopyFrom(pb.Route(kind=enum_number("RouteKind", a.route.kind),
                                    rationale=_ref_reasons(a.route.rationale), provisional=a.route.provisional,
                                    depends_on=list(a.route.depends_on)))
    for w in a.warnings:
        out.warnings.append(pb.Warning(code=w.code, severity=enum_number("Severity", w.severity), text=w.text,
                                       rule_id=w.rule_id, title=w.title))
    for q in a.questions:
        out.questions.append(question_to_proto(q))
    if a.metric:
        out.metric.CopyFrom(pb.Metric(name=a.metric.name, formula=a.metric.formula, rule_id=a.metric.rule_id,
                                      kind=enum_number("MetricKind", a.metric.kind)))
    for stage in a.benchmark_plan:
        out.benchmark_plan.append(pb.BenchmarkStage(name=stage.name, steps=list(stage.steps),
                                                    record=list(stage.record)))
    for sec in a.procurement_checklist:
        out.procurement_checklist.append(pb.ChecklistSection(name=sec.name, items=list(sec.items)))
    if a.ruleset:
        out.ruleset.CopyFrom(pb.RulesetRef(revision=a.ruleset.revision, content_hash=a.ruleset.content_hash))
    for t in a.trace:
        out.trace.append(pb.TraceEntry(rule_id=t.rule_id, location=t.location, fact=t.fact, fired=t.fired,
                                       detail=t.detail))
    out.notes.extend(_ref_reasons(a.notes))
    if a.api is not None:
        out.api.CopyFrom(api_leg_to_proto(a.api))
    for ch in a.charts:
        out.charts.append(pb.Chart(
            kind=enum_number("ChartKind", ch.kind), title=ch.title, x_label=ch.x_label, y_label=ch.y_label,
            series=[pb.ChartSeries(name=se.name, points=[pb.ChartPoint(x=x, y=y) for x, y in se.points])
                    for se in ch.series],
            marks=[pb.ChartMark(x=m.x, label=m.label) for m in ch.marks]))
    return out


@pytest.fixture(scope="module")
def bundle(book):  # noqa: ANN001, ANN201
    b = Bundle(book, loaded_at=None)  # type: ignore[arg-type]
    yield b
    b.retire(None)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=seeds, trace=st.booleans(), locale=st.sampled_from(("en", "zh-CN")))
def test_answer_built_in_place_serializes_to_the_same_bytes(bundle, seed, trace, locale):  # noqa: ANN001
    request = request_from_seed(seed)
    if validate(request, bundle.known_gpu_ids()):
        return
    request.include_trace, request.locale = trace, locale
    advice = bundle.advise(request_from_proto(request))
    # Twice: the second reply reads the parts (placements, bands, spreads) its first one kept.
    for _ in range(2):
        new, ref = advice_to_proto(advice), reference_advice_to_proto(advice)
        assert new.SerializeToString(deterministic=True) == ref.SerializeToString(deterministic=True)
        assert new.SerializeToString() == ref.SerializeToString()  # what the server sends
        assert new == ref
        # VIEW_SUMMARY cuts the reply made here; the oracle answers in the full view only.
        assert views.summarize(new).SerializeToString() == views.summarize(ref).SerializeToString()


def test_plan_and_checklist_kept_per_locale_are_what_each_request_would_render(bundle):  # noqa: ANN001
    book = bundle.book
    for locale in ("xx-YY", "en", "zh-CN", "xx-YY", "zh-CN"):  # an unknown locale reads the fallback's table
        for workload in range(1, len(pb.WorkloadType.keys())):
            request = pb.RecommendRequest(locale=locale)
            request.brief.workload = workload
            request.brief.model.params_billion = 8
            req = request_from_proto(request)
            advice = bundle.advise(req)
            run = run_state.Run(book, bundle.engine, req)
            assert advice.benchmark_plan == answer.benchmark(book, run, req.brief.workload)
            assert advice.procurement_checklist == answer.checklist(book, run, req.brief.workload)
    assert {key[1] for key in book.rendered} == {"en", "zh-CN"}


# size_all (per-request figures, per-rules GPU tables, formulas written out) against `size`, the plain version,
# with what brief_strategy leaves out: quotes (a GPU quoted twice, tiers), a compared price tier, electricity.
def _quotes(ids: list[str]) -> st.SearchStrategy[tuple[Quote, ...]]:
    quote = st.builds(
        Quote,
        gpu=st.sampled_from(ids),
        usd_per_hour=st.floats(0.01, 100),
        provider=st.sampled_from(("", "acme")),
        tier=st.sampled_from(("UNSPECIFIED", *RENT_TIERS)),
    )
    return st.lists(quote, max_size=4).map(tuple)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    brief=brief_strategy(),
    data=st.data(),
    tier=st.sampled_from(("UNSPECIFIED", *PRICE_TIERS)),
    kwh=st.one_of(st.just(0.0), st.floats(0.01, 1)),
    day=st.sampled_from((date(2024, 1, 1), date(2025, 6, 1), date(2026, 11, 15))),
)
def test_size_all_matches_size_with_quotes_tiers_and_electricity(book, brief, data, tier, kwh, day):  # noqa: ANN001
    a = book.assumptions
    brief = replace(brief, economics=replace(brief.economics, price_tier=tier, electricity_usd_per_kwh=kwh))
    shape = shape_of(brief, a)
    if shape is None:
        return
    quotes = data.draw(_quotes([g.id for g in book.catalog]))
    alone = [size(g, brief, shape, a, quotes, day) for g in book.catalog]
    fast = size_all(book.catalog, brief, shape, a, quotes, day)
    assert [repr(s) for s in fast] == [repr(s) for s in alone]


def test_size_all_matches_size_on_the_bench_briefs(book):  # noqa: ANN001
    a = book.assumptions
    for body in distinct_briefs(16):
        req = request_from_proto(pb.RecommendRequest.FromString(body[5:]))
        shape = shape_of(req.brief, a)
        assert shape is not None
        alone = [size(g, req.brief, shape, a, req.quotes, date(2026, 11, 15)) for g in book.catalog]
        fast = size_all(book.catalog, req.brief, shape, a, req.quotes, date(2026, 11, 15))
        assert [repr(s) for s in fast] == [repr(s) for s in alone]


def _outcome_of(fn) -> str:  # noqa: ANN001
    try:
        return repr(fn())
    except (ValueError, ZeroDivisionError, OverflowError) as e:
        return f"{type(e).__name__}: {e}"


@pytest.mark.parametrize(
    "change",
    [
        {"bandwidth_tbs": 0.0},
        {"tflops_bf16": 0.0, "tflops_fp8": 0.0},
        {"tflops_bf16": -1.0},
        {"tflops_bf16": math.nan},
        {"tdp_w": -700.0},
        {"tdp_w": math.nan},
        {"memory_gb": math.nan, "memory_reported_gb": math.nan},
        {"gpus_per_node": 0, "nvlink_domain": 0},
        {"gpu_class": "consumer", "interconnect_kind": "pcie"},
    ],
)
@pytest.mark.parametrize("workload", ["REALTIME_INFERENCE", "BATCH_INFERENCE", "EMBEDDING", "MEDIA_GENERATION"])
def test_size_all_on_a_gpu_the_fast_formulas_cannot_take_does_what_size_does(book, change, workload):  # noqa: ANN001
    # A hand-built catalog can hold what rules-check refuses: the plain functions' checks must still decide.
    odd = replace(next(g for g in book.catalog if g.id == "h100-sxm"), **change)
    negative = tuple(replace(p, usd=-p.usd) for p in odd.prices)
    gpus = (odd, replace(odd, id="negative-price", prices=negative), book.catalog[0])
    brief = Brief(
        workload=workload,
        model=Model(params_billion=70, precision="FP8", context_tokens=8192),
        traffic=Traffic(concurrent_sessions=32, avg_input_tokens=2000, p95_input_tokens=4000, avg_output_tokens=500,
                        requests_per_second=5),
        latency=Latency(p95_ms=2000, ttft_ms=500),
    )
    a = book.assumptions
    shape = shape_of(brief, a)
    for g in gpus:
        alone = _outcome_of(lambda g=g: size(g, brief, shape, a, (), date(2026, 11, 15)))
        fast = _outcome_of(lambda g=g: size_all((g,), brief, shape, a, (), date(2026, 11, 15))[0])
        assert fast == alone


_rows = st.lists(
    st.builds(
        Price,
        kind=st.sampled_from(("rent", "purchase")),
        usd=st.floats(0.1, 50_000),
        as_of=st.sampled_from(("2025-01-01", "2026-01-01")),
        source=st.just("test"),
        valid_from=st.one_of(st.none(), st.dates(date(2024, 1, 1), date(2027, 1, 1))),
        valid_until=st.one_of(st.none(), st.dates(date(2024, 1, 1), date(2027, 1, 1))),
        location=st.sampled_from(("a:1", "b:2", "c:3")),  # tells equal-keyed rows apart: the first must win
        tier=st.sampled_from(("", *PRICE_TIERS)),
    ),
    max_size=8,
).map(tuple)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=_rows, day=st.dates(date(2024, 1, 1), date(2027, 1, 1)), tier=st.sampled_from(("", *PRICE_TIERS)))
def test_gpu_table_prices_are_the_catalogs_row_lookups(book, rows, day, tier):  # noqa: ANN001
    gpu = replace(book.catalog[0], prices=rows)
    table = tables.gpu_table(gpu, tables.Constants.of(book.assumptions))
    tiers = tier_preference(tier)
    assert repr(table.rent_price(day, tiers)) == repr(gpu.rent_price(day, tiers))
    assert repr(table.purchase_price(day)) == repr(gpu.price("purchase", day))


def test_gpu_tables_are_kept_per_rules_load_and_per_gpu(book):  # noqa: ANN001
    a = book.assumptions
    t = tables.tables(a)
    assert tables.tables(a) is t
    g = book.catalog[0]
    assert t.gpu(g) is t.gpu(g)
    assert t.gpu(replace(g)) is not t.gpu(g)  # an equal GPU of another load gets its own table
    again = replace(a, values=dict(a.values))  # what a reload of the same files gives
    assert tables.tables(again) is not t
    assert tables.tables(again).constants == t.constants
    for gpu in book.catalog:
        table = t.gpu(gpu)
        assert table.sizes == common.tp_group_sizes(gpu, a)
        assert table.usable_gb == common.usable_gb(gpu, a)
        assert table.mbu == common.decode_mbu(gpu, a)


def test_blank_sizing_is_the_dataclass_default(book):  # noqa: ANN001
    g = book.catalog[0]
    blank = common.Sizing.blank(g, "RESERVED")
    assert blank == common.Sizing(gpu=g, compared_tier="RESERVED")
    assert blank.formulas == [] and blank.formulas is not common.Sizing.blank(g, "RESERVED").formulas


def reference_time_to_first_token(prefill_s: float, step_s: float, others: int, others_prefill_s: float,
                                   output_tokens: int, iterations: int = 30) -> float:
    """compute.time_to_first_token before its loop invariants were hoisted."""
    ttft = prefill_s + step_s
    if others <= 0 or others_prefill_s <= 0:
        return ttft
    for _ in range(iterations):
        cycle = ttft + max(0, output_tokens) * step_s
        rho = min(0.95, others * others_prefill_s / cycle) if cycle > 0 else 0.0
        nxt = prefill_s / (1 - rho) + step_s
        if abs(nxt - ttft) <= 1e-6 * ttft:
            return nxt
        ttft = nxt
    return ttft


_seconds = st.one_of(st.floats(0, 100), st.floats(allow_nan=True, allow_infinity=True))


@settings(max_examples=300, deadline=None)
@given(prefill=_seconds, step=_seconds, others=st.integers(-2, 600), others_prefill=_seconds,
       output=st.integers(-2, 8000))
def test_time_to_first_token_with_hoisted_invariants_matches_the_plain_loop(prefill, step, others, others_prefill,
                                                                           output):
    new = compute.time_to_first_token(prefill, step, others, others_prefill, output)
    ref = reference_time_to_first_token(prefill, step, others, others_prefill, output)
    assert repr(new) == repr(ref)  # repr: a NaN equals itself


def reference_candidate_fact(base: dict[str, Any], s: common.Sizing) -> dict[str, Any]:
    """facts.candidate_fact before the catalog's fields were kept per GPU: the GPU's part of the fact."""
    g = s.gpu
    return {
        **base,
        "id": f"candidate:{g.id}",
        "gpu": g.id,
        "vendor": g.vendor,
        "gpu_class": g.gpu_class,
        "software": g.software,
        "memory_gb": float(g.memory_gb),
        "bandwidth_tbs": float(g.bandwidth_tbs),
        "tflops_bf16": float(g.tflops_bf16),
        "fp8_native": g.tflops_fp8 > 0,
        "fp4_native": g.tflops_fp4 > 0,
        "interconnect": g.interconnect_kind,
        "fast_interconnect": g.fast_interconnect,
        "mig": int(g.mig),
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(brief=brief_strategy())
def test_candidate_fact_with_the_catalogs_fields_kept_per_gpu_is_the_same_fact(book, brief):  # noqa: ANN001
    a = book.assumptions
    shape = shape_of(brief, a)
    sizings = size_all(book.catalog, brief, shape, a, (), date(2026, 11, 15)) if shape else []
    base = F.brief_fact(brief, a.num("default_utilization"), shape, sizings, 0)
    for s in sizings:
        fact = F.candidate_fact(base, s)
        ref = reference_candidate_fact(base, s)
        assert list(fact.items())[: len(ref)] == list(ref.items())  # same keys in the same order, same values
        assert list(fact) == ["id", *F.CANDIDATE_FIELDS]


# Realtime briefs with targets around what the catalog reaches, so that the latency search lands on every width
# (1, 2, 4 and 8 GPUs, meeting the target or not).
_realtime = st.builds(
    Brief,
    workload=st.just("REALTIME_INFERENCE"),
    model=st.builds(Model, params_billion=st.floats(1, 400), precision=st.sampled_from(("UNSPECIFIED", *PRECISIONS)),
                    context_tokens=st.sampled_from((0, 8192, 32768))),
    traffic=st.builds(Traffic, concurrent_sessions=st.integers(0, 64), avg_input_tokens=st.integers(0, 4000),
                      p95_input_tokens=st.integers(0, 8000), avg_output_tokens=st.integers(0, 1000),
                      requests_per_second=amount(50)),
    latency=st.builds(Latency, p95_ms=st.one_of(st.just(0.0), st.floats(100, 30000)),
                      ttft_ms=st.one_of(st.just(0.0), st.floats(20, 3000))),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(brief=_realtime)
def test_latency_search_that_passes_over_too_slow_widths_lands_where_size_does(book, brief):  # noqa: ANN001
    assert_size_all_is_size_each(book, brief, date(2026, 11, 15))


_training = st.builds(
    Brief,
    workload=st.sampled_from(("PRETRAINING", "FULL_FINETUNE")),
    model=st.builds(Model, params_billion=st.floats(0.1, 1000), precision=st.sampled_from(("UNSPECIFIED", *PRECISIONS)),
                    context_tokens=st.sampled_from((0, 2048, 8192, 131072))),
    traffic=st.builds(Traffic, batch_size=st.one_of(st.just(0), st.integers(1, 64))),
    training=st.builds(Training, tokens_billion=st.one_of(st.just(0.0), st.floats(0.01, 20000)),
                       target_days=st.one_of(st.just(0.0), st.floats(0.01, 365)),
                       global_batch_tokens=st.one_of(st.just(0), st.integers(1, 100_000_000))),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(brief=_training, n=st.integers(1, 100_000), sequences=st.integers(1, 64))
def test_training_need_from_parts_kept_per_sequence_count_is_the_full_breakdown(book, brief, n, sequences):  # noqa: ANN001
    a = book.assumptions
    shape = shape_of(brief, a)
    req = per_request.RequestSizer(brief, shape, a, tables.tables(a).constants, (), date(2026, 11, 15))
    recompute = a.text("recompute_full_finetune")
    for k in (1, n, n + 1):
        assert req._training_need(k, sequences) == training.full_training_need(shape, a, recompute, k, sequences)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(brief=_training)
def test_size_all_matches_size_on_training_briefs(book, brief):  # noqa: ANN001
    assert_size_all_is_size_each(book, brief, date(2026, 11, 15))


def reference_text(tables: dict[str, dict[str, str]], key: str, locale: str, params: Mapping[str, Any]) -> str:
    """Messages.text before each locale's templates were compiled: looked up and parsed at every call."""
    template = tables.get(locale, {}).get(key) or tables.get("en", {}).get(key)
    if template is None:
        return key
    text, wide_value = m._fill(template, params)
    return m.tidy(text, locale) if wide_value else text


@settings(max_examples=1000, deadline=None)
@given(templates(), templates(), st.dictionaries(st.sampled_from(_NAMES[:3]), _VALUES),
       st.sampled_from(("en", "zh-CN", "zh-TW", "xx-YY")), st.sampled_from(("k", "only_en", "only_zh", "none")))
def test_compiled_tables_fill_as_text_did(en: str, zh: str, params: dict[str, Any], locale: str, key: str) -> None:
    # An empty template in a locale falls back to English; a key in neither table prints as itself.
    tables = {"en": {"k": en, "only_en": en}, "zh-CN": {"k": zh, "only_zh": zh, "empty": ""}}
    msgs = m.Messages(tables)
    assert msgs.text(key, locale, params) == reference_text(tables, key, locale, params)
    assert msgs.text("empty", locale, params) == reference_text(tables, "empty", locale, params)
    assert msgs.table(locale) is msgs.table(locale)  # compiled once


def reference_route_depends_on(rules: tuple, plan: dict[str, Any], route: str, default: str) -> tuple[str, ...]:
    """route_depends_on before it re-tested only the rules a counterfactual field reaches: every variant routed
    from scratch."""
    from service.decide import provisional as pv

    plan_rules = pv.route_rules(rules)
    out = []
    for path, (unknown, variants) in pv.ROUTE_INPUTS.items():
        if not unknown(plan):
            continue
        if any((pv.route_of(plan_rules, pv._derive(v)) or default) != route for v in variants(plan)):
            out.append(path)
    return tuple(out)


_PLAN_TWEAKS = st.fixed_dictionaries({}, optional={
    "hours_per_month": st.sampled_from((0.0, 40.0, 200.0, 730.0)),
    "horizon_months": st.sampled_from((0.0, 6.0, 48.0)),
    "demand": st.sampled_from(("UNSPECIFIED", "UNCERTAIN", "VOLATILE", "STEADY")),
    "run_cycle": st.sampled_from(("UNSPECIFIED", "ALWAYS_ON", "BURST", "EXPERIMENTAL")),
    "hardware_control": st.sampled_from(("UNKNOWN", "YES", "NO")),
    "platform_team": st.sampled_from(("UNKNOWN", "YES", "NO")),
    "utilization_given": st.booleans(),
    "boundary": st.sampled_from(("UNSPECIFIED", "PUBLIC_CLOUD", "ON_PREM")),
    # the model-API leg (decide/api_leg.py): the counterfactuals recompute api_cheaper from these
    "api_scope": st.sampled_from(("IN_SCOPE", "NOT_HOSTED", "UNNAMED", "RESIDENCY")),
    "api_hosted": st.sampled_from(("YES", "NO", "UNKNOWN")),
    "api_usd_per_unit": st.sampled_from((-1.0, 0.0001, 0.01)),
    "top_usd_per_unit": st.sampled_from((-1.0, 0.001)),
})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(brief=brief_strategy(), tweaks=_PLAN_TWEAKS, other_route=st.sampled_from(("RENT_ON_DEMAND", "BUY", "")))
def test_incremental_route_depends_on_matches_routing_every_variant(book, brief, tweaks, other_route):  # noqa: ANN001
    from service.decide import facts as F
    from service.decide import provisional as pv
    from service.decide.provisional import route_depends_on, route_of, route_rules

    a = book.assumptions
    shape = shape_of(brief, a)
    sizings = size_all(book.catalog, brief, shape, a, (), date(2026, 11, 15)) if shape else []
    base = F.brief_fact(brief, a.num("default_utilization"), shape, sizings, 0)
    plan = {**F.plan_fact(base, sizings[0] if sizings else None, len(sizings), brief.economics.hours_per_month),
            **tweaks}
    rules = book.program.for_fact("plan")
    # Each counterfactual differs from the plan only in the fields VARIES declares for it.
    assert set(pv.VARIES) == set(pv.ROUTE_INPUTS)
    for path, (_, variants) in pv.ROUTE_INPUTS.items():
        for variant in variants(plan):
            fact = pv._derive(variant)
            assert set(fact) >= set(plan)
            assert {k for k in fact if fact[k] is not plan.get(k, pv._ABSENT)} <= set(pv.VARIES[path])
    for route in (route_of(route_rules(rules), plan) or "RENT_ON_DEMAND", other_route):
        assert route_depends_on(rules, plan, route, "RENT_ON_DEMAND") == reference_route_depends_on(
            rules, plan, route, "RENT_ON_DEMAND")


def reference_apply_hit_policies(rules: tuple, matched: set[str]) -> list:
    """apply_hit_policies before it walked only the matched rules: every rule of the fact type, in order."""
    winners: list = []
    best_in_group: dict[str, Any] = {}
    for rule in rules:
        if rule.id not in matched:
            continue
        if rule.hit_policy == "collect":
            winners.append(rule)
            continue
        current = best_in_group.get(rule.group)
        if current is None or (rule.priority, -rule.order) > (current.priority, -current.order):
            best_in_group[rule.group] = rule
    winners.extend(best_in_group.values())
    return sorted(winners, key=lambda r: (-r.priority, r.group, r.order))


_RULE_ROWS = st.lists(st.tuples(st.sampled_from("abcdef"), st.sampled_from(("g1", "g2", "g3")),
                                st.sampled_from(("collect", "first")), st.integers(-2, 2), st.integers(0, 3)),
                      max_size=12)


@settings(max_examples=500, deadline=None)
@given(rows=_RULE_ROWS, matched=st.sets(st.sampled_from("abcdefxy")))
def test_hit_policies_over_the_matched_rules_only_pick_as_over_all_rules(rows, matched):  # noqa: ANN001
    from service.engine.ir import Rule, apply_hit_policies

    # Ids may repeat and tie on priority and order: the earlier rule in the tuple still wins its group.
    rules = tuple(Rule(rid, "candidate", group, policy, prio, order, (), (), f"t.yaml:{i}")
                  for i, (rid, group, policy, prio, order) in enumerate(rows))
    assert apply_hit_policies(rules, matched) == reference_apply_hit_policies(rules, matched)
    assert [r.location for r in apply_hit_policies(rules, matched)] == [
        r.location for r in reference_apply_hit_policies(rules, matched)]


@settings(max_examples=300, deadline=None)
@given(args=st.lists(st.tuples(st.sampled_from("abcd"), st.integers(0, 9)), max_size=6),
       key=st.sampled_from("abcde"))
def test_action_arguments_read_by_key_as_by_scanning(args, key):  # noqa: ANN001
    from service.engine.ir import Action

    scanned = next((v for k, v in args if k == key), "default")  # the first of a repeated key counts
    assert Action("note", tuple(args)).get(key, "default") == scanned


def reference_check_message(msg: Any, prefix: str, out: list) -> None:  # noqa: ANN401
    """validate's field walk before it was planned once per message type: the descriptor read at every call."""
    from service.wire import validate as v

    def numbers(msg: Any, prefix: str) -> Iterable[tuple[str, Any, Any]]:  # noqa: ANN401
        for fd in msg.DESCRIPTOR.fields:
            path = f"{prefix}.{fd.name}"
            value = getattr(msg, fd.name)
            if fd.type == fd.TYPE_MESSAGE and not fd.is_repeated:
                yield from numbers(value, path)
            else:
                yield path, fd, value

    for path, fd, value in numbers(msg, prefix):
        if fd.is_repeated:
            continue
        if fd.type == fd.TYPE_ENUM:
            if fd.enum_type.values_by_number.get(value) is None:
                out.append((path, f"unknown {fd.enum_type.name} value {value}"))
        elif fd.type in (fd.TYPE_DOUBLE, fd.TYPE_FLOAT):
            if math.isnan(value) or math.isinf(value):
                out.append((path, "must be a finite number"))
            elif value < 0:
                out.append((path, f"must not be negative (got {value:g})"))
            elif 0 < value < v.MIN_POSITIVE:
                out.append((path, f"must be 0 (not given) or at least {v.MIN_POSITIVE:g} (got {value:g})"))
            elif path in v.LIMITS and value > v.LIMITS[path]:
                out.append((path, f"must be at most {v.LIMITS[path]:g} (got {value:g})"))
        elif fd.type in (fd.TYPE_INT32, fd.TYPE_INT64, fd.TYPE_UINT32, fd.TYPE_UINT64):
            if value < 0:
                out.append((path, f"must not be negative (got {value})"))
            elif path in v.LIMITS and value > v.LIMITS[path]:
                out.append((path, f"must be at most {v.LIMITS[path]:g} (got {value})"))
        elif fd.type == fd.TYPE_STRING and len(value) > v.MAX_STRING:
            out.append((path, f"must be at most {v.MAX_STRING} characters"))


@settings(max_examples=400, deadline=None)
@given(seed=seeds, numbers=st.lists(st.tuples(st.sampled_from(sorted(LIMITS)),
                                              st.one_of(st.floats(), st.integers(-(2**31), 2**31 - 1))),
                                    max_size=4), enum=st.integers(-3, 40), text=st.integers(0, 300))
def test_planned_field_checks_report_what_the_descriptor_walk_reported(seed, numbers, enum, text):  # noqa: ANN001
    from service.wire.validate import _check_message

    request = request_from_seed(seed)
    brief = request.brief
    for path, value in numbers:  # push fields past their limits, below zero, to NaN
        *parents, name = path.split(".")[1:]
        msg = brief
        for p in parents:
            msg = getattr(msg, p)
        fd = msg.DESCRIPTOR.fields_by_name[name]
        is_int = fd.type in (fd.TYPE_INT32, fd.TYPE_INT64, fd.TYPE_UINT32, fd.TYPE_UINT64)
        if is_int and not isinstance(value, int):
            continue
        if fd.type in (fd.TYPE_UINT32, fd.TYPE_UINT64) and value < 0:
            continue
        setattr(msg, name, value if is_int else float(value))
    brief.model.precision = enum  # open enums keep unknown numbers
    brief.economics.demand = enum
    request.locale = "x" * text
    new: list = []
    ref: list = []
    _check_message(brief, "brief", new)
    reference_check_message(brief, "brief", ref)
    assert new == ref
    new, ref = [], []
    _check_message(request, "", new)
    reference_check_message(request, "", ref)
    assert new == ref


def _answer_objects(value: Any) -> Iterable[Any]:  # noqa: ANN401
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        yield value
        for f in dataclasses.fields(value):
            yield from _answer_objects(getattr(value, f.name))
    elif isinstance(value, tuple):
        for item in value:
            yield from _answer_objects(item)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=seeds, locale=st.sampled_from(("en", "zh-CN")))
def test_answer_objects_built_without_their_constructor_are_what_it_builds(bundle, seed, locale):  # noqa: ANN001
    # answer.build skips the frozen __init__: each object must hold every field and equal the constructor's.
    import dataclasses

    request = request_from_seed(seed)
    if validate(request, bundle.known_gpu_ids()):
        return
    request.locale = locale
    advice = bundle.advise(request_from_proto(request))
    for obj in _answer_objects(advice):
        names = {f.name for f in dataclasses.fields(obj)}
        if hasattr(obj, "__dict__"):  # slotted ones (an Offer from the table) come from their constructor
            assert set(vars(obj)) == names, type(obj).__name__
        rebuilt = type(obj)(**{n: getattr(obj, n) for n in names})
        assert rebuilt == obj and repr(rebuilt) == repr(obj) and hash(rebuilt) == hash(obj)


def test_build_gives_what_the_constructor_gives():
    import dataclasses

    from service.domain.advice import Performance

    fields = dict(ttft_ms=1.5, itl_ms=2.0, e2e_p95_ms=3.0, tokens_per_second_per_replica=4.0, tensor_parallel=2,
                  replicas=1, nodes=1, training_days=0.0, gpu_hours=0.0, cost_per_run_usd=0.0)
    built = answer.build(Performance, **fields)
    assert built == Performance(**fields) and hash(built) == hash(Performance(**fields))
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.ttft_ms = 2.0  # type: ignore[misc]  # still frozen



@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), locale=st.sampled_from(("en", "zh-CN")))
def test_shipped_templates_fill_straight_as_the_reference_does(book, data, locale):  # noqa: ANN001
    # Every shipped message through its straight-line filler (_straight), with each placeholder given a value of
    # any kind (small and large floats, ints, bools, text, None) or left missing.
    msgs = m.Messages(book.messages)
    key = data.draw(st.sampled_from(sorted(book.messages["en"])))
    names = m.placeholders(book.messages["en"][key])
    values = st.one_of(_VALUES, st.floats(-2000, 2000), st.sampled_from((0.5, 999.99, 1000.0, -999.5, 12345.678)))
    params = data.draw(st.dictionaries(st.sampled_from(names), values) if names else st.just({}))
    assert msgs.text(key, locale, params) == reference_text(book.messages, key, locale, params)


def test_answer_parts_filled_from_their_dict_have_exactly_their_messages_fields() -> None:
    # advice_to_proto hands Reason, Ownership and Performance objects' __dict__ to their messages as is.
    from dataclasses import fields

    for kind, message in ((advice_types.Reason, pb.Reason), (advice_types.Ownership, pb.Ownership),
                          (advice_types.Performance, pb.Performance)):
        assert {f.name for f in fields(kind)} == {f.name for f in message.DESCRIPTOR.fields}, kind
