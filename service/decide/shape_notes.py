"""Notes on what sizing assumed about the model's shape beyond the defaults: MoE routing it estimated or could
not use, attention windows it could not place. Each is (rule id, message key, parameters)."""

from __future__ import annotations

from typing import Any

from ..domain.assumptions import Assumptions
from ..domain.brief import Brief
from .sizing.engines import engine_of
from .sizing.inference import GENERATION
from .sizing.media import media_shape
from .sizing.shape import Shape

Note = tuple[str, str, dict[str, Any]]


def shape_notes(brief: Brief, shape: Shape, a: Assumptions) -> list[Note]:
    m = brief.model
    out: list[Note] = []
    if shape.routed:
        step_tokens = max(1, shape.sequences)
        read = shape.params_read_billion(step_tokens)
        routed = max(1e-9, shape.params_billion - shape.shared_params_billion)
        params = {
            "shared_params_billion": round(shape.shared_params_billion, 2),
            "params_billion": shape.params_billion,
            "active_params_billion": shape.active_params_billion,
            "experts": shape.experts,
            "experts_per_token": shape.experts_per_token,
            "sequences": step_tokens,
            "experts_touched": (read - shape.shared_params_billion) / routed,
        }
        out.append(("sizing.moe", "note.moe_shared_estimated" if shape.shared_estimated else "note.moe_routed",
                    params))
    elif 0 < m.active_params_billion < m.params_billion and brief.workload not in (
        "PRETRAINING", "FULL_FINETUNE", "ADAPTER_FINETUNE"
    ):
        step_tokens = max(1, shape.sequences)
        out.append(("sizing.moe", "note.moe_routing_unknown",
                    {"params_billion": m.params_billion, "active_params_billion": m.active_params_billion,
                     "sequences": step_tokens,
                     "experts_touched": shape.params_read_billion(step_tokens) / max(1e-9, shape.params_billion)}))
    if brief.workload == "MEDIA_GENERATION":
        ms = media_shape(brief, shape, a)
        out.append(("sizing.media", "note.media_sized", {
            "steps": ms.steps, "passes": ms.passes, "width": ms.width, "height": ms.height,
            "frames": max(1, ms.frames), "tokens": ms.tokens,
            "tflops_per_output": ms.flops_per_output / 1e12,
            "assumed": ", ".join(ms.defaults_used) or "-",
        }))
        if shape.denoiser is None:  # no registry model named: the default pipeline's denoiser, said (issue 36)
            d = ms.denoiser
            out.append(("sizing.media", "note.denoiser_default_video" if ms.frames > 1 else
                        "note.denoiser_default_image", {
                            "architecture": d.architecture, "denoiser_billion": d.params_billion,
                            "params_billion": shape.params_billion, "vae_temporal": d.vae_temporal,
                            "vae_spatial": d.vae_spatial}))
    if brief.workload in GENERATION:
        key = "note.kv_cache_precision_default" if shape.kv_precision_default else "note.kv_cache_precision"
        if shape.kv_precision_default and shape.kv_engine:
            key = "note.kv_cache_precision_engine"
        out.append(("sizing.kv_cache", key, {"kv_precision": shape.kv_precision, "kv_bytes": shape.kv_bytes,
                                             "engine": shape.kv_engine, "precision": shape.precision}))
        engine = engine_of(brief.toolchain)
        row = a.values.get("serving_engines", {}).get(engine)
        if row:
            out.append(("sizing.engine", "note.serving_engine", {
                "engine": engine, "mbu": float(row["decode_bandwidth_use"]), "mfu": float(row["prefill_mfu"]),
                "budget": int(row["token_budget"])}))
    if shape.window_layers_unknown:
        out.append(("sizing.window", "note.window_layers_unknown",
                    {"window": m.sliding_window_tokens, "layers": shape.arch.layers}))
    return out
