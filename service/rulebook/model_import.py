"""A Hugging Face `config.json` (already read from disk) → a model registry entry (`rules/models/*.yaml`).

Shapes map one to one: num_hidden_layers, num_key_value_heads, head_dim (else hidden_size / num_attention_heads),
hidden_size, max_position_embeddings, the window (sliding_window with layer_types, sliding_window_pattern, or
Llama 4's attention_chunk_size on its RoPE layers), experts (num_local_experts, n_routed_experts, num_experts),
num_experts_per_tok, and MLA's kv_lora_rank and qk_rope_head_dim. Multimodal configs are read from text_config.

config.json holds no parameter count, so one is computed from the shapes where the layout is standard (an
embedding, untied or tied lm_head, per layer attention + gated MLP or routed/shared experts + norms) and the
entry says it was computed; `params_billion` given by the caller wins. Shapes not handled here (Llama 4's
interleaved MoE, encoders) get no count and a note asking for one.
"""

from __future__ import annotations

import re
from typing import Any

# Model types whose MLP is gated (gate, up, down) and attention is q/k/v/o: what `_dense_params` counts.
_GATED = {"llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "qwen2_moe", "gemma3_text", "gemma3", "gemma2",
          "phi3", "deepseek_v3", "deepseek_v2", "gpt_oss", "mistral3", "ministral3"}
_QKV_BIAS = {"qwen2", "qwen2_moe"}  # q/k/v projections carry biases
_QK_NORM = {"qwen3", "qwen3_moe", "gemma3_text", "gemma3"}  # per-head RMSNorm on q and k
_FOUR_NORMS = {"gemma3_text", "gemma3", "gemma2"}  # pre and post norms around attention and MLP
_TIED_BY_DEFAULT = {"gemma3_text", "gemma3", "gemma2", "gemma"}  # their configs leave tie_word_embeddings out


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    inner = config.get("text_config")
    if isinstance(inner, dict):
        merged = dict(inner)
        merged.setdefault("model_type", config.get("model_type", ""))
        return merged
    return config


def _int(cfg: dict[str, Any], *keys: str) -> int:
    for k in keys:
        v = cfg.get(k)
        if isinstance(v, int | float) and not isinstance(v, bool) and v > 0:
            return int(v)
    return 0


def _window(cfg: dict[str, Any], layers: int) -> tuple[int, int, str]:
    """(window tokens, windowed layers, how it was read); (0, 0, '') for full attention."""
    types = cfg.get("layer_types")
    chunk = _int(cfg, "attention_chunk_size")
    if chunk and layers:
        rope = cfg.get("no_rope_layers")
        if isinstance(rope, list) and len(rope) == layers and any(rope):
            n = sum(1 for r in rope if r)
            return chunk, n, f"chunked attention {chunk} on the {n} RoPE layers (no_rope_layers)"
        interval = _int(cfg, "no_rope_layer_interval") or 4
        n = layers - layers // interval
        return chunk, n, f"chunked attention {chunk} on all but every {interval}th layer"
    window = _int(cfg, "sliding_window")
    if not window or cfg.get("use_sliding_window") is False:
        return 0, 0, ""
    if isinstance(types, list) and types:
        n = sum(1 for t in types if str(t) in ("sliding_attention", "chunked_attention"))
        return (window, n, f"layer_types: {n} of {len(types)} sliding") if n else (0, 0, "")
    pattern = _int(cfg, "sliding_window_pattern")
    if pattern and layers:
        n = layers - layers // pattern
        return window, n, f"sliding_window_pattern {pattern}: every {pattern}th layer global"
    return window, layers, "every layer windowed"


def _experts(cfg: dict[str, Any]) -> tuple[int, int]:
    return _int(cfg, "num_local_experts", "n_routed_experts", "num_experts"), _int(cfg, "num_experts_per_tok",
                                                                                    "experts_per_token")


def _attention_params(cfg: dict[str, Any], d: int, heads: int, kv: int, hd: int, kind: str) -> int:
    if _int(cfg, "kv_lora_rank"):  # MLA (DeepSeek-V2/V3)
        q_rank, kv_rank = _int(cfg, "q_lora_rank"), _int(cfg, "kv_lora_rank")
        nope, rope, v = _int(cfg, "qk_nope_head_dim"), _int(cfg, "qk_rope_head_dim"), _int(cfg, "v_head_dim")
        q = d * q_rank + q_rank + q_rank * heads * (nope + rope) if q_rank else d * heads * (nope + rope)
        return q + d * (kv_rank + rope) + kv_rank + kv_rank * heads * (nope + v) + heads * v * d
    out = d * heads * hd + 2 * d * kv * hd + heads * hd * d
    if kind in _QKV_BIAS:
        out += heads * hd + 2 * kv * hd
    if cfg.get("attention_bias") is True:
        out += heads * hd + 2 * kv * hd + d
    if kind == "gpt_oss":
        out += heads  # attention sinks
    if kind in _QK_NORM:
        out += 2 * hd
    return out


