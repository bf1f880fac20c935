"""The answer's charts as a picture file (`gpu-advisor recommend --chart FILE.png|FILE.svg`, the MCP tool's image).

matplotlib (the `charts` extra), through its object API and the Agg canvas: no pyplot state, so the MCP server
can draw for two sessions at once. One panel per chart, stacked; every label comes from the chart's data in the
answer's locale. Chinese labels need a CJK font: the first of CJK_FAMILIES installed is used (Debian:
`apt-get install fonts-noto-cjk`); with none, the picture is still written and the caller is told why its
Chinese may show as boxes.
"""

from __future__ import annotations

import io
import math
import re
import threading
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..wire.api import pb

# Families that cover simplified Chinese, best first.
CJK_FAMILIES = ("Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "Source Han Sans CN", "Noto Sans CJK JP",
                "WenQuanYi Micro Hei", "WenQuanYi Zen Hei", "Droid Sans Fallback", "AR PL UMing CN")
# Their files, for a font installed after matplotlib built its font cache.
CJK_FILES = re.compile(r"(NotoSansCJK|NotoSansSC|SourceHanSans|wqy-microhei|wqy-zenhei|DroidSansFallback|uming)",
                       re.IGNORECASE)
CJK_TEXT = re.compile(r"[\u3000-\u30ff\u3400-\u9fff\uff00-\uffef]")
FORMATS = {".png": "png", ".svg": "svg"}
LINE_STYLES = (("-", "s"), ("-", "o"), ("--", "^"), ("-.", "v"), (":", "D"), ("--", "x"), ("-.", "+"))
DPI = 120
# rc_context sets matplotlib's process-wide settings for the drawing: one drawing at a time (the MCP server draws
# on worker threads).
_DRAWING = threading.Lock()


class ChartError(Exception):
    """The file cannot be written as asked (an extension neither PNG nor SVG)."""


def format_of(path: str | Path) -> str:
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise ChartError(f"{path}: --chart writes .png or .svg files")
    return fmt


def cjk_family() -> str | None:
    """The first installed CJK family, registering a font file matplotlib's cache predates."""
    from matplotlib import font_manager

    known = {f.name for f in font_manager.fontManager.ttflist}
    found = next((name for name in CJK_FAMILIES if name in known), None)
    if found:
        return found
    for path in font_manager.findSystemFonts():
        if CJK_FILES.search(Path(path).name):
            try:
                font_manager.fontManager.addfont(path)
            except (OSError, RuntimeError, ValueError):
                continue
    known = {f.name for f in font_manager.fontManager.ttflist}
    return next((name for name in CJK_FAMILIES if name in known), None)


def _texts(charts: Iterable[pb.Chart]) -> Iterable[str]:
    for c in charts:
        yield from (c.title, c.x_label, c.y_label)
        yield from (s.name for s in c.series)
        yield from (m.label for m in c.marks)


def _money(value: float, _: Any = None) -> str:  # noqa: ANN401 - matplotlib's tick position
    if abs(value) >= 1000:
        return f"${value:,.0f}"
    return f"${value:.4g}"


def _short(candidate: Any) -> str:  # noqa: ANN401 - a pb.Candidate
    return f"{candidate.count}x {candidate.gpu}"


def _break_even(ax: Any, chart: pb.Chart) -> None:  # noqa: ANN401 - a matplotlib Axes
    top = 0.0
    for i, s in enumerate(chart.series):
        style, marker = LINE_STYLES[i % len(LINE_STYLES)]
        xs, ys = [p.x for p in s.points], [p.y for p in s.points]
        top = max([top, *ys])
        every = max(1, len(xs) // 12)
        ax.plot(xs, ys, linestyle=style, marker=marker, markevery=every, markersize=4, linewidth=2 if i < 2 else 1.4,
                label=s.name)
    buy = chart.series[0] if chart.series else None
    crossings = 0
    for m in chart.marks:
        # A crossing is where the buy line meets another; the other marks (the horizon) are drawn plainer.
        crossing = buy is not None and any(
            abs(_value_at(s, m.x) - _value_at(buy, m.x)) <= 0.005 * max(1.0, _value_at(buy, m.x))
            for s in chart.series[1:])
        ax.axvline(m.x, color="black" if crossing else "grey", linestyle="--" if crossing else ":", linewidth=1)
        if crossing and buy is not None:
            y = _value_at(buy, m.x)
            ax.plot([m.x], [y], marker="o", markersize=9, markerfacecolor="none", markeredgecolor="black",
                    markeredgewidth=1.5)
            right = m.x > 0.55 * max(p.x for p in buy.points)  # a label past the middle goes to the line's left
            # Each further crossing's label a line lower, so two close crossings do not print over each other.
            ax.annotate(m.label, (m.x, y), xytext=(-10 if right else 10, -34 - 24 * crossings),
                        textcoords="offset points", fontsize=9, ha="right" if right else "left",
                        arrowprops={"arrowstyle": "-", "color": "black", "linewidth": 0.8},
                        bbox={"boxstyle": "round,pad=0.3", "facecolor": "white", "edgecolor": "black"})
            crossings += 1
        else:
            ax.annotate(m.label, (m.x, 0), xytext=(-4, 6), textcoords="offset points", fontsize=8,
                        rotation=90, ha="right", va="bottom", color="dimgrey")
    ax.yaxis.set_major_formatter(_money)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)


