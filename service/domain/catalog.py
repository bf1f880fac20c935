"""The GPU catalog as loaded from rules/catalog/: specs and dated prices."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from functools import lru_cache

RENT_TIER_ORDER = ("ON_DEMAND", "MARKETPLACE", "RESERVED", "SPOT")


@lru_cache(maxsize=16)  # a brief's tier is one of a few names; placement asks per GPU, twice
def tier_preference(tier: str) -> tuple[str, ...]:
    """Rent tiers to try for a comparison at `tier`: that tier first, then the others in a fixed order, so every
    GPU without a row in `tier` falls back the same way."""
    return (tier, *(t for t in RENT_TIER_ORDER if t != tier))


@dataclass(frozen=True)
class Price:
    kind: str  # "rent" ($/GPU-hour) or "purchase" ($ per GPU)
    usd: float  # usd_per_hour for rent, usd for purchase
    as_of: str
    source: str
    valid_from: date | None = None
    valid_until: date | None = None
    location: str = ""  # file:line of the row, for explanations
    tier: str = ""  # ON_DEMAND | MARKETPLACE | RESERVED | LIST_PURCHASE (brief.PRICE_TIERS)
    sources: tuple[tuple[str, str], ...] = ()  # (locale, source as an answer in it says it): a row's source_<locale>

    def source_in(self, locale: str) -> str:
        """The source as an answer in `locale` says it (the row's `source_zh-CN`, say), else `source`."""
        return next((text for loc, text in self.sources if loc == locale), self.source)

    def valid_on(self, day: date) -> bool:
        if self.valid_from and day < self.valid_from:
            return False
        return not (self.valid_until and day > self.valid_until)


@dataclass(frozen=True)
class Gpu:
    id: str
    name: str
    vendor: str
    gpu_class: str  # datacenter | workstation | consumer
    memory_gb: float
    memory_type: str
    bandwidth_tbs: float
    tflops_bf16: float  # dense
    tflops_fp8: float  # dense, 0 = no native FP8
    tflops_fp4: float
    tdp_w: float
    interconnect_kind: str  # nvlink | xgmi | pcie | none
    interconnect_gbs: float
    gpus_per_node: int
    nvlink_domain: int
    mig: int
    matmul_efficiency: float
    software: str
    notes: str
    spec_source: str
    spec_as_of: str
    prices: tuple[Price, ...] = ()
    location: str = ""
    memory_reported_gb: float = 0.0  # total as the driver reports it, 1e9 bytes; 0 = not given (memory_gb)
    node_power_kw: float = 0.0  # one server at full load; 0 = estimate from TDP
    scale_out_gbs: float = 0.0  # per-GPU network beyond the NVLink domain, GB/s each way; 0 = none
    rack_gpus: int = 0  # > 0: sold and rented only by the rack of this many GPUs (GB200 NVL72: 72)

    @property
    def capacity_gb(self) -> float:
        """Memory the work is fitted into: the driver's total (an "80 GB" H100 holds 85.52e9 bytes), else the
        nominal figure."""
        return self.memory_reported_gb if self.memory_reported_gb > 0 else self.memory_gb

    def price(self, kind: str, day: date, tier: str = "") -> Price | None:
        """The newest price row of `kind` (and `tier`, when given) valid on `day` (the latest valid_from wins)."""
        rows = [p for p in self.prices if p.kind == kind and p.valid_on(day) and (not tier or p.tier == tier)]
        if not rows:
            return None
        return max(rows, key=lambda p: (p.valid_from or date.min, p.as_of))

    def rent_price(self, day: date, tiers: tuple[str, ...]) -> Price | None:
        """The rent row of the first tier in `tiers` that has one valid on `day`; else any valid rent row (a
        row without a tier, as a hand-built catalog may have)."""
        row = next((p for p in (self.price("rent", day, t) for t in tiers) if p is not None), None)
        return row or self.price("rent", day)

    @property
    def fast_interconnect(self) -> bool:
        return self.interconnect_kind in ("nvlink", "xgmi")