def parameter_counts(config: dict[str, Any]) -> tuple[float, float] | None:
    """(total, active) parameters in billions computed from the shapes; None when the layout is not one handled."""
    cfg = _text_config(config)
    kind = str(cfg.get("model_type", ""))
    if kind not in _GATED or cfg.get("interleave_moe_layer_step"):
        return None
    d, layers, vocab = _int(cfg, "hidden_size"), _int(cfg, "num_hidden_layers"), _int(cfg, "vocab_size")
    heads = _int(cfg, "num_attention_heads")
    if not (d and layers and vocab and heads):
        return None
    kv = _int(cfg, "num_key_value_heads") or heads
    hd = _int(cfg, "head_dim") or d // heads
    attn = _attention_params(cfg, d, heads, kv, hd, kind)
    norms = (4 if kind in _FOUR_NORMS else 2) * d
    experts, top_k = _experts(cfg)
    inter = _int(cfg, "intermediate_size")
    expert_inter = _int(cfg, "moe_intermediate_size") or inter
    per_expert = 3 * d * expert_inter + (3 * expert_inter + d if kind == "gpt_oss" else 0)  # gpt-oss: biases
    dense_layers = min(_int(cfg, "first_k_dense_replace"), layers) if experts else layers
    shared = _int(cfg, "n_shared_experts", "num_shared_experts") * 3 * d * expert_inter
    router = d * experts + (experts if kind == "gpt_oss" else 0)
    total = active = layers * (attn + norms)
    total += dense_layers * 3 * d * inter
    active += dense_layers * 3 * d * inter
    moe_layers = layers - dense_layers if experts else 0
    total += moe_layers * (experts * per_expert + shared + router)
    active += moe_layers * (top_k * per_expert + shared + router)
    tied = config.get("tie_word_embeddings", cfg.get("tie_word_embeddings", kind in _TIED_BY_DEFAULT))
    embed = vocab * d * (1 if tied else 2) + d
    return (total + embed) / 1e9, (active + embed) / 1e9


def slug(text: str) -> str:
    """A registry id from a repo or model name: lower case, the part after the last '/', safe characters."""
    base = text.rsplit("/", 1)[-1].lower()
    return re.sub(r"[^a-z0-9_.:-]+", "-", base).strip("-.") or "model"


def entry_from_config(config: dict[str, Any], model_id: str = "", params_billion: float = 0.0,
                      source: str = "", as_of: str = "") -> dict[str, Any]:
    """A registry entry (the mapping a `models` document lists) from a config.json; fields it cannot know are
    left out and the notes say so."""
    cfg = _text_config(config)
    kind = str(cfg.get("model_type", ""))
    name = str(config.get("_name_or_path", "") or model_id or kind)
    layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers")
    heads = _int(cfg, "num_attention_heads", "n_head")
    d = _int(cfg, "hidden_size", "d_model", "n_embd")
    notes: list[str] = []
    entry: dict[str, Any] = {"id": model_id or slug(name), "name": name, "kind": "llm"}
    if name and name != entry["id"] and "/" in name:
        entry["aliases"] = [name]
    counted = parameter_counts(config)
    if params_billion > 0:
        entry["params_billion"] = params_billion
    elif counted:
        entry["params_billion"] = round(counted[0], 3)
        notes.append(f"params_billion computed from the config shapes ({counted[0]:.3f}B)")
    else:
        notes.append(f"params_billion not computed for model_type '{kind}': give it (--params-billion)")
    experts, top_k = _experts(cfg)
    if experts and counted and not params_billion:
        entry["active_params_billion"] = round(counted[1], 3)
        notes.append(f"active_params_billion computed from the shapes ({counted[1]:.3f}B, top-{top_k})")
    kv_rank = _int(cfg, "kv_lora_rank")
    kv_heads = _int(cfg, "num_key_value_heads") or heads
    fields: dict[str, int] = {
        "layers": layers,
        "kv_heads": kv_heads,
        "head_dim": 0 if kv_rank else (_int(cfg, "head_dim") or (d // heads if heads else 0)),
        "hidden_size": d,
    }
    entry.update({k: v for k, v in fields.items() if v})
    entry["attention"] = ("MLA" if kv_rank else "MQA" if kv_heads == 1 else "GQA" if kv_heads < heads else "MHA") \
        if heads else None
    if kv_rank:
        entry["kv_lora_rank"] = kv_rank
        entry["rope_head_dim"] = _int(cfg, "qk_rope_head_dim")
    context = _int(cfg, "max_position_embeddings")
    if context:
        entry["context_window_tokens"] = context
    window, windowed, how = _window(cfg, layers)
    if window:
        entry["sliding_window_tokens"], entry["sliding_window_layers"] = window, windowed
        notes.append(how)
    if experts:
        entry["experts"], entry["experts_per_token"] = experts, top_k
    quant = config.get("quantization_config") or {}
    method = str(quant.get("quant_method", "")).lower() if isinstance(quant, dict) else ""
    dtype = str(config.get("torch_dtype", cfg.get("torch_dtype", "")) or "")
    precision = {"mxfp4": "FP4", "fp8": "FP8"}.get(method) or {"bfloat16": "BF16", "float16": "FP16",
                                                               "float32": "FP32"}.get(dtype, "")
    if precision:
        entry["native_precision"] = precision
    entry["source"] = source or "config.json (give the hub URL it came from)"
    if as_of:
        entry["as_of"] = as_of
    entry["notes"] = "; ".join(notes) + ("." if notes else "")
    return {k: v for k, v in entry.items() if v not in (None, "", [])}


def entry_yaml(entry: dict[str, Any]) -> str:
    """The entry as a `kind: models` document, in the registry's key order."""
    lines = ["kind: models", "models:"]
    first = True
    for key, value in entry.items():
        lead = "  - " if first else "    "
        first = False
        if isinstance(value, list):
            text = "[" + ", ".join(str(v) for v in value) + "]"
        elif isinstance(value, str) and (": " in value or value[:1] in "[{&*!|>'\"%@`#" or key == "notes"):
            text = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        else:
            text = str(value)
        lines.append(f"{lead}{key}: {text}")
    return "\n".join(lines) + "\n"
