"""Memory a model needs: weights, KV cache, training states, activations, logits, engine overhead.

Pure functions over numbers; constants come from the caller (rules/assumptions.yaml). GB means 1e9 bytes.
Sources are named per formula; see shared/design/peers-and-physics.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property

GB = 1e9


def _check(**values: float) -> None:
    for name, v in values.items():
        if v is None or (isinstance(v, float) and math.isnan(v)) or v < 0:
            raise ValueError(f"{name} must be a non-negative number, got {v!r}")


@dataclass(frozen=True)
class Architecture:
    layers: int
    kv_heads: int
    head_dim: int
    hidden_size: int
    attention_heads: int
    vocab_size: int
    exact: bool  # True when the caller's architecture pins the KV cache; False when estimated from size
    kind: str = "GQA"  # MHA | GQA | MQA | MLA
    kv_latent: int = 0  # MLA: kv_lora_rank + rope_head_dim elements cached per layer and token
    window: int = 0  # sliding-window attention: tokens a windowed layer keeps (0 = full attention)
    window_layers: int = -1  # layers that use the window (Gemma 3 27B: 52 of 62); -1 = every layer

    @property
    def windowed_layers(self) -> int:
        """Layers limited to the window; the others attend to the whole sequence."""
        if self.window <= 0:
            return 0
        return self.layers if self.window_layers < 0 else min(self.window_layers, self.layers)


@dataclass(frozen=True)
class ArchitectureBand:
    """Models up to `max_params_billion` are assumed to look like this when no architecture is given."""

    max_params_billion: float
    layers: int
    kv_heads: int
    head_dim: int
    hidden_size: int
    attention_heads: int
    vocab_size: int


def estimate_architecture(params_billion: float, bands: Sequence[ArchitectureBand]) -> Architecture:
    """The first band (by size) that covers the model; the largest band for anything bigger."""
    _check(params_billion=params_billion)
    if not bands:
        raise ValueError("no architecture bands to estimate from")
    ordered = sorted(bands, key=lambda b: b.max_params_billion)
    band = next((b for b in ordered if b.max_params_billion >= params_billion), ordered[-1])
    return Architecture(band.layers, band.kv_heads, band.head_dim, band.hidden_size, band.attention_heads,
                        band.vocab_size, exact=False)


def resolve_architecture(
    params_billion: float, layers: int, kv_heads: int, head_dim: int, hidden_size: int,
    bands: Sequence[ArchitectureBand], kind: str = "UNSPECIFIED", kv_lora_rank: int = 0, rope_head_dim: int = 0,
    window: int = 0, mla_default: tuple[int, int] = (512, 64), window_layers: int = -1,
) -> Architecture:
    """The caller's architecture when it pins the KV cache, else an estimate (exact=False) that still honours
    what was said. Pinned means: MLA with layers, kv_lora_rank and rope_head_dim; MHA with layers and
    hidden_size (one KV head per query head, so KV width = hidden); MQA with layers and a head size; otherwise
    layers, KV heads and a head size. `mla_default` (kv_lora_rank, rope_head_dim) fills an MLA guess;
    `window_layers` says how many layers use the window (-1 = all)."""
    arch = _resolve(params_billion, layers, kv_heads, head_dim, hidden_size, bands, kind, kv_lora_rank,
                    rope_head_dim, window, mla_default)
    return replace(arch, window_layers=window_layers) if window_layers >= 0 else arch


def _resolve(
    params_billion: float, layers: int, kv_heads: int, head_dim: int, hidden_size: int,
    bands: Sequence[ArchitectureBand], kind: str, kv_lora_rank: int, rope_head_dim: int, window: int,
    mla_default: tuple[int, int],
) -> Architecture:
    est = estimate_architecture(params_billion, bands)
    n_layers = layers or est.layers
    hidden = hidden_size or est.hidden_size
    heads = est.attention_heads
    if kind == "MLA":
        rank, rope = kv_lora_rank or mla_default[0], rope_head_dim or mla_default[1]
        exact = layers > 0 and kv_lora_rank > 0 and rope_head_dim > 0
        return Architecture(n_layers, 1, head_dim or est.head_dim, hidden, heads, est.vocab_size, exact,
                            "MLA", rank + rope, window)
    if kind == "MHA":
        hd = head_dim or est.head_dim
        kv = max(1, hidden // hd)
        return Architecture(n_layers, kv, hd, hidden, kv, est.vocab_size, layers > 0 and hidden_size > 0,
                            "MHA", 0, window)
    if kind == "MQA":
        hd = head_dim or (max(1, hidden // max(1, heads)) if hidden_size else est.head_dim)
        return Architecture(n_layers, 1, hd, hidden, heads, est.vocab_size,
                            layers > 0 and (head_dim > 0 or hidden_size > 0), "MQA", 0, window)
    if layers > 0 and kv_heads > 0 and (head_dim > 0 or hidden_size > 0):
        hd = head_dim or max(1, hidden // max(1, heads))
        return Architecture(layers, kv_heads, hd, hidden, heads, est.vocab_size, True, "GQA", 0, window)
    if window > 0 or layers > 0 or kv_heads > 0:
        return Architecture(n_layers, kv_heads or est.kv_heads, head_dim or est.head_dim, hidden, heads,
                            est.vocab_size, False, "GQA", 0, window)
    return est


def weights_gb(params_billion: float, bytes_per_param: float) -> float:
    """params × bytes per parameter (fp32 4, bf16 2, fp8/int8 1, int4 0.5, plus scale overhead)."""
    try:  # compared directly first (NaN compares False): asked thousands of times an answer
        ok = params_billion >= 0 and bytes_per_param >= 0
    except TypeError:
        ok = False
    if not ok:
        _check(params_billion=params_billion, bytes_per_param=bytes_per_param)
    return params_billion * 1e9 * bytes_per_param / GB


def kv_bytes_per_token(arch: Architecture, kv_bytes: float = 2.0) -> float:
    """2 (K and V) × layers × KV heads × head dim × bytes: GQA-aware (stas00/ml-engineering; llm-d).
    MLA caches one compressed latent per layer instead: layers × (kv_lora_rank + rope_head_dim) × bytes
    (DeepSeek-V2 paper section 2.1; llm-d KVCacheDetail)."""
    if arch.kind == "MLA":
        return float(arch.layers * arch.kv_latent * kv_bytes)
    return 2.0 * arch.layers * arch.kv_heads * arch.head_dim * kv_bytes


def cached_layer_tokens(arch: Architecture, tokens_per_sequence: int) -> int:
    """Layer-tokens a sequence keeps in the KV cache: a windowed layer keeps at most the window (Mistral 7B: all
    32 layers), the others every token (Gemma 3: 52 of 62 layers at 1,024, 10 global; gpt-oss: alternating)."""
    windowed = arch.windowed_layers
    full = arch.layers - windowed
    return full * tokens_per_sequence + windowed * min(tokens_per_sequence, max(arch.window, 0))


def kv_cache_gb(
    arch: Architecture, tokens_per_sequence: int, sequences: int, kv_bytes: float = 2.0, tensor_parallel: int = 1
) -> float:
    """Whole-configuration KV cache. Under tensor parallelism each GPU holds max(kv_heads / TP, 1) heads, so
    with TP > kv_heads heads are replicated and the total grows (llm-analysis get_memory_kv_cache_per_layer).
    MLA's latent is not split by heads; vLLM and SGLang serve MLA models with data-parallel attention, so each
    sequence's latent lives on one GPU and nothing is replicated."""
    _check(tokens_per_sequence=tokens_per_sequence, sequences=sequences, kv_bytes=kv_bytes)
    layer_tokens = cached_layer_tokens(arch, tokens_per_sequence)
    if arch.kind == "MLA":
        return float(arch.kv_latent * kv_bytes) * layer_tokens * sequences / GB
    tp = max(1, tensor_parallel)
    heads_per_gpu = max(arch.kv_heads / tp, 1.0)
    per_layer_token_all_gpus = 2.0 * heads_per_gpu * tp * arch.head_dim * kv_bytes
    return per_layer_token_all_gpus * layer_tokens * sequences / GB


