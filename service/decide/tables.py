"""What sizing reads from the rules, resolved once per rules load instead of once per GPU per request.

The assumptions sizing uses become attributes (a dict lookup and a float() per use, thousands per request,
before), and each catalog GPU gets its table: the tensor-parallel widths it can use, its usable memory, its
decode bandwidth utilization, per width the communication figures, and its price rows newest first. Nothing
here depends on a brief: the answer path may keep these for as long as the rules that made them serve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from datetime import date

from ..domain.assumptions import Assumptions
from ..domain.catalog import Gpu, Price
from ..memo import IdentityMemo, keep
from ..physics.memory import ArchitectureBand

MAX_TENSOR_PARALLEL = 8  # attention heads split evenly up to 8 ways in practice; beyond that, pipeline stages

@dataclass(frozen=True)
class Constants:
    """The assumptions (rules/assumptions.yaml) the sizing formulas read, as numbers, by their names there."""

    safety_headroom: float
    mfu_prefill: float
    mbu_decode: float
    mbu_decode_consumer: float
    kernel_saturation_ms: float
    decode_step_floor_ms: float
    tp_allreduce_latency_us_fast_link: float
    tp_allreduce_latency_us_slow_link: float
    kv_cache_bytes: float
    activation_bytes_per_token_hidden: float
    sampler_bytes_per_vocab_entry: float
    engine_overhead_gb: float
    media_activation_peak_gb: float
    max_inference_nodes: float
    default_utilization: float
    electricity_usd_per_kwh: float
    pue: float
    ownership_years: float
    maintenance_fraction_per_year: float
    hours_per_month: float

    @staticmethod
    def of(a: Assumptions) -> Constants:
        return Constants(**{f.name: a.num(f.name) for f in fields(Constants)})


@dataclass(frozen=True)
class Width:
    """One model copy on n GPUs: how the n split (tensor parallel inside the scale-up domain, pipeline stages
    beyond it) and what that split costs per decode step in communication, apart from the model's layers."""

    n: int
    tp: int
    stages: int
    allreduce_us: float  # per tensor-parallel all-reduce, over the link the tp group uses
    pipeline_s: float  # stage-boundary hand-offs per step


@dataclass(frozen=True)
class GpuTable:
    gpu: Gpu
    scale_up: int  # GPUs one model copy can span before crossing a node boundary
    tp_domain: int  # widest tensor parallelism: min(scale_up, MAX_TENSOR_PARALLEL)
    sizes: tuple[int, ...]  # GPU counts that can hold one model copy, ascending
    widths: dict[int, Width]  # by n, for every n in sizes
    usable_gb: float  # memory per GPU after the safety headroom
    mbu: float  # decode memory-bandwidth utilization for this class of GPU
    per_node: int
    rent_rows: tuple[Price, ...]  # newest first (latest valid_from, then as_of); ties keep catalog order
    purchase_rows: tuple[Price, ...]
    # (day, tier preference) -> (rent_price, purchase_price): every request of a day asks the same rows
    on_day: dict[tuple[date, tuple[str, ...]], tuple[Price | None, Price | None]] = field(
        default_factory=dict, compare=False, repr=False)

    def rent_price(self, day: date, tiers: tuple[str, ...]) -> Price | None:
        """Gpu.rent_price over the presorted rows: the first row of the first tier that has one valid on
        `day`, else the newest valid row of any tier."""
        valid = [p for p in self.rent_rows if p.valid_on(day)]
        for tier in tiers:
            for p in valid:
                if not tier or p.tier == tier:
                    return p
        return valid[0] if valid else None

    def purchase_price(self, day: date) -> Price | None:
        return next((p for p in self.purchase_rows if p.valid_on(day)), None)

    def prices_on(self, day: date, tiers: tuple[str, ...]) -> tuple[Price | None, Price | None]:
        """(rent_price(day, tiers), purchase_price(day)), looked up once per day and tier preference."""
        # Days asked with as_of: keep a few, not every one ever asked.
        return keep(self.on_day, (day, tiers), lambda: (self.rent_price(day, tiers), self.purchase_price(day)), 64)


def _newest_first(rows: list[Price]) -> tuple[Price, ...]:
    # Gpu.price takes max() by this key, which keeps the first of equal rows; a stable descending sort does too.
    return tuple(sorted(rows, key=lambda p: (p.valid_from or date.min, p.as_of), reverse=True))


def scale_up(gpu: Gpu) -> int:
    """GPUs one model copy can span before crossing a node boundary (an NVL72 rack counts as one domain)."""
    return max(1, gpu.gpus_per_node, gpu.nvlink_domain if gpu.fast_interconnect else 1)


def tp_sizes(domain: int, node: int, max_nodes: int) -> tuple[int, ...]:
    """Powers of two up to 8 inside the scale-up domain, then whole nodes of pipeline stages."""
    sizes = [n for n in (1, 2, 4, 8) if n <= domain]
    sizes += [max(node, domain) * k for k in range(2, max_nodes + 1)]
    return tuple(sorted(set(sizes)))


def _width(gpu: Gpu, n: int, domain: int, c: Constants) -> Width:
    tp = min(n, domain)
    fast = gpu.fast_interconnect and tp <= max(gpu.nvlink_domain, 1)
    return Width(
        n=n,
        tp=tp,
        stages=math.ceil(n / tp),
        allreduce_us=c.tp_allreduce_latency_us_fast_link if fast else c.tp_allreduce_latency_us_slow_link,
        pipeline_s=(math.ceil(n / tp) - 1) * c.tp_allreduce_latency_us_slow_link / 1e6,
    )


def gpu_table(gpu: Gpu, c: Constants) -> GpuTable:
    up = scale_up(gpu)
    domain = min(up, MAX_TENSOR_PARALLEL)
    sizes = tp_sizes(domain, max(1, gpu.gpus_per_node), int(c.max_inference_nodes))
    return GpuTable(
        gpu=gpu,
        scale_up=up,
        tp_domain=domain,
        sizes=sizes,
        widths={n: _width(gpu, n, domain, c) for n in sizes},
        usable_gb=gpu.capacity_gb * (1.0 - c.safety_headroom),
        mbu=c.mbu_decode_consumer if gpu.gpu_class == "consumer" else c.mbu_decode,
        per_node=max(1, gpu.gpus_per_node),
        rent_rows=_newest_first([p for p in gpu.prices if p.kind == "rent"]),
        purchase_rows=_newest_first([p for p in gpu.prices if p.kind == "purchase"]),
    )


class Tables:
    """Per rules load (one Assumptions object): the constants, and each catalog GPU's table on first use."""

    def __init__(self, a: Assumptions) -> None:
        self.constants = Constants.of(a)
        self.gpu = IdentityMemo(lambda g: gpu_table(g, self.constants), limit=1024)
        # A generation brief's speed figures by GPU, kept per brief and shape (sizing/per_request.py): briefs that
        # differ only in their economics differ only in what the speed does not read.
        self.speeds: dict[object, dict[int, tuple[object, dict[str, object], tuple[str, ...]]]] = {}
        # The missed-target suggestion's fit and latency by GPU and output length, per brief (all but what the
        # latency does not read) and day: advisor._resizer.
        self.latencies: dict[object, dict[tuple[int, int], tuple[object, tuple[bool, float]]]] = {}


tables = IdentityMemo(Tables, limit=8)
# The architecture bands every brief's shape is estimated from, built from the assumption rows once.
bands: IdentityMemo[Assumptions, tuple[ArchitectureBand, ...]] = IdentityMemo(Assumptions.bands, limit=8)
