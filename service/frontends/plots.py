"""`gpu-advisor recommend --plot`: the answer's charts (RecommendResponse.charts) drawn in the terminal.

plotext draws the canvas; everything with words (title, axes, what each line is, what each mark is) is printed
around it rather than inside, so a long label or a CJK name never breaks the canvas's columns, and nothing needs
colour: each line has its own marker letter. Plain text at a fixed width, so it reads the same piped to a file
as on a terminal.
"""

from __future__ import annotations

import math
import re
import shutil
import string
import sys
import unicodedata
from collections.abc import Sequence
from typing import Any

from ..wire.api import pb
from .cli_text import words

WIDTH = 80  # columns when stdout is not a terminal (and the most a terminal gets: wider is not easier to read)
HEIGHT = 22
# One marker per line, in the order the chart lists them (break-even: buy, the break-even's rent, then others).
LINE_MARKERS = ("*", "o", "x", "+", "#", "%", "=")
# Cost/latency: placed, unplaced, top pick.
POINT_MARKERS = ("o", "x", "@")


def _width(out: Any) -> int:  # noqa: ANN401 - a text stream
    if hasattr(out, "isatty") and out.isatty():
        return max(60, min(WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns))
    return WIDTH


def _canvas(chart: pb.Chart, width: int) -> tuple[str, list[tuple[str, str]]]:
    """The plot area as plain text, and (marker, series name) for the key."""
    import plotext as plt  # the charts extra: only --plot needs it

    plt.clear_figure()
    plt.plot_size(width, HEIGHT)
    plt.theme("clear")  # no colour: markers tell the lines apart
    scatter = chart.kind == pb.CHART_KIND_COST_LATENCY
    markers = POINT_MARKERS if scatter else LINE_MARKERS
    key: list[tuple[str, str]] = []
    xs = [p.x for s in chart.series for p in s.points] + [m.x for m in chart.marks]
    ys = [p.y for s in chart.series for p in s.points]
    for i, s in enumerate(chart.series):
        marker = markers[i % len(markers)]  # by place: a cost/latency chart's series are placed, unplaced, top
        if not s.points:
            continue
        x, y = [p.x for p in s.points], [p.y for p in s.points]
        (plt.scatter if scatter else plt.plot)(x, y, marker=marker)
        key.append((marker, s.name))
    low_x, high_x = (min(xs), max(xs)) if xs else (0.0, 1.0)
    pad = (high_x - low_x) * 0.05 or 1.0
    if scatter:
        plt.xlim(max(0.0, low_x - pad), high_x + pad)
    top = max(ys) if ys else 1.0
    plt.ylim(0, top * 1.08 if top > 0 else 1.0)
    ticks = _nice_ticks(top * 1.08 if top > 0 else 1.0)
    plt.yticks(ticks, [_short_money(t) for t in ticks])
    for letter, m in zip(string.ascii_uppercase, chart.marks, strict=False):
        plt.vline(m.x)
        plt.text(letter, m.x, top * 1.04)
    return plt.uncolorize(plt.build()), key


def _nice_ticks(high: float, count: int = 8) -> list[float]:
    """Round tick values from 0 up to `high`: steps of 1, 2 or 5 times a power of ten."""
    raw = high / count
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(int(high / step) + 1)]


def _short_money(value: float) -> str:
    if value >= 1e6:
        return f"${value / 1e6:,.3g}M"
    if value >= 1e4:
        return f"${value / 1e3:,.0f}k"
    if value >= 1:
        return f"${value:,.0f}"
    return f"${value:.2g}" if value else "$0"


def _points(chart: pb.Chart, candidates: Sequence[Any]) -> list[str]:
    """Cost/latency: which candidate each point is, with its figures, in the answer's order."""
    where: dict[tuple[float, float], str] = {}
    for i, s in enumerate(chart.series[:2]):
        for p in s.points:
            where[(p.x, p.y)] = POINT_MARKERS[i]
    out = []
    top = len(chart.series) > 2 and len(chart.series[2].points) == 1  # the first candidate drawn as the top pick
    for i, c in enumerate(candidates):
        perf = c.performance
        for x in (perf.e2e_p95_ms, perf.training_days):
            marker = where.get((x, c.cost.usd_per_unit)) if x > 0 else None
            if marker and top and i == 0:
                marker = POINT_MARKERS[2]
            if marker:
                out.append(f"  {marker}  {c.count}x {c.gpu}: {x:,.4g}, ${c.cost.usd_per_unit:.4g}")
                break
    return out


def draw(chart: pb.Chart, locale: str, width: int = WIDTH, candidates: Sequence[Any] = ()) -> str:
    """One chart: its title, the y axis's label, the canvas, the x axis's label, what each marker and mark is."""
    w = words(locale)
    canvas, key = _canvas(chart, width)
    lines = [chart.title, w["plot.y"].format(label=chart.y_label), canvas.rstrip("\n"),
             w["plot.x"].format(label=chart.x_label)]
    lines += [f"  {marker}  {name}" for marker, name in key]
    if chart.kind == pb.CHART_KIND_COST_LATENCY:
        lines += _points(chart, candidates)
    if chart.marks:
        lines.append(w["plot.marks"])
        lines += [f"  {letter}  {m.label}" for letter, m in zip(string.ascii_uppercase, chart.marks, strict=False)]
    return "\n".join(wrapped for line in "\n".join(lines).split("\n") for wrapped in _wrap(line.rstrip(), width))


def _columns(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _wrap(line: str, width: int) -> list[str]:
    """A key line longer than the width, broken at a space (or anywhere in CJK text) and indented under itself."""
    if _columns(line) <= width:
        return [line]
    indent = " " * (len(line) - len(line.lstrip()) + 3)
    out, current = [], ""
    for word in re.findall(r"\S+\s*|\s+", line):
        if _columns(current + word.rstrip()) > width and current.strip():
            out.append(current.rstrip())
            current = indent
        while _columns(current + word.rstrip()) > width:  # a word wider than the line (CJK text has no spaces)
            cut = 1
            while _columns(current + word[:cut + 1]) <= width:
                cut += 1
            out.append(current + word[:cut])
            current, word = indent, word[cut:]
        current += word
    if current.strip():
        out.append(current.rstrip())
    return out


def print_plots(resp: pb.RecommendResponse, locale: str, out: Any = None) -> None:  # noqa: ANN401
    out = out or sys.stdout
    w = words(locale)
    if not resp.charts:
        print(w["plot.no_charts"], file=out)
        return
    width = _width(out)
    for chart in resp.charts:
        print(file=out)
        print(draw(chart, locale, width, list(resp.candidates)), file=out)
