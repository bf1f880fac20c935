"""Load the rules without their offer tables (figures as sized, before placement rounds counts to instances),
answer every dataset row, print the table; `--write` rewrites the results file, `--check` fails when it is stale."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from ..market.progress import Progress
from ..rulebook.folder import load_rulebook
from ..rulebook.version import Bundle
from . import training
from .datasets import DATA, DATASETS
from .harness import evaluate
from .peer import section
from .report import render
from .results import ROWS, dump, dump_rows, results

RESULTS = "results.yaml"


def catalog_bundle(rules: Path, work: Path) -> Bundle:
    """`rules` without its offers (copied under `work`), loaded and compiled."""
    copy = work / "rules"
    shutil.copytree(rules, copy, ignore=shutil.ignore_patterns("offers"))
    book, problems = load_rulebook(copy, today=datetime.now(UTC).date())
    if book is None:
        raise SystemExit("rules do not load:\n" + "\n".join(str(p) for p in problems))
    return Bundle(book, loaded_at=datetime.now(UTC))


def produce(bundle: Bundle, folder: Path, day: date | None = None) -> dict[str, Any]:
    """The results document for the datasets in `folder` (calibration/) as `bundle` answers them on `day` (prices
    only: no estimate depends on it)."""
    day = day or datetime.now(UTC).date()
    # Progress on stderr (a bar on a terminal, a line every few seconds otherwise): the table stays on stdout.
    with Progress("make accuracy", "dataset rows evaluated") as progress:
        points, skipped = evaluate(bundle, folder, day, progress)
        progress.note(f"{len(points):,} points compared")
    counts = {d: _rows(folder / f) if (folder / f).exists() else 0 for d, (f, _, _) in DATASETS.items()}
    # Training runs (issue 41): held out by source, each row estimated by a fit that did not see it.
    runs = training.read_training(folder / training.TRAINING_CSV)
    held, folds = training.points(runs, bundle.book.catalog, bundle.book.assumptions, day)
    skipped += training.skipped(runs, {g.id: g for g in bundle.book.catalog})
    doc = results(points + held, skipped, counts)
    doc["training_folds"] = folds
    return doc


def _rows(path: Path) -> int:
    with path.open(encoding="utf-8") as f:
        return max(0, sum(1 for line in f if line.strip()) - 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m service.accuracy", description=__doc__)
    ap.add_argument("--rules", type=Path, default=Path("rules"), help="rules folder (default: rules)")
    ap.add_argument("--write", action="store_true",
                    help="rewrite <rules>/accuracy/results.yaml and <data>/rows.yaml")
    ap.add_argument("--check", action="store_true", help="exit 1 when either of those files is stale")
    ap.add_argument("--data", type=Path, default=DATA,
                    help="the measured datasets (default: calibration)")
    ap.add_argument("--rows", action="store_true", help="also print every compared row")
    args = ap.parse_args(argv)
    folder = args.rules / "accuracy"
    with tempfile.TemporaryDirectory() as work:
        bundle = catalog_bundle(args.rules, Path(work))
        doc = produce(bundle, args.data)
    print(render(doc, rows=args.rows))
    # AIConfigurator's own estimates beside ours, when calibration/ has them (make peer-estimates)
    beside, problem = section(doc, args.data)
    if beside:
        print("\n" + beside)
    if problem:
        print(problem, file=sys.stderr)
    outputs = ((folder / RESULTS, dump(doc)), (args.data / ROWS, dump_rows(doc)))
    if args.write:
        for target, text in outputs:
            target.write_text(text, encoding="utf-8")
            print(f"wrote {target}")
    elif args.check:
        stale = [t for t, text in outputs if not t.exists() or t.read_text(encoding="utf-8") != text]
        for target in stale:
            print(f"{target} is stale: run `make accuracy ACCURACY_ARGS=--write`", file=sys.stderr)
        return 1 if stale or problem else 0
    return 0
