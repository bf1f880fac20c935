"""The model-API leg (issue 35): the pricing formulas on a token mix, the scope an API offer must be in, the leg set
against a sized candidate, and ListApiOffers. Offers here are made up for the test (no shipped price is pinned)."""

from __future__ import annotations

import io
from dataclasses import replace
from datetime import date

import grpc
import pytest

from service.decide.api_leg import cheaper, plan_fields, price
from service.domain.api_offers import ApiOffer, ApiOfferTable
from service.domain.brief import Brief, Economics, Model, PlacementPolicy, Traffic
from service.money import api as money
from service.wire.api import pb
from tests.conftest import TODAY, bad_request_fields

DAY = date(2026, 12, 1)


def offer(provider: str, p_in: float, p_out: float, cached: float = 0.0, region: str = "", country: str = "",
          context: int = 0, model: str = "llama-3.1-8b-instruct") -> ApiOffer:
    return ApiOffer(provider, f"{provider}/m", model, p_in, p_out, cached, context, region, country, DAY, "test")


# ---- money/api.py: the formulas --------------------------------------------------------------------------------

def test_a_request_is_billed_per_side_and_cached_input_at_its_own_price():
    # 1,000 in (250 cached) and 300 out at $0.20 in, $0.05 cached, $0.60 out per 1M tokens
    bill = money.usd_per_request(1000, 300, 0.25, 0.20, 0.60, 0.05)
    assert bill == pytest.approx((750 * 0.20 + 250 * 0.05 + 300 * 0.60) / 1e6)
    # no cached price listed: cached input is billed as input
    assert money.usd_per_request(1000, 300, 0.25, 0.20, 0.60, 0.0) == pytest.approx((1000 * 0.20 + 300 * 0.60) / 1e6)


def test_acceptance_divides_the_whole_request():
    bill = money.usd_per_request(1000, 300, 0.0, 0.20, 0.60, 0.0)
    assert money.usd_per_accepted_unit(bill, 1.0, 0.5) == pytest.approx(2 * bill)
    assert money.usd_per_accepted_unit(bill, 1.0, 0.0) == pytest.approx(bill)  # 0 = not given: all accepted
    assert money.usd_per_accepted_unit(bill, 300 / 1e6, 1.0) == pytest.approx(bill / 300 * 1e6)  # per 1M output


def test_break_even_is_the_fixed_cost_over_the_api_price_unless_the_config_cannot_carry_it():
    assert money.break_even_units_per_month(1000.0, 0.001, 5e6) == pytest.approx(1e6)
    assert money.break_even_units_per_month(1000.0, 0.001, 5e5) == -1.0  # even fully busy it never pays
    assert money.saving_pct(0.25, 1.0) == pytest.approx(75.0)
    assert money.saving_pct(1.5, 1.0) == pytest.approx(-50.0)


@pytest.mark.parametrize("bad", [
    lambda: money.usd_per_request(-1, 1, 0, 1, 1, 0),
    lambda: money.usd_per_request(1, 1, 1.5, 1, 1, 0),
    lambda: money.usd_per_accepted_unit(1.0, 0.0, 1.0),
    lambda: money.usd_per_accepted_unit(1.0, 1.0, 2.0),
    lambda: money.break_even_units_per_month(1.0, 0.0, 1.0),
    lambda: money.saving_pct(1.0, 0.0),
])
def test_bad_inputs_are_refused(bad):
    with pytest.raises(ValueError):
        bad()


# ---- decide/api_leg.py: scope and the leg --------------------------------------------------------------------

def brief(**kw) -> Brief:
    base = dict(workload="REALTIME_INFERENCE", model=Model(name="llama-3.1-8b-instruct"),
                traffic=Traffic(concurrent_sessions=20, avg_input_tokens=1000, avg_output_tokens=300),
                run_cycle="ALWAYS_ON", success_unit="RESPONSE",
                economics=Economics(horizon_months=24, demand="STEADY", needs_hardware_control=False))
    base.update(kw)
    return Brief(**base)


