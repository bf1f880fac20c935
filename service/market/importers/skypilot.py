"""SkyPilot catalog (`catalogs/v7`, `v8`: `<provider>/vms.csv`) → offers.

Column orders differ by provider and schema version, so columns are found by header name; the derived one-file-
per-provider layout of the shared offers reference (`provider,instance_type,accelerator,...`) reads the same way.
What the catalog does that an offer must not:
- AWS and GCP list one row per availability zone: collapsed to one per region (on-demand is the same in every
  zone; spot is the lowest zone's price, since a placement picks the zone).
- GCP prices attached GPUs apart from the host VM (accelerator rows with an empty InstanceType, or the reference's
  "(GPU component only)"): the host VM row's price is added so the offer is the whole instance; without a host
  row the offer is dropped and reported, because a GPU-only price would undercut every other provider.
- Empty, NaN or 0 prices are not prices (vast writes spot 0.00 where it has none; aws p5e has no on-demand price
  in most regions): the row's other tier is kept, the missing one is reported.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from ...domain.offers import Offer
from ..accelerators import AcceleratorMap
from .common import ImportReport, parse_price
from .regions import country_of

DEFAULT_SOURCE = "skypilot-catalog {version} {provider}/vms.csv"
_ALIASES: dict[str, tuple[str, ...]] = {
    "instance": ("InstanceType", "instance_type"),
    "accelerator": ("AcceleratorName", "accelerator"),
    "count": ("AcceleratorCount", "accelerator_count"),
    "vcpus": ("vCPUs", "vcpus"),
    "memory": ("MemoryGiB", "memory_gib"),
    "price": ("Price", "price_usd_per_hour"),
    "spot": ("SpotPrice", "spot_price_usd_per_hour"),
    "region": ("Region", "region"),
    "zone": ("AvailabilityZone",),
    "provider": ("provider",),
}
_REQUIRED = ("instance", "accelerator", "count", "price", "region")
_GPU_ONLY = " (GPU component only)"
# GCP machine type that carries N GPUs of a kind (SkyPilot pairs GPU rows with these hosts the same way).
_GCP_HOSTS: dict[str, dict[int, str]] = {
    "a100": {1: "a2-highgpu-1g", 2: "a2-highgpu-2g", 4: "a2-highgpu-4g", 8: "a2-highgpu-8g", 16: "a2-megagpu-16g"},
    "a100-80gb": {1: "a2-ultragpu-1g", 2: "a2-ultragpu-2g", 4: "a2-ultragpu-4g", 8: "a2-ultragpu-8g"},
    "h100": {1: "a3-highgpu-1g", 2: "a3-highgpu-2g", 4: "a3-highgpu-4g", 8: "a3-highgpu-8g"},
    "h100-mega": {8: "a3-megagpu-8g"},
    "h200": {8: "a3-ultragpu-8g"},
    "b200": {8: "a4-highgpu-8g"},
    "l4": {1: "g2-standard-4", 2: "g2-standard-24", 4: "g2-standard-48", 8: "g2-standard-96"},
}


@dataclass
class _Group:
    """One (instance type, region) of a file, over its zone rows."""

    line: int
    accelerator: str
    count: float
    vcpus: float | None
    memory: float | None
    prices: list[float] = field(default_factory=list)
    spots: list[float] = field(default_factory=list)
    price_missing: int = 0
    spot_placeholder: int = 0


def _version(path: Path) -> str:
    for part in reversed(path.parts):
        if re.fullmatch(r"v\d+", part):
            return part
    return "(version unknown)"


def _float(text: str) -> float | None:
    try:
        return float(text) if text.strip() else None
    except ValueError:
        return None


def _on_demand_tier(provider: str, instance: str) -> str:
    # Vast is a marketplace of community hosts; RunPod's community cloud likewise (its secure cloud is on-demand)
    if provider == "vast" or (provider == "runpod" and "community" in instance.lower()):
        return "marketplace"
    return "on_demand"


def import_vms_csv(
    label: str,
    text: str,
    accel: AcceleratorMap,
    as_of: date,
    provider: str | None = None,
    source: str | None = None,
    providers: set[str] | None = None,
) -> tuple[list[Offer], ImportReport]:
    """Offers from one vms.csv text. `provider` is the catalog folder's name when the file has no provider column;
    `source` is stamped on every row (default: `skypilot-catalog vN <provider>/vms.csv`)."""
    report = ImportReport(label)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        report.notes.append("empty file")
        return [], report
    col: dict[str, int] = {}
    for key, names in _ALIASES.items():
        for name in names:
            if name in header:
                col[key] = header.index(name)
                break
    missing = [k for k in _REQUIRED if k not in col]
    if missing:
        report.notes.append("not a SkyPilot vms.csv: no column for " + ", ".join(_ALIASES[k][0] for k in missing))
        return [], report
    if "provider" not in col and not provider:
        report.notes.append("no provider column and no provider given")
        return [], report

    hosts: dict[tuple[str, str], tuple[float | None, float | None, float | None, float | None]] = {}
    groups: dict[tuple[str, str, str], _Group] = {}
    line = 1
    for cells in reader:
        start, line = line + 1, reader.line_num
        if not cells:
            continue
        report.rows_read += 1

        def get(key: str, cells: list[str] = cells) -> str:
            i = col.get(key)
            return cells[i].strip() if i is not None and i < len(cells) else ""

        prov = (get("provider") or provider or "").lower()
        if providers and prov not in providers:
            report.drop("provider not selected", prov, 1)
            continue
        instance, acc, region = get("instance"), get("accelerator"), get("region")
        if not acc:
            # GCP host VM rows price the machine alone; other providers' CPU-only instances are not GPU offers
            if prov == "gcp" and instance:
                key = (instance, region)
                price, spot = parse_price(get("price")), parse_price(get("spot"))
                old = hosts.get(key)
                if old is not None:
                    price = price if old[0] is None else old[0] if price is None else min(price, old[0])
                    spot = spot if old[1] is None else old[1] if spot is None else min(spot, old[1])
                hosts[key] = (price, spot, _float(get("vcpus")), _float(get("memory")))
                report.drop("gcp host VM row (priced into GPU offers, not an offer itself)", f"{instance} {region}")
            else:
                report.drop("no accelerator (CPU-only instance)", f"{label}:{start} {instance}")
            continue
        if not region:
            report.drop("no region", f"{label}:{start} {instance}")
            continue
        count = _float(get("count"))
        if count is None or count < 1 or count != int(count):
            report.drop("GPU count not a whole number >= 1 (fractional GPU)", f"{label}:{start} {instance}")
            continue
        if prov == "gcp":
            host = instance.removesuffix(_GPU_ONLY) if instance else _GCP_HOSTS.get(acc.lower(), {}).get(int(count))
            if not host:
                report.drop("gcp: no host machine type for this GPU count", f"{label}:{start} {acc} x{count:g}")
                continue
            instance = f"{host}{_GPU_ONLY}"  # resolved to the host below, once every host row has been read
        key3 = (prov, instance, region)
        g = groups.get(key3)
        if g is None:
            g = groups[key3] = _Group(start, acc, count, _float(get("vcpus")), _float(get("memory")))
        price, spot_text = parse_price(get("price")), get("spot")
        spot = parse_price(spot_text)
        if price is None or price <= 0:
            g.price_missing += 1
        else:
            g.prices.append(price)
        if spot is not None and spot <= 0:
            g.spot_placeholder += 1
        elif spot is not None:
            g.spots.append(spot)

    offers: list[Offer] = []
    differing = 0
    for (prov, instance, region), g in groups.items():
        where = f"{label}:{g.line} {instance} {region}"
        vcpus, memory = g.vcpus, g.memory
        price = min(g.prices) if g.prices else None
        spot = min(g.spots) if g.spots else None
        if len(set(g.prices)) > 1:
            differing += 1
        if instance.endswith(_GPU_ONLY):
            instance = instance.removesuffix(_GPU_ONLY)
            h = hosts.get((instance, region))
            if h is None:
                report.drop("gcp: GPU priced alone and no host VM row for its machine type and region", where,
                            1 + (spot is not None))
                continue
            h_price, h_spot, vcpus, memory = h
            price = price + h_price if price is not None and h_price is not None else None
            spot = spot + h_spot if spot is not None and h_spot is not None else None
        gpu = accel.map_accelerator(prov, g.accelerator, instance)
        if gpu is None:
            rule = accel.lookup(prov, g.accelerator, instance)
            why = f"accelerator {g.accelerator}: {rule.note}" if rule is not None and rule.note else (
                f"accelerator {g.accelerator} has no catalog id")
            report.drop(why, where)
            continue
        src = (source or DEFAULT_SOURCE).format(version=_version(Path(label)), provider=prov)
        common = dict(provider=prov, instance_type=instance, gpu=gpu, gpus_per_instance=int(g.count), vcpus=vcpus,
                      memory_gib=memory, region=region, country=country_of(prov, region), as_of=as_of,
                      source=src, valid_from=as_of, valid_until=None, path=label, line=g.line)
        if price is not None:
            offers.append(Offer(tier=_on_demand_tier(prov, instance), usd_per_hour=price, **common))  # type: ignore[arg-type]
        else:
            report.drop("no on-demand price (empty, NaN or 0); spot kept if listed", where)
        if spot is not None:
            offers.append(Offer(tier="spot", usd_per_hour=spot, **common))  # type: ignore[arg-type]
        elif g.spot_placeholder:
            report.drop("spot price 0.00 is a placeholder", where)
    if differing:
        report.notes.append(f"{differing} (instance type, region) listed at different on-demand prices across rows; "
                            "kept the lowest")
    report.rows_written = len(offers)
    return offers, report


def _files(root: Path) -> Iterable[tuple[Path, str | None]]:
    """(file, provider) for a vms.csv, a catalog folder (`<provider>/vms.csv`) or a folder of `<provider>.csv`."""
    if root.is_file():
        yield root, (root.parent.name if root.name == "vms.csv" else root.stem)
        return
    for p in sorted(root.glob("*/vms.csv")):
        yield p, p.parent.name
    for p in sorted(root.glob("*.csv")):
        yield p, p.stem


def import_skypilot(
    root: Path,
    accel: AcceleratorMap,
    as_of: date,
    providers: set[str] | None = None,
    source: str | None = None,
) -> tuple[list[Offer], ImportReport]:
    report = ImportReport(f"skypilot {root}")
    offers: list[Offer] = []
    for path, prov in _files(root):
        if providers and prov and prov.lower() not in providers:
            continue
        label = path.relative_to(root).as_posix() if path != root else f"{prov}/{path.name}"
        if _version(path) != "(version unknown)" and _version(Path(label)) == "(version unknown)":
            label = f"{_version(path)}/{label}"  # keep the schema version in the label the source is built from
        rows, sub = import_vms_csv(label, path.read_text(encoding="utf-8"), accel, as_of, prov, source, providers)
        offers.extend(rows)
        report.merge(sub)
    return offers, report
