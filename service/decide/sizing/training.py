"""Training sizing: pretraining and full fine-tuning (memory by GPU count) and adapter (LoRA/QLoRA) fine-tuning,
with one speed model for all three (`run_speed`): FLOPs per token by method, the share of peak a step reaches
at its size, data-parallel traffic by link and width, QLoRA's dequantization; then the fewest GPUs whose all-in
time (interruptions and start-up included) meets the deadline, at any data-parallel width (whole instances are
placement's business)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ...domain.assumptions import Assumptions
from ...domain.brief import Brief
from ...domain.catalog import Gpu
from ...physics import memory as mem
from ...physics import training as tr
from .common import MAX_GPUS, Memo, Sizing, tp_group_sizes, usable_gb
from .shape import Shape

TrainingNeed = Callable[[int, int], mem.MemoryBreakdown]  # (GPUs, sequences per GPU) -> whole configuration


@dataclass(frozen=True)
class Speed:
    """One GPU's rate on a training run at a width: tokens/s (compute, before interruptions) and the model FLOPs
    per second that is, per GPU."""

    tokens_per_s: float
    model_tflops: float
    flops_per_token: float


def method_of(brief: Brief, shape: Shape) -> str:
    """full (pretraining, full fine-tuning), lora, or qlora (an adapter fine-tune on a 4-bit base)."""
    if brief.workload != "ADAPTER_FINETUNE":
        return "full"
    return "qlora" if shape.precision in ("INT4", "FP4") else "lora"


def adapter_params_billion(shape: Shape, a: Assumptions) -> float:
    return mem.lora_trainable_params_billion(shape.arch, int(a.num("lora_rank")), int(a.num("lora_targets_per_layer")))


def run_speed(gpu: Gpu, shape: Shape, a: Assumptions, method: str, gpus: int, model_gpus: int, micro_tokens: int,
              step_tokens: float, tflops: float) -> Speed:
    """Tokens/s per GPU of a run on `gpus` GPUs, `model_gpus` of which hold one copy of the model states (the
    rest are data-parallel replicas of that group), each GPU running micro-batches of `micro_tokens` and
    `step_tokens` tokens per optimizer step."""
    arch = shape.arch
    seq = max(1, shape.tokens_per_sequence)
    adapters = adapter_params_billion(shape, a) if method != "full" else 0.0
    fpt = tr.flops_per_token(shape.active_params_billion, arch.layers, arch.hidden_size, seq, method, adapters,
                             a.num("adapter_flops_per_param_token"))
    # An FP8 step runs fp8_training_speedup x its BF16 rate, not at the FP8 peak (attention, norms, optimizer and
    # communication stay 16-bit); adapters train over a 16-bit (or dequantized) base.
    rate = gpu.tflops_bf16 or tflops
    if method == "full" and tflops > gpu.tflops_bf16 > 0:
        rate = min(tflops, gpu.tflops_bf16 * a.num("fp8_training_speedup"))
    share = a.num("mfu_training") * gpu.matmul_efficiency / a.num("reference_matmul_efficiency")
    if shape.active_params_billion < shape.params_billion:
        share *= a.num("moe_training_efficiency")
    if model_gpus > 1:
        share *= a.num("model_parallel_efficiency") ** math.log2(model_gpus)
    share *= tr.occupancy(tr.layer_forward_ms(micro_tokens, arch.hidden_size, rate), a.num("training_layer_half_ms"))
    per_token = fpt / (rate * 1e12 * share)
    if method == "qlora":
        passes = 3 if a.text("recompute_adapter") == "full" else 2
        per_token += tr.dequant_seconds(shape.params_billion / max(1, model_gpus), passes,
                                        a.num("qlora_dequant_bytes_per_param"), gpu.bandwidth_tbs,
                                        a.num("qlora_dequant_bandwidth_use")) / max(1, micro_tokens)
    compute_s = per_token * step_tokens
    replicas = max(1.0, gpus / max(1, model_gpus))
    trained = shape.params_billion if method == "full" else adapters
    traffic = tr.data_parallel_bytes(trained / max(1, model_gpus), math.ceil(replicas), 2.0) if replicas > 1 else 0.0
    if method != "full" and model_gpus > 1:
        # The frozen base sharded over the ranks (FSDP) is gathered for every micro-batch, in the forward, the
        # backward and the recomputed forward: traffic per micro-batch, not per optimizer step.
        passes = 3 if a.text("recompute_adapter") == "full" else 2
        traffic += tr.data_parallel_bytes(shape.params_billion, model_gpus, passes, shape.bytes_per_param) * (
            step_tokens / max(1, micro_tokens))
    comm_s = _comm_seconds(gpu, gpus, traffic) if traffic > 0 else 0.0
    step = tr.step_seconds(compute_s, comm_s, a.num("gradient_comm_overlap"))
    tps = step_tokens / step if step > 0 else 0.0
    return Speed(tps, tps * fpt / 1e12, fpt)


def _comm_seconds(gpu: Gpu, gpus: int, traffic: float) -> float:
    """Seconds a data-parallel collective of `traffic` bytes per GPU takes: over the scale-up link (NVLink/xGMI,
    half its bidirectional figure; a PCIe card its host link) inside one domain; beyond it hierarchically (NCCL:
    reduce inside the node first, so each GPU sends 1/domain of the tensor over its own network rail)."""
    domain = max(1, gpu.gpus_per_node, gpu.nvlink_domain if gpu.fast_interconnect else 1)
    local = traffic / (max(1.0, gpu.interconnect_gbs / 2) * 1e9)
    if gpus <= domain or gpu.scale_out_gbs <= 0:
        return local
    return local + traffic / domain / (gpu.scale_out_gbs * 1e9)


def all_in_hours(tokens_billion: float, gpus: int, speed: Speed, a: Assumptions) -> float:
    """Wall-clock hours of the run: compute hours over the share of time a run of `gpus` GPUs keeps after its
    interruptions, plus the start-up every run pays (weights loaded, kernels compiled)."""
    if speed.tokens_per_s <= 0 or gpus <= 0:
        return math.inf
    compute_h = tokens_billion * 1e9 / (gpus * speed.tokens_per_s) / 3600
    kept = tr.effective_share(gpus, a.num("interruptions_per_gpu_day"), a.num("hours_lost_per_interruption"))
    return compute_h / kept + a.num("training_startup_hours")


Rate = Callable[[int], Speed]  # GPUs -> one GPU's speed at that width


def fewest_for_deadline(tokens_billion: float, days: float, start: int, rate: Rate, a: Assumptions) -> int:
    """Fewest GPUs (at least `start`, any count: a data-parallel run can use any width) whose all-in time meets
    `days`; MAX_GPUS when none we would size does. Grows by the shortfall (at most doubling, so a width past the
    fastest one is not jumped to), stops when more GPUs no longer shorten the run, then bisects back down."""
    target = days * 24
    startup = a.num("training_startup_hours")
    if target <= startup:
        return MAX_GPUS

    def hours(n: int) -> float:
        return all_in_hours(tokens_billion, n, rate(n), a)

    lo, n, prev = start - 1, max(1, start), math.inf
    while True:
        h = hours(n)
        if h <= target:
            break
        if not math.isfinite(h) or h >= prev or n >= MAX_GPUS:
            return MAX_GPUS  # past the fastest width (per-GPU batches too small, traffic too large)
        lo, prev = n, h
        n = min(MAX_GPUS, 2 * n, max(n + 1, math.ceil(n * (h - startup) / (target - startup))))
    hi = n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if hours(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def size_full_training(
    s: Sizing, brief: Brief, shape: Shape, a: Assumptions, memo: Memo, fast_need: TrainingNeed | None = None
) -> None:
    """`fast_need`: size_all's equal of the memory need below, built from parts it keeps per request."""
    gpu = s.gpu
    micro = max(1, brief.traffic.batch_size or 1)
    recompute = a.text("recompute_full_finetune")

    def need(n: int, sequences: int = micro) -> mem.MemoryBreakdown:
        if fast_need is not None:
            return fast_need(n, sequences)
        key = ("training", n, sequences)  # the GPU does not enter: only how many and how many sequences
        if key not in memo:
            memo[key] = full_training_need(shape, a, recompute, n, sequences)
        return memo[key]

    usable = usable_gb(gpu, a, training=True)
    # Model states shard over GPUs (ZeRO-3/FSDP) and activations split over data-parallel replicas, so the
    # whole-configuration total must fit in n x usable memory; what grows per GPU is only the engine overhead.
    n = 1
    while need(n).total_gb > n * usable and n < MAX_GPUS:
        n = max(n + 1, math.ceil(need(n).total_gb / usable))
    s.memory_count = n
    s.fits = need(n).total_gb <= n * usable
    rate, micro_at = full_rate(s, brief, shape, a, need, usable)
    tokens = brief.training.tokens_billion
    if tokens > 0 and brief.training.target_days > 0:
        s.compute_count = fewest_for_deadline(tokens, brief.training.target_days, s.memory_count, rate, a)
    count = min(max(s.memory_count, s.compute_count, 1), MAX_GPUS)
    if s.compute_count >= MAX_GPUS:
        s.fits = False  # no cluster we would size finishes by the deadline
    _finish(s, brief, a, count, rate, need(count))
    s.micro_tokens = micro_at(count)


