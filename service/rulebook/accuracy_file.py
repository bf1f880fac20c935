"""rules/accuracy/results.yaml (kind: accuracy, written by `make accuracy`) → the AccuracyTable answers cite.
The schema (rules/schema/accuracy.schema.json) has checked its shape; a second file of the kind is a problem."""

from __future__ import annotations

from ..domain.accuracy import EMPTY, AccuracyTable, Band
from ..engine.load import Doc, Problem


def accuracy_table(docs: list[Doc]) -> tuple[AccuracyTable, list[Problem]]:
    if not docs:
        return EMPTY, []
    problems = [Problem(d.path, 1, 1, "kind", f"a second accuracy file (the first is {docs[0].path})")
                for d in docs[1:]]
    classes = docs[0].data.get("classes") or {}
    bands = {
        str(c): Band(basis=str(v["basis"]), points=int(v["points"]), itl_error_pct=float(v["itl_error_pct"]),
                     ttft_error_pct=float(v["ttft_error_pct"]), throughput_error_pct=float(v["throughput_error_pct"]),
                     of=str(c))
        for c, v in classes.items()
    }
    return AccuracyTable(bands, docs[0].path), problems
