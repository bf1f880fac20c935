"""Lean paths of decide/ held to the plain ones: the reserved term read at another tier, a GPU's generation
speed set again from what a rules version keeps (a copy of each list, never the kept one), and candidate facts
whose message-only figures are filled in for the candidates shown alone."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.bench.loadgen import distinct_briefs
from service.decide import facts as F
from service.decide import tables
from service.decide.placement import reserve_term
from service.decide.sizing.common import Sizing
from service.decide.sizing.per_gpu import size_all
from service.decide.sizing.per_request import NO_ECONOMICS, RequestSizer
from service.decide.sizing.shape import shape_of
from service.domain.brief import PRICE_TIERS, UNSPECIFIED, Brief, Latency, Model, Traffic
from service.engine.ir import Condition, Rule
from service.rulebook.version import Bundle
from service.wire.api import advice_to_proto, pb, request_from_proto
from service.wire.validate import validate
from tests.fuzz_requests import request_from_seed
from tests.test_advisor import brief_strategy


@settings(max_examples=150, deadline=None)
@given(brief=brief_strategy(), tier=st.sampled_from((UNSPECIFIED, *PRICE_TIERS)))
def test_the_term_at_another_tier_is_the_terms_of_that_brief(bundle: Bundle, brief, tier) -> None:  # noqa: ANN001
    a = bundle.book.assumptions
    at = replace(brief, economics=replace(brief.economics, price_tier=tier))
    assert reserve_term(brief, a, tier) == reserve_term(at, a)
    assert reserve_term(brief, a) == reserve_term(brief, a, brief.economics.price_tier)


def _requests(bundle: Bundle) -> list:  # noqa: ANN401 - AdviceRequest
    reqs = [request_from_proto(pb.RecommendRequest.FromString(b[5:])) for b in distinct_briefs(4)]
    for seed in range(160):
        r = request_from_seed(seed * 104729 + 3)
        if not validate(r, bundle.known_gpu_ids()):
            reqs.append(request_from_proto(r))
    return reqs


def test_kept_speeds_give_each_sizing_its_own_lists(bundle: Bundle) -> None:
    """A generation brief sized twice: the second takes every GPU's speed figures from the rules' table, equal to
    the first's; a list among what is kept is copied into each sizing, never shared."""
    book = bundle.book
    a = book.assumptions
    brief = _realtime()
    shape = shape_of(brief, a)
    assert shape is not None
    day = date(2026, 11, 2)
    first = size_all(book.catalog, brief, shape, a, (), day)
    second = size_all(book.catalog, brief, shape, a, (), day)
    assert [repr(s) for s in first] == [repr(s) for s in second]
    t = tables.tables(a)
    kept = t.speeds[(replace(brief, economics=NO_ECONOMICS), shape)]
    gpu = book.catalog[0]
    figures = {"step_ms": 1.5, "formulas": ["kept"]}
    kept[id(gpu)] = (gpu, figures, ("formulas",))
    sizer = RequestSizer(brief, shape, a, t.constants, (), day, speeds=t.speeds)
    one, two = Sizing.blank(gpu, "ON_DEMAND"), Sizing.blank(gpu, "ON_DEMAND")
    sizer._decode_speed(one, t.gpu(gpu))
    sizer._decode_speed(two, t.gpu(gpu))
    assert one.step_ms == two.step_ms == 1.5 and one.formulas == two.formulas == ["kept"]
    assert one.formulas is not figures["formulas"] and two.formulas is not one.formulas
    del kept[id(gpu)]


def _realtime() -> Brief:
    return Brief(workload="REALTIME_INFERENCE", model=Model(params_billion=8, precision="BF16", context_tokens=8192),
                 traffic=Traffic(concurrent_sessions=16, avg_input_tokens=1000, avg_output_tokens=300),
                 latency=Latency(p95_ms=3000))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(brief=brief_strategy())
def test_a_fact_filled_in_later_is_the_whole_fact(bundle: Bundle, brief) -> None:  # noqa: ANN001
    """The fields only messages read, left out while the rules run and filled in for a candidate shown: the same
    keys in the same order, the same values (a zero training figure of an inference brief unrounded included)."""
    a = bundle.book.assumptions
    shape = shape_of(brief, a)
    sizings = size_all(bundle.book.catalog, brief, shape, a, (), date(2026, 11, 15)) if shape else []
    base = F.brief_fact(brief, a.num("default_utilization"), shape, sizings, 0)
    for s in sizings:
        whole = F.candidate_fact(base, s)
        later = F.candidate_fact(base, s, later=True)
        assert all(later[k] is None for k in F.SHOWN_ONLY)
        later.update(F.shown_fields(s))
        assert list(later.items()) == list(whole.items())
        assert [type(v) for v in later.values()] == [type(v) for v in whole.values()]


def test_a_rule_that_tests_a_shown_field_gets_whole_facts(bundle: Bundle) -> None:
    rules = bundle.book.program.for_fact("candidate")
    assert not F.tests_shown_only(rules) and F.fills_later(rules), "today's rules test none: filled in later"
    extra = Rule("t.need", "candidate", "t", "collect", 0, 0, ((Condition("need_gb", "gt", 1.0),),), (), "t:1")
    assert F.tests_shown_only((*rules, extra))


def test_answers_with_facts_filled_in_later_equal_answers_with_whole_facts(bundle: Bundle,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    reqs = _requests(bundle)
    reqs += [replace(r, include_trace=True) for r in reqs[:6]] + [replace(r, locale="zh-CN") for r in reqs[:6]]
    later = [advice_to_proto(bundle.advise(r)).SerializeToString(deterministic=True) for r in reqs]
    monkeypatch.setattr(F, "fills_later", lambda _rules: False)
    whole = [advice_to_proto(bundle.advise(r)).SerializeToString(deterministic=True) for r in reqs]
    assert later == whole