def _finish(s: Sizing, brief: Brief, a: Assumptions, count: int, rate: Rate, memory: mem.MemoryBreakdown) -> None:
    speed = rate(count)
    s.count = s.per_replica = count
    s.memory = memory
    s.effective_tflops = speed.model_tflops
    tokens = brief.training.tokens_billion
    if tokens > 0:
        s.train_hours = all_in_hours(tokens, count, speed, a)
        compute_h = tokens * 1e9 / (count * speed.tokens_per_s) / 3600 if speed.tokens_per_s > 0 else 0.0
        s.restart_overhead_days = max(0.0, s.train_hours - compute_h - a.num("training_startup_hours")) / 24
        s.fixed_hours = a.num("training_startup_hours")
    s.formulas.append(
        f"training FLOPs per token = {speed.flops_per_token:.3g} (method and attention at the sequence length);"
        f" {speed.tokens_per_s:,.0f} tokens/s per GPU at {count} GPUs ({speed.model_tflops:,.0f} model TFLOPS);"
        f" run hours = tokens / (GPUs x tokens/s) / share kept after interruptions + start-up"
    )


def full_rate(s: Sizing, brief: Brief, shape: Shape, a: Assumptions, need: TrainingNeed, usable: float,
              ) -> tuple[Rate, Callable[[int], int]]:
    """A full-training run's speed by GPU count, and its micro-batch tokens by GPU count, for `s`'s GPU sized to
    `s.memory_count` GPUs per copy of the model states."""
    seq = max(1, shape.tokens_per_sequence)
    micro = max(1, brief.traffic.batch_size or 1)
    given_micro = brief.traffic.batch_size > 0 or brief.workload != "PRETRAINING"
    global_tokens = brief.training.global_batch_tokens or (
        int(a.num("default_global_batch_tokens")) if brief.workload == "PRETRAINING" else 0)

    def micro_at(k: int) -> int:
        # The brief's micro-batch as given (fine-tuning without one keeps one sequence per GPU); else each GPU
        # runs its share of the global batch in micro-batches as large as its memory allows.
        if given_micro:
            return micro * seq
        return tokens_per_micro_batch(k, global_tokens, shape, need, usable)

    def rate(k: int) -> Speed:
        mt = micro_at(k)
        step = max(float(mt), global_tokens / k) if global_tokens else float(mt)
        return run_speed(s.gpu, shape, a, "full", k, min(k, s.memory_count), mt, step, s.tflops)

    return rate, micro_at


