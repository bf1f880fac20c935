"""The per-GPU sizing record (`Sizing`) and what every workload kind shares: parallel groups, usable
memory, engine overhead, compute saturation, the rent price in the compared tier, whether a latency target
is met, cost per unit of work and the cost of owning."""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, field, fields
from datetime import date
from functools import lru_cache
from typing import Any

from ...domain.assumptions import Assumptions
from ...domain.brief import DEFAULT_PRICE_TIER, TRAINING_WORKLOADS, UNSPECIFIED, Brief, Quote
from ...domain.catalog import Gpu, Price, tier_preference
from ...domain.offers import Offer
from ...money import cost as money
from ...money import ownership as own
from ...physics import memory as mem
from .. import tables as tb
from ..tables import MAX_TENSOR_PARALLEL, scale_up
from .shape import Shape


@dataclass(frozen=True, slots=True)
class Placed:
    """A sized GPU on one offer: whole instances of its shape."""

    offer: Offer
    instances: int
    usd_per_hour: float  # the whole configuration
    offer_tier: str  # brief.PRICE_TIERS name of the offer's tier
    usd_per_month: float = 0.0  # the whole configuration for the brief's month (a reserved term bills 730 h)

    @property
    def gpus(self) -> int:
        return self.instances * self.offer.gpus_per_instance


@dataclass
class Sizing:
    gpu: Gpu
    count: int = 0
    per_replica: int = 1  # GPUs holding one copy of the model (tensor/pipeline parallel)
    replicas: int = 1
    nodes: int = 1
    fits: bool = False
    memory: mem.MemoryBreakdown | None = None
    capacity_gb: float = 0.0
    headroom: float = 0.0
    price: Price | None = None
    quote: Quote | None = None
    usd_per_gpu_hour: float = 0.0
    usd_per_hour: float = 0.0
    usd_per_month: float = 0.0  # the brief's month at this price (decide/month.py); 0 = unpriced
    tier_allowed: bool = False  # priced on an offer in a tier the brief allows (placement.priced_tiers)
    fixed_demand: bool = False  # serves a demand the brief states as a rate: the same for every GPU (month.py)
    compared_tier: str = DEFAULT_PRICE_TIER  # the tier every candidate is compared at
    price_tier: str = ""  # the tier of the price used ("" when unpriced)
    tflops: float = 0.0  # dense TFLOPS per GPU at the precision used for compute
    effective_tflops: float = 0.0  # what one GPU delivers on this work: peak x MFU-scaling x saturation
    usd_per_tflop_hour: float = 0.0
    unit: str = ""  # SUCCESS_UNIT name the cost is per (the brief's, else a workload default); rendered by messages
    units_per_hour: float = 0.0  # accepted-or-not outputs per hour; 0 = cannot be computed
    usd_per_unit: float = 0.0  # per ACCEPTED unit
    tokens_per_second: float = 0.0
    step_ms: float = 0.0
    est_latency_ms: float = 0.0
    est_ttft_ms: float = 0.0
    latency_target: bool = False
    meets_latency: bool = True
    train_hours: float = 0.0
    itl_ms: float = 0.0  # time per output token per sequence under the brief's load
    micro_tokens: int = 0  # training: tokens per GPU per forward pass the saturation model used
    compute_count: int = 0
    memory_count: int = 0
    memory_count_latency_ms: float = 0.0  # realtime: est_latency_ms at memory_count GPUs, before widening for latency
    split_copies: int = 0  # copies of a pinned parallel shape that split the sessions (0 = one copy holds them)
    sessions_per_copy: int = 0  # the sessions each of those copies holds
    purchase: Price | None = None
    annual_power_usd: float = 0.0
    owned_usd_per_hour: float = 0.0
    break_even_hours: float = 0.0
    break_even_months: float = 0.0
    running_usd_per_busy_hour: float = 0.0  # power x PUE + maintenance, per busy hour, whole configuration
    ownership_utilization: float = 0.0
    racks: int = 0
    power_kw_per_node: float = 0.0
    power_kw_per_rack: float = 0.0
    spare_nodes: int = 0  # training: nodes to keep for the ones under repair
    restart_overhead_days: float = 0.0  # training: wall-clock days of train_hours its interruptions cost
    fixed_hours: float = 0.0  # training: hours of train_hours every run pays whatever its GPUs (start-up)
    formulas: list[str] = field(default_factory=list)
    placement: Placed | None = None  # the offer it is priced on (decide/placement.py); None = catalog or quote
    placements: tuple[Placed, ...] = ()  # best first
    market: tuple[float, float, float, int, int] | None = None  # on-demand (min, median, max, offers, providers)
    offer_stale: bool = False
    gpus_needed: int = 0  # GPUs the sizing needs before whole-instance rounding (0 = not placed: count)
    spare_gpus: int = 0  # GPUs the placement rents that do no work (a fixed load on a wider instance)
    has_offers: bool = False
    offers_loaded: bool = False
    # The rent buying is weighed against, whole configuration $/h, and where it comes from: own (this
    # configuration's rent), catalog (the rules' reference rent in the compared tier) or market (the median offer).
    break_even_rent: float = 0.0
    break_even_basis: str = "own"

    @classmethod
    def blank(cls, gpu: Gpu, compared_tier: str) -> Sizing:
        """Sizing(gpu=gpu, compared_tier=compared_tier), without the generated __init__ assigning some fifty
        defaults one by one (several microseconds, for each GPU of each request)."""
        s = cls.__new__(cls)
        s.__dict__.update(BLANK_SIZING)
        s.gpu, s.compared_tier, s.formulas = gpu, compared_tier, []
        return s

    @property
    def price_from_quote(self) -> bool:
        return self.quote is not None

    @property
    def gpu_hours(self) -> float:
        return self.count * self.train_hours

    def hours_at(self, gpus: int) -> float:
        """Training: the run's hours on `gpus` GPUs instead of `count` (compute scales with the count; the
        start-up does not), for placement's whole instances."""
        if self.train_hours <= 0 or gpus <= 0 or self.count <= 0:
            return self.train_hours
        return (self.train_hours - self.fixed_hours) * self.count / gpus + self.fixed_hours

    @property
    def usd_per_run(self) -> float:
        return self.usd_per_hour * self.train_hours

    @property
    def price_tier_fallback(self) -> bool:
        """Priced, but neither in the brief's tier nor on an offer of a tier the brief allows (its cheapest month
        over those is like for like)."""
        return bool(self.price_tier) and self.price_tier != self.compared_tier and not self.tier_allowed


