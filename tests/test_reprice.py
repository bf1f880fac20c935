"""A reserve route's second pass prices the first pass's sizings again at the reserved tier (sizing/per_gpu.repriced)
instead of sizing every GPU again: what it gives equals sizing afresh, and the answers equal those made without
the reuse (trace on, zh-CN, quotes, every workload the fuzzed requests reach)."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.bench.loadgen import distinct_briefs
from service.decide import advisor
from service.decide.sizing.per_gpu import repriced, size_all, unplaced
from service.decide.sizing.shape import shape_of
from service.domain.brief import PRICE_TIERS
from service.rulebook.version import Bundle
from service.wire.api import advice_to_proto, pb, request_from_proto
from service.wire.validate import validate
from tests.fuzz_requests import request_from_seed
from tests.test_advisor import brief_strategy
from tests.test_fast_paths import _quotes, book  # noqa: F401 - the module's rules fixture


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    brief=brief_strategy(),
    data=st.data(),
    tiers=st.tuples(st.sampled_from(("UNSPECIFIED", *PRICE_TIERS)), st.sampled_from(PRICE_TIERS)),
    kwh=st.one_of(st.just(0.0), st.floats(0.01, 1)),
    day=st.sampled_from((date(2024, 1, 1), date(2026, 11, 15))),
)
def test_repriced_equals_sized_afresh_at_the_other_tier(book, brief, data, tiers, kwh, day):  # noqa: ANN001, F811
    a = book.assumptions
    first = replace(brief, economics=replace(brief.economics, price_tier=tiers[0], electricity_usd_per_kwh=kwh))
    again = replace(first, economics=replace(first.economics, price_tier=tiers[1]))
    shape = shape_of(first, a)
    if shape is None:
        return
    quotes = data.draw(_quotes([g.id for g in book.catalog]))
    sized = size_all(book.catalog, first, shape, a, quotes, day)
    kept = unplaced(sized)
    before = [repr(s) for s in kept]
    for s in sized:  # placement rewrites the first pass's sizings in place: the copies do not change with them
        s.count, s.usd_per_hour = s.count + 1, -1.0
        s.formulas.append("changed")
    fresh = size_all(book.catalog, again, shape, a, quotes, day)
    assert [repr(s) for s in repriced(kept, again, shape, a, quotes, day)] == [repr(s) for s in fresh]
    assert [repr(s) for s in kept] == before  # repricing leaves what it starts from as it was


def _requests(bundle: Bundle) -> list:  # noqa: ANN401 - AdviceRequest
    reqs = [request_from_proto(pb.RecommendRequest.FromString(b[5:])) for b in distinct_briefs(4)]
    for seed in range(160):
        r = request_from_seed(seed * 104729 + 3)
        if not validate(r, bundle.known_gpu_ids()):
            reqs.append(request_from_proto(r))
    return reqs


def test_answers_with_the_first_pass_reused_equal_answers_sized_afresh(bundle: Bundle,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    reqs = _requests(bundle)
    reqs += [replace(r, include_trace=True) for r in reqs[:6]] + [replace(r, locale="zh-CN") for r in reqs[:6]]
    calls = []
    real = advisor.repriced

    def counted(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(advisor, "repriced", counted)
    reused = [advice_to_proto(bundle.advise(r)).SerializeToString(deterministic=True) for r in reqs]
    assert len(calls) >= 12  # the bench's briefs (trace on, zh-CN) are answered again at reserved prices
    monkeypatch.setattr(advisor, "may_reserve_again", lambda *_: False)  # no first pass kept: sized afresh
    calls.clear()
    afresh = [advice_to_proto(bundle.advise(r)).SerializeToString(deterministic=True) for r in reqs]
    assert not calls
    assert reused == afresh
