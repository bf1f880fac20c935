"""`size_all`'s fast path: what depends only on the brief worked out once per request, each GPU then sized
from its per-rules table (tables.py). Equal to `size` by test."""

from __future__ import annotations

import math
from datetime import date

from ...domain.assumptions import Assumptions
from ...domain.brief import TRAINING_WORKLOADS, UNSPECIFIED, Brief, Economics, Quote
from ...domain.catalog import tier_preference
from ...domain.frozen import build
from ...money import cost as money
from ...money import ownership as own
from ...physics import memory as mem
from .. import tables as tb
from .cluster import size_cluster, whole_racks
from .common import Memo, Sizing, compared_tier, compute_tflops, size_ownership
from .inference import (
    GENERATION_SIZED,
    inference_need,
    inference_speed,
    pipeline_sizes,
    replicate_for_load,
    size_inference,
)
from .media_latency import check_latency
from .shape import Shape
from .training import full_training_need, size_adapter, size_full_training

NO_ECONOMICS = Economics()


def without_economics(brief: Brief) -> Brief:
    """`replace(brief, economics=NO_ECONOMICS)` without the frozen constructors' guarded setattr per field (the
    same brief: equal, same hash): the key of what a rules version keeps across briefs that differ only in what
    the speed never reads, made twice per answer (the speeds here, the missed-target lengths in the advisor)."""
    return build(type(brief), **{**brief.__dict__, "economics": NO_ECONOMICS})


SPEED_BRIEFS = 256  # briefs whose speeds a rules load keeps; all are dropped past it


