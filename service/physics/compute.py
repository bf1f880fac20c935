"""Compute and speed: training FLOPs (6·N·D), GPUs for a deadline, prefill and memory-bound decode."""

from __future__ import annotations

import math


def _positive(**values: float) -> None:
    for name, v in values.items():
        if v is None or math.isnan(v) or v <= 0:
            raise ValueError(f"{name} must be positive, got {v!r}")


def training_flops(active_params_billion: float, tokens_billion: float, flops_per_param_token: float = 6.0) -> float:
    """≈ 6·N·D: 2 forward + 4 backward FLOPs per parameter per token (Kaplan et al.; EleutherAI Transformer Math)."""
    if active_params_billion < 0 or tokens_billion < 0:
        raise ValueError("parameters and tokens must be non-negative")
    return flops_per_param_token * active_params_billion * 1e9 * tokens_billion * 1e9


def training_seconds(flops: float, gpus: int, tflops_per_gpu: float, mfu: float) -> float:
    _positive(gpus=gpus, tflops_per_gpu=tflops_per_gpu, mfu=mfu)
    return flops / (gpus * tflops_per_gpu * 1e12 * mfu)


def gpus_for_deadline(flops: float, tflops_per_gpu: float, mfu: float, days: float) -> int:
    """Fewest GPUs that finish `flops` within `days` at the given model FLOPs utilization."""
    _positive(tflops_per_gpu=tflops_per_gpu, mfu=mfu, days=days)
    return max(1, math.ceil(flops / (tflops_per_gpu * 1e12 * mfu * days * 86400)))


def prefill_seconds(active_params_billion: float, tokens: int, tflops_total: float, mfu: float) -> float:
    """Prompt processing is compute-bound: 2·N FLOPs per token."""
    _positive(tflops_total=tflops_total, mfu=mfu)
    return 2 * active_params_billion * 1e9 * max(0, tokens) / (tflops_total * 1e12 * mfu)


def decode_step_seconds(
    weights_gb: float, kv_read_gb: float, bandwidth_tbs_total: float, mbu: float, parallel_efficiency: float = 1.0
) -> float:
    """Decode is memory-bound: each step reads the weights once and every sequence's KV cache
    (gpu_poor, kv-planner): bytes / (MBU × aggregate bandwidth × parallel efficiency)."""
    _positive(bandwidth_tbs_total=bandwidth_tbs_total, mbu=mbu, parallel_efficiency=parallel_efficiency)
    return (weights_gb + kv_read_gb) * 1e9 / (bandwidth_tbs_total * 1e12 * mbu * parallel_efficiency)


def decode_tokens_per_second(sequences: int, step_seconds: float) -> float:
    """One token per sequence per step."""
    _positive(step_seconds=step_seconds)
    return max(0, sequences) / step_seconds


def compute_bound_tokens_per_second(active_params_billion: float, tflops_total: float, mfu: float) -> float:
    """Ceiling from compute: tflops × MFU / (2·N)."""
    _positive(active_params_billion=active_params_billion, tflops_total=tflops_total, mfu=mfu)
    return tflops_total * 1e12 * mfu / (2 * active_params_billion * 1e9)
