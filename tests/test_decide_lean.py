"""Lean paths of decide/ held to the plain ones: a request at another price tier built without the frozen
constructors, the reserved term read at another tier, and a GPU's generation speed set again from what a
rules version keeps (a copy of each list, never the kept one)."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

from hypothesis import given, settings
from hypothesis import strategies as st

from service.decide import tables
from service.decide.placement import reserve_term
from service.decide.reserve import with_price_tier
from service.decide.sizing.common import Sizing
from service.decide.sizing.per_gpu import size_all
from service.decide.sizing.per_request import NO_ECONOMICS, RequestSizer
from service.decide.sizing.shape import shape_of
from service.domain.brief import PRICE_TIERS, UNSPECIFIED, AdviceRequest, Brief, Latency, Model, Traffic
from service.rulebook.version import Bundle
from tests.test_advisor import brief_strategy


@settings(max_examples=150, deadline=None)
@given(brief=brief_strategy(), tier=st.sampled_from((UNSPECIFIED, *PRICE_TIERS)),
       locale=st.sampled_from(("en", "zh-CN")), limit=st.integers(0, 20), trace=st.booleans())
def test_a_request_at_another_tier_is_what_replace_makes(brief, tier, locale, limit, trace) -> None:  # noqa: ANN001
    req = AdviceRequest(brief=brief, locale=locale, max_candidates=limit, include_trace=trace, as_of=date(2026, 11, 2))
    before = repr(req)
    made = with_price_tier(req, tier)
    want = replace(req, brief=replace(brief, economics=replace(brief.economics, price_tier=tier)))
    assert made == want and repr(made) == repr(want) and hash(made) == hash(want)
    assert repr(req) == before  # the request asked about is left as it was


@settings(max_examples=150, deadline=None)
@given(brief=brief_strategy(), tier=st.sampled_from((UNSPECIFIED, *PRICE_TIERS)))
def test_the_term_at_another_tier_is_the_terms_of_that_brief(bundle: Bundle, brief, tier) -> None:  # noqa: ANN001
    a = bundle.book.assumptions
    at = replace(brief, economics=replace(brief.economics, price_tier=tier))
    assert reserve_term(brief, a, tier) == reserve_term(at, a)
    assert reserve_term(brief, a) == reserve_term(brief, a, brief.economics.price_tier)


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