class RequestSizer:
    """`size` for every GPU of one request, the fast way. What depends on the brief alone (the bytes a decode
    step reads, its FLOPs, a prompt's attention, the memory of one model copy at each width, the ownership
    inputs) is worked out here once; what depends on the GPU and the rules alone comes from its GpuTable.
    The formulas are `size`'s, written out over those figures with every operation in the same order, so the
    floats are the same bits. Where a figure would fail a physics or money function's own check (a hand-built
    GPU with no bandwidth, a negative price), the plain function is called instead and raises what it raises."""

    def __init__(
        self, brief: Brief, shape: Shape, a: Assumptions, c: tb.Constants, quotes: tuple[Quote, ...], day: date,
        needs: dict[tuple[int, int], mem.MemoryBreakdown] | None = None,
        speeds: dict[object, dict[int, tuple[object, dict[str, object], tuple[str, ...]]]] | None = None,
    ) -> None:
        """`needs`: memory breakdowns by (n, tp) already worked out for a brief and shape that differ from these
        only in what the memory does not read (the output length at the same sized context)."""
        self.brief, self.shape, self.a, self.c, self.day = brief, shape, a, c, day
        self.memo: Memo = {}  # the plain functions' per-request memo (training, prefill-only speed)
        self.tier = compared_tier(brief)
        self.tiers = tier_preference(self.tier)
        self.quote_of: dict[str, Quote] = {}
        for q in quotes:
            self.quote_of.setdefault(q.gpu, q)  # the first quote for a GPU wins, as in gpu_rent_price
        w = brief.workload
        self.workload = w
        self.decode = w not in ("PRETRAINING", "FULL_FINETUNE", "ADAPTER_FINETUNE", "EMBEDDING", "MEDIA_GENERATION")
        self.needs: dict[tuple[int, int], mem.MemoryBreakdown] = {} if needs is None else needs  # by (n, tp)
        self.training_needs: dict[tuple[int, int], mem.MemoryBreakdown] = {}  # by (n, sequences)
        self.training_parts: dict[int, tuple[tuple[str, float], ...]] = {}  # all but the engine, by sequences
        inference = w not in ("PRETRAINING", "FULL_FINETUNE", "ADAPTER_FINETUNE")
        self.weights = mem.weights_gb(shape.params_billion, shape.bytes_per_param) if inference else 0.0
        # Every part of an inference breakdown but the weights is >= 0 when these are, so a width whose usable
        # memory is below the weights alone cannot fit and need not be worked out.
        self.weights_bound = min(c.kv_cache_bytes, c.activation_bytes_per_token_hidden, c.engine_overhead_gb,
                                 c.sampler_bytes_per_vocab_entry, c.media_activation_peak_gb) >= 0
        # Generation speed by GPU for this brief and shape, kept across requests in the rules' Tables (`speeds`).
        # The key leaves out the economics, which the speed never reads: the same brief with other hours, horizon
        # or budget finds every GPU's width search already done.
        self.speeds: dict[int, tuple[object, dict[str, object], tuple[str, ...]]] | None = None
        if speeds is not None and self.decode:
            if len(speeds) > SPEED_BRIEFS:
                speeds.clear()
            self.speeds = speeds.setdefault((without_economics(brief), shape), {})
        lat = brief.latency
        self.latency = lat
        self.latency_target = lat.p95_ms > 0 or lat.ttft_ms > 0
        e = brief.economics
        self.util = e.utilization or c.default_utilization
        unit = brief.success_unit
        self.unit = unit if unit != "UNSPECIFIED" else ("TRAINING_RUN" if w in TRAINING_WORKLOADS else "TOKEN")
        # one unit's tokens (media: one output)
        self.unit_tokens = shape.input_tokens if w == "EMBEDDING" else (
            1 if w == "MEDIA_GENERATION" else shape.output_tokens
        )
        self.kwh = e.electricity_usd_per_kwh or c.electricity_usd_per_kwh
        # The ownership functions' own checks, of the inputs every GPU shares.
        self.own_ok = (
            0 < self.util <= 1 and self.kwh >= 0 and c.pue >= 0 and c.ownership_years > 0 and c.hours_per_month > 0
        )

    def size(self, gt: tb.GpuTable) -> Sizing:
        gpu = gt.gpu
        s = Sizing.blank(gpu, self.tier)
        s.tflops = compute_tflops(gpu, self.shape.precision)
        w = self.workload
        if w in ("PRETRAINING", "FULL_FINETUNE"):
            size_full_training(s, self.brief, self.shape, self.a, self.memo, self._training_need)
        elif w == "ADAPTER_FINETUNE":
            size_adapter(s, self.brief, self.shape, self.a)
        else:
            self.size_inference(s, gt)
        whole_racks(s)
        s.capacity_gb = s.count * gpu.capacity_gb
        need = s.memory.total_gb if s.memory else 0.0
        s.headroom = 1.0 - need / s.capacity_gb if s.capacity_gb > 0 else 0.0
        s.nodes = max(1, math.ceil(s.count / gt.per_node))
        size_cluster(s, self.a, w in TRAINING_WORKLOADS)
        self.price(s, gt)
        return s

    def price(self, s: Sizing, gt: tb.GpuTable) -> None:
        """The rent in the compared tier (a caller's quote first) and every figure that follows from it. Nothing
        sized before it reads a price."""
        gpu = gt.gpu
        row, purchase = gt.prices_on(self.day, self.tiers)
        quote = self.quote_of.get(gpu.id)
        if quote is not None:
            s.price, s.quote, s.usd_per_gpu_hour = row, quote, quote.usd_per_hour
            s.price_tier = quote.tier if quote.tier != UNSPECIFIED else self.tier
        else:
            s.price, s.usd_per_gpu_hour, s.price_tier = row, row.usd if row else 0.0, row.tier if row else ""
        s.purchase = purchase
        s.usd_per_hour = s.usd_per_gpu_hour * s.count
        if not gpu.tflops_bf16:
            s.usd_per_tflop_hour = 0.0
        elif s.usd_per_gpu_hour >= 0 and gpu.tflops_bf16 > 0:
            s.usd_per_tflop_hour = s.usd_per_gpu_hour / gpu.tflops_bf16
        else:
            s.usd_per_tflop_hour = money.usd_per_tflop_hour(s.usd_per_gpu_hour, gpu.tflops_bf16)
        self.size_unit_cost(s)
        self.size_ownership(s)

    def fit_and_latency(self, gt: tb.GpuTable) -> tuple[bool, float]:
        """`size(gt)`'s `fits` and `est_latency_ms`, without the price, cluster, cost and ownership figures that
        follow the speed and change neither (the missed-target suggestion reads only these two)."""
        if self.workload in TRAINING_WORKLOADS:
            s = self.size(gt)
        else:
            s = Sizing.blank(gt.gpu, self.tier)
            s.tflops = compute_tflops(gt.gpu, self.shape.precision)
            self.size_inference(s, gt, lean=True)
        return s.fits, s.est_latency_ms

    def _training_need(self, n: int, sequences: int) -> mem.MemoryBreakdown:
        """full_training_need(n, sequences): of its parts only the engine overhead (per GPU) depends on n, so
        the rest is worked out once per sequence count and the engine's share appended per n."""
        key = (n, sequences)
        hit = self.training_needs.get(key)
        if hit is None:
            parts = self.training_parts.get(sequences)
            if parts is None:
                one = full_training_need(self.shape, self.a, self.a.text("recompute_full_finetune"), 1, sequences)
                parts = self.training_parts[sequences] = one.components[:-1]  # the engine comes last
            engine = ("engine", self.c.engine_overhead_gb * max(1, n))  # full_training_memory's own product
            hit = self.training_needs[key] = mem.MemoryBreakdown((*parts, engine))
        return hit

    def _need(self, gt: tb.GpuTable, n: int) -> mem.MemoryBreakdown:
        # The GPU enters only through the tensor-parallel width its scale-up domain allows.
        key = (n, min(n, gt.tp_domain))
        hit = self.needs.get(key)
        if hit is None:
            hit = self.needs[key] = inference_need(gt.gpu, self.brief, self.shape, self.a, n)
        return hit

    def size_inference(self, s: Sizing, gt: tb.GpuTable, lean: bool = False) -> None:
        """`lean`: only `fits` and the speed fields are read (inference.size_inference)."""
        if self.decode:
            # Generation is sized by the plain functions: the width search sizes every width a node allows, and
            # the brief-only figures (bytes a step reads, a prompt's attention) are kept in the request's memo.
            self._decode_speed(s, gt, lean)
            return
        usable = gt.usable_gb
        sizes = pipeline_sizes(self.brief, gt.sizes)
        n = 0
        for k in sizes:
            if self.weights_bound and self.weights > k * usable:
                continue
            if self._need(gt, k).total_gb <= k * usable:
                n = k
                break
        s.fits = n > 0
        n = n or sizes[-1]
        s.memory_count = n
        s.latency_target = self.latency_target
        inference_speed(s, self.brief, self.shape, self.a, n, self.memo)
        replicate_for_load(s, n, self.workload, self.shape, self.brief.traffic.requests_per_second, self._need(gt, n))
        check_latency(s, self.brief, self._need(gt, n))

    def _decode_speed(self, s: Sizing, gt: tb.GpuTable, lean: bool = False) -> None:
        """size_inference, or the fields it set on an earlier blank Sizing of this GPU for this brief and shape
        (it reads only the GPU, its TFLOPS at the shape's precision, the brief but its economics and the shape).
        `lean` holds only without a speeds table: what is kept there is the whole sizing."""
        known = self.speeds
        if known is not None:
            hit = known.get(id(gt.gpu))
            if hit is not None and hit[0] is gt.gpu:
                # Sizing is a plain dataclass: its fields are its __dict__'s; each list it holds gets its own copy.
                d = s.__dict__
                d.update(hit[1])
                for k in hit[2]:
                    d[k] = list(d[k])
                return
        least = self.weights if self.weights_bound else -math.inf

        def need(k: int) -> mem.MemoryBreakdown:
            return self._need(gt, k)

        if known is None:
            size_inference(s, self.brief, self.shape, self.a, self.memo, need, least, lean, (gt.sizes, gt.usable_gb))
            return
        size_inference(s, self.brief, self.shape, self.a, self.memo, need, least, False, (gt.sizes, gt.usable_gb))
        # The fields a generation brief's sizing sets (and only those: tests/test_sized_fields.py), read by name
        # rather than found by comparing every field of the Sizing before and after.
        d = s.__dict__
        known[id(gt.gpu)] = (gt.gpu, {k: d[k] for k in GENERATION_SIZED}, ())

    def size_unit_cost(self, s: Sizing) -> None:
        """size_unit_cost with money.usd_per_accepted_unit written out (the plain one where its checks refuse)."""
        s.unit = self.unit
        w = self.workload
        if w in TRAINING_WORKLOADS:
            if s.train_hours > 0 and self.unit in ("TRAINING_RUN", "CHECKPOINT"):
                s.units_per_hour = 1.0 / s.train_hours
        elif w == "MEDIA_GENERATION":
            if self.unit == "IMAGE" and s.tokens_per_second > 0 and self.brief.media.frames <= 0:
                offered = self.brief.traffic.requests_per_second
                capacity = s.tokens_per_second * s.replicas
                s.units_per_hour = (min(offered, capacity) if offered > 0 else capacity * self.util) * 3600
        elif s.tokens_per_second > 0:
            out = self.unit_tokens
            offered = self.brief.traffic.requests_per_second
            capacity_rps = s.tokens_per_second * s.replicas / out
            served_rps = min(offered, capacity_rps) if offered > 0 else capacity_rps * self.util
            if self.unit == "TOKEN":
                s.units_per_hour = served_rps * out * 3600 / 1e6
            elif self.unit in ("RESPONSE", "TASK", "RECORD"):
                s.units_per_hour = served_rps * 3600
        if s.units_per_hour > 0 and s.usd_per_hour > 0:
            acceptance = self.brief.economics.acceptance_rate
            if 0 <= acceptance <= 1:
                s.usd_per_unit = s.usd_per_hour / (s.units_per_hour * (acceptance if acceptance > 0 else 1.0))
            else:
                s.usd_per_unit = money.usd_per_accepted_unit(s.usd_per_hour, s.units_per_hour, acceptance)

    def size_ownership(self, s: Sizing) -> None:
        """size_ownership with the money.ownership functions written out; any input their checks would refuse
        goes to the plain version, which raises."""
        c = self.c
        n = s.count
        s.break_even_rent, s.break_even_basis = s.usd_per_hour, "own"
        power_w = s.gpu.tdp_w * n
        if not (self.own_ok and power_w >= 0):
            size_ownership(s, self.brief, self.a)
            return
        util, kwh, pue = self.util, self.kwh, c.pue
        s.annual_power_usd = power_w / 1000 * own.HOURS_PER_YEAR * util * kwh * pue
        if s.purchase is None:
            return
        purchase = s.purchase.usd * n
        maintenance = c.maintenance_fraction_per_year * purchase
        running = power_w / 1000 * kwh * pue + maintenance / (own.HOURS_PER_YEAR * util)
        if not (purchase >= 0 and maintenance >= 0 and running >= 0 and s.usd_per_hour >= 0):
            size_ownership(s, self.brief, self.a)
            return
        years = c.ownership_years
        s.running_usd_per_busy_hour = running
        s.ownership_utilization = util
        s.owned_usd_per_hour = (purchase + years * 0.0) / (years * own.HOURS_PER_YEAR * util) + running
        if s.usd_per_hour > 0:
            margin = s.usd_per_hour - running
            s.break_even_hours = math.inf if margin <= 0 else purchase / margin
            if math.isfinite(s.break_even_hours):
                s.break_even_months = s.break_even_hours / (c.hours_per_month * util)
            else:
                s.break_even_months = math.inf
