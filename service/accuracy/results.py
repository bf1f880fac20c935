"""The points summed up per estimate and per class (median absolute % error, share within 25%, median signed
error, worst rows), and the results file the answer cites (rules/accuracy/results.yaml).

Everything is rounded to 0.1% so the file is the same on every machine: tests/test_accuracy.py holds the
checked-in file equal to what the harness produces from the shipped data and code.
"""

from __future__ import annotations

import io
import statistics
from collections.abc import Iterable
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from ..domain.accuracy import CLASSES, ESTIMATES
from .datasets import DATASETS, Skipped
from .harness import Point

WITHIN_PCT = 25.0
WORST = 3
# What the answer's throughput_error_pct stands for in each class: output tokens/s, or its training and media
# counterparts (GPU-hours of a run are its inverse; images/s).
THROUGHPUT_LIKE = ("throughput", "gpu_hours", "images", "train_tps")
CLASS_NAMES = {"dense": "dense serving", "moe": "MoE serving", "fp4": "FP4 serving",
               "long_context": "long-context serving", "amd": "AMD GPUs", "consumer": "consumer GPUs",
               "training": "training", "media": "media generation"}
HEADER = ("# Written by `make accuracy ACCURACY_ARGS=--write` (python -m service.accuracy --write) from the datasets\n"
          "# in calibration/ and the code; do not edit by hand. tests/test_accuracy.py fails when it is stale.\n")
ROWS_HEADER = ("# Written by `make accuracy ACCURACY_ARGS=--write` beside rules/accuracy/results.yaml: every compared\n"
               "# row's estimate and error; do not edit by hand. tests/test_accuracy.py fails when it is stale.\n")


def _r(x: float) -> float:
    return round(x, 1) + 0.0  # no -0.0


def summary(points: list[Point]) -> dict[str, Any]:
    """points, median_abs_pct, within_25_pct, median_signed_pct and the worst rows of one set of points."""
    if not points:
        return {"points": 0}
    worst = sorted(points, key=lambda p: (-p.abs_pct, p.row))[:WORST]
    return {
        "points": len(points),
        "median_abs_pct": _r(statistics.median(p.abs_pct for p in points)),
        "within_25_pct": _r(100 * sum(p.abs_pct <= WITHIN_PCT for p in points) / len(points)),
        "median_signed_pct": _r(statistics.median(p.signed_pct for p in points)),
        "worst": [{"row": p.row, "error_pct": _r(p.signed_pct)} for p in worst],
    }


def _of(points: Iterable[Point], estimate: str | tuple[str, ...], cls: str = "") -> list[Point]:
    keys = (estimate,) if isinstance(estimate, str) else estimate
    return [p for p in points if p.estimate in keys and (not cls or cls in p.classes)]


def bands(points: list[Point]) -> dict[str, dict[str, Any]]:
    """Per class, what an answer cites: rows measured and the median absolute error per estimate (0 = none)."""
    out = {}
    for c in CLASSES:
        rows = {p.row for p in points if c in p.classes}
        datasets = sorted({p.dataset for p in points if c in p.classes})

        def med(estimate: str | tuple[str, ...], c: str = c) -> float:
            got = _of(points, estimate, c)
            return _r(statistics.median(p.abs_pct for p in got)) if got else 0.0

        out[c] = {
            "basis": f"{CLASS_NAMES[c]}: {', '.join(datasets) or 'no measured points'}",
            "points": len(rows),
            "itl_error_pct": med("itl"),
            "ttft_error_pct": med("ttft"),
            "throughput_error_pct": med(THROUGHPUT_LIKE),
        }
    return out


def results(points: list[Point], skipped: list[Skipped], rows_per_dataset: dict[str, int]) -> dict[str, Any]:
    """The whole results document (kind: accuracy)."""
    table: dict[str, Any] = {}
    for key, _ in ESTIMATES:
        per = {"all": summary(_of(points, key))}
        for d in DATASETS:
            per[d] = summary([p for p in _of(points, key) if p.dataset == d])
        for c in CLASSES:
            per[c] = summary(_of(points, key, c))
        table[key] = per
    return {
        "kind": "accuracy",
        "datasets": [
            {"id": d, "file": f"calibration/{f}", "source": src, "licence": lic, "rows": rows_per_dataset.get(d, 0),
             "compared": len({p.row for p in points if p.dataset == d})}
            for d, (f, src, lic) in DATASETS.items()
        ],
        "classes": bands(points),
        "table": table,
        "rows": [
            {"row": p.row, "dataset": p.dataset, "estimate": p.estimate, "classes": list(p.classes),
             "measured": _sig(p.measured), "estimated": _sig(p.estimated), "error_pct": _r(p.signed_pct),
             **({"note": p.note} if p.note else {})}
            for p in points
        ],
        "not_expressed": [{"row": s.id, "dataset": s.dataset, "why": s.why} for s in skipped],
    }


def _sig(x: float) -> float:
    """Four significant figures: enough to check a row by hand, stable across machines."""
    return float(f"{x:.4g}")


ROWS = "rows.yaml"  # every compared row's estimate, written beside the datasets (calibration/)


def dump(doc: dict[str, Any]) -> str:
    """The results file answers cite (rules/accuracy/results.yaml): the document less its per-row estimates, which
    the server never reads and which would take the served rules folder past a ConfigMap's 1 MiB (dump_rows)."""
    return _dump({k: v for k, v in doc.items() if k != "rows"})


def dump_rows(doc: dict[str, Any]) -> str:
    """Every compared row's estimate and error (calibration/rows.yaml), one line each."""
    return _dump({"rows": doc["rows"]}, ROWS_HEADER)


def _dump(doc: dict[str, Any], header: str = HEADER) -> str:
    """Block style in the document's order; one line per row, per worst row and per class list."""
    yaml = YAML()
    yaml.width = 4096
    out = io.StringIO()
    yaml.dump(_flow_leaves(doc), out)
    return header + out.getvalue()


def _flow_leaves(node: Any) -> Any:  # noqa: ANN401
    """Mappings and lists holding only scalars (or lists of scalars) written on one line."""
    if isinstance(node, dict):
        out: Any = CommentedMap((k, _flow_leaves(v)) for k, v in node.items())
    elif isinstance(node, list):
        out = CommentedSeq(_flow_leaves(v) for v in node)
    else:
        return node
    items = node.values() if isinstance(node, dict) else node
    if node and not any(isinstance(v, dict) or (isinstance(v, list) and any(isinstance(x, dict | list) for x in v))
                        for v in items):
        out.fa.set_flow_style()
    return out
