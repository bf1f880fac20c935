"""Owning against renting (money/ownership.py), every term and limit from first principles (issue 42): the
seed's H100 example in test_formulas.py passes zero maintenance and zero yearly costs, so those terms, the
730-hour month and the edges of each argument's range are held here."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.money import ownership as own


def test_power_is_kilowatts_times_busy_hours_times_price_times_pue():
    # 1,000 W x 8,760 h x 50% x $0.20/kWh x PUE 1.5 = $1,314 a year; PUE defaults to 1.
    assert own.annual_power_usd(1000, 0.5, 0.20, 1.5) == pytest.approx(1314.0, rel=1e-12)
    assert own.annual_power_usd(1000, 0.5, 0.20) == pytest.approx(876.0, rel=1e-12)


def test_running_cost_is_power_while_busy_plus_maintenance_over_the_busy_hours():
    # 700 W x $0.10/kWh x PUE 1.3 = $0.091 per busy hour; $876 maintenance a year over 8,760 x 25% = 2,190 busy
    # hours = $0.40 per busy hour.
    assert own.running_usd_per_busy_hour(700, 0.10, 1.3, 876.0, 0.25) == pytest.approx(0.091 + 0.40, rel=1e-12)
    assert own.running_usd_per_busy_hour(700, 0.10, 1.3, 0.0, 0.25) == pytest.approx(0.091, rel=1e-12)


def test_owned_cost_spreads_the_purchase_and_yearly_costs_over_the_busy_hours():
    # ($30,000 + 3 x $2,000) / (3 x 8,760 x 40%) = $36,000 / 10,512 = $3.4247 per busy hour, plus $0.50 running.
    got = own.owned_usd_per_hour(30_000, 3, 2_000, 0.5, 0.4)
    assert got == pytest.approx(36_000 / 10_512 + 0.5, rel=1e-12)
    assert own.owned_usd_per_hour(30_000, 1, 0.0, 0.0, 1.0) == pytest.approx(30_000 / 8760, rel=1e-12)


def test_break_even_is_the_purchase_over_the_hourly_margin_and_never_without_one():
    assert own.break_even_hours(10_000, 3.0, 1.0) == 5_000.0
    assert own.break_even_hours(10_000, 3.0, 0.0) == pytest.approx(10_000 / 3)
    assert math.isinf(own.break_even_hours(10_000, 2.0, 2.0))  # owning costs as much per hour: never
    assert math.isinf(own.break_even_hours(10_000, 2.0, 2.5))
    assert own.break_even_hours(0.0, 2.0, 1.0) == 0.0  # nothing to pay back


def test_break_even_months_are_busy_hours_over_730_hours_times_utilization():
    assert own.break_even_months(7_300, 1.0) == 10.0
    assert own.break_even_months(7_300, 0.5) == 20.0
    assert own.break_even_months(7_300, 1.0, hours_per_month=365) == 20.0


@pytest.mark.parametrize(("call", "name"), [
    (lambda: own.annual_power_usd(-1, 0.5, 0.1), "tdp_w"),
    (lambda: own.annual_power_usd(700, 0.5, -0.1), "usd_per_kwh"),
    (lambda: own.annual_power_usd(700, 0.5, 0.1, -1), "pue"),
    (lambda: own.annual_power_usd(700, 0.5, math.nan), "usd_per_kwh"),
    (lambda: own.running_usd_per_busy_hour(-700, 0.1, 1.0, 0, 0.5), "tdp_w"),
    (lambda: own.running_usd_per_busy_hour(700, -0.1, 1.0, 0, 0.5), "usd_per_kwh"),
    (lambda: own.running_usd_per_busy_hour(700, 0.1, -1.0, 0, 0.5), "pue"),
    (lambda: own.running_usd_per_busy_hour(700, 0.1, 1.0, -5, 0.5), "maintenance_usd_per_year"),
    (lambda: own.owned_usd_per_hour(-1, 3, 0, 0, 0.5), "purchase_usd"),
    (lambda: own.owned_usd_per_hour(1, 3, -1, 0, 0.5), "annual_fixed_usd"),
    (lambda: own.owned_usd_per_hour(1, 3, 0, -1, 0.5), "running_usd_per_busy_hour"),
    (lambda: own.break_even_hours(-1, 2, 0), "purchase_usd"),
    (lambda: own.break_even_hours(1, -2, 0), "rent_usd_per_hour"),
    (lambda: own.break_even_hours(1, 2, -1), "running_usd_per_busy_hour"),
])
def test_a_negative_or_missing_figure_is_refused_by_name(call, name):  # noqa: ANN001
    with pytest.raises(ValueError, match=rf"^{name} must be a non-negative number, got "):
        call()


@pytest.mark.parametrize("utilization", [0.0, -0.1, 1.01, math.nan, None])
def test_utilization_outside_zero_to_one_is_refused(utilization):  # noqa: ANN001
    for call in (lambda: own.annual_power_usd(700, utilization, 0.1),
                 lambda: own.running_usd_per_busy_hour(700, 0.1, 1.0, 0.0, utilization),
                 lambda: own.owned_usd_per_hour(1, 3, 0, 0, utilization),
                 lambda: own.break_even_months(100, utilization)):
        with pytest.raises(ValueError, match=r"^utilization must be in \(0, 1\], got "):
            call()


def test_the_edges_that_are_allowed_are_allowed():
    assert own.annual_power_usd(0, 1.0, 0.0, 0.0) == 0.0  # zeros and a fully busy GPU are figures, not errors
    assert own.break_even_months(0.0, 1.0) == 0.0
    assert own.break_even_months(100, 1.0, hours_per_month=0.5) == 200.0  # any positive month length
    with pytest.raises(ValueError, match="^years must be positive$"):
        own.owned_usd_per_hour(1, 0, 0, 0, 0.5)
    with pytest.raises(ValueError, match="^hours_per_month must be positive$"):
        own.break_even_months(1, 0.5, hours_per_month=0)


@settings(max_examples=200, deadline=None)
@given(purchase=st.floats(1, 1e6), rent=st.floats(0.01, 100), running=st.floats(0, 100),
       utilization=st.floats(0.01, 1.0))
def test_at_break_even_renting_and_owning_have_cost_the_same(purchase, rent, running, utilization):
    hours = own.break_even_hours(purchase, rent, running)
    if math.isinf(hours):
        assert rent <= running
        return
    assert rent * hours == pytest.approx(purchase + running * hours, rel=1e-9)
    assert own.break_even_months(hours, utilization) == pytest.approx(hours / (730 * utilization), rel=1e-12)
