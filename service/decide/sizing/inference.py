"""Inference sizing: memory per model copy, tensor-parallel width, replicas for the offered load, prefill and
decode speed; embeddings and media generation are its prefill-only cases."""

from __future__ import annotations

import math

from ...domain.assumptions import Assumptions
from ...domain.brief import Brief
from ...domain.catalog import Gpu
from ...physics import compute
from ...physics import memory as mem
from ..tables import MAX_TENSOR_PARALLEL, scale_up
from .common import (
    MAX_GPUS,
    Memo,
    Sizing,
    decode_mbu,
    meets_latency,
    parallel_efficiency,
    saturation,
    tp_group_sizes,
    usable_gb,
)
from .media import media_need, outputs_per_second
from .shape import Shape


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
        a.num("kv_cache_bytes"),
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
    s: Sizing, brief: Brief, shape: Shape, a: Assumptions, memo: Memo
) -> None:
    gpu = s.gpu
    usable = usable_gb(gpu, a)
    sizes = pipeline_sizes(brief, tp_group_sizes(gpu, a))

    def need(n: int) -> mem.MemoryBreakdown:
        # The GPU enters only through the tensor-parallel width its scale-up domain allows.
        key = ("inference", n, min(n, scale_up(gpu), MAX_TENSOR_PARALLEL))
        if key not in memo:
            memo[key] = inference_need(gpu, brief, shape, a, n)
        return memo[key]

    n = next((k for k in sizes if need(k).total_gb <= k * usable), 0)
    s.fits = n > 0
    n = n or sizes[-1]
    s.memory_count = n
    lat = brief.latency
    s.latency_target = lat.p95_ms > 0 or lat.ttft_ms > 0
    inference_speed(s, brief, shape, a, n, memo)
    s.memory_count_latency_ms = s.est_latency_ms
    if s.latency_target and brief.workload == "REALTIME_INFERENCE":
        # More tensor parallelism inside the fast-link domain shortens each decode step; stop at the node.
        for k in sizes:
            if k <= n or k > min(scale_up(gpu), MAX_TENSOR_PARALLEL):
                continue
            if meets_latency(s, lat):
                break
            n = k
            inference_speed(s, brief, shape, a, n, memo)
        s.meets_latency = meets_latency(s, lat)
    replicate_for_load(s, n, brief.workload, shape, brief.traffic.requests_per_second, need(n))


def pipeline_sizes(brief: Brief, sizes: tuple[int, ...]) -> tuple[int, ...]:
    """GPU counts one model copy may span: a diffusion pipeline is served whole on one GPU (replicas for load,
    never tensor parallel across cards)."""
    return sizes[:1] if brief.workload == "MEDIA_GENERATION" else sizes


