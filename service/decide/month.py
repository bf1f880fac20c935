"""The brief's month: what each candidate costs for it, and the cost per unit the ranking reads from it.

Every candidate is priced on its cheapest placement over the tiers the brief allows (decide/placement.py), each
costed as the month the brief would pay: an hourly tier at the hours it is used (`placement.month_hours`), a
reserved term at 730 h (it bills every hour). The cost per accepted unit is that month over the month's units.

A fixed load (an offered requests/s, or a batch's volume over its window) is the same demand whichever GPU
serves it: each candidate's units are that demand, not what it could serve at saturation (a faster GPU's spare
capacity is headroom, not cheaper units), so its cost per unit is its month over the brief's demand. With
sessions alone (no rate), the units are what the brief's sessions get through on each configuration; a backlog
of scale-out work with no volume, what one copy gets through at the expected utilization.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..domain.brief import TRAINING_WORKLOADS, Brief
from ..domain.frozen import build
from ..money import cost as money
from .placement import month_hours
from .sizing.common import Sizing


def with_volume_rate(brief: Brief, a: Any) -> Brief:  # noqa: ANN401 - Assumptions
    """A batch's volume as the rate it must be served at: requests_per_month over its window (else the brief's
    hours a month, else the rules' full month), so the copies sized are those that finish it in time. A brief
    with an offered rate, or no volume, is returned as it is."""
    t = brief.traffic
    if brief.workload in TRAINING_WORKLOADS or t.requests_per_second > 0 or t.requests_per_month <= 0:
        return brief
    rate = t.requests_per_month / (month_hours(brief, a) * 3600)
    traffic = build(type(t), **{**t.__dict__, "requests_per_second": rate})
    return replace(brief, traffic=traffic)


def fixed_load(brief: Brief) -> bool:
    """Serving a demand the brief states as a rate (requests/s, or a volume over its window): not training."""
    return brief.workload not in TRAINING_WORKLOADS and brief.traffic.requests_per_second > 0


def cost_months(sizings: list[Sizing], brief: Brief, a: Any) -> None:  # noqa: ANN401 - Assumptions
    """Each sizing's month (its placement's, else its price for the month) and its cost per accepted unit over
    that month: a fixed load's units are the brief's demand, the same for every candidate."""
    hours = month_hours(brief, a)
    for s in sizings:
        if s.placement is None or s.quote is not None:
            s.usd_per_month = money.month_usd(s.usd_per_hour, hours, s.price_tier == "RESERVED")
    if fixed_load(brief):
        for s in sizings:
            s.fixed_demand = True
        # Sized for the rate, every configuration serves it: its units are the rate's (min(offered, capacity)
        # in sizing), the least any of them serves if one falls short by a rounding.
        demand = min((s.units_per_hour for s in sizings if s.fits and s.units_per_hour > 0), default=0.0)
        for s in sizings:
            if s.units_per_hour > 0:
                s.units_per_hour = demand
    acceptance = brief.economics.acceptance_rate
    for s in sizings:
        if s.units_per_hour > 0 and s.usd_per_month > 0:
            s.usd_per_unit = money.usd_per_accepted_unit(s.usd_per_month / hours, s.units_per_hour, acceptance)
