"""The money the route rules read and the month every candidate is costed on (decide/route_money.py and
decide/month.py), worked by hand (issue 42): which placement is the first pick's on-demand and reserved month,
what the term saves and when it is the cheaper, the term to ask providers for, buying's break-even, a batch
volume as the rate that finishes it, and a fixed load's units being the brief's demand whatever the GPU.
Sizings are built directly, so each test reads only these two modules and the money formulas."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import date
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.decide.month import cost_months, fixed_load, with_volume_rate
from service.decide.route_money import MAX_QUOTE_TERM_MONTHS, MONEY_FIELDS, NO_MONEY, money_facts
from service.decide.sizing.common import Placed, Sizing
from service.domain.brief import UNSPECIFIED, Brief, Economics, Quote, Traffic
from service.domain.catalog import Gpu, Price
from service.domain.offers import Offer


class _Assumptions:
    """The two assumptions these modules read: the rules' full month and the default term."""

    def __init__(self, hours: float = 730.0, **values: Any) -> None:  # noqa: ANN401
        self.values = {"hours_per_month": hours, **values}

    def num(self, name: str) -> float:
        return float(self.values[name])


A = _Assumptions()


def _gpu(gid: str = "h100") -> Gpu:
    return Gpu(gid, gid.upper(), "nvidia", "datacenter", 80, "HBM3", 3.35, 989, 1979, 0, 700, "nvlink", 900, 8, 8,
               7, 0.7, "cuda", "", "", "")


def _placed(tier: str, month: float, term: int = 0) -> Placed:
    offer = Offer("p", "i", "h100", 8, None, None, "r", "US", tier, month / 730, date(2026, 1, 1), "s",
                  date(2026, 1, 1), None, term_months=term)
    return Placed(offer, 1, month / 730, tier.upper(), usd_per_month=month)


def _brief(hours: float = 0.0, horizon: float = 0.0, **traffic: Any) -> Brief:  # noqa: ANN401
    return Brief(workload="REALTIME_INFERENCE", traffic=Traffic(**traffic),
                 economics=Economics(hours_per_month=hours, horizon_months=horizon))


# -- route_money: the first pick's months ------------------------------------------------------------------


def test_no_first_pick_has_no_money_but_still_the_discount_a_term_needs():
    # 365 h a month: a term billing 730 h pays from 1 - 365/730 = 50% off. The horizon of 48 months is asked
    # as the longest published term, 36.
    got = money_facts(None, _brief(hours=365, horizon=48), A)
    assert set(got) == set(MONEY_FIELDS) == set(NO_MONEY)
    assert got == {**NO_MONEY, "reserve_discount_needed_pct": 50.0, "quote_term_months": MAX_QUOTE_TERM_MONTHS}


def _top_with_tiers(**kw: Any) -> Sizing:  # noqa: ANN401
    # on-demand months $2,000 and $1,500; reserved $1,200 (12 months) and $1,100 (36 months); priced on the
    # $1,100 term unless told otherwise
    places = (_placed("on_demand", 2000.0), _placed("reserved", 1200.0, 12), _placed("on_demand", 1500.0),
              _placed("reserved", 1100.0, 36))
    fields = {"gpu": _gpu(), "count": 8, "placements": places, "placement": places[3], "usd_per_month": 1100.0,
              "price_tier": "RESERVED", **kw}
    return Sizing(**fields)


def test_the_cheapest_placement_of_each_tier_and_what_the_term_saves():
    # on-demand min(2000, 1500) = 1500; reserved min(1200, 1100) = 1100 on its 36-month term;
    # saving 1500 - 1100 = 400, 400 / 1500 = 26.67% -> 26.7; 730 h a month: any discount pays (0%).
    got = money_facts(_top_with_tiers(), _brief(hours=730, horizon=6), A)
    assert got == {
        "top_name": "H100", "top_tier": "RESERVED", "top_month_usd": 1100.0, "top_on_demand_month_usd": 1500.0,
        "top_reserved_month_usd": 1100.0, "top_reserved_term_months": 36, "reserved_cheaper": True,
        "reserve_saving_usd": 400.0, "reserve_saving_pct": 26.7, "reserve_discount_needed_pct": 0.0,
        "quote_term_months": 36, "buy_break_even_months": -1.0,
    }


def test_the_reserved_term_is_the_cheaper_only_when_the_pick_is_priced_on_it():
    brief = _brief(hours=730)
    on_demand = _top_with_tiers()
    on_demand = replace(on_demand, placement=on_demand.placements[2], usd_per_month=1500.0, price_tier="ON_DEMAND")
    other_term = replace(_top_with_tiers(), placement=_top_with_tiers().placements[1])  # the $1,200 term
    quoted = _top_with_tiers(quote=Quote("h100", 1.0))  # the caller's own price: no offer's term is its month
    for top in (on_demand, other_term, quoted):
        got = money_facts(top, brief, A)
        assert got["reserved_cheaper"] is False
        assert (got["top_on_demand_month_usd"], got["top_reserved_month_usd"]) == (1500.0, 1100.0)