def adapter_rate(s: Sizing, brief: Brief, shape: Shape, a: Assumptions) -> Rate:
    """An adapter run's speed by GPU count, `s.memory_count` GPUs holding one copy of the base."""
    method = method_of(brief, shape)
    micro_tokens = max(1, brief.traffic.batch_size or 1) * max(1, shape.tokens_per_sequence)
    global_tokens = brief.training.global_batch_tokens

    def rate(k: int) -> Speed:
        step = max(float(micro_tokens), global_tokens / k) if global_tokens else float(micro_tokens)
        # Adapter recipes (torchtune, axolotl, HF accelerate) shard the frozen base over every rank (FSDP).
        return run_speed(s.gpu, shape, a, method, k, k, micro_tokens, step, s.tflops)

    return rate


def full_training_need(
    shape: Shape, a: Assumptions, recompute: str, n: int, sequences: int
) -> mem.MemoryBreakdown:
    return mem.full_training_memory(
        shape.params_billion,
        shape.arch,
        shape.tokens_per_sequence,
        sequences,
        a.num("adam_state_bytes_per_param"),
        recompute,
        a.num("engine_overhead_gb"),
        gpus=n,
    )


def tokens_per_micro_batch(
    count: int, global_tokens: int, shape: Shape, need, usable: float  # noqa: ANN001 - need(n, sequences)
) -> int:
    """Tokens one GPU runs per forward pass: its data-parallel share of the global batch, but no more
    sequences than fit beside its share of the model states (the rest goes to gradient accumulation)."""
    seq = max(1, shape.tokens_per_sequence)
    per_seq = need(count, 2).total_gb - need(count, 1).total_gb  # activations + logits of one sequence
    free = count * usable - need(count, 1).total_gb
    fit = 1 + int(free / (per_seq * count)) if per_seq > 0 and free > 0 else 1
    # The share in tokens, not whole sequences: a global batch over more GPUs shrinks each GPU's step smoothly
    # (sequences pack and split across ranks), so the speed falls on a curve rather than in steps.
    return max(1, min(global_tokens // max(1, count), max(1, fit) * seq))


def adapter_breakdown(shape: Shape, a: Assumptions, micro: int) -> mem.MemoryBreakdown:
    """Adapter fine-tuning memory on one GPU at `micro` sequences per micro-batch."""
    return mem.adapter_training_memory(
        shape.params_billion, shape.bytes_per_param, shape.arch, shape.tokens_per_sequence, micro,
        int(a.num("lora_rank")), int(a.num("lora_targets_per_layer")), a.text("recompute_adapter"),
        a.num("engine_overhead_gb"),
    )


def size_adapter(s: Sizing, brief: Brief, shape: Shape, a: Assumptions) -> None:
    gpu = s.gpu
    micro = max(1, brief.traffic.batch_size or 1)
    breakdown = adapter_breakdown(shape, a, micro)
    usable = usable_gb(gpu, a, training=True)
    n = next((k for k in tp_group_sizes(gpu, a) if ranks_memory(breakdown, k).total_gb <= k * usable), 0)
    s.fits = n > 0
    n = n or tp_group_sizes(gpu, a)[-1]
    s.memory_count = n
    rate = adapter_rate(s, brief, shape, a)
    tokens = brief.training.tokens_billion
    if tokens > 0 and brief.training.target_days > 0:
        s.compute_count = fewest_for_deadline(tokens, brief.training.target_days, n, rate, a)
    count = min(max(n, s.compute_count), MAX_GPUS)
    if s.compute_count >= MAX_GPUS:
        s.fits = False
    s.micro_tokens = micro * max(1, shape.tokens_per_sequence)
    _finish(s, brief, a, count, rate, ranks_memory(breakdown, count))


PER_RANK = ("activations", "logits", "engine")


def ranks_memory(one: mem.MemoryBreakdown, gpus: int) -> mem.MemoryBreakdown:
    """A one-GPU adapter breakdown on `gpus` GPUs: the frozen base and the adapters' states are sharded (FSDP),
    while every GPU runs its own micro-batch (activations, logits) and has its own CUDA context."""
    k = max(1, gpus)
    return mem.MemoryBreakdown(tuple((name, v * k if name in PER_RANK else v) for name, v in one.components))
