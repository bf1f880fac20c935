"""A hosted model API's cost on a brief's own token mix, and where self-hosting starts to pay against it.

APIs bill per token: input, output, and input read from the provider's prompt cache, each at its own price per
million tokens. A rejected output was still billed for its input and its output, so the acceptance rate divides
the whole request's cost (both sides), exactly as it divides a GPU's hourly cost per accepted unit.
"""

from __future__ import annotations

import math


def _check(**values: float) -> None:
    for name, v in values.items():
        if v is None or math.isnan(v) or v < 0:
            raise ValueError(f"{name} must be a non-negative number, got {v!r}")


def usd_per_request(input_tokens: float, output_tokens: float, cached_input_share: float, usd_per_m_input: float,
                    usd_per_m_output: float, usd_per_m_cached_input: float) -> float:
    """One request's bill: uncached input + cached input + output, each at its price per 1M tokens. A cached
    price of 0 means the provider lists none: cached input is billed as input."""
    _check(input_tokens=input_tokens, output_tokens=output_tokens, usd_per_m_input=usd_per_m_input,
           usd_per_m_output=usd_per_m_output, usd_per_m_cached_input=usd_per_m_cached_input)
    if not 0 <= cached_input_share <= 1:
        raise ValueError("cached_input_share is a fraction in 0..1")
    cached_price = usd_per_m_cached_input if usd_per_m_cached_input > 0 else usd_per_m_input
    cached = input_tokens * cached_input_share
    return ((input_tokens - cached) * usd_per_m_input + cached * cached_price + output_tokens * usd_per_m_output) / 1e6


def usd_per_accepted_unit(usd_per_request_: float, units_per_request: float, acceptance_rate: float) -> float:
    """A request's bill ÷ the accepted units it yields (units per request × acceptance; 0 = not given = all)."""
    _check(usd_per_request=usd_per_request_, acceptance_rate=acceptance_rate)
    if units_per_request <= 0:
        raise ValueError("units_per_request must be positive")
    if acceptance_rate > 1:
        raise ValueError("acceptance_rate is a fraction in 0..1")
    return usd_per_request_ / (units_per_request * (acceptance_rate if acceptance_rate > 0 else 1.0))


def saving_pct(api_usd_per_unit: float, self_usd_per_unit: float) -> float:
    """How much less the API costs per accepted unit than self-hosting, in percent (negative: the API costs more)."""
    if self_usd_per_unit <= 0:
        raise ValueError("self_usd_per_unit must be positive")
    return (self_usd_per_unit - api_usd_per_unit) / self_usd_per_unit * 100


def break_even_units_per_month(self_usd_per_month: float, api_usd_per_unit: float,
                               self_capacity_units_per_month: float) -> float:
    """The monthly load (accepted units) above which self-hosting costs less than the API: the fixed monthly cost
    of the configuration ÷ the API's price per unit. -1 when the configuration cannot carry that load even fully
    busy (more copies of it carry more load at the same cost per unit, so self-hosting it never pays)."""
    _check(self_usd_per_month=self_usd_per_month, self_capacity_units_per_month=self_capacity_units_per_month)
    if api_usd_per_unit <= 0:
        raise ValueError("api_usd_per_unit must be positive")
    units = self_usd_per_month / api_usd_per_unit
    return units if units <= self_capacity_units_per_month else -1.0