def test_a_catalog_on_demand_price_is_the_on_demand_month_when_no_offer_places_it():
    # No placement: the $900 month of the catalog's (or a quote's) on-demand price is the on-demand month; a
    # catalog reserved price is not. With no term in scope nothing is saved and the horizon (6) is asked.
    brief = _brief(hours=500, horizon=6)
    top = Sizing(gpu=_gpu(), count=1, usd_per_month=900.0, price_tier="ON_DEMAND")
    got = money_facts(top, brief, A)
    assert (got["top_on_demand_month_usd"], got["top_reserved_month_usd"], got["reserve_saving_usd"],
            got["reserve_saving_pct"], got["reserved_cheaper"], got["quote_term_months"]) == (
        900.0, 0.0, 0.0, 0.0, False, 6)
    # 1 - 500/730 = 31.5%
    assert got["reserve_discount_needed_pct"] == 31.5
    assert money_facts(replace(top, price_tier="RESERVED"), brief, A)["top_on_demand_month_usd"] == 0.0
    placed = replace(top, placement=_placed("reserved", 900.0, 12), price_tier="ON_DEMAND")
    assert money_facts(placed, brief, A)["top_on_demand_month_usd"] == 0.0


def test_the_months_are_in_cents():
    # on-demand $1,500.256 and a $1,100.123 term: 1,500.26 and 1,100.12; saved 400.133 -> 400.13 (26.7%)
    places = (_placed("on_demand", 1500.256), _placed("reserved", 1100.123, 12))
    top = Sizing(gpu=_gpu(), count=1, placements=places, placement=places[1], usd_per_month=1100.123,
                 price_tier="RESERVED")
    got = money_facts(top, _brief(hours=730), A)
    assert (got["top_month_usd"], got["top_on_demand_month_usd"], got["top_reserved_month_usd"],
            got["reserve_saving_usd"], got["reserve_saving_pct"]) == (1100.12, 1500.26, 1100.12, 400.13, 26.7)


def test_the_term_to_ask_for():
    top = Sizing(gpu=_gpu(), count=1, usd_per_month=900.0, price_tier="ON_DEMAND")
    assert money_facts(top, _brief(horizon=48), A)["quote_term_months"] == 36  # the longest published
    assert money_facts(top, _brief(horizon=36), A)["quote_term_months"] == 36
    assert money_facts(top, _brief(horizon=7), A)["quote_term_months"] == 7
    assert money_facts(top, _brief(horizon=1), A)["quote_term_months"] == 1  # a month is a horizon
    assert money_facts(top, _brief(), A)["quote_term_months"] == 12  # no horizon: the usual year
    assert money_facts(top, _brief(), _Assumptions(reserve_term_months_default=24))["quote_term_months"] == 24


def test_unpriced_and_unnamed_tiers_read_unspecified():
    top = Sizing(gpu=_gpu(), count=1)
    got = money_facts(top, _brief(hours=730), A)
    assert (got["top_tier"], got["top_month_usd"], got["top_on_demand_month_usd"]) == (UNSPECIFIED, 0.0, 0.0)


def _buyer(month: float, running: float, usd: float = 25_000.0, count: int = 4) -> Sizing:
    return Sizing(gpu=_gpu(), count=count, usd_per_month=month, running_usd_per_busy_hour=running,
                  purchase=Price("purchase", usd, "2026-01-01", "s"), price_tier="ON_DEMAND")


def test_buying_pays_back_in_the_months_its_rent_less_its_running_costs_take():
    # 4 GPUs x $25,000 = $100,000; rent $8,000 a month less running $2/busy hour x 500 h = $7,000 saved a
    # month: 100,000 / 7,000 = 14.2857 -> 14.29 months.
    got = money_facts(_buyer(8000.0, 2.0), _brief(hours=500), A)
    assert got["buy_break_even_months"] == 14.29
    # running as dear as the rent: nothing saved, never pays back; a month of $0.50 rent still does (slowly):
    # 100,000 / 0.5 = 200,000 months
    assert money_facts(_buyer(1000.0, 2.0), _brief(hours=500), A)["buy_break_even_months"] == -1.0
    assert money_facts(_buyer(1200.0, 2.0), _brief(hours=500), A)["buy_break_even_months"] == 500.0
    assert money_facts(_buyer(0.5, 0.0), _brief(hours=500), A)["buy_break_even_months"] == 200_000.0


