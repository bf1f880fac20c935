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

from ..rulebook.folder import load_rulebook
from ..rulebook.version import Bundle
from .datasets import AICONFIGURATOR, PUBLISHED, PUBLISHED_SERVING
from .harness import evaluate
from .report import render
from .results import dump, results

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
    """The results document for the datasets in `folder` (rules/accuracy) as `bundle` answers them on `day` (prices
    only: no estimate depends on it)."""
    points, skipped = evaluate(bundle, folder, day or datetime.now(UTC).date())
    counts = {"aiconfigurator": _rows(folder / AICONFIGURATOR), "published": _rows(folder / PUBLISHED),
              "published-serving": _rows(folder / PUBLISHED_SERVING) if (folder / PUBLISHED_SERVING).exists() else 0}
    return results(points, skipped, counts)


def _rows(path: Path) -> int:
    with path.open(encoding="utf-8") as f:
        return max(0, sum(1 for line in f if line.strip()) - 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m service.accuracy", description=__doc__)
    ap.add_argument("--rules", type=Path, default=Path("rules"), help="rules folder (default: rules)")
    ap.add_argument("--write", action="store_true", help="rewrite <rules>/accuracy/results.yaml")
    ap.add_argument("--check", action="store_true", help="exit 1 when <rules>/accuracy/results.yaml is stale")
    ap.add_argument("--rows", action="store_true", help="also print every compared row")
    args = ap.parse_args(argv)
    folder = args.rules / "accuracy"
    with tempfile.TemporaryDirectory() as work:
        bundle = catalog_bundle(args.rules, Path(work))
        doc = produce(bundle, folder)
    print(render(doc, rows=args.rows))
    text = dump(doc)
    target = folder / RESULTS
    if args.write:
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target}")
    elif args.check and (not target.exists() or target.read_text(encoding="utf-8") != text):
        print(f"{target} is stale: run `make accuracy ACCURACY_ARGS=--write`", file=sys.stderr)
        return 1
    return 0
