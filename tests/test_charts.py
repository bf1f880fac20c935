"""Charts as data (RecommendRequest.include_charts, issue 43): off by default with the answer unchanged byte for
byte; when asked, the break-even chart crosses where the answer says buying pays back and the cost/latency chart
holds every candidate the table shows once, from the same figures."""

from __future__ import annotations

import math
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from google.protobuf.json_format import ParseDict
from ruamel.yaml import YAML

from service.decide.charts import running_and_rent
from service.wire.api import pb

REPO = Path(__file__).parents[1]
CASES = sorted((REPO / "tests" / "cases").glob("*.yaml"))
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


def _request(path: Path) -> pb.RecommendRequest:
    data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    body = data.get("request", data if "brief" in data else {"brief": data})
    return ParseDict(body, pb.RecommendRequest())


def _answer(stub: Any, request: pb.RecommendRequest, charts: bool, locale: str = "") -> pb.RecommendResponse | None:
    r = pb.RecommendRequest()
    r.CopyFrom(request)
    r.include_charts = charts
    if locale:
        r.locale = locale
    try:
        return stub.Recommend(r, timeout=60)
    except Exception as err:  # an invalid golden case: INVALID_ARGUMENT either way, nothing to chart
        code = err.code() if hasattr(err, "code") else None
        assert code is not None and code.name == "INVALID_ARGUMENT", err
        return None


def _chart(resp: pb.RecommendResponse, kind: int) -> pb.Chart | None:
    found = [c for c in resp.charts if c.kind == kind]
    assert len(found) <= 1
    return found[0] if found else None


def _at(series: pb.ChartSeries, x: float) -> float:
    """The series' value at x, on the straight segments between its points."""
    pts = [(p.x, p.y) for p in series.points]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:], strict=False):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    raise AssertionError(f"{x} outside {series.name}")


