"""Refit the serving engines' named efficiencies over the measured serving rows, and say how well they hold out.

`python -m service.accuracy.calibrate` (offline, a few minutes): every serving row of rules/accuracy that names
its engine (AIConfigurator's aggregated rows the registry and catalog express, the published NIM and TensorRT-LLM
points) is sized at its measured width, with the arrival pattern the row states, by the code the answers run.
Coordinate descent on a grid fits, per engine, `prefill_first` and `decode_bandwidth_use`
(rules/assumptions.yaml `serving_engines`) to the smallest median |TTFT error| + 0.5 x median |TPOT error| (a
throughput figure counts with TPOT). It prints the fit over all rows and a k-fold held-out error: each fold fitted
on the other rows, judged on its own. Nothing is written: a rule author copies the values it reports
(docs/calibration.md).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..decide.models import resolve
from ..decide.sizing.engines import engine_of
from .datasets import ARRIVALS, Row
from .harness import _at_width, read_rows
from .run import catalog_bundle

PREFILL_FIRST = tuple(round(0.05 * i, 2) for i in range(21))
BANDWIDTH_USE = tuple(round(0.45 + 0.05 * i, 2) for i in range(9))
FIELDS = (("prefill_first", PREFILL_FIRST), ("decode_bandwidth_use", BANDWIDTH_USE))


def serving_rows(bundle: Any, folder: Path) -> list[Row]:  # noqa: ANN401
    """Rows with a TTFT, TPOT or throughput measured on a named engine, at a width the catalog's GPU allows."""
    rows, _ = read_rows(bundle, folder)
    keep, seen = [], set()
    for row in rows:
        key = (row.gpu, row.gpus, tuple(sorted(row.measured.items())))
        if key in seen or not row.gpus or not engine_of(row.brief.toolchain):
            continue
        if not {"itl", "ttft", "throughput"} & set(row.measured):
            continue
        seen.add(key)
        keep.append(row)
    return keep


def errors(bundle: Any, rows: list[Row], day: Any) -> list[tuple[str, float]]:  # noqa: ANN401
    """(estimate, |error| %) of every measured serving figure of `rows` under the bundle's current assumptions."""
    out = []
    for row in rows:
        brief = resolve(row.brief, bundle.book.models)
        gpu = next((g for g in bundle.book.catalog if g.id == row.gpu), None)
        if gpu is None:
            continue
        est = _at_width(bundle, brief, gpu, row.gpus, day, ARRIVALS.get(row.arrivals))
        for key in ("itl", "ttft", "throughput"):
            if key in row.measured and row.measured[key] > 0:
                out.append((key, abs(est[key] - row.measured[key]) / row.measured[key] * 100))
    return out


def score(errs: list[tuple[str, float]]) -> tuple[float, float, float]:
    ttft = [e for k, e in errs if k == "ttft"]
    tpot = [e for k, e in errs if k != "ttft"]
    t = statistics.median(ttft) if ttft else 0.0
    p = statistics.median(tpot) if tpot else 0.0
    return t + 0.5 * p, t, p


def fit(bundle: Any, rows: list[Row], day: Any, passes: int = 2) -> dict[str, dict[str, float]]:  # noqa: ANN401
    """Coordinate descent over FIELDS for the engines `rows` name; leaves the best values in the bundle."""
    table = bundle.book.assumptions.values["serving_engines"]
    engines = sorted({engine_of(r.brief.toolchain) for r in rows} & set(table))
    best = score(errors(bundle, rows, day))[0]
    for _ in range(passes):
        moved = False
        for engine in engines:
            for name, grid in FIELDS:
                keep = table[engine][name]
                for value in grid:
                    table[engine][name] = value
                    s = score(errors(bundle, rows, day))[0]
                    if s < best - 1e-9:
                        best, keep, moved = s, value, True
                table[engine][name] = keep
        if not moved:
            break
    return {e: {n: table[e][n] for n, _ in FIELDS} for e in engines}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m service.accuracy.calibrate", description=__doc__)
    ap.add_argument("--rules", type=Path, default=Path("rules"))
    ap.add_argument("--folds", type=int, default=4)
    args = ap.parse_args(argv)
    day = datetime.now(UTC).date()
    with tempfile.TemporaryDirectory() as work:
        bundle = catalog_bundle(args.rules, Path(work))
        table = bundle.book.assumptions.values["serving_engines"]
        start = {e: dict(v) for e, v in table.items()}
        rows = serving_rows(bundle, args.rules / "accuracy")
        _, t0, p0 = score(errors(bundle, rows, day))
        print(f"{len(rows)} serving rows; as shipped: TTFT {t0:.1f}%, TPOT/throughput {p0:.1f}%")
        values = fit(bundle, rows, day)
        _, t1, p1 = score(errors(bundle, rows, day))
        print(f"fitted on all: {values}\n  in-sample: TTFT {t1:.1f}%, TPOT/throughput {p1:.1f}%")
        held: list[tuple[str, float]] = []
        for k in range(args.folds):
            for e, v in start.items():
                table[e].update(v)
            test = rows[k::args.folds]
            train = [r for r in rows if r not in test]
            chosen = fit(bundle, train, day)
            held += errors(bundle, test, day)
            print(f"  fold {k + 1}: {chosen}")
        _, th, ph = score(held)
        print(f"held out ({args.folds}-fold): TTFT {th:.1f}%, TPOT/throughput {ph:.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
