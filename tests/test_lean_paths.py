"""The lean paths an answer takes where the full computation would give the same figures: each is held equal to
the full one on random inputs."""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from datetime import date
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.decide import tables
from service.decide.advisor import with_output_tokens
from service.decide.sizing.per_gpu import latency_of, size
from service.decide.sizing.per_request import NO_ECONOMICS, without_economics
from service.decide.sizing.shape import shape_of
from service.domain.brief import PRICE_TIERS, AdviceRequest
from service.domain.catalog import RENT_TIER_ORDER, tier_preference
from service.rulebook.folder import load_rulebook
from service.wire.api import request_from_proto, request_to_proto
from tests.test_advisor import brief_strategy

RULES = Path(__file__).parents[1] / "rules"


@pytest.fixture(scope="module")
def book():  # noqa: ANN201
    book, problems = load_rulebook(RULES, today=date(2026, 11, 15))
    assert book is not None, problems
    return book


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(brief=brief_strategy(), lengths=st.lists(st.integers(1, 4000), min_size=1, max_size=3))
def test_fit_and_latency_at_other_output_lengths_are_what_size_gives(book, brief, lengths):  # noqa: ANN001
    a, day = book.assumptions, date(2026, 11, 15)
    first = shape_of(brief, a)
    if first is None:
        return
    # As the missed-target search does: lengths that size the same context share their memory breakdowns.
    shared: dict[tuple[int, int], dict] = {}
    for outputs in lengths:
        again = replace(brief, traffic=replace(brief.traffic, avg_output_tokens=outputs))
        shape = shape_of(again, a, first.arch)
        assert shape == shape_of(again, a)  # the architecture reads the model only
        needs = shared.setdefault((shape.tokens_per_sequence, shape.sequences), {})
        for gpu in book.catalog:
            full = size(gpu, again, shape, a, (), day)
            assert repr(latency_of(gpu, again, shape, a, day, needs)) == repr((full.fits, full.est_latency_ms))


@settings(max_examples=200, deadline=None)
@given(brief=brief_strategy(), outputs=st.integers(1, 4000))
def test_a_brief_with_other_output_tokens_is_what_replace_makes(brief, outputs):  # noqa: ANN001
    before = repr(brief)
    made = with_output_tokens(brief, outputs)
    want = replace(brief, traffic=replace(brief.traffic, avg_output_tokens=outputs))
    assert made == want and repr(made) == repr(want) and hash(made) == hash(want)
    assert repr(brief) == before  # the brief asked about is left as it was


@settings(max_examples=100, deadline=None)
@given(brief=brief_strategy())
def test_a_brief_without_its_economics_is_what_replace_makes(brief):  # noqa: ANN001
    # The key of the speeds and missed-target tables (per_request.without_economics): equal, same repr and hash.
    before = repr(brief)
    made = without_economics(brief)
    want = replace(brief, economics=NO_ECONOMICS)
    assert made == want and repr(made) == repr(want) and hash(made) == hash(want)
    assert repr(brief) == before


def _rebuilt(obj: object) -> object:
    """`obj` made again through the real constructors, all the way down (dataclasses.replace reads every field:
    one that `frozen.build` left out raises)."""
    if not is_dataclass(obj):
        return obj
    return replace(obj, **{f.name: _rebuilt(getattr(obj, f.name)) for f in fields(obj)})


@settings(max_examples=100, deadline=None)
@given(brief=brief_strategy())
def test_a_request_read_from_the_wire_is_what_the_constructors_make(brief):  # noqa: ANN001
    # request_from_proto builds the brief's frozen parts through frozen.build: each with every field it has.
    made = request_from_proto(request_to_proto(AdviceRequest(brief=brief)))
    want = _rebuilt(made)
    assert made == want and repr(made) == repr(want) and hash(made) == hash(want)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(asks=st.lists(st.tuples(st.dates(date(2024, 1, 1), date(2027, 1, 1)), st.sampled_from(("", *PRICE_TIERS))),
                     min_size=1, max_size=80))
def test_prices_kept_per_day_are_the_catalogs_row_lookups(book, asks):  # noqa: ANN001
    # Many days in a row (the kept ones are dropped past a bound), each asked again: always the catalog's rows.
    for gpu in book.catalog[:3]:
        table = tables.gpu_table(gpu, tables.Constants.of(book.assumptions))
        for day, tier in [*asks, *asks]:
            tiers = tier_preference(tier)
            rent, purchase = table.prices_on(day, tiers)
            assert repr(rent) == repr(gpu.rent_price(day, tiers))
            assert repr(purchase) == repr(gpu.price("purchase", day))


def test_tier_preference_kept_per_tier_is_the_same_order() -> None:
    for tier in ("", "ON_DEMAND", "SPOT", "RESERVED", "MARKETPLACE", "LIST_PURCHASE"):
        assert tier_preference(tier) == (tier, *(t for t in RENT_TIER_ORDER if t != tier))