def _value_at(series: pb.ChartSeries, x: float) -> float:
    pts = [(p.x, p.y) for p in series.points]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:], strict=False):
        if x0 <= x <= x1 and x1 > x0:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return pts[-1][1] if pts else 0.0


def _cost_latency(ax: Any, chart: pb.Chart, candidates: Sequence[Any]) -> None:  # noqa: ANN401
    styles = ({"marker": "o", "s": 45, "color": "tab:blue"},
              {"marker": "x", "s": 55, "color": "tab:grey"},
              {"marker": "*", "s": 320, "color": "tab:orange", "edgecolors": "black", "zorder": 5})
    for i, s in enumerate(chart.series):
        if not s.points:  # styled by place: placed, unplaced, top pick
            continue
        ax.scatter([p.x for p in s.points], [p.y for p in s.points], label=s.name, **styles[min(i, 2)])
    named: dict[tuple[float, float], list[str]] = {}
    for c in candidates:
        perf = c.performance
        for x in (perf.e2e_p95_ms, perf.training_days):
            if x > 0:
                named.setdefault((x, c.cost.usd_per_unit), []).append(_short(c))
    points = sorted({(p.x, p.y) for s in chart.series for p in s.points})
    ys = [y for _, y in points if y > 0]
    log = bool(ys) and max(ys) / min(ys) > 8  # one far dearer candidate would flatten the rest onto the axis
    if log:
        ax.set_yscale("log")
    _label_points(ax, points, named, log)
    for m in chart.marks:
        ax.axvline(m.x, color="tab:red", linestyle="--", linewidth=1.2, label=m.label)
    ax.yaxis.set_major_formatter(_money)
    if log:
        ax.yaxis.set_minor_formatter(_money)  # a log axis labels its 2-9 ticks too: as money, not 10^x
    else:
        ax.set_ylim(bottom=0)


def _label_points(ax: Any, points: list[tuple[float, float]], named: dict[tuple[float, float], list[str]],  # noqa: ANN401
                  log: bool) -> None:
    """Each point's candidates by name; a label that would land on an earlier one moves a line down."""
    if not points:
        return
    xs = [x for x, _ in points]
    ys = [math.log10(y) if log else y for _, y in points if y > 0] or [0.0]
    span_x, span_y = (max(xs) - min(xs)) or 1.0, (max(ys) - min(ys)) or 1.0
    placed: list[tuple[float, float]] = []
    for x, y in points:
        names = named.get((x, y))
        if not names or y <= 0:
            continue
        fx, fy = (x - min(xs)) / span_x, ((math.log10(y) if log else y) - min(ys)) / span_y
        # Lines of ~11 points are ~3% of the panel's height: go down a line until no earlier label is there.
        shift = 0
        while any(abs(px - fx) < 0.18 and abs(py - (fy - 0.03 * shift)) < 0.028 for px, py in placed):
            shift += 1
        placed.append((fx, fy - 0.03 * shift))
        ax.annotate(f"{', '.join(names)}  {_money(y)}", (x, y), xytext=(6, 4 - 11 * shift), textcoords="offset points",
                    fontsize=8)


def render(charts: Sequence[pb.Chart], fmt: str = "png", candidates: Sequence[Any] = ()) -> tuple[bytes, list[str]]:
    """The charts drawn into one picture; (the file's bytes, what the reader should know: a missing font)."""
    from matplotlib import rc_context
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    notes: list[str] = []
    family = ["DejaVu Sans"]
    if any(CJK_TEXT.search(t) for t in _texts(charts)):
        cjk = cjk_family()
        if cjk:
            family = [cjk, "DejaVu Sans"]
        else:
            notes.append("no_cjk_font")
    with _DRAWING, rc_context({"font.family": family, "axes.unicode_minus": False,
                     "text.parse_math": False,  # "$64,000 ... $1.02/h" is money, not two dollar-delimited formulas
                     "svg.hashsalt": "gpu-advisor",
                     "svg.fonttype": "path"}):
        fig = Figure(figsize=(11, 6.2 * max(1, len(charts))), dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(max(1, len(charts)), 1, squeeze=False)[:, 0]
        for ax, chart in zip(axes, charts, strict=False):
            if chart.kind == pb.CHART_KIND_BREAK_EVEN:
                _break_even(ax, chart)
            else:
                _cost_latency(ax, chart, candidates)
            ax.set_title(chart.title, fontsize=12, fontweight="bold", loc="left")
            ax.set_xlabel(chart.x_label)
            ax.set_ylabel(chart.y_label)
            ax.grid(True, alpha=0.3)
            ax.legend(loc="best", fontsize=8, framealpha=0.9)
        out = io.BytesIO()
        # No timestamps or software stamp: the same answer writes the same bytes.
        meta = {"Software": None} if fmt == "png" else {"Date": None, "Creator": None}
        with warnings.catch_warnings():
            # Without a CJK font each missing glyph warns once; the note says it once, with what to install.
            warnings.filterwarnings("ignore", message="Glyph .* missing from font", category=UserWarning)
            fig.savefig(out, format=fmt, metadata=meta)
    return out.getvalue(), notes


def write_chart(resp: pb.RecommendResponse, path: str | Path) -> list[str]:
    """The answer's charts into `path` (PNG or SVG by its extension); the notes `render` gives."""
    fmt = format_of(path)
    data, notes = render(list(resp.charts), fmt, list(resp.candidates))
    Path(path).write_bytes(data)
    return notes