def test_no_purchase_price_no_rent_or_a_price_that_is_not_a_number_never_pays_back():
    brief = _brief(hours=500)
    assert money_facts(replace(_buyer(8000.0, 2.0), purchase=None), brief, A)["buy_break_even_months"] == -1.0
    assert money_facts(_buyer(0.0, 0.0), brief, A)["buy_break_even_months"] == -1.0
    assert money_facts(_buyer(8000.0, 0.0, usd=math.inf), brief, A)["buy_break_even_months"] == -1.0


# -- month: the brief's month and the cost per unit --------------------------------------------------------


def test_a_batch_volume_is_the_rate_that_finishes_it_in_its_window():
    # 360,000 requests over a 100 h window: 360,000 / (100 x 3,600) = 1 request/s; over the brief's 200 h:
    # 0.5/s; with neither, over the rules' 730 h: 360,000 / 2,628,000 = 0.13699/s.
    assert with_volume_rate(_brief(requests_per_month=360_000, window_hours=100), A).traffic.requests_per_second \
        == pytest.approx(1.0)
    assert with_volume_rate(_brief(hours=200, requests_per_month=360_000), A).traffic.requests_per_second \
        == pytest.approx(0.5)
    assert with_volume_rate(_brief(requests_per_month=360_000), A).traffic.requests_per_second \
        == pytest.approx(360_000 / (730 * 3600))
    rated = with_volume_rate(_brief(requests_per_month=360_000, window_hours=100, avg_input_tokens=700), A)
    assert rated.traffic.avg_input_tokens == 700 and rated.traffic.requests_per_month == 360_000


def test_a_volume_of_one_request_is_a_volume():
    # 1 request over a 100 h window: 1 / 360,000 requests/s
    got = with_volume_rate(_brief(requests_per_month=1, window_hours=100), A)
    assert got.traffic.requests_per_second == pytest.approx(1 / 360_000)


def test_a_stated_rate_no_volume_or_training_is_left_as_it_is():
    for brief in (_brief(requests_per_second=2.0, requests_per_month=360_000),
                  _brief(requests_per_second=0.5, requests_per_month=360_000),  # a rate under 1/s is a rate
                  _brief(requests_per_month=0.0),
                  replace(_brief(requests_per_month=360_000), workload="FULL_FINETUNE")):
        assert with_volume_rate(brief, A) is brief


def test_a_fixed_load_is_a_stated_rate_that_is_not_training():
    assert fixed_load(_brief(requests_per_second=0.1))
    assert not fixed_load(_brief())
    assert not fixed_load(replace(_brief(requests_per_second=1.0), workload="PRETRAINING"))


def test_each_sizing_is_costed_on_the_brief_month_of_its_price():
    # 500 h a month: $4/h on demand = $2,000; $3/h on a term bills 730 h = $2,190; a quote is costed the
    # same way even when an offer also places it; a placed sizing keeps its placement's month.
    brief = _brief(hours=500)
    hourly = Sizing(gpu=_gpu("a"), usd_per_hour=4.0, price_tier="ON_DEMAND")
    term = Sizing(gpu=_gpu("b"), usd_per_hour=3.0, price_tier="RESERVED")
    placed = Sizing(gpu=_gpu("c"), usd_per_hour=5.0, price_tier="ON_DEMAND", placement=_placed("on_demand", 1234.0),
                    usd_per_month=1234.0)
    quoted = replace(placed, quote=Quote("c", 5.0))
    cost_months([hourly, term, placed, quoted], brief, A)
    assert [s.usd_per_month for s in (hourly, term, placed, quoted)] == [2000.0, 2190.0, 1234.0, 2500.0]
    assert not any(s.fixed_demand for s in (hourly, term, placed, quoted))


def test_without_a_fixed_load_each_unit_is_what_that_configuration_gets_through():
    # 500 h: $2,000 a month / 500 h = $4/h over 1,000 units an hour at 80% accepted: $0.005 per accepted unit;
    # the other, $2/h over 100 units (acceptance 80%): $0.025.
    brief = replace(_brief(hours=500), economics=Economics(hours_per_month=500, acceptance_rate=0.8))
    a = Sizing(gpu=_gpu("a"), usd_per_hour=4.0, price_tier="ON_DEMAND", units_per_hour=1000.0, fits=True)
    b = Sizing(gpu=_gpu("b"), usd_per_hour=2.0, price_tier="ON_DEMAND", units_per_hour=100.0, fits=True)
    cost_months([a, b], brief, A)
    assert (a.units_per_hour, b.units_per_hour) == (1000.0, 100.0)
    assert a.usd_per_unit == pytest.approx(0.005) and b.usd_per_unit == pytest.approx(0.025)