def adamw_mixed_precision_bytes_per_param(fp32_grads: bool = False) -> float:
    """16 = 2 (bf16 weights) + 2 (bf16 gradients) + 12 (fp32 master, m, v): ZeRO paper; EleutherAI cookbook.
    18 with fp32 gradients (stas00 training/performance)."""
    return 18.0 if fp32_grads else 16.0


def activation_gb(
    seq_len: int, batch: int, hidden: int, layers: int, attention_heads: int, recompute: str,
    tensor_parallel: int = 1,
) -> float:
    """Activation memory of a transformer in 16-bit (Korthikanti et al. 2022, "Reducing Activation
    Recomputation"), per layer: none s·b·h·(34 + 5·a·s/h); selective s·b·h·34; full 2·s·b·h for the saved layer
    inputs plus one layer's working set s·b·h·34 while it is recomputed. Divided by tensor parallelism."""
    _check(seq_len=seq_len, batch=batch, hidden=hidden, layers=layers)
    s, b, h, a = float(seq_len), float(batch), float(hidden), float(max(1, attention_heads))
    if recompute == "none":
        total = layers * s * b * h * (34 + 5 * a * s / h)
    elif recompute == "selective":
        total = layers * s * b * h * 34
    elif recompute == "full":
        total = layers * 2 * s * b * h + s * b * h * 34
    else:
        raise ValueError(f"recompute must be none, selective or full, got {recompute!r}")
    return total / max(1, tensor_parallel) / GB