def replicate_for_load(s: Sizing, n: int, workload: str, shape: Shape, offered: float,
               one_replica: mem.MemoryBreakdown) -> None:
    """Replicas of `n` GPUs each for the offered requests/s: per_replica, replicas, count and the memory of all
    of them (`fits` turns False past MAX_GPUS)."""
    s.per_replica = n
    # Requests/s one replica sustains: an embedding request is its input tokens, a generation its output tokens.
    # (media: outputs per second, one output per request)
    per_request = shape.input_tokens if workload == "EMBEDDING" else (
        1 if workload == "MEDIA_GENERATION" else shape.output_tokens
    )
    per_replica_rate = s.tokens_per_second / max(1, per_request)
    needed = offered / per_replica_rate if offered > 0 and per_replica_rate > 0 else 1.0
    # A huge model on a small GPU at a huge offered load can ask for more GPUs than any cluster (or an int32
    # count) holds: like a training deadline that cannot be met, that is infeasible, not a number to print.
    most = max(1, MAX_GPUS // n)
    if needed > most:
        s.replicas, s.fits = most, False
    else:
        s.replicas = max(1, math.ceil(needed))
    s.count = n * s.replicas
    s.memory = one_replica
    if s.replicas > 1:
        s.memory = mem.MemoryBreakdown(tuple((c, v * s.replicas) for c, v in one_replica.components))


def parallel_overhead_s(gpu: Gpu, n: int, layers: int, a: Assumptions) -> float:
    """Per-step communication latency of one model copy on n GPUs: tensor parallelism inside the scale-up
    domain all-reduces twice per layer (Megatron); pipeline stages beyond it pass activations once per stage
    boundary over the slower link."""
    if n <= 1:
        return 0.0
    tp = min(n, scale_up(gpu), MAX_TENSOR_PARALLEL)
    stages = math.ceil(n / tp)
    fast = gpu.fast_interconnect and tp <= max(gpu.nvlink_domain, 1)
    per_allreduce = a.num("tp_allreduce_latency_us_fast_link" if fast else "tp_allreduce_latency_us_slow_link")
    tp_s = 2 * layers * per_allreduce / 1e6 if tp > 1 else 0.0
    return tp_s + (stages - 1) * a.num("tp_allreduce_latency_us_slow_link") / 1e6


def prefill_only_tokens(brief: Brief, shape: Shape, a: Assumptions) -> int:
    """Tokens per forward pass of embedding-style work: the brief's batch, else what a server batches from
    queued requests under load (text-embeddings-inference's default token budget)."""
    if brief.traffic.batch_size > 0:
        return brief.traffic.batch_size * shape.tokens_per_sequence
    return max(shape.tokens_per_sequence, int(a.num("default_prefill_batch_tokens")))


def prefill_batch_sequences(brief: Brief, shape: Shape, a: Assumptions) -> int:
    """Requests per forward pass that embedding sizing assumes when the brief gives no batch."""
    return max(1, prefill_only_tokens(brief, shape, a) // max(1, shape.tokens_per_sequence))


def inference_speed(s: Sizing, brief: Brief, shape: Shape, a: Assumptions, n: int, memo: Memo) -> None:
    """Decode is memory-bound (bytes read per step / bandwidth) with a per-step floor, prefill compute-bound
    (2·N per token plus attention); under load the other sequences' prefills share the steps.

    `memo` keeps what depends on the brief alone (bytes read per step, attention FLOPs of a prompt), asked
    for by every GPU and every tensor-parallel width tried."""
    gpu = s.gpu
    arch = shape.arch
    mfu = a.num("mfu_prefill")
    attn_tflops = (gpu.tflops_bf16 or s.tflops) * n  # 16-bit KV: attention runs on BF16 tensor cores
    if brief.workload == "MEDIA_GENERATION":
        # Denoising is compute-bound: outputs/s = TFLOPS x MFU / FLOPs per output, one pipeline per GPU.
        s.effective_tflops = s.tflops * mfu
        s.tokens_per_second = outputs_per_second(s.tflops, mfu, brief, shape, a) * n * parallel_efficiency(gpu, n, a)
        s.step_ms = s.itl_ms = 0.0
        s.est_ttft_ms = s.est_latency_ms = 0.0
        return
    if brief.workload == "EMBEDDING":
        # Prefill-only work is throughput-bound by its input tokens: every token costs 2·N FLOPs plus its
        # attention over the sequence, at the utilization a batch of this size reaches.
        tokens = prefill_only_tokens(brief, shape, a)
        busy = saturation(s.tflops, tokens, arch.hidden_size, a.num("kernel_saturation_ms"))
        s.effective_tflops = s.tflops * mfu * busy
        seq = shape.input_tokens
        per_token = 2 * shape.active_params_billion * 1e9 + compute.attention_flops(
            arch.layers, seq, arch.hidden_size, arch.window, arch.window_layers
        ) / max(1, seq)
        s.tokens_per_second = s.tflops * n * 1e12 * mfu * busy * parallel_efficiency(gpu, n, a) / per_token
        s.step_ms = s.itl_ms = 0.0
        s.est_ttft_ms = s.est_latency_ms = 0.0
        return
    busy = saturation(
        s.tflops, shape.sequences * shape.tokens_per_sequence, arch.hidden_size, a.num("kernel_saturation_ms")
    )
    s.effective_tflops = s.tflops * mfu * busy
    c, s_in, s_out = shape.sequences, shape.input_tokens, shape.output_tokens
    # While one sequence decodes, the other c - 1 start new requests: their prompts are prefilled in the same
    # steps (chunked prefill), (c - 1) x input / output prompt tokens per step on average.
    prefill_per_step = (c - 1) * s_in / max(1, s_out)
    if ("decode_read",) not in memo:
        memo[("decode_read",)] = (
            # An MoE step reads the shared weights and the experts its tokens touch (every weight when dense).
            mem.weights_gb(shape.params_read_billion(c + prefill_per_step), shape.bytes_per_param),
            mem.kv_cache_gb(arch, shape.avg_tokens_per_sequence, c, a.num("kv_cache_bytes")),
        )
    weights, kv_read = memo[("decode_read",)]

    def attention(tokens: int) -> float:
        key = ("attention", tokens)
        if key not in memo:
            memo[key] = compute.attention_flops(arch.layers, tokens, arch.hidden_size, arch.window,
                                                arch.window_layers)
        return memo[key]

    active = shape.active_params_billion * 1e9
    overhead = a.num("decode_step_floor_ms") / 1000 + parallel_overhead_s(gpu, n, arch.layers, a)
    # Pipeline stages beyond the scale-up domain each read their weights once per micro-batch, so a token
    # still waits for the whole model to be read at one stage's bandwidth: stages add capacity, not speed.
    stages = math.ceil(n / min(n, scale_up(gpu), MAX_TENSOR_PARALLEL))
    step = compute.step_seconds(
        weights * stages, kv_read, gpu.bandwidth_tbs * n, decode_mbu(gpu, a),
        linear_flops=2 * active * (c + prefill_per_step), tflops_total=s.tflops * n, mfu=mfu,
        attn_flops=prefill_per_step * attention(s_in) / max(1, s_in),
        attention_tflops_total=attn_tflops, overhead_s=overhead,
    )

    def prefill(tokens: int) -> float:
        return compute.prefill_seconds(
            shape.active_params_billion, tokens, s.tflops * n, mfu, attention(tokens), attn_tflops,
        )

    avg_prefill = prefill(s_in)
    ttft_avg = compute.time_to_first_token(avg_prefill, step, c - 1, avg_prefill, s_out)
    p95_in = brief.traffic.p95_input_tokens or s_in
    ttft = ttft_avg if p95_in == s_in else compute.time_to_first_token(prefill(p95_in), step, c - 1,
                                                                       avg_prefill, s_out)
    s.step_ms = s.itl_ms = step * 1000
    # Each sequence yields its output tokens once per cycle of TTFT + output x step: the replica's output rate,
    # with the input tokens' prefill counted in both.
    s.tokens_per_second = c * s_out / (ttft_avg + s_out * step)
    s.est_ttft_ms = ttft * 1000
    s.est_latency_ms = s.est_ttft_ms + s_out * s.step_ms