@pytest.mark.parametrize("path", CASES + EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_off_by_default_and_nothing_else_changes(stub, path: Path):
    """Without include_charts the answer has no charts; with it, the answer less its charts is the same bytes."""
    request = _request(path)
    plain = _answer(stub, request, charts=False)
    charted = _answer(stub, request, charts=True)
    if plain is None:
        assert charted is None
        return
    assert not plain.charts
    assert not request.include_charts and plain.SerializeToString() == _answer(stub, request, False).SerializeToString()
    rest = pb.RecommendResponse()
    rest.CopyFrom(charted)
    rest.ClearField("charts")
    assert rest.SerializeToString(deterministic=True) == plain.SerializeToString(deterministic=True)


CHARTED = [p for p in CASES + EXAMPLES if p.stem in {
    "buy-h100-break-even", "realtime-70b-fp8", "realtime-chat-8b", "offers2-reserve-route-reserved-prices",
    "pretrain-70b", "batch-inference-13b", "chinese-answer", "lora-7b"}]


@pytest.mark.parametrize("path", CASES + EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_break_even_crosses_where_the_answer_says(stub, path: Path):
    resp = _answer(stub, _request(path), charts=True)
    if resp is None or not resp.candidates:
        assert resp is None or not resp.charts  # refused, or nothing ranked: nothing to draw
        return
    top = resp.candidates[0]
    chart = _chart(resp, pb.CHART_KIND_BREAK_EVEN)
    if top.ownership.purchase_usd <= 0:
        assert chart is None  # nothing to buy: no buy line to cross
        return
    assert chart is not None and chart.title and chart.x_label and chart.y_label
    buy, reference = chart.series[0], chart.series[1]
    months = [p.x for p in buy.points]
    assert months == [float(m) for m in range(len(months))]  # month by month from 0
    assert buy.points[0].y == pytest.approx(top.ownership.purchase_usd)
    assert reference.points[0].y == 0
    be = top.ownership.break_even_months
    if 0 < be <= months[-1]:
        # The answer's break-even month is marked, and there the buy line meets the break-even's rent line.
        assert be in [m.x for m in chart.marks], (be, list(chart.marks))
        assert _at(buy, be) == pytest.approx(_at(reference, be), rel=2e-3)
        before, after = math.floor(be), math.ceil(be) if math.ceil(be) > be else be + 1
        assert _at(buy, before) > _at(reference, before)  # owning costs more before it pays back...
        assert _at(buy, min(after, months[-1])) <= _at(reference, min(after, months[-1])) * (1 + 1e-9)  # ...then less
    if 0 < be <= 100:  # drawn up to ten years: any break-even within about eight is on the chart
        assert months[-1] >= be
    horizon = _request(path).brief.economics.horizon_months
    if horizon:
        assert float(horizon) in [m.x for m in chart.marks]
        assert months[-1] >= horizon


@pytest.mark.parametrize("path", CHARTED, ids=lambda p: p.stem)
def test_recovered_rent_is_the_one_the_answer_prints(stub, path: Path):
    """The break-even's rent, recovered from owned $/h and break-even hours, is the rent its reason quotes."""
    resp = _answer(stub, _request(path), charts=True, locale="en")
    assert resp is not None
    top = resp.candidates[0]
    reason = next((r.text for r in top.reasons if r.rule_id == "ownership.break-even"), "")
    printed = re.search(r"rent \$([\d,.]+)/h", reason)
    if not printed or top.ownership.break_even_hours <= 0:
        return
    chart = _chart(resp, pb.CHART_KIND_BREAK_EVEN)
    assert chart is not None
    rate = float(printed.group(1).replace(",", ""))
    assert f"${rate:,.2f}/h" in chart.series[1].name
    busy = chart.series[1].points[1].y / rate  # the busy hours a month every line is costed on
    assert busy == pytest.approx(float(re.search(r"each ([\d,]+) busy", chart.x_label).group(1).replace(",", "")),
                                 abs=1.0)


def test_running_and_rent_invert_the_ownership_formulas():
    from service.money import ownership as own
    purchase, years, util, rent = 200_000.0, 3.0, 0.6, 23.6
    running = own.running_usd_per_busy_hour(5600, 0.1, 1.3, 0.05 * purchase, util)
    hours = own.break_even_hours(purchase, rent, running)
    c = SimpleNamespace(ownership=SimpleNamespace(
        purchase_usd=purchase, break_even_hours=hours,
        owned_usd_per_hour=own.owned_usd_per_hour(purchase, years, 0.0, running, util)))
    got_running, got_rent = running_and_rent(c, years, util)  # type: ignore[arg-type]
    assert got_running == pytest.approx(running) and got_rent == pytest.approx(rent)


@pytest.mark.parametrize("path", CHARTED, ids=lambda p: p.stem)
def test_cost_latency_holds_each_shown_candidate_once(stub, path: Path):
    request = _request(path)
    resp = _answer(stub, request, charts=True, locale="en")
    assert resp is not None
    chart = _chart(resp, pb.CHART_KIND_COST_LATENCY)
    top = resp.candidates[0]
    training = top.performance.training_days > 0

    def x_of(c: Any) -> float:
        return c.performance.training_days if training else c.performance.e2e_p95_ms

    drawn = [c for c in resp.candidates if x_of(c) > 0 and c.cost.usd_per_unit > 0]
    if not drawn:
        assert chart is None
        return
    assert chart is not None and len(chart.series) == 3  # placed, unplaced, top pick: clients style by place
    assert chart.series[0].name.startswith("an offer in scope") and chart.series[1].name.startswith("no offer")
    placed = [s for s in chart.series if s.name.startswith("an offer in scope")]
    unplaced = [s for s in chart.series if s.name.startswith("no offer in scope")]
    got = sorted((p.x, p.y) for s in placed + unplaced for p in s.points)
    assert got == sorted((x_of(c), c.cost.usd_per_unit) for c in drawn)
    assert sorted((p.x, p.y) for s in placed for p in s.points) == sorted(
        (x_of(c), c.cost.usd_per_unit) for c in drawn if c.placements)
    tops = [s for s in chart.series if s.name.startswith("top pick")]
    assert tops == [chart.series[2]]
    if drawn[0] == top:
        assert [(p.x, p.y) for p in tops[0].points] == [(x_of(top), top.cost.usd_per_unit)]
        assert top.name in tops[0].name
    else:
        assert not tops[0].points
    target = request.brief.training.target_days if training else request.brief.latency.p95_ms
    assert [m.x for m in chart.marks] == ([float(target)] if target else [])
    assert top.cost.unit in chart.y_label


def test_chinese_charts_are_in_chinese(stub):
    path = next(p for p in EXAMPLES if p.stem == "realtime-chat-8b")
    resp = _answer(stub, _request(path), charts=True, locale="zh-CN")
    assert resp is not None and len(resp.charts) == 2
    cjk = re.compile(r"[\u4e00-\u9fff]")
    for chart in resp.charts:
        texts = [chart.title, chart.x_label, chart.y_label, *(s.name for s in chart.series),
                 *(m.label for m in chart.marks)]
        assert all(cjk.search(t) for t in texts), texts


class _Text:
    def text(self, key: str, params: dict[str, Any]) -> str:
        return f"{key} {params}"


def test_the_break_even_chart_draws_the_model_api_the_answer_prices(stub):
    """An answer that prices a model API (RecommendResponse.api) draws it as a straight line of its monthly cost;
    one that prices none draws no API line."""
    priced = _answer(stub, _request(REPO / "tests" / "cases" / "api-cheaper-llama-8b.yaml"), True)
    assert priced is not None and priced.api.usd_per_month > 0
    chart = next(c for c in priced.charts if c.kind == pb.CHART_KIND_BREAK_EVEN)
    per_month = priced.api.usd_per_month
    api = [se for se in chart.series if f"{per_month:,.0f}" in se.name and "API" in se.name]
    assert len(api) == 1, [se.name for se in chart.series]
    for p in api[0].points:
        assert p.y == pytest.approx(per_month * p.x, abs=0.01)
    unpriced = _answer(stub, _request(REPO / "tests" / "cases" / "api-not-hosted.yaml"), True)
    assert unpriced is not None and not unpriced.HasField("api")
    for c in unpriced.charts:
        assert not any("API" in se.name for se in c.series)
