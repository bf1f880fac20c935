"""`size_all`'s fast path: what depends only on the brief worked out once per request, each GPU then sized
from its per-rules table (tables.py). Equal to `size` by test."""

from __future__ import annotations

import copy
import math
from datetime import date

from ...domain.assumptions import Assumptions
from ...domain.brief import TRAINING_WORKLOADS, UNSPECIFIED, Brief, Quote
from ...domain.catalog import tier_preference
from ...money import cost as money
from ...money import ownership as own
from ...physics import compute
from ...physics import memory as mem
from .. import tables as tb
from .cluster import size_cluster, whole_racks
from .common import Memo, Sizing, compared_tier, compute_tflops, meets_latency, size_ownership
from .inference import inference_need, inference_speed, pipeline_sizes, replicate_for_load
from .shape import Shape
from .training import full_training_need, size_adapter, size_full_training


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
        if self.decode:
            self._decode_figures()

    def _decode_figures(self) -> None:
        shape, c = self.shape, self.c
        arch = shape.arch
        seqs, s_in, s_out = shape.sequences, shape.input_tokens, shape.output_tokens
        self.kv_read = mem.kv_cache_gb(arch, shape.avg_tokens_per_sequence, seqs, c.kv_cache_bytes)
        prefill_per_step = (seqs - 1) * s_in / max(1, s_out)
        # inference_speed's read: the experts a step's tokens touch (every weight when dense)
        self.read_weights = mem.weights_gb(shape.params_read_billion(seqs + prefill_per_step), shape.bytes_per_param)
        active = shape.active_params_billion * 1e9
        self.linear_flops = 2 * active * (seqs + prefill_per_step)
        attn_in = compute.attention_flops(arch.layers, s_in, arch.hidden_size, arch.window, arch.window_layers)
        self.step_attn_flops = prefill_per_step * attn_in / max(1, s_in)
        self.layer_flops = 24.0 * (seqs * shape.tokens_per_sequence) * arch.hidden_size * arch.hidden_size
        self.floor_s = c.decode_step_floor_ms / 1000
        self.tp_layers = 2 * arch.layers
        # A prompt's prefill: linear FLOPs (2·N per token) and attention FLOPs, at the average and p95 input.
        self.prompt_avg = (2 * shape.active_params_billion * 1e9 * max(0, s_in), attn_in)
        p95_in = self.brief.traffic.p95_input_tokens or s_in
        self.prompt_p95 = None if p95_in == s_in else (
            2 * shape.active_params_billion * 1e9 * max(0, p95_in),
            compute.attention_flops(arch.layers, p95_in, arch.hidden_size, arch.window, arch.window_layers),
        )

    def size(self, gt: tb.GpuTable) -> Sizing:
        gpu = gt.gpu
        s = Sizing.blank(gpu, self.tier)
        row, purchase = gt.prices_on(self.day, self.tiers)
        quote = self.quote_of.get(gpu.id)
        if quote is not None:
            s.price, s.quote, s.usd_per_gpu_hour = row, quote, quote.usd_per_hour
            s.price_tier = quote.tier if quote.tier != UNSPECIFIED else self.tier
        else:
            s.price, s.usd_per_gpu_hour, s.price_tier = row, row.usd if row else 0.0, row.tier if row else ""
        s.purchase = purchase
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
        s.usd_per_hour = s.usd_per_gpu_hour * s.count
        if not gpu.tflops_bf16:
            s.usd_per_tflop_hour = 0.0
        elif s.usd_per_gpu_hour >= 0 and gpu.tflops_bf16 > 0:
            s.usd_per_tflop_hour = s.usd_per_gpu_hour / gpu.tflops_bf16
        else:
            s.usd_per_tflop_hour = money.usd_per_tflop_hour(s.usd_per_gpu_hour, gpu.tflops_bf16)
        self.size_unit_cost(s)
        self.size_ownership(s)
        return s

    def fit_and_latency(self, gt: tb.GpuTable) -> tuple[bool, float]:
        """`size(gt)`'s `fits` and `est_latency_ms`, without the price, cluster, cost and ownership figures that
        follow the speed and change neither (the missed-target suggestion reads only these two)."""
        if self.workload in TRAINING_WORKLOADS:
            s = self.size(gt)
        else:
            s = Sizing.blank(gt.gpu, self.tier)
            s.tflops = compute_tflops(gt.gpu, self.shape.precision)
            self.size_inference(s, gt)
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

    def size_inference(self, s: Sizing, gt: tb.GpuTable) -> None:
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
        lat = self.latency
        s.latency_target = self.latency_target
        fast = self.decode and gt.gpu.bandwidth_tbs > 0 and gt.mbu > 0 and s.tflops > 0 and self.c.mfu_prefill > 0
        widen = s.latency_target and self.workload == "REALTIME_INFERENCE"
        if fast and widen:
            n = self._widen(s, gt, n)
            if n == s.memory_count:
                s.memory_count_latency_ms = s.est_latency_ms
            else:  # what memory's width would take, said on the candidate (decide/counts.py); _widen may skip it
                probe = copy.copy(s)
                probe.formulas = []
                self._decode_speed(probe, gt, s.memory_count)
                s.memory_count_latency_ms = probe.est_latency_ms
        else:
            speed = self._decode_speed if fast else self._plain_speed
            speed(s, gt, n)
            s.memory_count_latency_ms = s.est_latency_ms
            if widen:
                # More tensor parallelism inside the fast-link domain shortens each decode step; stop at the node.
                for k in sizes:
                    if k <= n or k > gt.tp_domain:
                        continue
                    if meets_latency(s, lat):
                        break
                    n = k
                    speed(s, gt, n)
        if widen:
            s.meets_latency = meets_latency(s, lat)
        replicate_for_load(s, n, self.workload, self.shape, self.brief.traffic.requests_per_second, self._need(gt, n))

    def _plain_speed(self, s: Sizing, gt: tb.GpuTable, n: int) -> None:
        inference_speed(s, self.brief, self.shape, self.a, n, self.memo)

    def _widen(self, s: Sizing, gt: tb.GpuTable, n: int) -> int:
        """size_inference's latency search: from the width memory needs, the first wider tensor-parallel width
        inside the fast-link domain that meets the target, else the widest; `s` holds the speed at the width
        returned. A width whose latency cannot meet the target even before its prompt waits behind others (TTFT
        is at least prefill + one step, in floats too: every operation after is monotone) is passed over without
        solving its TTFT; the plain loop would have computed it only to find it too slow and move on."""
        widths = [n, *(k for k in gt.sizes if n < k <= gt.tp_domain)]
        lat = self.latency
        last = widths[-1]
        for k in widths:
            if k != last and self._too_slow(s.tflops, gt, k, lat):
                continue
            self._decode_speed(s, gt, k)
            if k == last or meets_latency(s, lat):
                return k
        return last  # not reached: the last width always returns

    def _too_slow(self, tflops: float, gt: tb.GpuTable, n: int, lat) -> bool:  # noqa: ANN001 - Latency
        step, linear_den, attn_den = self._step(tflops, gt, n)
        lin, att = self.prompt_p95 or self.prompt_avg  # the prompt est_ttft_ms is for
        ttft_ms = (lin / linear_den + (att / attn_den if att > 0 else 0.0) + step) * 1000
        return (lat.ttft_ms > 0 and ttft_ms > lat.ttft_ms) or (
            lat.p95_ms > 0 and ttft_ms + self.shape.output_tokens * (step * 1000) > lat.p95_ms
        )

    def _step(self, tflops: float, gt: tb.GpuTable, n: int) -> tuple[float, float, float]:
        """compute.step_seconds and parallel_overhead_s written out: one decode step on n GPUs (seconds), and
        the denominators of linear and attention FLOPs (prefill_seconds's)."""
        gpu, width, mfu = gt.gpu, gt.widths[n], self.c.mfu_prefill
        tflops_total = tflops * n
        attn_tflops = (gpu.tflops_bf16 or tflops) * n
        linear_den = tflops_total * 1e12 * mfu
        attn_den = (attn_tflops or tflops_total) * 1e12 * mfu
        bw = gpu.bandwidth_tbs * n * 1e12 * gt.mbu
        if n <= 1:
            comm = 0.0
        else:
            comm = (self.tp_layers * width.allreduce_us / 1e6 if width.tp > 1 else 0.0) + width.pipeline_s
        overhead = self.floor_s + comm
        linear = max(self.read_weights * width.stages * 1e9 / bw, self.linear_flops / linear_den)
        attention = self.step_attn_flops / attn_den if self.step_attn_flops > 0 else 0.0
        return overhead + linear + self.kv_read * 1e9 / bw + attention, linear_den, attn_den

    def _decode_speed(self, s: Sizing, gt: tb.GpuTable, n: int) -> None:
        """inference_speed's decode branch over the request's figures."""
        c = self.c
        mfu = c.mfu_prefill
        tflops = s.tflops
        needed = tflops * 1e12 * c.kernel_saturation_ms / 1000
        busy = min(1.0, self.layer_flops / needed) if needed > 0 else 1.0
        s.effective_tflops = tflops * mfu * busy
        step, linear_den, attn_den = self._step(tflops, gt, n)
        lin, att = self.prompt_avg
        avg_prefill = lin / linear_den + (att / attn_den if att > 0 else 0.0)
        shape = self.shape
        others, s_out = shape.sequences - 1, shape.output_tokens
        ttft_avg = compute.time_to_first_token(avg_prefill, step, others, avg_prefill, s_out)
        if self.prompt_p95 is None:
            ttft = ttft_avg
        else:
            lin, att = self.prompt_p95
            p95_prefill = lin / linear_den + (att / attn_den if att > 0 else 0.0)
            ttft = compute.time_to_first_token(p95_prefill, step, others, avg_prefill, s_out)
        s.step_ms = s.itl_ms = step * 1000
        s.tokens_per_second = shape.sequences * s_out / (ttft_avg + s_out * step)
        s.est_ttft_ms = ttft * 1000
        s.est_latency_ms = s.est_ttft_ms + s_out * s.step_ms

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
