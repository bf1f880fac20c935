"""`offers import`: turn a SkyPilot catalog or a gpuhunt CSV into a `rules/offers` CSV and print the report.

    python -m service.market.importers offers import --from skypilot DIR --out FILE [--as-of DATE] [--provider P ...]
    python -m service.market.importers offers import --from gpuhunt FILE --out FILE ...

(`gpu-advisor offers import` takes the same arguments.)
"""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path

from ruamel.yaml import YAML

from ...domain.offers import Offer
from ...rulebook.accelerators import read_accelerator_map
from ..progress import Progress
from .common import write_offers_csv
from .gpuhunt import import_gpuhunt
from .skypilot import import_skypilot

RULES = Path(__file__).resolve().parents[3] / "rules"


def catalog_memory(rules: Path = RULES) -> dict[str, float]:
    """Catalog id → memory_gb, from every catalog file of the rules folder."""
    out: dict[str, float] = {}
    for path in sorted((rules / "catalog").glob("*.yaml")):
        data = YAML(typ="safe").load(path.read_text(encoding="utf-8")) or {}
        for g in data.get("gpus", []) if isinstance(data, dict) else []:
            if isinstance(g, dict) and "id" in g:
                out[str(g["id"])] = float(g.get("memory_gb") or 0)
    return out


def catalog_ids(rules: Path = RULES) -> set[str]:
    return set(catalog_memory(rules))


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="gpu-advisor offers import", description=__doc__.splitlines()[0])
    add_arguments(ap)
    return ap


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The import's arguments, for this module's own parser and for `gpu-advisor offers import`."""
    ap.add_argument("--from", dest="kind", choices=("skypilot", "gpuhunt"), required=True)
    ap.add_argument("path", type=Path, help="SkyPilot catalog folder or vms.csv; gpuhunt CSV file")
    ap.add_argument("--out", type=Path, required=True,
                    help="the offers CSV to write, or an existing folder: one <provider>.csv per provider (each "
                         "written atomically: a temporary file, then a rename)")
    ap.add_argument("--as-of", type=date.fromisoformat, default=None, help="stamped on every row (default: today)")
    ap.add_argument("--provider", action="append", default=[], help="only this provider (repeatable)")
    ap.add_argument("--accelerators", type=Path, default=RULES / "offers" / "accelerators.csv")
    ap.add_argument("--source", default=None,
                    help="source stamp; {provider}, {read} (the as-of date) and (skypilot) {version} are filled in. "
                         "Default: the catalog and version when the path says them (v7/<provider>/vms.csv), else "
                         "the file read (and a request for --source)")
    ap.add_argument("--rules", type=Path, default=RULES, help="the rules folder whose catalog ids map to")
    ap.add_argument("--dropped", action="store_true", help="list every dropped row in the report, not 3 a reason")


def main(argv: list[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    while args_in[:1] in (["offers"], ["import"]):  # `offers import ...` as the future CLI subcommand spells it
        args_in = args_in[1:]
    return run(_parser().parse_args(args_in))


def run(args: argparse.Namespace) -> int:
    if not args.path.exists():
        print(f"{args.path}: no such file or folder", file=sys.stderr)
        return 2
    label = args.accelerators.as_posix()
    memory = catalog_memory(args.rules)
    accel, problems = read_accelerator_map(label, args.accelerators.read_text(encoding="utf-8"), set(memory))
    accel.catalog_gb = memory
    for p in problems:
        print(p, file=sys.stderr)
    if any(p.severity == "error" for p in problems):
        return 1
    as_of = args.as_of or date.today()
    providers = {p.lower() for p in args.provider} or None
    # Progress on stderr (a bar on a terminal, a line every few seconds otherwise); the report stays on stdout.
    with Progress(f"offers import ({args.kind})", "rows read") as progress:
        if args.kind == "skypilot":
            offers, report = import_skypilot(args.path, accel, as_of, providers, args.source, progress=progress)
        else:
            offers, report = import_gpuhunt(args.path, accel, as_of, providers, args.source, progress)
    if args.out.is_dir():
        by_provider: dict[str, list[Offer]] = {}
        for o in offers:
            by_provider.setdefault(o.provider, []).append(o)
        for prov, rows in sorted(by_provider.items()):
            write_offers_csv(rows, args.out / f"{prov}.csv")
    else:
        write_offers_csv(offers, args.out)
    print(report.render(every_row=args.dropped))
    if report.unsure_source:
        print(f"{args.path}: cannot tell which catalog (or version) these files are, so each row says only the file "
              f"it was read from (\"{report.unsure_source}\"); pass --source \"<where they came from>, {{provider}}, "
              "read {read}\" to stamp them truthfully", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
