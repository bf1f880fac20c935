"""Charts as data (RecommendRequest.include_charts): pictures of figures the finished answer already gives.

Read from the final Advice (its candidates, their ownership figures and placements) and the brief, never from
the ranking's working state, so a chart cannot disagree with the table beside it:

- Break-even: cumulative cost by month for the top candidate, rented (the break-even's own rent, and each tier
  and reserved term its placements price) and bought (purchase, then power, cooling and maintenance per busy
  hour). Every line is costed on the same busy hours a month the break-even counts (730 h x utilization), so
  the "buy" line crosses the break-even's rent at exactly `ownership.break_even_months`, which is marked.
- Cost/latency: each candidate's cost per accepted unit against its p95 latency (training days for a run),
  placed and unplaced apart, the top pick on its own, the brief's target marked.

The break-even's rent is not printed on its own in the answer; it is recovered from the figures that are:
owned $/h = purchase / (years x 8,760 x utilization) + running, and break-even hours = purchase / (rent -
running) (money/ownership.py), so running and rent follow from `owned_usd_per_hour` and `break_even_hours`.
"""

from __future__ import annotations

import math

from ..domain.advice import Advice, Candidate, Chart, ChartMark, ChartSeries
from ..money.ownership import HOURS_PER_YEAR
from .run import Run

MAX_MONTHS = 120  # a break-even past the horizon is still drawn, up to ten years
RENT_TIERS = ("ON_DEMAND", "RESERVED")  # spot capacity can be taken away: not a line to own against
SAME_RATE = 0.005  # a placement within 0.5% of the break-even's rent is that line, not another


def charts_of(advice: Advice, run: Run) -> tuple[Chart, ...]:
    """The answer's charts; a chart with nothing to draw (no candidate, no purchase price, no latency) is left
    out rather than drawn empty."""
    found = (break_even(advice, run), cost_latency(advice, run))
    return tuple(c for c in found if c is not None)


def _tier_name(run: Run, tier: str, term_months: int = 0) -> str:
    name = run.name(f"tier.{tier}")
    return run.text("summary.tier_term", {"tier": name, "months": term_months}) if term_months > 0 else name


def _busy_hours(run: Run) -> tuple[float, float, float]:
    """(busy hours a month, utilization, hours a month) as the break-even counts them (sizing/common.py)."""
    a = run.book.assumptions
    util = run.req.brief.economics.utilization or a.num("default_utilization")
    hpm = a.num("hours_per_month")
    return hpm * util, util, hpm


def running_and_rent(c: Candidate, years: float, util: float) -> tuple[float, float]:
    """Power, cooling and maintenance per busy hour, and the rent the break-even weighed buying against ($/h,
    whole configuration), from the candidate's printed ownership figures (0 rent when it never breaks even)."""
    own = c.ownership
    running = max(0.0, own.owned_usd_per_hour - own.purchase_usd / (years * HOURS_PER_YEAR * util))
    rent = running + own.purchase_usd / own.break_even_hours if own.break_even_hours > 0 else 0.0
    return running, rent


def _rent_lines(c: Candidate, compared: str, reference: float) -> list[tuple[str, int, float, bool]]:
    """(tier, term months, $/h, is the break-even's rent): the break-even's rent first, then the cheapest
    placement per tier and reserved term that is not that same rate."""
    lines: list[tuple[str, int, float, bool]] = []
    if reference > 0:  # the tier the candidate is priced in (a reserved term since issue 34), else the compared
        lines.append((c.cost.price_tier if c.cost.price_tier in RENT_TIERS else compared or "ON_DEMAND", 0,
                      reference, True))
    cheapest: dict[tuple[str, int], float] = {}
    for p in c.placements:
        tier = p.offer.tier.upper()
        if tier not in RENT_TIERS or p.usd_per_hour <= 0:
            continue
        key = (tier, p.offer.term_months if tier == "RESERVED" else 0)
        cheapest[key] = min(cheapest.get(key, math.inf), p.usd_per_hour)
    for (tier, term), rate in sorted(cheapest.items(), key=lambda kv: (RENT_TIERS.index(kv[0][0]), kv[0][1])):
        if reference > 0 and tier == lines[0][0] and abs(rate - reference) <= SAME_RATE * reference:
            # The break-even's rent is this placement's: say its term on that line instead of drawing it twice.
            lines[0] = (tier, term, reference, True)
            continue
        lines.append((tier, term, rate, False))
    if not lines and c.cost.usd_per_hour > 0:
        lines.append((c.cost.price_tier if c.cost.price_tier in RENT_TIERS else "ON_DEMAND", 0,
                      c.cost.usd_per_hour, False))
    return lines


