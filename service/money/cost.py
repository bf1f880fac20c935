"""Renting: price per TFLOP-hour, per accepted unit, per million tokens, per month."""

from __future__ import annotations

import math


def _nonneg(**values: float) -> None:
    for name, v in values.items():
        if v is None or math.isnan(v) or v < 0:
            raise ValueError(f"{name} must be a non-negative number, got {v!r}")


def usd_per_tflop_hour(usd_per_hour: float, tflops: float) -> float:
    """$/h ÷ dense TFLOPS (seed 000: H100 $3.15 / ~1,000 ≈ $0.0032)."""
    _nonneg(usd_per_hour=usd_per_hour)
    if tflops <= 0:
        raise ValueError("tflops must be positive")
    return usd_per_hour / tflops


def usd_per_accepted_unit(usd_per_hour: float, units_per_hour: float, acceptance_rate: float) -> float:
    """All-in hourly cost ÷ accepted outputs per hour (seed 003: effective unit cost). An acceptance rate of 0
    means "not given" and counts every output as accepted; callers warn about it."""
    _nonneg(usd_per_hour=usd_per_hour, acceptance_rate=acceptance_rate)
    if units_per_hour <= 0:
        raise ValueError("units_per_hour must be positive")
    if acceptance_rate > 1:
        raise ValueError("acceptance_rate is a fraction in 0..1")
    accepted = units_per_hour * (acceptance_rate if acceptance_rate > 0 else 1.0)
    return usd_per_hour / accepted


def usd_per_million_tokens(usd_per_hour: float, tokens_per_second: float) -> float:
    """$/h ÷ (tokens/s × 3600) × 1e6 (NVIDIA's TCO method, inference-perf #139)."""
    _nonneg(usd_per_hour=usd_per_hour)
    if tokens_per_second <= 0:
        raise ValueError("tokens_per_second must be positive")
    return usd_per_hour / (tokens_per_second * 3600) * 1e6


TERM_HOURS_PER_MONTH = 730.0  # a reserved term bills every hour of the month, used or not (8,760 h / 12)


def month_usd(usd_per_hour: float, hours_per_month: float, term: bool) -> float:
    """What a month costs on one price: an hourly tier bills the hours used, a reserved term every hour."""
    _nonneg(usd_per_hour=usd_per_hour, hours_per_month=hours_per_month)
    return usd_per_hour * (TERM_HOURS_PER_MONTH if term else hours_per_month)


def term_discount_needed(hours_per_month: float) -> float:
    """The share off the on-demand rate at which a term (billing 730 h) costs no more than renting the hours
    used: 1 - hours / 730 (450 h a month: 38%); 0 at 730 h or more, where any discount pays."""
    _nonneg(hours_per_month=hours_per_month)
    return max(0.0, 1.0 - hours_per_month / TERM_HOURS_PER_MONTH)
