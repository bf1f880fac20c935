"""Each dataset row asked of the product in-process, as the server answers it, and its estimate set beside the
measurement.

A serving row is compared at the GPUs per model copy it was measured on: the answer's candidate when the product
chose that width itself, else the same sizing code (`decide/sizing`) run at the measured width, so a row measures
the physics and not the width the product would pick (the row says which it was).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from ..decide.models import resolve
from ..decide.sizing.common import usable_gb
from ..decide.sizing.engines import engine_of
from ..decide.sizing.inference import GENERATION, inference_speed, sessions_held
from ..decide.sizing.per_gpu import size
from ..decide.sizing.shape import shape_of
from ..decide.tables import MAX_TENSOR_PARALLEL, scale_up
from ..domain.accuracy import classes_of
from ..domain.brief import AdviceRequest, Brief
from ..domain.catalog import Gpu
from ..domain.models import name_index
from ..market.progress import Progress
from ..physics.queueing import closed_loop_wait_s
from ..rulebook.version import Bundle
from .datasets import (
    AICONFIGURATOR,
    AICONFIGURATOR_SAMPLE,
    ARRIVALS,
    INFERENCEX_DEPLOYMENTS,
    PUBLISHED,
    PUBLISHED_SERVING,
    Deployment,
    Row,
    Skipped,
    read_aiconfigurator,
    read_deployments,
    read_published,
)

TRAINING = ("PRETRAINING", "FULL_FINETUNE", "ADAPTER_FINETUNE")


@dataclass(frozen=True)
class Point:
    """One estimate of one row against its measurement."""

    row: str
    dataset: str
    estimate: str
    classes: tuple[str, ...]
    measured: float
    estimated: float
    note: str = ""

    @property
    def signed_pct(self) -> float:
        return (self.estimated - self.measured) / self.measured * 100

    @property
    def abs_pct(self) -> float:
        # A memory figure is a published ceiling: under it is no known error.
        if self.estimate in ("memory", "train_memory_ceiling"):
            return max(0.0, self.signed_pct)
        return abs(self.signed_pct)


def read_rows(bundle: Bundle, folder: Path) -> tuple[list[Row], list[Skipped]]:
    """Every dataset row, each marked with why when a stated rule keeps it out of the comparison (`unexpressed`)."""
    book = bundle.book
    models = set(name_index(book.models))
    catalog = {g.id: g for g in book.catalog}
    settings = folder / INFERENCEX_DEPLOYMENTS
    deployments = read_deployments(settings) if settings.exists() else {}
    rows, skipped = read_aiconfigurator(folder / AICONFIGURATOR, models, set(catalog), deployments=deployments)
    sample = folder / AICONFIGURATOR_SAMPLE
    if sample.exists():
        more, left = read_aiconfigurator(sample, models, set(catalog), "aiconfigurator-sample", deployments)
        rows, skipped = rows + more, skipped + left
    serving = folder / PUBLISHED_SERVING
    more = read_published(serving, "published-serving") if serving.exists() else []
    rows = rows + read_published(folder / PUBLISHED) + more
    return [dataclasses.replace(r, unexpressed=unexpressed(r, catalog.get(r.gpu))) for r in rows], skipped


def unexpressed(row: Row, gpu: Gpu | None) -> str:
    """Why one stated rule, the same for every row of every dataset (calibration/README.md, "Expressibility"),
    keeps a measured row out of the comparison; "" = compared. The product sizes one model copy whose attention is
    tensor parallel over its GPUs (the experts tensor or expert parallel over the same GPUs), at most
    MAX_TENSOR_PARALLEL wide and inside one NVLink domain, with pipeline stages beyond that; and a closed loop of the
    stated sessions."""
    if row.deployment.speculative == "mtp":
        return ("speculative decoding (multi-token prediction) as measured: each decode step may emit several tokens "
                "a sequence, which the product does not size (one token per sequence per step)")
    if row.attention_dp > 1:
        return (f"attention data parallel {row.attention_dp} as measured: each GPU keeps its own sessions' attention, "
                "which the product does not size (tensor-parallel attention only)")
    tp = row.gpus // max(1, row.pipeline)
    if gpu is not None and tp > min(MAX_TENSOR_PARALLEL, scale_up(gpu)):
        return (f"tensor parallel {tp} as measured: wider than the product's widest tensor-parallel group "
                f"({min(MAX_TENSOR_PARALLEL, scale_up(gpu))} on {gpu.id}; beyond it the product adds pipeline stages)")
    ttft, itl = row.measured.get("ttft", 0.0), row.measured.get("itl", 0.0)
    decode_ms = row.brief.traffic.avg_output_tokens * itl
    sessions = max(row.brief.traffic.concurrent_sessions, row.brief.traffic.batch_size)
    # one session at a time has no one to queue behind: a long prompt's prefill may outlast a short decode
    if sessions > 1 and ttft > 0 and decode_ms > 0 and ttft >= decode_ms:
        return (f"TTFT {ttft / 1000:,.1f} s at least the request's whole decode ({decode_ms / 1000:,.1f} s): its "
                "clients waited in a queue the source does not record (a request rate or a cap on running requests), "
                "which no closed loop of the stated sessions reaches")
    return ""


def evaluate(bundle: Bundle, folder: Path, day: date,
             progress: Progress | None = None) -> tuple[list[Point], list[Skipped]]:
    """Every row of the datasets in `folder` (calibration/) answered by `bundle`'s rules on `day` (each row
    counted on `progress` as it is done)."""
    rows, skipped = read_rows(bundle, folder)
    points: list[Point] = []
    seen: dict[tuple[str, int, str, tuple[tuple[str, float], ...]], str] = {}
    if progress is not None:
        progress.set_total(len(rows))
    for row in rows:
        if progress is not None:
            progress.update(1)
        # The same measurement filed twice under two ids (DeepSeek-R1 and -V3 share one shape) counts once.
        key = (row.gpu, row.gpus, row.dataset, tuple(sorted(row.measured.items())))
        if key in seen:
            skipped.append(Skipped(row.id, row.dataset, f"the same measurement as {seen[key]}"))
            continue
        seen[key] = row.id
        if row.unexpressed:
            skipped.append(Skipped(row.id, row.dataset, row.unexpressed))
            continue
        got, why = _estimates(bundle, row, day)
        if why:
            skipped.append(Skipped(row.id, row.dataset, why))
            continue
        estimates, classes, note = got
        for key, measured in row.measured.items():
            points.append(Point(row.id, row.dataset, key, classes, measured, estimates[key], note))
    return points, skipped


def _estimates(bundle: Bundle, row: Row, day: date) -> tuple[Any, str]:  # noqa: ANN401
    book = bundle.book
    advice = bundle.advise(AdviceRequest(brief=row.brief, max_candidates=100, as_of=day))
    cand = next((c for c in advice.candidates if c.gpu == row.gpu), None)
    if cand is None or cand.performance is None:
        reasons = [r.text for x in advice.excluded if x.gpu == row.gpu for r in x.reasons]
        return None, f"{row.gpu} is not a candidate: {reasons[0] if reasons else 'not in the answer'}"
    perf = cand.performance
    brief = resolve(row.brief, book.models)
    gpu = next(g for g in book.catalog if g.id == row.gpu)
    m = brief.model
    moe = 0 < m.active_params_billion < m.params_billion  # as the answer classes a candidate (decide/accuracy.py)
    precision = m.precision if m.precision != "UNSPECIFIED" else "BF16"
    # a row's class is its nominal prompt's (a campaign of 8k prompts drawn 6.5k-8k is long context)
    prompt = row.class_input_tokens or brief.traffic.avg_input_tokens
    classes = classes_of(brief.workload, precision, moe, prompt, gpu.vendor, gpu.gpu_class)
    est = {
        "itl": perf.itl_ms, "ttft": perf.ttft_ms, "throughput": perf.tokens_per_second_per_replica,
        "gpu_hours": perf.gpu_hours, "images": perf.images_per_second_per_replica,
        "memory": cand.memory.need_gb / max(1, perf.replicas),
    }
    notes = []
    serving = brief.workload not in TRAINING and brief.workload != "MEDIA_GENERATION"
    width = row.gpus or perf.tensor_parallel
    # A measured concurrency is one copy's: an answer that splits the sessions over copies is sized again at one.
    # So is a width whose engine admits fewer sessions at once than the row ran (its static memory pool).
    shape = shape_of(brief, book.assumptions) if serving else None
    engine = row.deployment
    queued = shape is not None and brief.workload in GENERATION and \
        0 < _held(gpu, brief, shape, book.assumptions, width, engine) < shape.sequences
    # engine settings the answer cannot be asked for (a brief names no token budget, memory share, request cap or
    # scheduler poll interval)
    settings = bool(engine.token_budget or engine.memory_fraction or engine.max_running or engine.recv_interval)
    if serving and (width != perf.tensor_parallel or row.arrivals or perf.replicas > 1 or queued or settings):
        # The same sizing at the measured width and, when the row says how its client sent the prompts, with
        # that arrival pattern in place of the one the product assumes for users; with the engine's settings as
        # measured.
        est.update(_at_width(bundle, brief, gpu, width, day, ARRIVALS.get(row.arrivals), engine))
        if settings:
            notes.append(f"engine settings as measured ({engine.cited})")
        if width != perf.tensor_parallel:
            notes.append(f"at the measured {width} GPUs (the answer chose {perf.tensor_parallel})")
        if row.arrivals:
            notes.append(f"prompts arriving {row.arrivals}, as measured")
    return (est, classes, "; ".join(notes)), ""


def _at_width(bundle: Bundle, brief: Brief, gpu: Gpu, width: int, day: date,
              synchrony: float | None = None, engine: Deployment = Deployment()) -> dict[str, float]:  # noqa: B008
    """ITL, TTFT and tokens/s of one copy on `width` GPUs: the sizing the answer runs, at a width the product
    would not have chosen, with prompts arriving as `synchrony` says (None: as the product assumes) and the engine
    settings a measurement ran with (`engine`: tokens per step, memory share, request cap, scheduler poll interval;
    default: the engine's). (When the brief can name its parallelism, asking the answer for it replaces this.)"""
    a = _with_recv_interval(_with_budget(bundle.book.assumptions, brief, engine.token_budget), brief,
                            engine.recv_interval)
    shape = shape_of(brief, a)
    assert shape is not None  # the answer sized this brief
    s = size(gpu, brief, shape, a, (), day)
    # A measured width whose memory cannot hold every session's KV cache runs the sessions it holds; the others'
    # clients wait for a slot (the product never answers with such a width: it adds GPUs or copies).
    clients = shape.sequences
    held = _held(gpu, brief, shape, a, width, engine) if brief.workload in GENERATION else clients
    if 0 < held < clients:
        shape = dataclasses.replace(shape, sequences=held)
    inference_speed(s, brief, shape, a, width, {}, synchrony)
    wait_ms = 0.0
    if 0 < held < clients:
        cycle_ms = s.est_ttft_ms + shape.output_tokens * s.itl_ms
        wait_ms = closed_loop_wait_s(clients, held, cycle_ms / 1000) * 1000
    return {"itl": s.itl_ms, "ttft": s.est_ttft_ms + wait_ms, "throughput": s.tokens_per_second}


def _with_budget(a: Any, brief: Brief, budget: int) -> Any:  # noqa: ANN401
    """`a` with the brief's engine stepping at most `budget` tokens (0 or no named engine: `a` itself). A fresh
    copy each call: calibrate refits `serving_engines` in place between calls."""
    name = engine_of(brief.toolchain)
    table = a.values.get("serving_engines", {})
    if not budget or name not in table:
        return a
    return dataclasses.replace(a, values={**a.values, "serving_engines": {
        **table, name: {**table[name], "token_budget": budget}}})


def _with_recv_interval(a: Any, brief: Brief, interval: int) -> Any:  # noqa: ANN401
    """`a` with the brief's engine polling for new requests every `interval` decode steps (0 or no named engine: `a`
    itself); a fresh copy, as _with_budget."""
    name = engine_of(brief.toolchain)
    if not interval or not name:
        return a
    return dataclasses.replace(a, values={**a.values, "scheduler_recv_interval": {
        **a.values.get("scheduler_recv_interval", {}), name: interval}})


def _held(gpu: Gpu, brief: Brief, shape: Any, a: Any, width: int,  # noqa: ANN401
          engine: Deployment = Deployment()) -> int:  # noqa: B008
    """Sessions one copy of `width` GPUs admits at once: in the static pool of an engine that keeps one
    (engine_static_memory_fraction: weights and KV cache in that share of each GPU, by tensor-parallel width; or
    the share the measurement set, `engine.memory_fraction`), else in the memory the product sizes against
    (safety_headroom, or vLLM's gpu-memory-utilization as measured); at most `engine.max_running`."""
    name = engine_of(brief.toolchain) or ""
    fractions = a.values.get("engine_static_memory_fraction", {}).get(name, {})
    tp = min(width, scale_up(gpu), MAX_TENSOR_PARALLEL)
    frac = next((f for w, f in sorted(((int(k), v) for k, v in fractions.items()), reverse=True) if tp >= w), None)
    if engine.memory_fraction and name == "sglang":
        frac = engine.memory_fraction
    if frac is not None:
        held = sessions_held(gpu, brief, shape, a, width, gpu.capacity_gb * float(frac), static_only=True)
    elif engine.memory_fraction:  # vLLM's share holds its weights, KV cache and activations, as safety_headroom
        held = sessions_held(gpu, brief, shape, a, width, gpu.capacity_gb * engine.memory_fraction)
    else:
        held = sessions_held(gpu, brief, shape, a, width, usable_gb(gpu, a))
    return min(held, engine.max_running) if engine.max_running and held > 0 else held
