"""Size one GPU type for one brief (`size`, the plain reference), or every GPU of a catalog (`size_all`, the
per-request fast path that tests/test_fast_paths.py holds equal to it)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import date
from typing import Any

from ...domain.assumptions import Assumptions
from ...domain.brief import TRAINING_WORKLOADS, Brief, Quote
from ...domain.catalog import Gpu
from ...money import cost as money
from ...physics.memory import MemoryBreakdown
from .. import tables as tb
from .cluster import size_cluster, whole_racks
from .common import (
    Memo,
    Sizing,
    compared_tier,
    compute_tflops,
    gpu_rent_price,
    size_ownership,
    size_unit_cost,
)
from .inference import size_inference
from .per_request import RequestSizer
from .shape import Shape
from .training import size_adapter, size_full_training


def size_all(
    gpus: Iterable[Gpu], brief: Brief, shape: Shape, a: Assumptions, quotes: tuple[Quote, ...], day: date
) -> list[Sizing]:
    """`size` for each GPU, with what depends only on the brief worked out once per request (RequestSizer) and what
    depends only on the GPU and the rules once per rules load (tables.py). `size` stays the plain version and
    the reference: tests/test_fast_paths.py holds the two equal."""
    t = tb.tables(a)
    req = RequestSizer(brief, shape, a, t.constants, quotes, day, speeds=t.speeds)
    return [req.size(t.gpu(g)) for g in gpus]


def latency_of(
    gpu: Gpu, brief: Brief, shape: Shape, a: Assumptions, day: date, needs: dict[tuple[int, int], MemoryBreakdown],
    prefills: dict[Any, Any] | None = None,
) -> tuple[bool, float]:
    """`size(gpu, brief, ...)`'s `fits` and `est_latency_ms` (RequestSizer.fit_and_latency): what the missed-target
    suggestion asks of each output length it tries. No quotes: they set the price, never the speed. `needs`: the
    memory breakdowns of an earlier length whose shape sized the same context and sequences (see RequestSizer);
    `prefills`: the prefill steps of earlier lengths (a prefill reads no output length; decide/sizing/width.py)."""
    t = tb.tables(a)
    # No speeds table: the caller keeps each length's result (advisor's latencies), and a brief at a length tried
    # is rarely asked again, so keeping its widths' figures would cost a key (a hash over the whole brief) and a
    # copy of the fields per call, and push the briefs asked for out of the table.
    req = RequestSizer(brief, shape, a, t.constants, (), day, needs)
    if prefills is not None:
        req.memo[("prefill",)] = prefills
    return req.fit_and_latency(t.gpu(gpu))


def size(
    gpu: Gpu, brief: Brief, shape: Shape, a: Assumptions, quotes: tuple[Quote, ...], day: date,
    memo: Memo | None = None,
) -> Sizing:
    """`memo`: memory breakdowns already computed for this brief, shape and assumptions (by `size_all`)."""
    memo = {} if memo is None else memo
    s = Sizing(gpu=gpu, compared_tier=compared_tier(brief))
    s.price, s.quote, s.usd_per_gpu_hour, s.price_tier = gpu_rent_price(gpu, quotes, day, s.compared_tier)
    s.purchase = gpu.price("purchase", day)
    s.tflops = compute_tflops(gpu, shape.precision)
    w = brief.workload
    if w in ("PRETRAINING", "FULL_FINETUNE"):
        size_full_training(s, brief, shape, a, memo)
    elif w == "ADAPTER_FINETUNE":
        size_adapter(s, brief, shape, a)
    else:
        size_inference(s, brief, shape, a, memo)
    whole_racks(s)
    s.capacity_gb = s.count * gpu.capacity_gb
    need = s.memory.total_gb if s.memory else 0.0
    s.headroom = 1.0 - need / s.capacity_gb if s.capacity_gb > 0 else 0.0
    s.nodes = max(1, math.ceil(s.count / max(1, gpu.gpus_per_node)))
    size_cluster(s, a, w in TRAINING_WORKLOADS)
    s.usd_per_hour = s.usd_per_gpu_hour * s.count
    s.usd_per_tflop_hour = (
        money.usd_per_tflop_hour(s.usd_per_gpu_hour, gpu.tflops_bf16) if gpu.tflops_bf16 else 0.0
    )
    size_unit_cost(s, brief, shape, a)
    size_ownership(s, brief, a)
    return s
