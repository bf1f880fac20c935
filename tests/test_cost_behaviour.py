"""The renting formulas (money/cost.py) at their edges (issue 42): every bad argument is refused by name with a
ValueError (never a ZeroDivisionError, a TypeError or a silently wrong price), the boundary values that are
allowed are priced, and each formula is worked by hand at a value where a wrong constant would show."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.money import cost

BAD = (-0.01, math.nan, None)


@pytest.mark.parametrize("bad", BAD)
def test_a_negative_or_missing_amount_is_refused_by_name(bad: float | None):
    def refused(name: str) -> str:
        return rf"^{name} must be a non-negative number, got {re.escape(repr(bad))}$"

    with pytest.raises(ValueError, match=refused("usd_per_hour")):
        cost.usd_per_tflop_hour(bad, 989)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=refused("usd_per_hour")):
        cost.usd_per_accepted_unit(bad, 100, 0.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=refused("acceptance_rate")):
        cost.usd_per_accepted_unit(10, 100, bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=refused("usd_per_hour")):
        cost.usd_per_million_tokens(bad, 100)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=refused("usd_per_hour")):
        cost.month_usd(bad, 100, False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=refused("hours_per_month")):
        cost.month_usd(2.0, bad, True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=refused("hours_per_month")):
        cost.term_discount_needed(bad)  # type: ignore[arg-type]


def test_zero_is_an_amount_not_a_refusal():
    # $0/h (a free tier) and 0 hours are amounts: each formula prices them at $0 (or needs the whole term off)
    assert cost.usd_per_tflop_hour(0.0, 989) == 0.0
    assert cost.usd_per_accepted_unit(0.0, 100, 0.0) == 0.0
    assert cost.usd_per_million_tokens(0.0, 100) == 0.0
    assert cost.month_usd(0.0, 0.0, False) == 0.0
    assert cost.term_discount_needed(0.0) == 1.0
    # a fraction of a dollar and of an hour is not refused either (a bound of 1 in place of 0 would be)
    assert cost.month_usd(0.5, 0.5, False) == 0.25
    assert cost.usd_per_tflop_hour(0.5, 0.5) == 1.0


@pytest.mark.parametrize("rate", [0.0, -1.0])
def test_no_throughput_is_refused_by_name_not_divided_by(rate: float):
    with pytest.raises(ValueError, match=r"^tflops must be positive$"):
        cost.usd_per_tflop_hour(3.15, rate)
    with pytest.raises(ValueError, match=r"^units_per_hour must be positive$"):
        cost.usd_per_accepted_unit(3.15, rate, 0.5)
    with pytest.raises(ValueError, match=r"^tokens_per_second must be positive$"):
        cost.usd_per_million_tokens(3.15, rate)


def test_a_throughput_below_one_is_still_a_throughput():
    # 0.5 TFLOPS at $1/h: $2 per TFLOP-hour; 0.5 units an hour: $2 a unit; 0.5 tokens/s = 1,800 an hour:
    # $1 / 1,800 x 1e6 = $555.56 per million.
    assert cost.usd_per_tflop_hour(1.0, 0.5) == 2.0
    assert cost.usd_per_accepted_unit(1.0, 0.5, 1.0) == 2.0
    assert cost.usd_per_million_tokens(1.0, 0.5) == pytest.approx(1e6 / 1800)


def test_acceptance_is_a_fraction():
    # all accepted (1.0) is allowed and is the same as not given (0); 1.5 and 2.5 are refused by name
    assert cost.usd_per_accepted_unit(10, 100, 1.0) == cost.usd_per_accepted_unit(10, 100, 0.0) == 0.1
    for bad in (1.5, 2.5):
        with pytest.raises(ValueError, match=r"^acceptance_rate is a fraction in 0\.\.1$"):
            cost.usd_per_accepted_unit(10, 100, bad)


def test_a_million_tokens_is_exactly_a_million():
    # $3.6/h at 1 token/s = 3,600 tokens an hour: $0.001 a token, $1,000 per million
    assert cost.usd_per_million_tokens(3.6, 1.0) == pytest.approx(1000.0, rel=1e-12)


def test_a_month_bills_the_hours_used_or_the_whole_term():
    # $2/h: 300 h on demand = $600; a term bills 730 h whatever the use = $1,460
    assert cost.month_usd(2.0, 300.0, False) == 600.0
    assert cost.month_usd(2.0, 300.0, True) == 1460.0
    assert cost.TERM_HOURS_PER_MONTH == 730.0


@given(hours=st.floats(0, 2000))
def test_the_discount_a_term_needs_makes_it_cost_what_the_hours_do(hours: float):
    """At the discount needed, a term's month (730 h at the discounted rate) is the on-demand month of the hours
    used; past 730 h any discount pays (0); and it is a share, 0..1."""
    needed = cost.term_discount_needed(hours)
    assert 0.0 <= needed <= 1.0
    if hours <= 730:
        assert cost.month_usd(1.0 - needed, hours, True) == pytest.approx(cost.month_usd(1.0, hours, False))
    else:
        assert needed == 0.0


def test_the_discount_needed_worked_by_hand():
    # 450 h: 1 - 450/730 = 0.38356; 73 h: 0.9; 730 h and more: 0
    assert cost.term_discount_needed(450) == pytest.approx(0.383562, abs=1e-6)
    assert cost.term_discount_needed(73) == pytest.approx(0.9)
    assert cost.term_discount_needed(730) == 0.0 and cost.term_discount_needed(1000) == 0.0

