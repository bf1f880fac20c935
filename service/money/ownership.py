"""Owning: power, cost per delivered GPU-hour over the ownership years, and break-even against renting.

Seed 000's H100 example: $25,000 bought vs $3.15/h rented breaks even after 25,000 / 3.15 ≈ 7,937 busy hours:
about 11 months at 24/7 and 18 months at 60% utilization; power $0.07/h and cooling $0.02/h at $0.10/kWh.
"""

from __future__ import annotations

import math

HOURS_PER_YEAR = 8760.0


def _nonneg(**values: float) -> None:
    for name, v in values.items():
        if v is None or math.isnan(v) or v < 0:
            raise ValueError(f"{name} must be a non-negative number, got {v!r}")


def _fraction(name: str, v: float) -> None:
    if v is None or math.isnan(v) or not 0 < v <= 1:
        raise ValueError(f"{name} must be in (0, 1], got {v!r}")


def annual_power_usd(tdp_w: float, utilization: float, usd_per_kwh: float, pue: float = 1.0) -> float:
    """kW × 8,760 h × utilization × $/kWh × PUE (seed 000: 700 W at 60% and $0.10 → ≈ $368/year, PUE 1)."""
    _nonneg(tdp_w=tdp_w, usd_per_kwh=usd_per_kwh, pue=pue)
    _fraction("utilization", utilization)
    return tdp_w / 1000 * HOURS_PER_YEAR * utilization * usd_per_kwh * pue


def running_usd_per_busy_hour(
    tdp_w: float, usd_per_kwh: float, pue: float, maintenance_usd_per_year: float, utilization: float
) -> float:
    """Power and cooling while busy, plus the year's maintenance spread over the busy hours."""
    _nonneg(tdp_w=tdp_w, usd_per_kwh=usd_per_kwh, pue=pue, maintenance_usd_per_year=maintenance_usd_per_year)
    _fraction("utilization", utilization)
    return tdp_w / 1000 * usd_per_kwh * pue + maintenance_usd_per_year / (HOURS_PER_YEAR * utilization)


def owned_usd_per_hour(
    purchase_usd: float, years: float, annual_fixed_usd: float, running_usd_per_busy_hour: float, utilization: float
) -> float:
    """Cost per delivered (busy) GPU-hour: (purchase + years × fixed yearly costs) / (years × 8,760 ×
    utilization) + running cost per busy hour. Idle time raises it: at 50% the purchase costs twice per hour."""
    _nonneg(purchase_usd=purchase_usd, annual_fixed_usd=annual_fixed_usd,
            running_usd_per_busy_hour=running_usd_per_busy_hour)
    _fraction("utilization", utilization)
    if years <= 0:
        raise ValueError("years must be positive")
    fixed = (purchase_usd + years * annual_fixed_usd) / (years * HOURS_PER_YEAR * utilization)
    return fixed + running_usd_per_busy_hour


def break_even_hours(purchase_usd: float, rent_usd_per_hour: float, running_usd_per_busy_hour: float) -> float:
    """Busy hours after which buying beats renting: purchase / (rent − running). Never (inf) when owning costs
    as much per hour as renting."""
    _nonneg(purchase_usd=purchase_usd, rent_usd_per_hour=rent_usd_per_hour,
            running_usd_per_busy_hour=running_usd_per_busy_hour)
    margin = rent_usd_per_hour - running_usd_per_busy_hour
    return math.inf if margin <= 0 else purchase_usd / margin


def break_even_months(break_even_hours: float, utilization: float, hours_per_month: float = 730.0) -> float:
    """Calendar months to accumulate those busy hours: hours / (730 × utilization)."""
    _fraction("utilization", utilization)
    if hours_per_month <= 0:
        raise ValueError("hours_per_month must be positive")
    return break_even_hours / (hours_per_month * utilization)