def api_series(advice: Advice, run: Run, months: list[float]) -> ChartSeries | None:
    """The model API's cumulative cost, when the answer prices one (RecommendResponse.api, for the same load)."""
    per_month = advice.api.usd_per_month if advice.api is not None else 0.0
    if per_month <= 0:
        return None
    return ChartSeries(run.text("chart.series.api", {"usd_per_month": per_month}),
                       tuple((m, round(per_month * m, 2)) for m in months))


def break_even(advice: Advice, run: Run) -> Chart | None:
    if not advice.candidates:
        return None
    top = advice.candidates[0]
    own = top.ownership
    if own.purchase_usd <= 0:
        return None
    a = run.book.assumptions
    busy, util, hpm = _busy_hours(run)
    running, reference = running_and_rent(top, a.num("ownership_years"), util)
    horizon = run.req.brief.economics.horizon_months or a.num("ownership_years") * 12
    last = horizon
    if own.break_even_months > horizon:
        last = min(max(horizon, MAX_MONTHS), math.ceil(own.break_even_months * 1.2))
    months = [float(m) for m in range(int(math.ceil(last)) + 1)]
    buy_name = run.text("chart.series.buy", {"purchase_usd": own.purchase_usd, "running_usd_per_hour": running})
    series = [ChartSeries(buy_name, tuple((m, round(own.purchase_usd + running * busy * m, 2)) for m in months))]
    marks: list[ChartMark] = []
    for tier, term, rate, is_reference in _rent_lines(top, advice.price_tier, reference):
        tier_name = _tier_name(run, tier, term)
        key = "chart.series.rent_reference" if is_reference else "chart.series.rent"
        series.append(ChartSeries(run.text(key, {"tier": tier_name, "usd_per_hour": rate}),
                                  tuple((m, round(rate * busy * m, 2)) for m in months)))
        # The reference line's crossing is the answer's own figure; another line's is where the same two
        # straight lines meet (purchase / ((rent - running) x busy hours)).
        crossing = own.break_even_months if is_reference else (
            own.purchase_usd / ((rate - running) * busy) if rate > running else math.inf)
        if 0 < crossing <= months[-1]:
            marks.append(ChartMark(round(crossing, 2), run.text("chart.mark.pays_back", {
                "months": crossing, "tier": tier_name, "usd_per_hour": rate})))
    api = api_series(advice, run, months)
    if api is not None:
        series.append(api)
    marks.append(ChartMark(float(horizon), run.text("chart.mark.horizon", {"months": horizon})))
    return Chart(
        kind="BREAK_EVEN",
        title=run.text("chart.break_even.title", {"months": months[-1], "count": top.count, "name": top.name}),
        x_label=run.text("chart.break_even.x", {"busy_hours": busy, "utilization": util, "hours_per_month": hpm}),
        y_label=run.name("chart.break_even.y"),
        series=tuple(series),
        marks=tuple(marks),
    )


def _x_of(c: Candidate, training: bool) -> float:
    perf = c.performance
    if perf is None:
        return 0.0
    return perf.training_days if training else perf.e2e_p95_ms


def cost_latency(advice: Advice, run: Run) -> Chart | None:
    if not advice.candidates:
        return None
    top = advice.candidates[0]
    training = bool(top.performance and top.performance.training_days > 0)
    drawn = [c for c in advice.candidates if _x_of(c, training) > 0 and c.cost.usd_per_unit > 0]
    if not drawn:
        return None
    unit = top.cost.unit

    def points(cs: list[Candidate]) -> tuple[tuple[float, float], ...]:
        return tuple((_x_of(c, training), c.cost.usd_per_unit) for c in cs)

    series = [
        ChartSeries(run.name("chart.series.placed"), points([c for c in drawn if c.placements])),
        ChartSeries(run.name("chart.series.unplaced"), points([c for c in drawn if not c.placements])),
    ]
    series.append(ChartSeries(run.text("chart.series.top", {"count": top.count, "name": top.name}),
                              points([top] if drawn[0] is top else [])))
    brief = run.req.brief
    marks: list[ChartMark] = []
    if training and brief.training.target_days > 0:
        marks.append(ChartMark(brief.training.target_days,
                               run.text("chart.mark.target_days", {"target_days": brief.training.target_days})))
    elif not training and brief.latency.p95_ms > 0:
        marks.append(ChartMark(float(brief.latency.p95_ms),
                               run.text("chart.mark.target_latency", {"p95_ms": brief.latency.p95_ms})))
    return Chart(
        kind="COST_LATENCY",
        title=run.text("chart.cost_latency.title_training" if training else "chart.cost_latency.title",
                       {"unit": unit, "count": len(drawn)}),
        x_label=run.name("chart.cost_latency.x_training" if training else "chart.cost_latency.x"),
        y_label=run.text("chart.cost_latency.y", {"unit": unit}),
        series=tuple(series),  # placed, unplaced, top pick: always this order (one may be empty), styled by place
        marks=tuple(marks),
    )
