"""Inference sizing: memory per model copy, tensor-parallel width, replicas for the offered load, prefill and
decode speed; embeddings and media generation are its prefill-only cases."""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable

from ...domain.assumptions import Assumptions
from ...domain.brief import Brief
from ...domain.catalog import Gpu
from ...physics import encoder
from ...physics import memory as mem
from ..tables import MAX_TENSOR_PARALLEL, scale_up
from .common import (
    MAX_GPUS,
    Memo,
    Sizing,
    decode_mbu,
    meets_latency,
    parallel_efficiency,
    tp_group_sizes,
    usable_gb,
)
from .media import media_need, outputs_per_second
from .media_latency import check_latency
from .shape import Shape
from .width import SPEED_FIELDS, pick_width, serving_speed


def inference_need(gpu: Gpu, brief: Brief, shape: Shape, a: Assumptions, n: int) -> mem.MemoryBreakdown:
    if brief.workload == "MEDIA_GENERATION":
        return media_need(brief, shape, a, n)
    # Up to the scale-up domain the GPUs split each layer (tensor parallel: KV heads are replicated once TP
    # exceeds them); beyond it they hold different layers (pipeline stages: nothing is replicated).
    tp = min(n, scale_up(gpu), MAX_TENSOR_PARALLEL)
    one_stage_set = mem.inference_memory(
        shape.params_billion,
        shape.bytes_per_param,
        shape.arch,
        shape.tokens_per_sequence,
        shape.sequences,
        shape.kv_bytes,
        activation_per_gpu_gb(shape, a, tp),
        a.num("engine_overhead_gb"),
        tensor_parallel=tp,
    )
    per_gpu = ("activations", "engine")
    return mem.MemoryBreakdown(
        tuple((c, v * n / tp if c in per_gpu else v) for c, v in one_stage_set.components)
    )


def activation_per_gpu_gb(shape: Shape, a: Assumptions, tp: int) -> float:
    """The engine's workspace for this work: a step holds at most the engine's token budget (chunked prefill),
    and fewer when the sessions' whole contexts are smaller than that."""
    step = min(int(a.num("serving_max_batched_tokens")), shape.sequences * shape.tokens_per_sequence)
    return mem.serving_activation_gb(
        step, shape.sequences, shape.arch.hidden_size, shape.arch.vocab_size,
        a.num("activation_bytes_per_token_hidden"), a.num("sampler_bytes_per_vocab_entry"), tp,
    )


def size_inference(
    s: Sizing, brief: Brief, shape: Shape, a: Assumptions, memo: Memo,
    need: Callable[[int], mem.MemoryBreakdown] | None = None, least_gb: float = -math.inf, lean: bool = False,
    fit: tuple[tuple[int, ...], float] | None = None,
) -> None:
    """`need` (optional): inference_need of this GPU by width, from the caller's own store; `least_gb`: a figure
    no width's need is below (RequestSizer: the weights), so a width whose usable memory is below it is passed over
    without working its breakdown out. `lean`: the caller reads `fits` and the speed fields only, so the latency at
    memory's width (memory_count_latency_ms) is left unset and the width search need not size that width. `fit`:
    the GPU's (tp_group_sizes, usable_gb) when the caller has them (its GpuTable)."""
    gpu = s.gpu
    widths, usable = fit or (tp_group_sizes(gpu, a), usable_gb(gpu, a))
    sizes = pipeline_sizes(brief, widths)

    if need is None:
        def need(n: int) -> mem.MemoryBreakdown:
            # The GPU enters only through the tensor-parallel width its scale-up domain allows.
            key = ("inference", n, min(n, scale_up(gpu), MAX_TENSOR_PARALLEL))
            if key not in memo:
                memo[key] = inference_need(gpu, brief, shape, a, n)
            return memo[key]

    n = next((k for k in sizes if least_gb <= k * usable and need(k).total_gb <= k * usable), 0)
    s.fits = n > 0
    n = n or sizes[-1]
    s.memory_count = n
    lat = brief.latency
    s.latency_target = lat.p95_ms > 0 or lat.ttft_ms > 0
    pinned = pinned_width(brief)
    copies = 1
    if pinned and brief.workload not in ("EMBEDDING", "MEDIA_GENERATION"):
        # The brief's shape: tensor x pipeline GPUs per copy, whether or not it is the one we would pick.
        n = pinned
        s.fits = need(n).total_gb <= n * usable
        if not s.fits and brief.workload in GENERATION:
            # Copies of the pinned shape split the sessions (issue 36): the fewest copies one of which holds
            # its share; each is then sized (memory and speed) at that share.
            copies, split = split_sessions(gpu, brief, shape, a, n, usable)
            if copies > 1:
                shape, memo = split, {}
                need = _need_of(gpu, brief, shape, a)
                s.fits = True
                s.split_copies, s.sessions_per_copy = copies, shape.sequences
    tried: dict[int, tuple[float, ...]] = {}
    if pinned or brief.workload not in GENERATION:
        inference_speed(s, brief, shape, a, n, memo)
    else:
        n = pick_width(s, brief, shape, a, n, sizes, gpu, memo, tried, smallest_first=not lean)
    if n == s.memory_count or not s.latency_target:
        s.memory_count_latency_ms = s.est_latency_ms
    elif lean:  # nobody reads it: memory's width was not sized for it
        s.memory_count_latency_ms = 0.0
    elif s.memory_count in tried:  # the width search sized memory's width already
        s.memory_count_latency_ms = tried[s.memory_count][SPEED_FIELDS.index("est_latency_ms")]
    else:  # what memory's width would take, said on the candidate when the count is raised (decide/counts.py)
        probe = copy.copy(s)
        probe.formulas = []
        inference_speed(probe, brief, shape, a, s.memory_count, memo)
        s.memory_count_latency_ms = probe.est_latency_ms
    if s.latency_target and brief.workload == "REALTIME_INFERENCE":
        s.meets_latency = meets_latency(s, lat)
    replicate_for_load(s, n, brief.workload, shape, brief.traffic.requests_per_second, need(n), copies)
    check_latency(s, brief, need(n))  # media: per image or clip, queueing at the offered rate (issue 37)


