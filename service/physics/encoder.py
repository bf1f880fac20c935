"""Prefill-only encoders (embedding models): one batched forward pass over many short sequences.

A small encoder on a big GPU is not bounded by one number. Its linear layers and bidirectional attention are
compute; its unfused elementwise kernels (LayerNorm, GELU, bias, residual adds) move every activation through
memory; and every layer pays a fixed launch and scheduling cost however few tokens it runs. The pass takes the
longer of compute and memory traffic (they overlap across kernels) plus the fixed cost. Pure: constants come
from the caller (rules/assumptions.yaml).
"""

from __future__ import annotations

import math


def _check(**values: float) -> None:
    for name, v in values.items():
        if v is None or math.isnan(v) or v <= 0:
            raise ValueError(f"{name} must be positive, got {v!r}")


def bidirectional_attention_flops(layers: int, sequence_tokens: int, hidden: int) -> float:
    """Attention FLOPs per token of an encoder over sequences of S tokens: QK^T and scores x V are 2·S·d each
    per layer and token, with no causal mask to skip half (BERT attends both ways): 4·L·S·d."""
    return 4.0 * max(0, layers) * max(0, sequence_tokens) * max(0, hidden)


def encoder_pass_seconds(
    params_billion: float, bytes_per_param: float, tokens: int, sequence_tokens: int, layers: int, hidden: int,
    tflops: float, mfu: float, bandwidth_tbs: float, mbu: float, traffic_bytes_per_token_hidden: float,
    layer_overhead_s: float,
) -> float:
    """One forward pass of `tokens` tokens (sequences of `sequence_tokens`) on one GPU: the longer of its FLOPs
    (2·N per token plus attention) at `mfu` of peak and its bytes (the weights once, plus every layer's activation
    traffic) at `mbu` of bandwidth, plus `layer_overhead_s` per layer."""
    _check(tflops=tflops, mfu=mfu, bandwidth_tbs=bandwidth_tbs, mbu=mbu)
    t = max(0, tokens)
    flops = t * (2.0 * params_billion * 1e9 + bidirectional_attention_flops(layers, sequence_tokens, hidden))
    moved = params_billion * 1e9 * bytes_per_param + t * layers * hidden * traffic_bytes_per_token_hidden
    compute_s = flops / (tflops * 1e12 * mfu)
    memory_s = moved / (bandwidth_tbs * 1e12 * mbu)
    return max(compute_s, memory_s) + max(0, layers) * max(0.0, layer_overhead_s)
