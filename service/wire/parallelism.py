"""A brief's parallel split that no serving or training engine can run → field violations (issue 38 item 4).

What vLLM, SGLang and TensorRT-LLM (and Megatron for training) require of a split, checked against the model's
shape from the registry (or the brief's own `layers` / `kv_heads`) and the catalog's scale-up domains:
- tensor parallelism shards the query heads evenly: `tensor_parallel` must divide them;
- and the KV heads: either `tensor_parallel` divides the KV heads (each GPU holds kv / tp of them), or it is a
  multiple of them and each KV head is replicated on tp / kv GPUs; anything else leaves heads split unevenly;
- one tensor-parallel group stays within one scale-up domain (an NVLink domain, or one node's PCIe GPUs);
- pipeline parallelism gives each stage at least one layer: `pipeline_parallel` cannot exceed the layers (for a
  model the registry does not know, the most layers any registry model has).
A brief whose model is not known by shape gets only the checks that need no shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Violation = tuple[str, str]
TP = "brief.parallelism.tensor_parallel"
PP = "brief.parallelism.pipeline_parallel"


def _divisors(n: int, up_to: int) -> str:
    ds = [d for d in range(1, min(n, up_to) + 1) if n % d == 0]
    return ", ".join(str(d) for d in ds)


def check_parallelism(
    brief: Any,  # noqa: ANN401 - pb.Brief
    shapes: Mapping[str, tuple[str, int, int, int]] | None,
    scale_up: Mapping[str, int] | None,
) -> list[Violation]:
    out: list[Violation] = []
    p, m = brief.parallelism, brief.model
    tp, pp = p.tensor_parallel, p.pipeline_parallel
    if tp <= 0 and pp <= 0:
        return out
    name = m.name.strip().lower()
    model, heads, kv, layers = (shapes or {}).get(name, ("", 0, 0, 0)) if name else ("", 0, 0, 0)
    said = model or "the model"  # the registry's id, never the caller's spelling of it
    if m.kv_heads > 0:  # the brief's own shape wins over the registry's
        kv, heads = m.kv_heads, heads if heads and heads % m.kv_heads == 0 else 0
    if m.layers > 0:
        layers = m.layers
    if tp > 0 and scale_up:
        gpus = [g for g in brief.gpus if g in scale_up] or list(scale_up)
        domain = max(scale_up[g] for g in gpus)
        if tp > domain:
            which = "the GPUs the brief names" if brief.gpus else "any GPU in the catalog"
            out.append((TP, f"{tp:,} GPUs cannot share one layer: the largest scale-up domain of {which} is "
                            f"{domain} GPUs (an NVLink domain, or one node's PCIe GPUs), and tensor parallelism "
                            "stays within one; split further with pipeline_parallel"))
    if tp > 1 and heads > 0 and heads % tp:
        out.append((TP, f"{tp} does not divide the {heads} attention heads of {said}: tensor parallelism gives "
                        f"each GPU an equal share of them (divisors: {_divisors(heads, 64)})"))
    elif tp > 1 and kv > 0 and kv % tp and tp % kv:
        out.append((TP, f"{tp} does not split the {kv} KV heads of {said}: engines (vLLM, SGLang, TensorRT-LLM) "
                        f"give each GPU kv / tp of them when tp divides {kv}, or replicate each KV head on tp / kv "
                        f"GPUs when tp is a multiple of {kv}; {tp} is neither (use {_divisors(kv, 64)} or a "
                        f"multiple of {kv})"))
    if pp > 1:
        most = layers or max((s[3] for s in (shapes or {}).values()), default=0)
        if most and pp > most:
            whose = f"the {most} layers of {said}" if layers else f"{most} layers, the most of any model the " \
                                                                  "registry knows"
            out.append((PP, f"{pp:,} pipeline stages need at least one layer each: more than {whose}"))
    return out