def _need_of(gpu: Gpu, brief: Brief, shape: Shape, a: Assumptions) -> Callable[[int], mem.MemoryBreakdown]:
    return lambda n: inference_need(gpu, brief, shape, a, n)


def split_sessions(gpu: Gpu, brief: Brief, shape: Shape, a: Assumptions, n: int,
                   usable: float) -> tuple[int, Shape]:
    """The fewest copies of `n` GPUs that hold `shape`'s sequences between them (each ceil(sequences / copies)),
    and the shape of one copy's share; (1, shape) when even one sequence per copy does not fit, or past MAX_GPUS."""
    seqs = shape.sequences
    most = min(seqs, MAX_GPUS // max(1, n))

    def share(k: int) -> Shape:
        return dataclasses.replace(shape, sequences=-(-seqs // k))

    def fits(k: int) -> bool:
        return inference_need(gpu, brief, share(k), a, n).total_gb <= n * usable

    if most < 2 or not fits(most):
        return 1, shape
    lo, hi = 1, most  # fits(hi); not fits(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi, share(hi)


def sessions_held(gpu: Gpu, brief: Brief, shape: Shape, a: Assumptions, n: int, usable: float,
                  static_only: bool = False) -> int:
    """The most of `shape`'s sequences one copy of `n` GPUs holds (weights, their KV cache at the sized context,
    workspace) in `n` x `usable` GB: all of them when they fit, 0 when not even one does. An engine admits a new
    request only when the KV cache left after the weights holds it (vLLM's and SGLang's schedulers); the rest wait.
    `static_only`: `usable` is an engine's static pool (weights and KV cache; its workspace lives outside it)."""
    def fits(k: int) -> bool:
        need = inference_need(gpu, brief, dataclasses.replace(shape, sequences=k), a, n)
        if static_only:
            return sum(v for c, v in need.components if c in ("weights", "kv_cache")) <= n * usable
        return need.total_gb <= n * usable

    seqs = shape.sequences
    if fits(seqs):
        return seqs
    if not fits(1):
        return 0
    lo, hi = 1, seqs  # fits(lo); not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


GENERATION = ("REALTIME_INFERENCE", "BATCH_INFERENCE", "EVALUATION", "NOTEBOOK")
# Every field size_inference sets on a generation brief's blank Sizing (RequestSizer keeps these per GPU).
GENERATION_SIZED = ("fits", "memory_count", "latency_target", *SPEED_FIELDS, "memory_count_latency_ms", "meets_latency",
                    "per_replica", "replicas", "count", "memory", "split_copies", "sessions_per_copy")


def pinned_width(brief: Brief) -> int:
    """GPUs per model copy the brief pins (tensor x pipeline parallel); 0 when it pins neither."""
    p = brief.parallelism
    if p.tensor_parallel <= 0 and p.pipeline_parallel <= 0:
        return 0
    return max(1, p.tensor_parallel) * max(1, p.pipeline_parallel)


def pipeline_sizes(brief: Brief, sizes: tuple[int, ...]) -> tuple[int, ...]:
    """GPU counts one model copy may span: a diffusion pipeline is served whole on one GPU (replicas for load,
    never tensor parallel across cards)."""
    return sizes[:1] if brief.workload == "MEDIA_GENERATION" else sizes


def replicate_for_load(s: Sizing, n: int, workload: str, shape: Shape, offered: float,
               one_replica: mem.MemoryBreakdown, copies: int = 1) -> None:
    """Replicas of `n` GPUs each for the offered requests/s, at least `copies` (that many split the sessions):
    per_replica, replicas, count and the memory of all of them (`fits` turns False past MAX_GPUS)."""
    s.per_replica = n
    # Requests/s one replica sustains: an embedding request is its input tokens, a generation its output tokens.
    # (media: outputs per second, one output per request)
    per_request = shape.input_tokens if workload == "EMBEDDING" else (
        1 if workload == "MEDIA_GENERATION" else shape.output_tokens
    )
    per_replica_rate = s.tokens_per_second / (per_request if per_request > 1 else 1)  # max(1, per_request)
    needed = offered / per_replica_rate if offered > 0 and per_replica_rate > 0 else 1.0
    # A huge model on a small GPU at a huge offered load can ask for more GPUs than any cluster (or an int32
    # count) holds: like a training deadline that cannot be met, that is infeasible, not a number to print.
    most = MAX_GPUS // n
    most = most if most > 1 else 1  # max(1, most)
    if needed > most:
        s.replicas, s.fits = most, False
    else:
        replicas = max(math.ceil(needed), copies)
        s.replicas = replicas if replicas > 1 else 1  # max(1, replicas)
    s.count = n * s.replicas
    s.memory = one_replica
    if s.replicas > 1:
        s.memory = mem.MemoryBreakdown(tuple((c, v * s.replicas) for c, v in one_replica.components))


def prefill_only_tokens(brief: Brief, shape: Shape, a: Assumptions) -> int:
    """Tokens per forward pass of embedding-style work: the brief's batch, else what a server batches from
    queued requests under load (text-embeddings-inference's default token budget)."""
    if brief.traffic.batch_size > 0:
        return brief.traffic.batch_size * _record_tokens(shape)
    return max(_record_tokens(shape), int(a.num("default_prefill_batch_tokens")))


def _record_tokens(shape: Shape) -> int:
    """Tokens of one embedded record: its input (an encoder batch packs records without padding them to the
    context: text-embeddings-inference batches by tokens over variable-length attention)."""
    return max(1, shape.input_tokens)


def prefill_batch_sequences(brief: Brief, shape: Shape, a: Assumptions) -> int:
    """Requests per forward pass that embedding sizing assumes when the brief gives no batch."""
    return max(1, prefill_only_tokens(brief, shape, a) // _record_tokens(shape))


def embedding_speed(s: Sizing, brief: Brief, shape: Shape, a: Assumptions, n: int) -> None:
    """Prefill-only work is throughput-bound by its input tokens: one batched encoder pass takes the longer of
    its FLOPs and its activation traffic, plus a fixed cost per layer (physics/encoder.py). No saturation cap: a
    GPU with more compute or bandwidth runs the same batch faster, and a batch too small to keep it busy is
    bounded by the per-layer cost, not by a share of its peak."""
    gpu, arch = s.gpu, shape.arch
    mfu = a.num("mfu_prefill")
    tokens = prefill_only_tokens(brief, shape, a)
    seconds = encoder.encoder_pass_seconds(
        shape.active_params_billion, shape.bytes_per_param, tokens, shape.input_tokens, arch.layers,
        arch.hidden_size, s.tflops, mfu, gpu.bandwidth_tbs, decode_mbu(gpu, a),
        a.num("encoder_activation_traffic_bytes_per_token_hidden"), a.num("encoder_layer_overhead_us") / 1e6,
    )
    per_gpu = tokens / seconds
    s.effective_tflops = per_gpu * 2 * shape.active_params_billion * 1e9 / 1e12
    s.tokens_per_second = per_gpu * n * parallel_efficiency(gpu, n, a)
    s.step_ms = s.itl_ms = 0.0
    s.est_ttft_ms = s.est_latency_ms = 0.0


def inference_speed(s: Sizing, brief: Brief, shape: Shape, a: Assumptions, n: int, memo: Memo,
                    synchrony: float | None = None) -> None:
    """Decode is memory-bound (bytes read per step / bandwidth) with a per-step floor, prefill compute-bound
    (2·N per token plus attention); under load the other sequences' prefills share the steps.

    `memo` keeps what depends on the brief alone (bytes read per step, attention FLOPs of a prompt), asked
    for by every GPU and every tensor-parallel width tried. `synchrony`: how the prompts arrive (serving_speed);
    None = as the product assumes for the engine."""
    gpu = s.gpu
    if brief.workload == "MEDIA_GENERATION":
        # Denoising is compute-bound: outputs/s = TFLOPS x MFU / FLOPs per output, one pipeline per GPU.
        mfu = a.num("mfu_denoising")
        s.effective_tflops = s.tflops * mfu
        s.tokens_per_second = outputs_per_second(s.tflops, mfu, brief, shape, a) * n * parallel_efficiency(gpu, n, a)
        s.step_ms = s.itl_ms = 0.0
        s.est_ttft_ms = s.est_latency_ms = 0.0
        return
    if brief.workload == "EMBEDDING":
        embedding_speed(s, brief, shape, a, n)
        return
    serving_speed(s, brief, shape, a, n, memo, synchrony)