def test_a_fixed_load_costs_every_candidate_on_the_same_demand():
    # 2 requests/s offered; the sizings say what each serves: 7,200/h (a faster GPU's 9,000 is headroom) and
    # 7,199.9 (a rounding short): the demand is the least, 7,199.9, for both. A configuration that does not fit
    # sets no demand; one with no units keeps none and gets no unit cost.
    brief = _brief(hours=500, requests_per_second=2.0)
    fast = Sizing(gpu=_gpu("fast"), usd_per_hour=6.0, price_tier="ON_DEMAND", units_per_hour=9000.0, fits=True)
    slow = Sizing(gpu=_gpu("slow"), usd_per_hour=3.0, price_tier="ON_DEMAND", units_per_hour=7199.9, fits=True)
    unfit = Sizing(gpu=_gpu("unfit"), usd_per_hour=1.0, price_tier="ON_DEMAND", units_per_hour=10.0, fits=False)
    none = Sizing(gpu=_gpu("none"), usd_per_hour=1.0, price_tier="ON_DEMAND", units_per_hour=0.0, fits=True)
    cost_months([fast, slow, unfit, none], brief, A)
    assert all(s.fixed_demand for s in (fast, slow, unfit, none))
    assert [s.units_per_hour for s in (fast, slow, unfit, none)] == [7199.9, 7199.9, 7199.9, 0.0]
    # $3,000 a month / 500 h = $6/h over 7,199.9 units; $3/h over the same: half the cost per unit
    assert fast.usd_per_unit == pytest.approx(6.0 / 7199.9) and slow.usd_per_unit == pytest.approx(3.0 / 7199.9)
    assert none.usd_per_unit == 0.0


def test_a_fixed_load_of_less_than_one_unit_an_hour_is_still_the_demand():
    # A slow batch: the fitting configurations serve 0.5 and 2 units an hour; the demand is 0.5 for every one
    # with units, the one that does not fit (0.8) included. $0.001/h x 500 h = $0.50 a month: a month too.
    brief = _brief(hours=500, requests_per_second=0.0001)
    a = Sizing(gpu=_gpu("a"), usd_per_hour=0.001, price_tier="ON_DEMAND", units_per_hour=0.5, fits=True)
    b = Sizing(gpu=_gpu("b"), usd_per_hour=1.0, price_tier="ON_DEMAND", units_per_hour=2.0, fits=True)
    c = Sizing(gpu=_gpu("c"), usd_per_hour=1.0, price_tier="ON_DEMAND", units_per_hour=0.8, fits=False)
    cost_months([a, b, c], brief, A)
    assert [s.units_per_hour for s in (a, b, c)] == [0.5, 0.5, 0.5]
    assert a.usd_per_month == pytest.approx(0.5) and a.usd_per_unit == pytest.approx(0.001 / 0.5)


def test_a_fixed_load_no_configuration_can_serve_costs_no_unit():
    # Nothing fits: there is no demand any configuration serves, so no units and no cost per unit (not a
    # division by a missing demand).
    brief = _brief(hours=500, requests_per_second=2.0)
    s = Sizing(gpu=_gpu(), usd_per_hour=2.0, price_tier="ON_DEMAND", units_per_hour=7200.0, fits=False)
    cost_months([s], brief, A)
    assert (s.units_per_hour, s.usd_per_unit, s.fixed_demand) == (0.0, 0.0, True)


def test_an_unpriced_configuration_has_no_unit_cost():
    s = Sizing(gpu=_gpu(), usd_per_hour=0.0, units_per_hour=100.0, fits=True)
    cost_months([s], _brief(hours=500), A)
    assert (s.usd_per_month, s.usd_per_unit) == (0.0, 0.0)


@settings(max_examples=60, deadline=None)
@given(offered=st.floats(0.01, 50.0), served=st.lists(st.floats(1.0, 1e6), min_size=2, max_size=5),
       prices=st.lists(st.floats(0.5, 100.0), min_size=5, max_size=5))
def test_under_a_fixed_load_a_cheaper_month_is_never_a_dearer_unit(offered: float, served: list[float],
                                                                   prices: list[float]) -> None:
    """Every candidate serves the same demand, so the cost per unit orders exactly as the month does."""
    sizings = [Sizing(gpu=_gpu(f"g{i}"), usd_per_hour=p, price_tier="ON_DEMAND", units_per_hour=u, fits=True)
               for i, (u, p) in enumerate(zip(served, prices, strict=False))]
    cost_months(sizings, _brief(hours=300, requests_per_second=offered), A)
    assert len({s.units_per_hour for s in sizings}) == 1
    for x in sizings:
        for y in sizings:
            if x.usd_per_month < y.usd_per_month:
                assert x.usd_per_unit < y.usd_per_unit
