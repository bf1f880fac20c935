"""`api-offers import` and `api-offers refresh`: LiteLLM's price table → `rules/api_offers/litellm.csv`.

    gpu-advisor api-offers import model_prices_and_context_window_backup.json [--out rules/api_offers/litellm.csv]
    gpu-advisor api-offers refresh --url URL [--rules rules]

`import` reads a file on disk (the JSON, or `.json.gz`; the copy inside the `litellm` wheel is
litellm/model_prices_and_context_window_backup.json) and prints the report (read = written + dropped, every
drop with its reason). `refresh` downloads the URL the operator gives, imports it, vets the rules folder with the
new table exactly as the server would, and swaps the table in atomically only when it passes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from datetime import date
from pathlib import Path
from typing import TextIO

from ..domain.api_offers import ApiOffer
from ..rulebook.api_offer_files import read_api_offers, write_api_offers_csv
from ..rulebook.atomic import write_atomically
from .importers.common import ImportReport
from .importers.litellm import import_litellm, read_table, registry_from
from .refresh import _vet, fetch

TABLE = "api_offers/litellm.csv"
SOURCE = "LiteLLM model_prices_and_context_window.json"
EXIT_OK, EXIT_NOTHING = 0, 1


def _rules_default() -> Path:
    return Path(os.environ.get("GPU_ADVISOR_RULES", "rules"))


def add_import_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("path", type=Path, help="LiteLLM's model_prices_and_context_window(.json|_backup.json|.json.gz)")
    ap.add_argument("--rules", type=Path, default=_rules_default(),
                    help="the rules folder whose model registry (models/) maps provider ids (default rules)")
    ap.add_argument("--out", type=Path, default=None, help=f"the CSV to write (default RULES/{TABLE})")
    ap.add_argument("--as-of", type=date.fromisoformat, default=None, help="stamped on every row (default today)")
    ap.add_argument("--source", default=SOURCE, help="the source stamp; each row adds its entry's key")
    ap.add_argument("--dropped", action="store_true", help="list every dropped entry, not 3 a reason")


def add_refresh_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--url", required=True, help="where to download the table from (set by the operator; "
                                                 "nothing is downloaded without it)")
    ap.add_argument("--rules", type=Path, default=_rules_default(), help="the rules folder to update")
    ap.add_argument("--as-of", type=date.fromisoformat, default=None, help="stamped on every row (default today)")
    ap.add_argument("--source", default=None, help="the source stamp (default: the URL)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds for the download")


def imported(data: dict, rules: Path, as_of: date, source: str) -> tuple[list[ApiOffer], ImportReport]:
    rows, report = import_litellm(data, registry_from(rules), as_of, source)
    # Cheapest first per model: the table reads the way the answer compares.
    rows.sort(key=lambda o: (o.registry_model, o.usd_per_million_input + o.usd_per_million_output, o.provider,
                             o.model, o.region))
    return rows, report


def run_import(args: argparse.Namespace) -> int:
    if not args.path.is_file():
        print(f"{args.path}: no such file", file=sys.stderr)
        return 2
    try:
        data = read_table(args.path)
    except (ValueError, OSError) as exc:
        print(f"{args.path}: {exc}", file=sys.stderr)
        return 2
    rows, report = imported(data, args.rules, args.as_of or date.today(), args.source)
    out = args.out or args.rules / TABLE
    out.parent.mkdir(parents=True, exist_ok=True)
    write_api_offers_csv(rows, out)
    print(report.render(every_row=args.dropped))
    print(f"wrote {len(rows):,} API offers to {out}")
    return EXIT_OK


def refresh(rules: Path, url: str, as_of: date, source: str, out: TextIO, timeout: float = 60.0,
            get: object = None) -> int:
    """Download, import, vet a copy of the rules folder with the new table, then swap it in (or say why not)."""
    import json

    target = rules / TABLE
    body = get(url) if callable(get) else fetch(url, timeout)
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        data = f"{url} is not JSON ({exc})"
    if not isinstance(data, dict):
        why = data if isinstance(data, str) else f"{url} is not a JSON object keyed by model id"
        print(f"{target}: NOT updated, the last good table keeps serving: {why}", file=out)
        return EXIT_NOTHING
    rows, report = imported(data, rules, as_of, source)
    with tempfile.TemporaryDirectory(prefix="api-offers-refresh-") as tmp:
        staging = Path(tmp) / rules.name
        shutil.copytree(rules, staging, symlinks=False, ignore=shutil.ignore_patterns(".*"))
        (staging / TABLE).parent.mkdir(parents=True, exist_ok=True)
        write_api_offers_csv(rows, staging / TABLE)
        text = (staging / TABLE).read_text(encoding="utf-8")
        errors, failed = _vet(staging, as_of)
    print(report.render(), file=out)
    if errors or failed or not rows:
        why = [str(e) for e in errors] + failed or ["no row was written"]
        print(f"{target}: NOT updated, the last good table keeps serving: " + "; ".join(why)[:1000], file=out)
        return EXIT_NOTHING
    old = read_api_offers(target.name, target.read_text(encoding="utf-8"))[0] if target.exists() else []
    before = {(o.provider, o.model, o.region): o for o in old}
    after = {(o.provider, o.model, o.region): o for o in rows}
    changed = sum(1 for k, o in after.items() if k in before and (
        before[k].usd_per_million_input, before[k].usd_per_million_output) != (o.usd_per_million_input,
                                                                              o.usd_per_million_output))
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(target, text)
    print(f"{target}: {len(after.keys() - before.keys())} added, {len(before.keys() - after.keys())} removed, "
          f"{changed} repriced ({len(rows):,} API offers)", file=out)
    return EXIT_OK


def run_refresh(args: argparse.Namespace) -> int:
    return refresh(args.rules, args.url, args.as_of or date.today(), args.source or args.url, sys.stdout,
                   args.timeout)
