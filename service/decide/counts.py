"""Why a candidate has more GPUs than its memory needs, as candidate fields (issue 25): rules/counts.yaml says it
on the candidate ("8x, not the 4x that holds it: 4x misses the 6,000 ms p95 at 32 sessions")."""

from __future__ import annotations

from typing import Any

from ..engine.parse import FieldSpec
from .sizing.common import Sizing

COUNT_FIELDS: dict[str, FieldSpec] = {
    "memory_count": FieldSpec("int", "GPUs one copy of the model needs to hold it (memory alone)"),
    "per_replica": FieldSpec("int", "GPUs in one copy of the model as sized (count = per_replica x replicas)"),
    "replicas": FieldSpec("int", "copies of the model serving the offered load"),
    "raised_for_latency": FieldSpec(
        "bool", "a latency target needs more tensor parallelism than memory: per_replica > memory_count"
    ),
    "memory_count_latency_ms": FieldSpec(
        "number", "estimated end-to-end latency at memory_count GPUs per copy, ms (0 = not raised for latency)"
    ),
    "raised_for_load": FieldSpec("bool", "the offered requests/s need more than one copy: replicas > 1"),
    "raised_for_deadline": FieldSpec(
        "bool", "a training run needs more GPUs than memory to finish in time: count > memory_count"
    ),
    "needed_gpus": FieldSpec("int", "GPUs the work needs: per_replica x replicas (count may be more: whole units)"),
    "whole_units": FieldSpec(
        "bool", "count is more than needed_gpus: the GPU is rented or bought in whole instances or racks"
    ),
    "memory_count_days": FieldSpec(
        "number", "training: days the run would take on memory_count GPUs at the same per-GPU speed (0 = n/a)"
    ),
}


def count_fields(s: Sizing) -> dict[str, Any]:
    per_replica = int(s.per_replica or s.count)
    latency = per_replica > s.memory_count > 0 and s.latency_target
    # Raised for the deadline only when the deadline sized it (compute_count): GPUs a rented instance brings
    # beyond the need are whole units, never "the memory count would take 0.0 days, past the deadline".
    deadline = s.train_hours > 0 and s.count > s.memory_count > 0 and s.compute_count > s.memory_count
    needed = per_replica * int(s.replicas or 1)
    out = {
        "memory_count": int(s.memory_count),
        "per_replica": per_replica,
        "replicas": int(s.replicas or 1),
        "raised_for_latency": bool(latency),
        "memory_count_latency_ms": round(s.memory_count_latency_ms, 1) if latency else 0.0,
        "raised_for_load": (s.replicas or 1) > 1,
        "raised_for_deadline": bool(deadline),
        "needed_gpus": needed,
        "whole_units": s.count > needed > 0,
        "memory_count_days": round(s.train_hours * s.count / s.memory_count / 24, 2) if deadline else 0.0,
    }
    return out
