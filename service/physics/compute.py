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


def attention_flops(layers: int, tokens: int, hidden: int, window: int = 0, window_layers: int = -1) -> float:
    """Forward attention FLOPs of a causal prefill of S tokens: QK^T and softmax·V are 2·S²·d each per layer,
    halved by the causal mask (FlashAttention skips the masked blocks): 2·L·S²·d (Kaplan et al. count
    2·n_layer·n_ctx·d_attn per token). A sliding window W caps each windowed layer's span: 2·S·min(S, W)·d;
    `window_layers` of the layers use it (-1 = all), the others attend fully."""
    s = max(0, tokens)
    if window <= 0:
        return 2.0 * layers * s * s * hidden
    windowed = layers if window_layers < 0 else min(window_layers, layers)
    return 2.0 * s * hidden * ((layers - windowed) * s + windowed * min(s, window))


def prefill_seconds(
    active_params_billion: float, tokens: int, tflops_total: float, mfu: float,
    attn_flops: float = 0.0, attention_tflops_total: float = 0.0,
) -> float:
    """Prompt processing is compute-bound: 2·N FLOPs per token in the linear layers, plus the attention FLOPs
    at the rate attention runs at (16-bit KV: BF16 tensor cores even when the weights are FP8)."""
    _positive(tflops_total=tflops_total, mfu=mfu)
    linear = 2 * active_params_billion * 1e9 * max(0, tokens) / (tflops_total * 1e12 * mfu)
    attention = attn_flops / ((attention_tflops_total or tflops_total) * 1e12 * mfu) if attn_flops > 0 else 0.0
    return linear + attention


def step_seconds(
    weights_gb: float, kv_read_gb: float, bandwidth_tbs_total: float, mbu: float,
    linear_flops: float, tflops_total: float, mfu: float,
    attn_flops: float = 0.0, attention_tflops_total: float = 0.0, overhead_s: float = 0.0,
) -> float:
    """One engine step (a decode token for every running sequence, plus any prefill chunk batched with it):
    the linear layers take the longer of reading the weights and computing their FLOPs (the weights are read
    once for every token in the step, so a small prefill chunk hides under the read and a big one does not);
    decode attention reads each sequence's KV cache; prefill attention is compute; `overhead_s` is the
    per-step floor (kernel launches, sampling, tensor-parallel all-reduces) that no batch size removes."""
    _positive(bandwidth_tbs_total=bandwidth_tbs_total, mbu=mbu, tflops_total=tflops_total, mfu=mfu)
    bw = bandwidth_tbs_total * 1e12 * mbu
    linear = max(weights_gb * 1e9 / bw, linear_flops / (tflops_total * 1e12 * mfu))
    attention = attn_flops / ((attention_tflops_total or tflops_total) * 1e12 * mfu) if attn_flops > 0 else 0.0
    return overhead_s + linear + kv_read_gb * 1e9 / bw + attention


def time_to_first_token(prefill_s: float, step_s: float, others: int, others_prefill_s: float,
                        output_tokens: int, iterations: int = 30) -> float:
    """TTFT under load: the prompt's prefill shares the GPUs' compute with the other sequences' prefills
    (processor sharing: prefill / (1 − ρ), ρ = the others' prefill time per second), then one step emits the
    first token. Requests cycle every TTFT + output × step, so ρ and TTFT are solved together."""
    ttft = prefill_s + step_s
    if others <= 0 or others_prefill_s <= 0:
        return ttft
    # Loop invariants hoisted (the same products, so the same floats): sizing solves this for every GPU and
    # tensor-parallel width of every request.
    decode_s = max(0, output_tokens) * step_s
    others_s = others * others_prefill_s
    for _ in range(iterations):
        cycle = ttft + decode_s
        if cycle > 0:
            rho = others_s / cycle
            rho = rho if rho < 0.95 else 0.95  # min(0.95, rho), NaN included
        else:
            rho = 0.0
        nxt = prefill_s / (1 - rho) + step_s
        if abs(nxt - ttft) <= 1e-6 * ttft:
            return nxt
        ttft = nxt
    return ttft


def denoising_flops(params_billion: float, pixels: float, pixels_per_token: float, steps: int, passes: int,
                    frames: int = 0) -> float:
    """FLOPs of one generated image (or video): every denoiser pass runs 2·N FLOPs per latent token, tokens =
    pixels / pixels_per_token (a DiT: 2x2 patches of the 8x-downsampled latent, 256 pixels a token; a UNet's
    parameters mostly sit at a further 4x downsampling, 1,024), for steps x passes passes (classifier-free
    guidance runs the conditional and unconditional pass: 2), for every frame of a video."""
    if params_billion < 0 or pixels < 0 or pixels_per_token <= 0 or steps < 0 or passes < 0:
        raise ValueError("denoising figures must be non-negative (pixels_per_token positive)")
    tokens = pixels / pixels_per_token
    return 2.0 * params_billion * 1e9 * tokens * steps * passes * max(1, frames)


def experts_touched_fraction(experts: int, experts_per_token: int, tokens: float) -> float:
    """Share of a layer's routed experts that `tokens` tokens routed top-k touch: each expert is missed by one
    token with probability 1 - k/E, so by all of them with (1 - k/E)^tokens (uniform routing). One token reads
    k of E; a large batch reads them all."""
    if experts <= 0 or experts_per_token <= 0:
        return 1.0
    k = min(experts_per_token, experts)
    return 1.0 - (1.0 - k / experts) ** max(1.0, tokens)


def moe_shared_params_billion(params_billion: float, active_params_billion: float, experts: int,
                              experts_per_token: int) -> float:
    """Parameters every token uses (attention, embeddings, shared experts), from total P and active A with top-k
    of E routed experts: A = S + (P - S)·k/E, so S = (A - P·k/E) / (1 - k/E), clamped to [0, A]."""
    if experts <= 0 or experts_per_token <= 0 or experts_per_token >= experts:
        return active_params_billion
    r = experts_per_token / experts
    return min(active_params_billion, max(0.0, (active_params_billion - params_billion * r) / (1.0 - r)))


def moe_params_read_billion(params_billion: float, shared_params_billion: float, experts: int,
                            experts_per_token: int, tokens: float) -> float:
    """Parameters one forward step over `tokens` tokens reads: the shared ones, and of the routed ones the share
    the tokens touch (a dense model, or one whose routing is unknown, reads everything)."""
    if experts <= 0 or experts_per_token <= 0:
        return params_billion
    routed = max(0.0, params_billion - shared_params_billion)
    return shared_params_billion + routed * experts_touched_fraction(experts, experts_per_token, tokens)


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
