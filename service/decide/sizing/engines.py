"""What a serving engine on a GPU reaches: decode bandwidth use, prefill compute use, the per-step floor, the
token budget of one step and the front end's time per request. The engine is the one the brief's toolchain
names (vllm, sglang, tensorrt-llm); a brief that names none gets the general figures. The figures live in
rules/assumptions.yaml (`serving_engines`, `decode_bandwidth_use_by_gpu`) with their sources."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...domain.assumptions import Assumptions
from ...domain.catalog import Gpu

# Names a toolchain entry may use for an engine, lowercase.
ENGINE_ALIASES = {
    "vllm": "vllm", "sglang": "sglang", "tensorrt-llm": "tensorrt-llm", "trtllm": "tensorrt-llm",
    "trt-llm": "tensorrt-llm", "tensorrt_llm": "tensorrt-llm", "nim": "tensorrt-llm", "llama.cpp": "llama.cpp",
    "llamacpp": "llama.cpp", "ollama": "llama.cpp",
}


@dataclass(frozen=True)
class Efficiency:
    engine: str  # the engine whose figures these are
    named: bool  # the brief named it (else the default engine's figures)
    mbu: float  # decode: share of HBM bandwidth a step's reads reach
    mfu: float  # prefill: share of dense peak the prompt's GEMMs reach (scaled by the GPU's matmul efficiency)
    floor_s: float  # per-step floor: launches, sampling, scheduling
    budget_tokens: int  # most tokens one step runs (chunked prefill)
    request_s: float  # the front end's own time per request before its first token: HTTP, tokenizer, queueing
    prefill_first: float  # share of the other sessions' prefill a prompt waits for before its first token (the
    # rest is mixed into the decode steps): 1 = prefill batches run first, apart (SGLang), 0 = mixed (chunked)
    prefill_layer_s: float = 0.0  # host time a prefill step spends per layer launching its kernels
    recv_interval: int = 1  # decode steps between the scheduler's polls for new requests (1 = every step)


def engine_of(toolchain: tuple[str, ...]) -> str:
    """The first serving engine the toolchain names; '' when it names none."""
    for tool in toolchain:
        name = ENGINE_ALIASES.get(tool.strip().lower())
        if name:
            return name
    return ""


def efficiency(gpu: Gpu, toolchain: tuple[str, ...], a: Assumptions) -> Efficiency:
    """The named engine's figures from `serving_engines`; a brief that names none gets the general ones
    (mbu_decode, mfu_prefill, decode_step_floor_ms, serving_max_batched_tokens: no front-end time)."""
    named = engine_of(toolchain)
    table: dict[str, Any] = a.values.get("serving_engines", {})
    row = table.get(named)
    by_gpu = a.values.get("decode_bandwidth_use_by_gpu", {})
    if row is None:
        named = ""
        mbu, mfu = a.num("mbu_decode"), a.num("mfu_prefill")
        floor_ms, budget, request_ms = a.num("decode_step_floor_ms"), a.num("serving_max_batched_tokens"), 0.0
        first = a.num("prefill_first")
        layer_ms = 0.0
    else:
        mbu, mfu = float(row["decode_bandwidth_use"]), float(row["prefill_mfu"])
        floor_ms, budget, request_ms = float(row["step_floor_ms"]), float(row["token_budget"]), float(row["request_ms"])
        first = float(row["prefill_first"])
        layer_ms = float(row.get("prefill_layer_ms", 0.0))
    if gpu.id in by_gpu:  # measured for this GPU family: beats the engine's datacenter NVIDIA figure
        mbu = float(by_gpu[gpu.id])
    elif gpu.gpu_class == "consumer" and named != "llama.cpp":
        mbu = a.num("mbu_decode_consumer")
    # Prompt GEMMs reach the engine's share of what a large matmul reaches on this GPU (stas00 MAMF, the catalog's
    # matmul_efficiency), relative to the reference GPU the engine's figure was measured on.
    ref = a.num("reference_matmul_efficiency")
    # A GPU family whose matmul share was measured since the catalog assumed one (prefill_matmul_efficiency_by_gpu)
    measured = a.values.get("prefill_matmul_efficiency_by_gpu", {}).get(gpu.id)
    scale = (float(measured) if measured else gpu.matmul_efficiency or ref) / ref
    recv = int(a.values.get("scheduler_recv_interval", {}).get(named, 1)) if named else 1
    return Efficiency(engine=named or "general", named=bool(named), mbu=mbu, mfu=mfu * scale,
                      floor_s=floor_ms / 1000, budget_tokens=max(1, int(budget)), request_s=request_ms / 1000,
                      prefill_first=min(1.0, max(0.0, first)), prefill_layer_s=layer_ms / 1000,
                      recv_interval=max(1, recv))