@pytest.fixture(scope="module")
def sized(bundle):
    """The 8B brief's shape and first candidate from the shipped rules (the leg reads its cost and load only)."""
    from service.decide.sizing.per_gpu import size
    from service.decide.sizing.shape import shape_of

    book = bundle.book
    b = replace(brief(), model=Model(name="llama-3.1-8b-instruct", params_billion=8.03, precision="BF16"))
    shape = shape_of(b, book.assumptions)
    gpu = next(g for g in book.catalog if g.id == "a100-80gb")
    return book, b, shape, size(gpu, b, shape, book.assumptions, (), TODAY)


def test_the_cheapest_offer_on_the_token_mix_wins_and_the_spread_is_kept(sized):
    book, b, shape, top = sized
    # cheap on input, dear on output vs the reverse: 1,000 in / 300 out favours the cheap-input one
    table = ApiOfferTable([offer("a", 0.01, 1.00), offer("b", 0.50, 0.10), offer("c", 0.02, 0.05)])
    got = price(table, book.models, b, shape, top, book.assumptions)
    assert got.scope == "IN_SCOPE" and got.leg is not None
    leg = got.leg
    assert leg.offer.provider == "c" and leg.providers == 3
    assert leg.usd_per_unit == pytest.approx((1000 * 0.02 + 300 * 0.05) / 1e6)
    assert leg.max_usd_per_unit == pytest.approx((1000 * 0.50 + 300 * 0.10) / 1e6)
    assert leg.saving_pct == pytest.approx((top.usd_per_unit - leg.usd_per_unit) / top.usd_per_unit * 100)
    assert leg.self_usd_per_month == pytest.approx(top.usd_per_hour * book.assumptions.num("hours_per_month"))
    assert leg.usd_per_month == pytest.approx(leg.usd_per_unit * leg.units_per_month)
    facts = plan_fields(got, top, book.assumptions.num("hours_per_month"))
    assert facts["api_provider"] == "c" and facts["api_cheaper"] is cheaper(facts) is True
    assert leg.tokens_per_unit == 1300  # a response: its input and output tokens, none rejected
    if leg.break_even_units_per_month > 0:
        assert facts["api_break_even_million_tokens"] == pytest.approx(leg.break_even_units_per_month * 1300 / 1e6,
                                                                       abs=0.1)
    else:
        assert facts["api_break_even_million_tokens"] == -1.0


def test_the_cached_share_comes_from_the_brief_else_the_rules_default(sized):
    book, b, shape, top = sized
    table = ApiOfferTable([offer("a", 1.0, 1.0, cached=0.1)])
    plain = price(table, book.models, b, shape, top, book.assumptions).leg
    cached = price(table, book.models, replace(b, traffic=replace(b.traffic, cached_input_share=0.5)), shape, top,
                   book.assumptions).leg
    assert plain.cached_input_share == book.assumptions.num("default_cached_input_share")
    assert cached.cached_input_share == 0.5
    assert cached.usd_per_unit == pytest.approx((500 * 1.0 + 500 * 0.1 + 300 * 1.0) / 1e6)


def test_residency_needs_a_named_place_and_boundaries_rule_hosted_apis_out(sized):
    book, b, shape, top = sized
    nowhere, us = offer("a", 0.01, 0.01), offer("b", 0.1, 0.1, region="us", country="US")
    de = offer("c", 0.2, 0.2, region="eu-central-1", country="DE")
    eu_zone = offer("d", 0.3, 0.3, region="eu", country="EU")
    table = ApiOfferTable([nowhere, us, de, eu_zone])
    eu = replace(b, boundary="DATA_RESIDENCY", placement=PlacementPolicy(countries=("EU",)))
    got = price(table, book.models, eu, shape, top, book.assumptions)
    assert got.scope == "IN_SCOPE" and got.leg.offer.provider == "c" and got.leg.providers == 2  # DE and the zone
    only_unknown = ApiOfferTable([nowhere, us])
    out = price(only_unknown, book.models, eu, shape, top, book.assumptions)
    assert out.scope == "RESIDENCY" and not out.leg.in_scope  # the cheapest anywhere, marked out of scope
    assert plan_fields(out, top, 730)["api_cheaper"] is False
    no_place = price(table, book.models, replace(b, boundary="DATA_RESIDENCY"), shape, top, book.assumptions)
    assert no_place.scope == "RESIDENCY"  # residency with no place named: nothing is known to comply
    for boundary in ("ON_PREM", "PRIVATE_NETWORK", "DEDICATED_CLUSTER"):
        assert price(table, book.models, replace(b, boundary=boundary), shape, top, book.assumptions).scope == \
            "BOUNDARY"


