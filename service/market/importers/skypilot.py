"""SkyPilot catalog (`catalogs/v7`, `v8`: `<provider>/vms.csv`) → offers.

Column orders differ by provider and schema version, so columns are found by header name; the derived one-file-
per-provider layout of the shared offers reference (`provider,instance_type,accelerator,...`) reads the same way.
What the catalog does that an offer must not:
- AWS and GCP list one row per availability zone: collapsed to one per region (on-demand is the same in every
  zone; spot is the lowest zone's price, since a placement picks the zone). The other zones' rows are counted as
  superseded.
- GCP prices attached GPUs apart from the host VM (accelerator rows with an empty InstanceType, or the reference's
  "(GPU component only)"): the host VM row's price is added so the offer is the whole instance; without a host
  row the offer is dropped and reported, because a GPU-only price would undercut every other provider.
- A spot price above the on-demand one (runpod L40S) means the two look swapped: the row is dropped, not guessed.
- Empty, NaN or 0 prices are not prices (vast writes spot 0.00 where it has none; aws p5e has no on-demand price
  in most regions): the row's other tier is kept, the missing one is reported.
- Host RAM that is not the host's: every Vast row carries a placeholder 65,536 MiB. Written as unknown (empty),
  never as a small host a placement rule would refuse. (Cudo's configurable RAM is listed shape by shape, each
  at its own price: kept as listed.)
- Mithril sells by auction: its "price" is the spot price, so its rows are spot offers, not on-demand ones.
- Names hide memory: the GPU memory column (`GpuInfo`, or the reference's `gpu_memory_mib`) maps an 80 GB A100
  listed as `A100` to a100-80gb and refuses a 48 GB RTX 4090 the catalog's 24 GB rtx-4090 would misdescribe.
- Rows with no region (seeweb) are kept as region `unlisted`, country unknown, and said so in the report.
- The same provider in two schema versions (v7 and v8 on one day): the newer file wins, the older one's rows are
  counted as superseded.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from ...domain.offers import Offer
from ...rulebook.accelerators import AcceleratorMap
from ..progress import BATCH, Progress
from .common import MALFORMED, ImportReport, csv_lines, parse_number, parse_price
from .regions import country_of

DEFAULT_SOURCE = "SkyPilot catalog {version}, {provider}/vms.csv, read {read}"
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
    "gpu_info": ("GpuInfo",),
    "gpu_mib": ("gpu_memory_mib",),  # the reference's per-GPU memory
    "arch": ("Arch",),  # schema v8
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
# Providers whose MemoryGiB is not the host's RAM (written empty: unknown, not small), and why.
# Cudo's RAM is configurable too, but its catalog lists each configuration as its own shape at its own price
# (1x2v4gb, 1x4v8gb, ... 2x48v96gb): those rows keep their RAM, so the host-RAM rule picks the cheapest shape with
# enough of it rather than a 4 GiB host's price for a configuration nobody could run.
HOST_RAM_UNKNOWN = {
    "vast": "Vast rows carry SkyPilot's placeholder host RAM (65,536 MiB)",
}
# Providers whose listed price is an auction (spot) price, never an on-demand one.
AUCTION = {"mithril": "Mithril prices by auction (price = spot price)"}
NO_REGION = "unlisted"  # the region given to a row that names none
_TOTAL_MIB = re.compile(r"TotalGpuMemoryInMiB['\"]?\s*:\s*([\d.]+)")
_SIZE_MIB = re.compile(r"SizeInMiB['\"]?\s*:\s*([\d.]+)")


@dataclass
class _Group:
    """One (instance type, region) of a file, over its zone rows."""

    line: int
    accelerator: str
    count: float
    vcpus: float | None
    memory: float | None
    gpu_gib: float | None
    rows: int = 0
    prices: list[float] = field(default_factory=list)
    spots: list[float] = field(default_factory=list)
    price_missing: int = 0
    spot_placeholder: int = 0


def _version(path: Path) -> str:
    for part in reversed(path.parts):
        if re.fullmatch(r"v\d+", part):
            return part
    return ""


def _version_number(v: str) -> int:
    return int(v[1:]) if v else 0


def _gpu_gib(get: Callable[[str], str], count: float) -> float | None:
    """Memory per GPU in GiB: the reference's column, else GpuInfo's total over the count (Vast writes the total
    in SizeInMiB; AWS and Lambda the per-GPU size), else its SizeInMiB."""
    mib = parse_number(get("gpu_mib"))
    if mib is None:
        info = get("gpu_info")
        total = _TOTAL_MIB.search(info)
        if total and count:
            mib = float(total.group(1)) / count
        else:
            size = _SIZE_MIB.search(info)
            mib = float(size.group(1)) if size else None
    return mib / 1024 if mib else None


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
    progress: Progress | None = None,
) -> tuple[list[Offer], ImportReport]:
    """Offers from one vms.csv text (rows counted on `progress`, in batches). `provider` is the catalog folder's
    name when the file has no provider column;
    `source` is stamped on every row (default: `SkyPilot catalog vN, <provider>/vms.csv, read <as_of>`)."""
    report = ImportReport(label)
    lines = csv_lines(text)
    first = next(lines, None)
    if first is None or first.error:
        report.notes.append("empty file" if first is None else f"{label}:{first.number}: the header is not CSV "
                            f"({first.error})")
        return [], report
    header = [h.strip() for h in first.cells]
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
    version = _version(Path(label)) or ("v8" if "arch" in col else "v7")

    hosts: dict[tuple[str, str], tuple[float | None, float | None, float | None, float | None]] = {}
    groups: dict[tuple[str, str, str], _Group] = {}
    no_region: dict[str, int] = {}
    counted = 0
    for row in lines:
        if row.error:
            i = col.get("provider")
            named = row.cells[i].strip().lower() if i is not None and i < len(row.cells) else ""
            prov = named or (provider or "").lower()
            report.read(prov)
            report.drop(MALFORMED, f"{label}:{row.number} ({row.error})", 1, prov)
            continue
        _row(row.cells, row.number, label, col, provider, providers, report, hosts, groups, no_region)
        counted += 1
        if progress is not None and counted == BATCH:
            progress.update(counted)
            counted = 0
    if progress is not None:
        progress.update(counted)
    for prov, n in sorted(no_region.items()):
        report.notes.append(f"{prov}: {n} rows list no region; kept as region '{NO_REGION}', country unknown "
                            "(a country or region filter leaves them out)")

    offers: list[Offer] = []
    differing = 0
    unknown_ram: dict[str, int] = {}
    auction: dict[str, int] = {}
    placeholder_spot: dict[str, int] = {}
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
                            g.rows, prov)
                continue
            h_price, h_spot, vcpus, memory = h
            price = price + h_price if price is not None and h_price is not None else None
            spot = spot + h_spot if spot is not None and h_spot is not None else None
        gpu, why = accel.resolve(prov, g.accelerator, instance, g.gpu_gib)
        if gpu is None:
            report.drop(why, where, g.rows, prov)
            continue
        if prov in AUCTION and price is not None:
            spot = min(price, spot) if spot is not None else price
            price = None
            auction[prov] = auction.get(prov, 0) + 1
        if prov in HOST_RAM_UNKNOWN and memory is not None:
            memory = None
            unknown_ram[prov] = unknown_ram.get(prov, 0) + 1
        src = (source or DEFAULT_SOURCE).format(version=version, provider=prov, read=as_of.isoformat())
        common = dict(provider=prov, instance_type=instance, gpu=gpu, gpus_per_instance=int(g.count), vcpus=vcpus,
                      memory_gib=memory, region=region, country=country_of(prov, region), as_of=as_of,
                      source=src, valid_from=as_of, valid_until=None, path=label, line=g.line)
        made = []
        if price is not None:
            made.append(Offer(tier=_on_demand_tier(prov, instance), usd_per_hour=price, **common))  # type: ignore[arg-type]
        elif prov not in AUCTION and spot is not None:
            report.notes.append(f"{where}: no on-demand price (empty, NaN or 0); its spot price is kept")
        if spot is not None and price is not None and spot > price:
            # Interruptible capacity above the on-demand rate is no offer anyone takes: the two figures look
            # swapped (runpod's file lists SpotPrice before Price; its L40S reads $0.43 on-demand, $0.86 spot, the
            # reverse of RunPod's list), so neither is trusted. Dropped and counted, never guessed.
            report.drop("spot price above on-demand: the two look swapped, neither is used", where, g.rows, prov)
            continue
        if spot is not None:
            made.append(Offer(tier="spot", usd_per_hour=spot, **common))  # type: ignore[arg-type]
        elif g.spot_placeholder:
            placeholder_spot[prov] = placeholder_spot.get(prov, 0) + 1
        if not made:
            report.drop("no price in any tier (empty, NaN or 0; spot 0.00 is a placeholder)", where, g.rows, prov)
            continue
        offers.extend(made)
        report.written(prov)
        report.supersede(prov, g.rows - 1)  # the region's other zone rows
        for o in made:
            report.offer(prov, o.tier)
    if differing:
        report.notes.append(f"{differing} (instance type, region) listed at different on-demand prices across rows; "
                            "kept the lowest")
    for prov, n in sorted(unknown_ram.items()):
        report.notes.append(f"{prov}: host RAM written as unknown on {n} offers ({HOST_RAM_UNKNOWN[prov]})")
    for prov, n in sorted(placeholder_spot.items()):
        report.notes.append(f"{prov}: spot price 0.00 is a placeholder on {n} offers: no spot offer written")
    for prov, n in sorted(auction.items()):
        report.notes.append(f"{prov}: {n} offers imported as spot, not on-demand ({AUCTION[prov]})")
    return offers, report


def _row(
    cells: list[str], start: int, label: str, col: dict[str, int], provider: str | None,
    providers: set[str] | None, report: ImportReport,
    hosts: dict[tuple[str, str], tuple[float | None, float | None, float | None, float | None]],
    groups: dict[tuple[str, str, str], _Group], no_region: dict[str, int],
) -> None:
    """One catalog row: counted as read, then dropped with its reason, kept as a GCP host price, or added to the
    group of its (instance type, region)."""

    def get(key: str) -> str:
        i = col.get(key)
        return cells[i].strip() if i is not None and i < len(cells) else ""

    prov = (get("provider") or provider or "").lower()
    report.read(prov)
    if providers and prov not in providers:
        report.drop("provider not selected", f"{label}:{start} {prov}", 1, prov)
        return
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
            hosts[key] = (price, spot, parse_number(get("vcpus")), parse_number(get("memory")))
            report.drop("gcp host VM row: no GPU (its price is added to the GPU rows it carries)",
                        f"{label}:{start} {instance} {region}", 1, prov)
        else:
            report.drop("no accelerator (CPU-only instance)", f"{label}:{start} {instance}", 1, prov)
        return
    if not region:
        region = NO_REGION
        no_region[prov] = no_region.get(prov, 0) + 1
    count = parse_number(get("count"))
    if count is None or count < 1 or count != int(count):
        report.drop("GPU count not a whole number >= 1 (fractional GPU)", f"{label}:{start} {instance}", 1, prov)
        return
    if prov == "gcp":
        host = instance.removesuffix(_GPU_ONLY) if instance else _GCP_HOSTS.get(acc.lower(), {}).get(int(count))
        if not host:
            report.drop("gcp: no host machine type for this GPU count", f"{label}:{start} {acc} x{count:g}", 1, prov)
            return
        instance = f"{host}{_GPU_ONLY}"  # resolved to the host later, once every host row has been read
    key3 = (prov, instance, region)
    g = groups.get(key3)
    if g is None:
        g = groups[key3] = _Group(start, acc, count, parse_number(get("vcpus")), parse_number(get("memory")),
                                  _gpu_gib(get, count))
    g.rows += 1
    price, spot = parse_price(get("price")), parse_price(get("spot"))
    if price is None or price <= 0:
        g.price_missing += 1
    else:
        g.prices.append(price)
    if spot is not None and spot <= 0:
        g.spot_placeholder += 1
    elif spot is not None:
        g.spots.append(spot)


def _files(root: Path) -> list[tuple[Path, str]]:
    """(file, provider) for a vms.csv, a catalog folder (`[vN/]<provider>/vms.csv`, any depth) or a folder of
    `<provider>.csv` (the reference's layout)."""
    if root.is_file():
        return [(root, root.parent.name if root.name == "vms.csv" else root.stem)]
    found = [(p, p.parent.name) for p in sorted(root.rglob("vms.csv"))]
    found += [(p, p.stem) for p in sorted(root.glob("*.csv")) if p.name != "vms.csv"]  # a provider's folder
    return found


def _shown(root: Path, path: Path, provider: str) -> str:
    """The file as the report and the offers' `path` name it: relative to the import root, keeping the schema
    version folder when the root is the file itself."""
    rel = path.relative_to(root).as_posix() if path != root else f"{provider}/{path.name}"
    v = _version(path)
    return f"{v}/{rel}" if v and not _version(Path(rel)) else rel


def what_was_read(root: Path, path: Path, shown: str) -> str | None:
    """The source stamp when --source is not given (issue 37): None (the catalog's own stamp, DEFAULT_SOURCE) when
    the path says it is SkyPilot's `vN/<provider>/vms.csv`; else the file as read, named from the folder given (never
    this machine's location above it), and when it was read. A `{read}` in it is filled with the as-of date."""
    if _version(Path(shown)) and path.name == "vms.csv":
        return None
    named = f"{root.name}/{path.relative_to(root).as_posix()}" if root.is_dir() else path.name
    return named.replace("{", "{{").replace("}", "}}") + ", read {read}"


def _data_rows(text: str) -> int:
    return max(0, sum(1 for line in text.splitlines() if line.strip()) - 1)


def import_skypilot(
    root: Path,
    accel: AcceleratorMap,
    as_of: date,
    providers: set[str] | None = None,
    source: str | None = None,
    label: str | None = None,
    progress: Progress | None = None,
) -> tuple[list[Offer], ImportReport]:
    """Every provider file under `root`; when one provider has files of several schema versions, the newest
    version's file is imported and the older files' rows are counted as superseded (said in a note)."""
    # The report names the dataset, not where this machine keeps its copy.
    report = ImportReport(label or "SkyPilot catalog")
    by_provider: dict[str, list[tuple[int, Path]]] = {}
    for path, prov in _files(root):
        rel = Path(_shown(root, path, prov))
        by_provider.setdefault(prov.lower(), []).append((_version_number(_version(rel)), path))
    offers: list[Offer] = []
    done = 0
    for prov, files in sorted(by_provider.items()):
        if progress is not None:
            progress.note(f"{done} of {len(by_provider)} providers done, now {prov}")
        done += 1
        files.sort(key=lambda vp: vp[0])
        _, newest = files[-1]
        shown = _shown(root, newest, prov)
        if providers and prov not in providers:
            continue
        for _, older in files[:-1]:
            n = _data_rows(older.read_text(encoding="utf-8", errors="replace"))
            report.read(prov, n)
            report.supersede(prov, n)
            report.notes.append(f"{prov}: {shown} supersedes {_shown(root, older, prov)} ({n} rows, the older "
                                "schema)")
        stamp = source if source is not None else what_was_read(root, newest, shown)
        if stamp is not None and source is None and not report.unsure_source:
            report.unsure_source = stamp.format(read=as_of.isoformat())
            report.notes.append(f"the files do not say which SkyPilot catalog they are (no vN/<provider>/vms.csv in "
                                f"the path): each row is stamped with the file it came from, e.g. "
                                f"\"{report.unsure_source}\"; pass --source to say where they came from")
        rows, sub = import_vms_csv(shown, newest.read_text(encoding="utf-8"), accel, as_of, prov, stamp, providers,
                                   progress)
        offers.extend(rows)
        report.merge(sub)
    if progress is not None:
        progress.note(f"{len(by_provider)} providers")
    return offers, report
