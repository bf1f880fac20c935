"""dstack gpuhunt catalog CSV → offers.

gpuhunt publishes one CSV per provider (in a zip), columns `instance_name,location,price,cpu,memory,gpu_count,
gpu_name,gpu_memory,spot,disk_size,gpu_vendor,flags` (older versions stop after `spot`); its query dumps add
`provider`. Prices are whole instances per hour; `spot` is True/False; `gpu_memory` is GB per GPU, which tells
an A100 80GB from a 40GB one (both are `A100`), so the accelerator map is asked for `<name>-<memory>GB` first.
GCP locations are zones: collapsed to their region (on-demand the first zone's, spot the lowest).
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

from ...domain.offers import Offer
from ...rulebook.accelerators import AcceleratorMap
from ..progress import BATCH, Progress
from .common import MALFORMED, ImportReport, csv_lines, parse_number, parse_price
from .regions import country_of

DEFAULT_SOURCE = "dstack gpuhunt catalog, {provider}.csv, read {read}"
_REQUIRED = ("instance_name", "location", "price", "gpu_count", "gpu_name", "spot")
_GCP_ZONE = re.compile(r"([a-z]+-[a-z]+\d+)-[a-z]")
# gpuhunt's provider names → ours (the ones SkyPilot and the shipped table also use)
_PROVIDERS = {"lambdalabs": "lambda", "vastai": "vast", "cudocompute": "cudo"}


def import_gpuhunt_csv(
    label: str,
    text: str,
    accel: AcceleratorMap,
    as_of: date,
    provider: str | None = None,
    source: str | None = None,
    providers: set[str] | None = None,
    progress: Progress | None = None,
) -> tuple[list[Offer], ImportReport]:
    """Offers from one gpuhunt CSV text; `provider` names the file's provider when it has no provider column (rows
    counted on `progress`, in batches)."""
    report = ImportReport(label)
    lines = csv_lines(text)
    first = next(lines, None)
    fields = [f.strip() for f in first.cells] if first is not None and not first.error else []
    missing = [c for c in _REQUIRED if c not in fields]
    if missing:
        report.notes.append("not a gpuhunt catalog: no column " + ", ".join(missing))
        return [], report
    if "provider" not in fields and not provider:
        report.notes.append("no provider column and no provider given")
        return [], report
    best: dict[tuple[str, str, str, str], tuple[float, int, dict[str, str]]] = {}
    rows_of: dict[tuple[str, str, str, str], int] = {}
    counted = 0
    for row in lines:
        line = row.number
        counted += 1
        if progress is not None and counted == BATCH:
            progress.update(counted)
            counted = 0
        r = dict(zip(fields, (v.strip() for v in row.cells), strict=False))
        for name in fields[len(row.cells):]:  # a short row reads its missing cells as empty, as DictReader did
            r[name] = ""
        raw_provider = (r.get("provider") or provider or "").lower()
        prov = _PROVIDERS.get(raw_provider, raw_provider)
        report.read(prov)
        if row.error:
            report.drop(MALFORMED, f"{label}:{line} ({row.error})", 1, prov)
            continue
        if providers and prov not in providers:
            report.drop("provider not selected", f"{label}:{line} {prov}", 1, prov)
            continue
        where = f"{label}:{line} {r['instance_name']} {r['location']}"
        count = parse_number(r["gpu_count"])
        if not r["gpu_name"] or count is None or count < 1 or count != int(count):
            report.drop("no whole GPU (CPU-only or fractional GPU instance)", where, 1, prov)
            continue
        price = parse_price(r["price"])
        if price is None or price <= 0:
            report.drop("price empty, NaN or 0", where, 1, prov)
            continue
        if not r["location"]:
            report.drop("no location", where, 1, prov)
            continue
        region = r["location"]
        m = _GCP_ZONE.fullmatch(region) if prov == "gcp" else None
        if m:
            region = m.group(1)
        spot = r["spot"].lower() == "true"
        tier = "spot" if spot else ("marketplace" if prov == "vast" else "on_demand")
        key = (prov, r["instance_name"], region, tier)
        rows_of[key] = rows_of.get(key, 0) + 1
        old = best.get(key)
        if old is None or (spot and price < old[0]):
            best[key] = (price, line, r)
        elif not spot and price != old[0]:
            report.notes.append(f"{where}: on-demand {price:g} differs from {old[0]:g} on line {old[1]}; "
                                "kept the first")
    if progress is not None:
        progress.update(counted)
    offers: list[Offer] = []
    for (prov, instance, region, tier), (price, line, r) in best.items():
        mem = parse_number(r.get("gpu_memory", ""))  # GB per GPU as gpuhunt lists it (80 for an 80 GB A100)
        gpu, why = accel.resolve(prov, r["gpu_name"], instance, mem)
        if gpu is None:
            report.drop(why, f"{label}:{line} {instance}", rows_of[(prov, instance, region, tier)], prov)
            continue
        report.written(prov)
        report.supersede(prov, rows_of[(prov, instance, region, tier)] - 1)
        report.offer(prov, tier)
        offers.append(Offer(
            provider=prov, instance_type=instance, gpu=gpu, gpus_per_instance=int(float(r["gpu_count"])),
            vcpus=parse_number(r.get("cpu", "")), memory_gib=parse_number(r.get("memory", "")), region=region,
            country=country_of(prov, region), tier=tier, usd_per_hour=price, as_of=as_of,
            source=(source or DEFAULT_SOURCE).format(provider=prov, read=as_of.isoformat()), valid_from=as_of,
            valid_until=None,
            path=label, line=line,
        ))
    return offers, report


def import_gpuhunt(
    path: Path, accel: AcceleratorMap, as_of: date, providers: set[str] | None = None, source: str | None = None,
    progress: Progress | None = None,
) -> tuple[list[Offer], ImportReport]:
    """A gpuhunt CSV file (provider from its `provider` column, else from the file name: `aws.csv`)."""
    return import_gpuhunt_csv(path.name, path.read_text(encoding="utf-8"), accel, as_of, path.stem, source,
                              providers, progress)
