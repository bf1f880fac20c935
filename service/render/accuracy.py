"""The measured error beside the figure a target depends on, in words: the summary's band and at-risk lines and
the candidates' at-risk caveat are filled from these (messages accuracy.*, summary.accuracy_*)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..domain.accuracy import Band, Margin, margins

Text = Callable[[str, Mapping[str, Any]], str]  # a locale's message lookup: text(key, params)


def margins_of(perf: Any, band: Band | None, brief: Mapping[str, Any]) -> tuple[Margin, ...]:  # noqa: ANN401
    """The brief fact's targets against `perf` (a Performance) and its band."""
    return margins(band, brief.get("p95_ms", 0.0), brief.get("ttft_ms", 0.0), brief.get("target_days", 0.0),
                   perf.e2e_p95_ms, perf.ttft_ms, perf.training_days)


def figure_text(field: str, value: float, text: Text) -> str:
    """A target's figure in its unit (ms below a second, else s; days, hours below a day)."""
    if field == "training.target_days":
        if value < 1:  # a run of hours in hours: never "~0.0 days"
            return text("accuracy.figure_hours", {"value": value * 24})
        return text("accuracy.figure_days", {"value": value})
    return text("accuracy.figure_s", {"value": value / 1000}) if value >= 1000 else text(
        "accuracy.figure_ms", {"value": value})


def risk_params(m: Margin, band: Band, text: Text) -> dict[str, Any]:
    """What the band and at-risk messages are filled from."""
    return {"target_name": text(f"accuracy.target.{m.target_field}", {}),
            "figure": figure_text(m.target_field, m.figure, text),
            "target": figure_text(m.target_field, m.target, text),
            "margin_pct": (m.target / m.figure - 1) * 100, "band_pct": m.band_pct,
            "over_pct": (m.figure / m.target - 1) * 100,  # a near miss: by how much the figure is over
            "class_name": text(f"accuracy.class.{band.of}", {})}


def band_lines(perf: Any, brief: Mapping[str, Any], text: Text) -> list[str]:  # noqa: ANN401
    """For the top pick: each target's figure with its measured error, and "at risk" where the error exceeds the
    margin by which the target is met; without a band, the figure and that it has none."""
    if perf is None:
        return []
    band = perf.accuracy
    if band is None:
        # The figures a target depends on, with no band: margins() of a band that measured everything at 0%.
        unmeasured = Band("", 0, 1.0, 1.0, 1.0)
        return [text("summary.accuracy_unmeasured", {"target_name": text(f"accuracy.target.{m.target_field}", {}),
                                                     "figure": figure_text(m.target_field, m.figure, text)})
                for m in margins_of(perf, unmeasured, brief)]
    out = []
    for m in margins_of(perf, band, brief):
        params = risk_params(m, band, text)
        out.append(text("summary.accuracy_band", params))
        if m.at_risk:
            out.append(text("summary.accuracy_at_risk", params))
        elif m.near_miss:
            out.append(text("summary.accuracy_near_miss", params))
    return out