def test_unnamed_unhosted_and_too_short_context(sized):
    book, b, shape, top = sized
    table = ApiOfferTable([offer("a", 0.01, 0.01, context=512)])
    assert price(table, book.models, replace(b, model=Model(params_billion=8)), shape, top,
                 book.assumptions).scope == "UNNAMED"
    assert price(ApiOfferTable([]), book.models, b, shape, top, book.assumptions).hosted == "NO"
    assert price(table, book.models, b, shape, top, book.assumptions).scope == "CONTEXT"
    assert price(table, book.models, replace(b, workload="FULL_FINETUNE"), shape, top,
                 book.assumptions).scope == "NOT_TEXT"


# ---- ListApiOffers and the CLI --------------------------------------------------------------------------------

def test_list_api_offers_filters_and_pages(stub):
    every = stub.ListApiOffers(pb.ListApiOffersRequest(page_size=1000), timeout=30)
    assert every.total == len(every.offers) > 100
    by_alias = stub.ListApiOffers(pb.ListApiOffersRequest(model="meta-llama/Llama-3.1-8B-Instruct"), timeout=30)
    assert by_alias.total > 1 and {o.registry_model for o in by_alias.offers} == {"llama-3.1-8b-instruct"}
    costs = [o.usd_per_million_input + o.usd_per_million_output for o in by_alias.offers]
    assert costs == sorted(costs)
    first = stub.ListApiOffers(pb.ListApiOffersRequest(model="llama-3.1-8b-instruct", page_size=2), timeout=30)
    second = stub.ListApiOffers(pb.ListApiOffersRequest(model="llama-3.1-8b-instruct", page_size=2,
                                                        page_token=first.next_page_token), timeout=30)
    assert [o.provider for o in [*first.offers, *second.offers]] == [o.provider for o in by_alias.offers[:4]]
    us = stub.ListApiOffers(pb.ListApiOffersRequest(country="US", page_size=1000), timeout=30)
    assert us.total and all(o.country == "US" for o in us.offers)


def test_list_api_offers_refuses_bad_filters(stub):
    with pytest.raises(grpc.RpcError) as err:
        stub.ListApiOffers(pb.ListApiOffersRequest(model="no-such-model", country="Europe", as_of="soon"), timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert set(bad_request_fields(err.value)) == {"model", "country", "as_of"}


def test_cli_prints_the_api_table_and_the_answers_api_row(stub):
    from service.frontends.api_offers_cli import print_api_offers
    from service.frontends.cli import print_advice
    from service.wire.api import request_to_proto

    out = io.StringIO()
    print_api_offers(stub.ListApiOffers(pb.ListApiOffersRequest(model="llama-3.1-8b-instruct"), timeout=30), out)
    assert "$/1M in" in out.getvalue() and "llama-3.1-8b-instruct" in out.getvalue()
    from service.domain.brief import AdviceRequest

    req = request_to_proto(AdviceRequest(brief=brief()))
    resp = stub.Recommend(req, timeout=60)
    assert resp.HasField("api")
    out = io.StringIO()
    print_advice(resp, out, req)
    text = out.getvalue()
    assert f"Model API: {resp.api.offer.provider} {resp.api.offer.model}" in text
    assert f"${resp.api.usd_per_month:,.0f} a month for this load" in text
