"""Training speed by method and layout: FLOPs per token (full, LoRA, QLoRA), how much of the GPU's peak a step
reaches at its size, the data-parallel traffic per optimizer step, QLoRA's dequantization, and the share of
wall-clock time a run keeps after interruptions.

Pure functions over numbers; the constants come from the caller (rules/assumptions.yaml, training section).
"""

from __future__ import annotations

import math

METHODS = ("full", "lora", "qlora")


def _check(**values: float) -> None:
    for name, v in values.items():
        if v is None or math.isnan(v) or v < 0:
            raise ValueError(f"{name} must be a non-negative number, got {v!r}")


def flops_per_token(
    active_params_billion: float, layers: int, hidden: int, seq_len: int, method: str,
    adapter_params_billion: float = 0.0, frozen_flops_per_param: float = 4.0,
) -> float:
    """Model FLOPs one training token costs (MFU counting: recomputation is not counted, it lowers the share of
    peak instead). Linear layers: full training 2N forward + 4N backward (activation and weight gradients) = 6N
    (Kaplan et al. 2020; EleutherAI Transformer Math); LoRA/QLoRA: the frozen base gets no weight gradients, so
    2N + 2N = 4N (`frozen_flops_per_param`), plus 6 per adapter parameter. Attention at the run's sequence
    length: a causal forward is 2·L·S·h per token (QK^T and softmax·V, half the square masked), the backward
    twice that: 6·L·S·h for every method (the adapters need the activation gradients through attention)."""
    _check(active_params_billion=active_params_billion, layers=layers, hidden=hidden, seq_len=seq_len,
           adapter_params_billion=adapter_params_billion)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    n = active_params_billion * 1e9
    linear = 6.0 * n if method == "full" else frozen_flops_per_param * n + 6.0 * adapter_params_billion * 1e9
    return linear + 6.0 * layers * seq_len * hidden


def layer_forward_ms(tokens: float, hidden: int, tflops: float) -> float:
    """Milliseconds one layer's forward matmuls (24·t·h² FLOPs: QKV, output, and a 4h MLP's two) take at
    `tflops` for a micro-batch of `tokens` tokens: the size of the kernels a step launches."""
    _check(tokens=tokens, hidden=hidden)
    if tflops <= 0:
        raise ValueError("tflops must be positive")
    return 24.0 * tokens * hidden * hidden / (tflops * 1e12) * 1000


def occupancy(layer_ms: float, half_ms: float) -> float:
    """Share of its large-kernel rate a step reaches when each layer's forward matmuls last `layer_ms` at peak:
    t / (t + t½), a smooth curve (small models and small micro-batches launch short kernels, and per-layer work
    that does not grow with them, norms, rotary, launches, optimizer, takes a larger share), half at `half_ms`."""
    _check(layer_ms=layer_ms, half_ms=half_ms)
    if layer_ms + half_ms <= 0:
        return 1.0
    return layer_ms / (layer_ms + half_ms)


def data_parallel_bytes(params_billion: float, width: int, passes: float, bytes_per_value: float = 2.0) -> float:
    """Bytes each GPU sends per optimizer step over a data-parallel group of `width`: a ring collective moves
    (w-1)/w of the tensor per pass (NCCL); `passes` is 2 for an all-reduce of the gradients (reduce-scatter +
    all-gather), 3 for FSDP/ZeRO-3 (all-gather in forward and in backward, reduce-scatter of the gradients)."""
    _check(params_billion=params_billion, passes=passes, bytes_per_value=bytes_per_value)
    if width <= 1:
        return 0.0
    return passes * (width - 1) / width * params_billion * 1e9 * bytes_per_value


def step_seconds(compute_s: float, comm_s: float, overlap: float) -> float:
    """An optimizer step's wall time: its compute, plus the communication that does not hide under it (a share
    `overlap` of the compute time can hide traffic: buckets all-reduced while the backward runs)."""
    _check(compute_s=compute_s, comm_s=comm_s, overlap=overlap)
    return compute_s + max(0.0, comm_s - overlap * compute_s)


def dequant_seconds(params_billion: float, passes: float, bytes_per_param: float, bandwidth_tbs: float,
                    bandwidth_use: float) -> float:
    """QLoRA's extra time per micro-batch: before each matmul the 4-bit weight is dequantized to 16 bits (read
    the NF4 blocks, write the BF16 copy, the GEMM reads it back), in the forward, the backward and the
    recomputed forward: memory traffic that no batch size removes, so small micro-batches pay it most."""
    _check(params_billion=params_billion, passes=passes, bytes_per_param=bytes_per_param)
    if bandwidth_tbs <= 0 or bandwidth_use <= 0:
        raise ValueError("bandwidth and its use must be positive")
    return passes * params_billion * 1e9 * bytes_per_param / (bandwidth_tbs * 1e12 * bandwidth_use)


def effective_share(gpus: int, interruptions_per_gpu_day: float, hours_lost_per_interruption: float,
                    most_lost: float = 0.5) -> float:
    """Share of wall-clock time a synchronous run spends training: each interruption (a failed GPU, host or
    link stops every GPU of the job) costs a restart, a checkpoint reload and the steps since the last save.
    Lost share = interruptions per day x hours lost / 24, growing with the GPUs (Llama 3: 466 in 54 days on
    16,384 H100, over 90% effective); capped at `most_lost`."""
    _check(interruptions_per_gpu_day=interruptions_per_gpu_day,
           hours_lost_per_interruption=hours_lost_per_interruption)
    lost = interruptions_per_gpu_day * max(0, gpus) * hours_lost_per_interruption / 24.0
    return 1.0 - min(most_lost, lost)