BLANK_SIZING = {f.name: f.default for f in fields(Sizing) if f.default is not MISSING}


# Figures that depend on the brief but not on the GPU, computed once per request (see size_all).
Memo = dict[tuple[Any, ...], Any]




# A handful of distinct (domain, node) pairs in a catalog, asked for by every GPU of every request.
_tp_sizes_of = lru_cache(maxsize=256)(tb.tp_sizes)


def tp_group_sizes(gpu: Gpu, a: Assumptions) -> tuple[int, ...]:
    """GPU counts that can hold one model copy: powers of two up to 8 inside the scale-up domain, then whole
    nodes of pipeline stages."""
    return _tp_sizes_of(min(scale_up(gpu), MAX_TENSOR_PARALLEL), max(1, gpu.gpus_per_node),
                        int(a.num("max_inference_nodes")))


def usable_gb(gpu: Gpu, a: Assumptions, training: bool = False) -> float:
    """Memory the work may fill: the driver's total less the serving engine's headroom (vLLM keeps 8-10% free);
    training has no serving engine and keeps only `training_safety_headroom`."""
    return gpu.capacity_gb * (1.0 - a.num("training_safety_headroom" if training else "safety_headroom"))


def parallel_efficiency(gpu: Gpu, n: int, a: Assumptions) -> float:
    if n <= 1:
        return 1.0
    if gpu.fast_interconnect and n <= max(gpu.nvlink_domain, 1):
        return a.num("parallel_efficiency_fast_link")
    return a.num("parallel_efficiency_pcie")


def decode_mbu(gpu: Gpu, a: Assumptions) -> float:
    return a.num("mbu_decode_consumer") if gpu.gpu_class == "consumer" else a.num("mbu_decode")


def compute_tflops(gpu: Gpu, precision: str) -> float:
    """Dense TFLOPS used for compute: FP8 where the GPU has it and the model runs in 8 bits, FP4 where it has FP4
    tensor cores and the weights are FP4, else BF16/FP16 (FP4 weights without FP4 cores are dequantized: the
    memory win stays, the compute is 16-bit; a caveat says so)."""
    if precision in ("FP8", "INT8") and gpu.tflops_fp8 > 0:
        return gpu.tflops_fp8
    if precision == "FP4" and gpu.tflops_fp4 > 0:
        return gpu.tflops_fp4
    return gpu.tflops_bf16


# Work that can stop and resume from a checkpoint without anyone waiting on it: spot capacity suits it.
INTERRUPTIBLE_WORKLOADS = ("BATCH_INFERENCE", "EVALUATION", "EMBEDDING", "PRETRAINING", "FULL_FINETUNE",
                           "ADAPTER_FINETUNE")


def compared_tier(brief: Brief) -> str:
    """The tier every candidate's rent is compared at, so the ranking is like for like: the brief's; else spot
    for interruptible work the brief lets run there (and that is not always on); else on-demand."""
    if brief.economics.price_tier != UNSPECIFIED:
        return brief.economics.price_tier
    if (brief.placement.interruptible_ok and brief.workload in INTERRUPTIBLE_WORKLOADS
            and brief.run_cycle != "ALWAYS_ON"):
        return "SPOT"
    return DEFAULT_PRICE_TIER


def gpu_rent_price(
    gpu: Gpu, quotes: tuple[Quote, ...], day: date, tier: str
) -> tuple[Price | None, Quote | None, float, str]:
    """The rent price in the compared tier, else the next tier that has one; a caller's quote beats both."""
    quote = next((q for q in quotes if q.gpu == gpu.id), None)
    row = gpu.rent_price(day, tier_preference(tier))
    if quote is not None:
        return row, quote, quote.usd_per_hour, quote.tier if quote.tier != UNSPECIFIED else tier
    return row, None, row.usd if row else 0.0, row.tier if row else ""


