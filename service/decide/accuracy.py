"""How sure each candidate's figures are: the measured error of its class (rules/accuracy/results.yaml, written
by `make accuracy`), a caveat where a target is met by less than that error, and a note where a shown candidate's
class has no measured points."""

from __future__ import annotations

from typing import Any

from ..domain.accuracy import Band, classes_of
from ..domain.advice import Candidate, Reason
from ..render.accuracy import margins_of, risk_params
from .run import Run, Scored


def band_of(c: Scored, run: Run) -> tuple[Band | None, str]:
    """The band a candidate cites and its class ("" when none of its classes has points)."""
    f, gpu = c.fact, c.sizing.gpu
    total, active = f["params_billion"], f["active_params_billion"]
    precision = f["precision"] if f["precision"] != "UNSPECIFIED" else "BF16"
    classes = classes_of(f["workload"], precision, 0 < active < total, f["avg_input_tokens"], gpu.vendor,
                         gpu.gpu_class)
    return run.book.accuracy.band_for(classes)


def risk_caveats(perf: Any, band: Band | None, run: Run, brief: dict[str, Any]) -> tuple[Reason, ...]:  # noqa: ANN401
    return tuple(Reason("accuracy.at_risk", run.text("caveat.accuracy_at_risk", risk_params(m, band, run.text)))
                 for m in margins_of(perf, band, brief) if m.at_risk and band is not None)


def unmeasured_note(shown: list[Scored], candidates: tuple[Candidate, ...], run: Run) -> Reason | None:
    """Said once per answer: the shown candidates whose class has no measured points, and the class."""
    missing: dict[str, list[str]] = {}
    for c, cand in zip(shown, candidates, strict=True):
        if cand.performance is not None and cand.performance.accuracy is None:
            _, cls = band_of(c, run)
            missing.setdefault(cls, []).append(cand.gpu)
    if not missing:
        return None
    sep = run.text("summary.list_separator", {})
    parts = [run.text("note.accuracy_none_class" if cls else "note.accuracy_none_any",
                      {"gpus": sep.join(gpus), "class_name": run.text(f"accuracy.class.{cls}", {}) if cls else ""})
             for cls, gpus in missing.items()]
    return Reason("accuracy.unmeasured", " ".join(parts))