def logits_gb(seq_len: int, batch: int, vocab_size: int) -> float:
    """fp32 logits for the loss: 4 · b · s · vocab bytes (stas00)."""
    _check(seq_len=seq_len, batch=batch, vocab_size=vocab_size)
    return 4.0 * batch * seq_len * vocab_size / GB


def lora_trainable_params_billion(arch: Architecture, rank: int, targets_per_layer: int) -> float:
    """LoRA adds A (h×r) and B (r×h) to each targeted h×h projection: r·2h parameters each."""
    return arch.layers * targets_per_layer * rank * 2 * arch.hidden_size / 1e9


def serving_activation_gb(
    step_tokens: int, sequences: int, hidden: int, vocab_size: int, bytes_per_token_hidden: float,
    sampler_bytes_per_vocab_entry: float, tensor_parallel: int = 1,
) -> float:
    """Per GPU, the serving engine's activation workspace, which scales with the work: one layer's live tensors
    for the tokens of one step (`bytes_per_token_hidden` x hidden per token, split by tensor parallelism), and the
    sampler's fp32 logits, probabilities and sorted copy for every running sequence (vLLM profiles exactly these
    two: a forward of max_num_batched_tokens and a sampler run of max_num_seqs)."""
    _check(step_tokens=step_tokens, sequences=sequences, hidden=hidden, vocab_size=vocab_size)
    forward = step_tokens * hidden * bytes_per_token_hidden / max(1, tensor_parallel)
    return (forward + sequences * vocab_size * sampler_bytes_per_vocab_entry) / GB


@dataclass(frozen=True)
class MemoryBreakdown:
    components: tuple[tuple[str, float], ...]  # (name, GB) in display order

    @cached_property  # the sizing search, the facts, the answer and its trace each ask, per GPU per request
    def total_gb(self) -> float:
        return sum(v for _, v in self.components)


def inference_memory(
    params_billion: float, bytes_per_param: float, arch: Architecture, tokens_per_sequence: int, sequences: int,
    kv_bytes: float, activation_peak_gb: float, engine_overhead_gb: float, tensor_parallel: int = 1,
) -> MemoryBreakdown:
    """Serving memory of one model copy over `tensor_parallel` GPUs: weights (sharded, summed), KV cache at the
    sized context and concurrency, the engine's peak activation workspace per GPU (serving_activation_gb) and the
    CUDA context / non-torch memory per GPU."""
    tp = max(1, tensor_parallel)
    return MemoryBreakdown((
        ("weights", weights_gb(params_billion, bytes_per_param)),
        ("kv_cache", kv_cache_gb(arch, tokens_per_sequence, sequences, kv_bytes, tp)),
        ("activations", activation_peak_gb * tp),
        ("engine", engine_overhead_gb * tp),
    ))


def full_training_memory(
    params_billion: float, arch: Architecture, seq_len: int, micro_batch: int, state_bytes_per_param: float,
    recompute: str, engine_overhead_gb: float, gpus: int = 1,
) -> MemoryBreakdown:
    """Whole-configuration memory of mixed-precision training: 16-bit weights (2 B) and gradients (2 B), the
    optimizer's fp32 master copy and moments (state_bytes_per_param − 4), activations and logits of the batch,
    and engine overhead per GPU. Model states can be sharded over the GPUs (ZeRO-3/FSDP); the totals hold."""
    _check(state_bytes_per_param=state_bytes_per_param)
    p = params_billion * 1e9
    return MemoryBreakdown((
        ("weights", p * 2 / GB),
        ("gradients", p * 2 / GB),
        ("optimizer", p * max(0.0, state_bytes_per_param - 4) / GB),
        ("activations", activation_gb(seq_len, micro_batch, arch.hidden_size, arch.layers, arch.attention_heads,
                                      recompute)),
        ("logits", logits_gb(seq_len, micro_batch, arch.vocab_size)),
        ("engine", engine_overhead_gb * max(1, gpus)),
    ))


def adapter_training_memory(
    params_billion: float, bytes_per_param: float, arch: Architecture, seq_len: int, micro_batch: int,
    lora_rank: int, lora_targets_per_layer: int, recompute: str, engine_overhead_gb: float,
) -> MemoryBreakdown:
    """LoRA / QLoRA on one GPU: the frozen base at its precision (4-bit base = QLoRA), adapter parameters with
    16 B/param AdamW mixed precision, activations (no weight gradients for the base) and logits."""
    adapter = lora_trainable_params_billion(arch, lora_rank, lora_targets_per_layer)
    return MemoryBreakdown((
        ("weights", weights_gb(params_billion, bytes_per_param)),
        ("adapter_states", adapter * 1e9 * adamw_mixed_precision_bytes_per_param() / GB),
        ("activations", activation_gb(seq_len, micro_batch, arch.hidden_size, arch.layers, arch.attention_heads,
                                      recompute)),
        ("logits", logits_gb(seq_len, micro_batch, arch.vocab_size)),
        ("engine", engine_overhead_gb),
    ))