MAX_GPUS = 1_000_000  # beyond any real cluster: a brief that needs more is infeasible, not a number to print


def size_unit_cost(s: Sizing, brief: Brief, shape: Shape, a: Assumptions) -> None:
    acceptance = brief.economics.acceptance_rate
    unit_kind = brief.success_unit
    if unit_kind == "UNSPECIFIED":
        unit_kind = "TRAINING_RUN" if brief.workload in TRAINING_WORKLOADS else "TOKEN"
    s.unit = unit_kind
    if brief.workload in TRAINING_WORKLOADS:
        if s.train_hours > 0 and unit_kind in ("TRAINING_RUN", "CHECKPOINT"):
            s.units_per_hour = 1.0 / s.train_hours
    elif brief.workload == "MEDIA_GENERATION":
        # Outputs per second from the denoising FLOPs; priced per image (a video's seconds need its frame rate).
        if unit_kind == "IMAGE" and s.tokens_per_second > 0 and brief.media.frames <= 0:
            util = brief.economics.utilization or a.num("default_utilization")
            offered = brief.traffic.requests_per_second
            capacity = s.tokens_per_second * s.replicas
            s.units_per_hour = (min(offered, capacity) if offered > 0 else capacity * util) * 3600
    elif s.tokens_per_second > 0:
        # An embedding record is its input; a generated output is its output tokens.
        out = shape.input_tokens if brief.workload == "EMBEDDING" else shape.output_tokens
        util = brief.economics.utilization or a.num("default_utilization")
        offered = brief.traffic.requests_per_second
        capacity_rps = s.tokens_per_second * s.replicas / out
        # Offered load when the brief gives it (capacity beyond it idles and is still paid for); otherwise the
        # capacity at the expected utilization.
        served_rps = min(offered, capacity_rps) if offered > 0 else capacity_rps * util
        if unit_kind == "TOKEN":
            s.units_per_hour = served_rps * out * 3600 / 1e6
        elif unit_kind in ("RESPONSE", "TASK", "RECORD"):
            s.units_per_hour = served_rps * 3600
    if s.units_per_hour > 0 and s.usd_per_hour > 0:
        s.usd_per_unit = money.usd_per_accepted_unit(s.usd_per_hour, s.units_per_hour, acceptance)


def size_ownership(s: Sizing, brief: Brief, a: Assumptions, rent: float | None = None, basis: str = "own") -> None:
    """Power, owned cost and buy-vs-rent break-even; `rent` ($/h, whole configuration) is what buying is weighed
    against: this configuration's rent unless the caller names another (placement.py: a reference rent)."""
    rent = s.usd_per_hour if rent is None else rent
    s.break_even_rent, s.break_even_basis = rent, basis
    e = brief.economics
    util = e.utilization or a.num("default_utilization")
    kwh = e.electricity_usd_per_kwh or a.num("electricity_usd_per_kwh")
    pue = a.num("pue")
    years = a.num("ownership_years")
    n = s.count
    s.annual_power_usd = own.annual_power_usd(s.gpu.tdp_w * n, util, kwh, pue)
    if s.purchase is None:
        return
    purchase = s.purchase.usd * n
    maintenance = a.num("maintenance_fraction_per_year") * purchase
    running = own.running_usd_per_busy_hour(s.gpu.tdp_w * n, kwh, pue, maintenance, util)
    s.running_usd_per_busy_hour = running
    s.ownership_utilization = util
    s.owned_usd_per_hour = own.owned_usd_per_hour(purchase, years, 0.0, running, util)
    if rent > 0:
        s.break_even_hours = own.break_even_hours(purchase, rent, running)
        if math.isfinite(s.break_even_hours):
            s.break_even_months = own.break_even_months(s.break_even_hours, util, a.num("hours_per_month"))
        else:
            s.break_even_months = math.inf


def meets_latency(s: Sizing, lat) -> bool:  # noqa: ANN001 - Latency
    ok = True
    if lat.p95_ms > 0:
        ok = ok and s.est_latency_ms <= lat.p95_ms
    if lat.ttft_ms > 0:
        ok = ok and s.est_ttft_ms <= lat.ttft_ms
    return ok


def with_engine_overhead(b: mem.MemoryBreakdown, gpus: int, a: Assumptions) -> mem.MemoryBreakdown:
    """Engine overhead is per GPU: a breakdown sized for one GPU gains it once per extra GPU."""
    if gpus <= 1:
        return b
    extra = (gpus - 1) * a.num("engine_overhead_gb")
    return mem.MemoryBreakdown(tuple((n, v + extra if n == "engine" else v) for n, v in b.components))


def saturation(tflops: float, tokens_per_step: int, hidden: int, saturation_ms: float) -> float:
    layer_flops = 24.0 * tokens_per_step * hidden * hidden
    needed = tflops * 1e12 * saturation_ms / 1000
    return min(1.0, layer_flops / needed) if needed > 0 else 1.0
