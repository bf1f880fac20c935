"""Training sizing: pretraining and full fine-tuning (memory by GPU count, deadline counts, MFU) and adapter
(LoRA/QLoRA) fine-tuning."""

from __future__ import annotations

import math
from collections.abc import Callable

from ...domain.assumptions import Assumptions
from ...domain.brief import Brief
from ...domain.catalog import Gpu
from ...physics import compute
from ...physics import memory as mem
from .common import MAX_GPUS, Memo, Sizing, saturation, tp_group_sizes, usable_gb, with_engine_overhead
from .shape import Shape

TrainingNeed = Callable[[int, int], mem.MemoryBreakdown]  # (GPUs, sequences per GPU) -> whole configuration


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
    flops = compute.training_flops(shape.active_params_billion, brief.training.tokens_billion)
    deadline = brief.training.tokens_billion > 0 and brief.training.target_days > 0
    kept = training_efficiency(gpu, shape, s.tflops, a)
    if brief.traffic.batch_size > 0 or brief.workload != "PRETRAINING":
        # The brief's micro-batch as given (fine-tuning without one keeps one sequence per GPU).
        s.micro_tokens = micro * shape.tokens_per_sequence
        mfu = training_mfu(gpu, a, s.tflops, s.micro_tokens, shape.arch.hidden_size) * kept
        if deadline:
            s.compute_count = deadline_count(flops, s.tflops, mfu, brief.training.target_days)
    else:
        # No micro-batch given: each GPU runs its share of the global batch (Llama: 4M tokens) in micro-batches
        # as large as its memory allows. The share depends on the count and the count on the MFU, so iterate.
        global_tokens = brief.training.global_batch_tokens or int(a.num("default_global_batch_tokens"))
        count = max(1, s.memory_count)
        mfu = a.num("mfu_training") * kept
        for _ in range(8):
            s.micro_tokens = tokens_per_micro_batch(count, global_tokens, shape, need, usable)
            mfu = training_mfu(gpu, a, s.tflops, s.micro_tokens, shape.arch.hidden_size) * kept
            if not deadline:
                break
            nxt = max(s.memory_count, deadline_count(flops, s.tflops, mfu, brief.training.target_days))
            if nxt == count:
                break
            count = nxt
        if deadline:
            s.compute_count = deadline_count(flops, s.tflops, mfu, brief.training.target_days)
    s.effective_tflops = s.tflops * mfu
    count = min(max(s.memory_count, s.compute_count, 1), MAX_GPUS)
    if s.compute_count >= MAX_GPUS:
        s.fits = False  # no cluster we would size finishes by the deadline
    if count > 1 and gpu.gpus_per_node > 1 and count > gpu.gpus_per_node:
        count = math.ceil(count / gpu.gpus_per_node) * gpu.gpus_per_node
    elif count > 1:
        count = 1 << (count - 1).bit_length() if count <= gpu.gpus_per_node else count
    s.count = s.per_replica = count
    s.memory = need(count)
    if brief.training.tokens_billion > 0:
        # The MFU the count was sized at already includes communication (Llama 3 measured 38-43% on 16k
        # H100s end to end), so run time uses the same MFU: a count sized for a deadline meets it.
        s.train_hours = compute.training_seconds(flops, count, s.tflops, mfu) / 3600
    s.formulas.append(
        f"training FLOPs = 6 x {shape.active_params_billion:g}e9 params x {brief.training.tokens_billion:g}e9 tokens"
        f" = {flops:.3g}; GPUs for the deadline = FLOPs / ({s.tflops:g} TFLOPS x MFU {mfu:.2f} x days)"
    )


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
    share = max(1, global_tokens // max(1, count) // seq)
    per_seq = need(count, 2).total_gb - need(count, 1).total_gb  # activations + logits of one sequence
    free = count * usable - need(count, 1).total_gb
    fit = 1 + int(free / (per_seq * count)) if per_seq > 0 and free > 0 else 1
    return min(share, max(1, fit)) * seq


def deadline_count(flops: float, tflops: float, mfu: float, days: float) -> int:
    try:
        return min(compute.gpus_for_deadline(flops, tflops, mfu, days), MAX_GPUS)
    except (OverflowError, ValueError):
        return MAX_GPUS


def training_efficiency(gpu: Gpu, shape: Shape, tflops: float, a: Assumptions) -> float:
    """Share of the dense BF16 MFU (mfu_training, at the peak of the rate used) a run keeps. An MoE run spends
    time in expert all-to-all and grouped GEMMs (moe_training_efficiency); an FP8 (or FP4) run is faster than
    BF16 by fp8_training_speedup, far from the 2x of its peak, because attention, norms, optimizer and
    communication stay 16-bit: against the FP8 peak its MFU is mfu x speedup x BF16 peak / FP8 peak."""
    kept = 1.0
    if shape.active_params_billion < shape.params_billion:
        kept *= a.num("moe_training_efficiency")
    if tflops > gpu.tflops_bf16 > 0:
        kept *= a.num("fp8_training_speedup") * gpu.tflops_bf16 / tflops
    return kept


def training_mfu(gpu: Gpu, a: Assumptions, tflops: float, tokens_per_step: int, hidden: int) -> float:
    """mfu_training is what a well-tuned run reaches on the reference GPU. GPUs whose achievable matmul
    fraction (MAMF) is lower reach proportionally less, and a step too small to keep a big GPU busy reaches
    less again: one layer's forward matmuls (24·t·h² FLOPs) must last `kernel_saturation_ms` at the rate the
    step runs at (an FP8 step runs at fp8_training_speedup x BF16, not at the FP8 peak)."""
    base = a.num("mfu_training") * gpu.matmul_efficiency / a.num("reference_matmul_efficiency")
    rate = tflops
    if tflops > gpu.tflops_bf16 > 0:
        rate = min(tflops, gpu.tflops_bf16 * a.num("fp8_training_speedup"))
    return base * saturation(rate, tokens_per_step, hidden, a.num("kernel_saturation_ms"))


def size_adapter(s: Sizing, brief: Brief, shape: Shape, a: Assumptions) -> None:
    gpu = s.gpu
    micro = max(1, brief.traffic.batch_size or 1)
    breakdown = mem.adapter_training_memory(
        shape.params_billion,
        shape.bytes_per_param,
        shape.arch,
        shape.tokens_per_sequence,
        micro,
        int(a.num("lora_rank")),
        int(a.num("lora_targets_per_layer")),
        a.text("recompute_adapter"),
        a.num("engine_overhead_gb"),
    )
    usable = usable_gb(gpu, a, training=True)
    n = next(
        (
            k
            for k in tp_group_sizes(gpu, a)
            if breakdown.total_gb + (k - 1) * a.num("engine_overhead_gb") <= k * usable
        ),
        0,
    )
    s.fits = n > 0
    n = n or tp_group_sizes(gpu, a)[-1]
    s.memory_count = n
    flops = compute.training_flops(
        shape.active_params_billion, brief.training.tokens_billion, a.num("adapter_flops_per_param_token")
    )
    mfu = training_mfu(gpu, a, s.tflops, micro * shape.tokens_per_sequence, shape.arch.hidden_size)
    s.effective_tflops = s.tflops * mfu
    if brief.training.tokens_billion > 0 and brief.training.target_days > 0:
        s.compute_count = deadline_count(flops, s.tflops, mfu, brief.training.target_days)
    s.count = s.per_replica = min(max(n, s.compute_count), MAX_GPUS)
    if s.compute_count >= MAX_GPUS:
        s.fits = False
    s.memory = with_engine_overhead(breakdown, s.count, a)
    if brief.training.tokens_billion > 0:
        s.train_hours = (
            compute.training_seconds(flops, s.count, s.tflops, mfu) / 3600  # same MFU as the count
        )
    s.formulas.append(
        f"adapter training FLOPs = {a.num('adapter_flops_per_param_token'):g} x {shape.active_params_billion:g}e9"
        f" x {brief.training.tokens_billion:g}e9 tokens = {flops:.3g} (frozen base: no weight gradients,"
        " plus recomputation)"
    )
