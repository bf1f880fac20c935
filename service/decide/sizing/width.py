"""The width one model copy of a generation brief is served at (`pick_width`) and its speed there
(`serving_speed`): the decode step, the prompts' prefill and the time to first token on one GPU type at each
tensor-parallel width the node allows, with what no width or output length changes kept per GPU and width."""

from __future__ import annotations

import dataclasses
import math
import operator
from typing import Any

from ...domain.assumptions import Assumptions
from ...domain.brief import Brief, Latency
from ...domain.catalog import Gpu
from ...memo import keep_held
from ...physics import compute, serving
from ...physics import memory as mem
from ..tables import MAX_TENSOR_PARALLEL, scale_up
from .common import Memo, Sizing, meets_latency, saturation
from .engines import Efficiency, efficiency
from .shape import Shape

# What serving_speed sets on a Sizing (and all it sets): the width search keeps them per width tried.
SPEED_FIELDS = ("effective_tflops", "tokens_per_second", "step_ms", "itl_ms", "est_ttft_ms", "est_latency_ms")
_speed_fields = operator.attrgetter(*SPEED_FIELDS)


def pick_width(s: Sizing, brief: Brief, shape: Shape, a: Assumptions, n: int, sizes: tuple[int, ...], gpu: Gpu,
               memo: Memo, tried: dict[int, tuple[float, ...]] | None = None, prune: bool = True,
               smallest_first: bool = True) -> int:
    """The width one copy is served at, by the brief's objective: every width from the smallest that holds the
    model up to the node's tensor-parallel domain is sized, and the cheapest per unit of work among those that
    meet the brief's latency targets wins (GPUs per output token/s: the price per GPU is the same at every width);
    when none meets them, the fastest. `s` is left holding the speed at the width returned; `tried` (optional)
    gets each width's SPEED_FIELDS.

    `prune`: a width whose floor (`serving_floor`: latency and GPUs per token/s it cannot beat) already loses to
    the best width sized is not sized. The smallest width is sized first (its latency is said when the count is
    raised; `smallest_first` False: not needed), then, under a latency target, the widest (the fastest, which the
    others' floors are held against)."""
    tried = {} if tried is None else tried
    domain = min(scale_up(gpu), MAX_TENSOR_PARALLEL)
    widths = [n, *(k for k in sizes if n < k <= domain)]
    lat = brief.latency
    target = (lat.p95_ms > 0 or lat.ttft_ms > 0) and brief.workload == "REALTIME_INFERENCE"
    order = widths
    if target:
        order = [n, *reversed(widths[1:])] if smallest_first else widths[::-1]
    keys: dict[int, tuple[bool, float, int]] = {}
    best: tuple[bool, float, int] | None = None
    last = n
    g = _serving_gpu(s, brief, shape, a, memo, None)  # what serving_speed would find at every width
    for k in order:
        if prune and best is not None and _cannot_win(g, k, best, lat, target):
            continue
        _speed_at(s, g, k)
        last = k
        tried[k] = _speed_fields(s)
        ok = meets_latency(s, lat) if target else True
        # Unmet targets rank by latency (closest first); met ones by GPUs per token/s, then the narrower.
        key = keys[k] = (False, _per_rate(k, s.tokens_per_second), k) if ok else (True, s.est_latency_ms, k)
        if best is None or key < best:
            best = key
    best = None  # the least key taken in width order, as when every width was sized (the same key under NaN too)
    for k in widths:
        key = keys.get(k)
        if key is not None and (best is None or key < best):
            best = key
    chosen = best[2] if best else n
    if chosen != last:  # the chosen width's figures back on `s`, as sizing it again would set them
        for f, v in zip(SPEED_FIELDS, tried[chosen], strict=True):
            setattr(s, f, v)
    return chosen


_MARGIN = 1.0 + 1e-9  # a floor must beat the best by more than its own rounding (a few ulps) to rule a width out


def _cannot_win(g: _ServingGpu, n: int, best: tuple[bool, float, int], lat: Latency, target: bool) -> bool:
    """Whether width n's key in pick_width is surely above `best`, from its floor alone."""
    unmet, value, _ = best
    if not math.isfinite(value) or value <= 0:
        return False
    ttft_s, step_s = serving_floor(g, n)
    s_out = g.s_out
    ttft_ms = ttft_s * 1000
    latency_ms = ttft_ms + s_out * (step_s * 1000)
    misses = target and (
        (lat.p95_ms > 0 and latency_ms > lat.p95_ms * _MARGIN) or (lat.ttft_ms > 0 and ttft_ms > lat.ttft_ms * _MARGIN)
    )
    if unmet:  # only a width that meets the targets, or comes closer, beats an unmet best
        return misses and latency_ms > value * _MARGIN
    if misses:
        return True
    cycle = ttft_s + s_out * step_s
    if not cycle > 0:
        return False
    return _per_rate(n, g.c * s_out / cycle) > value * _MARGIN


def _per_rate(n: int, rate: float) -> float:
    """n / max(rate, 1e-12), the max written as the builtin picks (the rate unless 1e-12 is strictly greater:
    NaN included), for each width sized and each floor held against the best."""
    return n / (1e-12 if rate < 1e-12 else rate)


def serving_floor(g: _ServingGpu, n: int) -> tuple[float, float]:
    """(TTFT, decode step) in seconds that serving_speed's at n GPUs are no less than: the step's floor and
    communication latency, the weights' read or their math and the KV cache's read (the terms left out are >= 0);
    a prompt's chunks each at least the floor and their linear FLOPs, and at least one step. Asked only after a width of
    this GPU was sized (its bandwidth and peak are known positive)."""
    w = _width(g, n)
    read_rate, math_rate = w.read_rate, w.math_rate
    # max(0.0, x) and max(x, y) written as the builtins pick (the first unless the second is strictly greater:
    # NaN and signed zero included): a floor for each width of each sizing.
    weights = g.weights * w.stages
    weights = (weights if weights > 0.0 else 0.0) * 1e9 / read_rate
    flops, kv = g.decode_flops, g.kv_read
    flops = (flops if flops > 0.0 else 0.0) / math_rate
    step = w.overhead + (flops if flops > weights else weights) + (kv if kv > 0.0 else 0.0) * 1e9 / read_rate
    head = w.floor_head
    if head is None:  # the TTFT but its step, worked out when a floor is first asked of this width
        eff = g.eff
        budget = eff.budget_tokens
        # every chunk's floor, and the prompt's linear FLOPs (an MoE's tiled experts only add to them; no vocabulary)
        prefill = g.active - g.shape.vocab_params_billion * 1e9  # _linear_flops' dense part
        head = eff.request_s + math.ceil(g.s_in / budget) * w.overhead + 2 * prefill * g.s_in / math_rate
        w.floor_head = head
    # A prompt's prefill emits its first token and takes at least the step that carries it (lone_first_token).
    alone = g.eff.request_s + step
    return (alone if alone > head else head), step


def parallel_overhead_s(gpu: Gpu, n: int, tp: int, stages: int, layers: int, fast_us: float,
                        slow_us: float) -> float:
    """Per-step communication latency of one model copy on n GPUs split `tp` ways in `stages` pipeline stages:
    tensor parallelism inside the scale-up domain all-reduces twice per layer (Megatron, `fast_us` each over
    NVLink, `slow_us` over anything else); pipeline stages beyond it pass activations once per stage boundary
    over the slower link."""
    if n <= 1:
        return 0.0
    fast = gpu.fast_interconnect and tp <= max(gpu.nvlink_domain, 1)
    tp_s = 2 * layers * (fast_us if fast else slow_us) / 1e6 if tp > 1 else 0.0
    return tp_s + (stages - 1) * slow_us / 1e6


def serving_speed(s: Sizing, brief: Brief, shape: Shape, a: Assumptions, n: int, memo: Memo,
                  synchrony: float | None = None) -> None:
    """Generation on n GPUs (one model copy) with the engine the brief names. A decode step runs its kernels one
    after another, each the longer of its reads and its math (the weights its tokens touch against their FLOPs; the
    KV cache against attention's FLOPs), plus the step's floor and communication. A prompt's prefill is the same
    bound over its tokens (an MoE's expert GEMMs at the tile use their few rows per expert reach). The engine runs
    a share of the others' prefills first (`prefill_first`: they lengthen a new prompt's wait, the prompts that
    arrived together in chunks of the token budget) and mixes the rest into the decode steps as chunks (they
    lengthen every output token: their tokens ride in the step's GEMMs).

    `synchrony` overrides that share when how the prompts arrive is known (a measurement's client): 0 = each
    prompt arrives on its own (its prefill rides in the decode steps; it waits for its own), 1 = every session's
    prompt arrives together (the wave). None = the engine's `prefill_first`, the product's assumption."""
    _speed_at(s, _serving_gpu(s, brief, shape, a, memo, synchrony), n)


def decode_only_step_s(s: Sizing, brief: Brief, shape: Shape, a: Assumptions, n: int, memo: Memo) -> float:
    """The decode step, in seconds, of one copy on n GPUs whose steps carry no prompt tokens: a disaggregated
    deployment's decode worker, whose prompts are prefilled on other GPUs and arrive as KV cache (Dynamo, SGLang's
    PD disaggregation). The brief's sessions all decode at its context; serving_speed's step but no prompt's
    chunks ride in it (the product sizes aggregated copies; this is the figure a measured decode worker is held
    against)."""
    g = _serving_gpu(s, brief, shape, a, memo, 1.0)  # every prompt prefilled apart: none in the decode steps
    return _decode_step(g, _width(g, n))


def attention_dp_decode_step_s(s: Sizing, brief: Brief, shape: Shape, a: Assumptions, n: int, memo: Memo) -> float:
    """decode_only_step_s for a decode worker that runs attention data parallel over its n GPUs and the experts
    expert-parallel over the same n (the disaggregated DeepSeek workers of SGLang and TensorRT-LLM): each GPU
    decodes a share of the sessions, reads the shared weights whole and its share of the experts and the KV cache,
    all-reduces nothing, and dispatches and combines its tokens at every MoE layer (expert_all_to_all_by_gpu).
    Every layer is counted an MoE layer, as expert_parallel_s counts them (DeepSeek-V3: 58 of 61)."""
    if not shape.routed:
        raise ValueError("attention data parallel with expert parallelism needs a routed MoE")
    g = _serving_gpu(s, brief, shape, a, memo, 1.0)  # every prompt prefilled apart: none in the decode steps
    gpu = s.gpu
    shared = mem.weights_gb(shape.shared_params_billion, shape.bytes_per_param)
    a2a = a.values.get("expert_all_to_all_by_gpu", {}).get(gpu.id)
    if a2a:
        latency_us, gbs = float(a2a["latency_us"]), float(a2a["gbs"])
    else:  # not measured: the all-reduce latency of the link it crosses and the link's one-way rate
        fast = gpu.fast_interconnect and n <= max(gpu.nvlink_domain, 1)
        latency_us, gbs = (g.fast_us if fast else g.slow_us), (g.link / 2 if g.link > 0 else 1.0)
    return serving.attention_dp_decode_step_s(
        n, shared, max(0.0, g.weights - shared), g.decode_flops, g.kv_read, g.decode_attn, gpu.bandwidth_tbs,
        g.eff.mbu, g.tflops, g.mfu, g.attn_base, g.eff.floor_s, g.overlap, g.layers, g.c, shape.experts_per_token,
        g.hidden, latency_us / 1e6, gbs)


def _speed_at(s: Sizing, g: _ServingGpu, n: int) -> None:
    """serving_speed at n GPUs on the GPU's figures `g` (pick_width asks them once for every width)."""
    s.effective_tflops = g.effective_tflops
    itl, ttft_avg, ttft = _serving_width(g, n)
    c, s_out = g.c, g.s_out
    s.step_ms = s.itl_ms = itl * 1000
    # Each sequence yields its output tokens once per cycle of TTFT + output x ITL: the replica's output rate.
    s.tokens_per_second = c * s_out / (ttft_avg + s_out * itl)
    s.est_ttft_ms = ttft * 1000
    s.est_latency_ms = s.est_ttft_ms + s_out * s.step_ms


class _ServingGpu:
    """What serving_speed reads for one GPU at every width: the engine's figures on it and the decode step's
    brief-only parts. Worked out once per GPU per request (the width search asks for several widths)."""

    __slots__ = ("gpu", "a", "tflops", "sync", "eff", "mfu", "attn_base", "effective_tflops", "c", "s_in", "s_out",
                 "p95_in", "pps", "weights", "kv_read", "decode_attn", "decode_flops", "decode_prefill_attn",
                 "layers", "hidden", "shape", "active", "tile", "overlap", "ep_s", "up", "link", "fast_us",
                 "slow_us", "prefills", "attn_width", "host_s")


def _attention(shape: Shape, prefills: dict[Any, Any], tokens: int, width: float = 0.0) -> float:
    """A `tokens`-token prompt's attention FLOPs, kept in the brief's prefill table (its model is the table's):
    at `width` (attention_width; 0 = the hidden size)."""
    key = ("attention", tokens)
    hit = prefills.get(key)
    if hit is None:
        arch = shape.arch
        hit = prefills[key] = compute.attention_flops(arch.layers, tokens, width or arch.hidden_size, arch.window,
                                                  arch.window_layers)
    return hit


def attention_width(shape: Shape, a: Assumptions) -> float:
    """The width a prompt's attention runs at: the hidden size, but an MLA model's decompressed heads (issue 36:
    DeepSeek's prefill attention is 2.9x what its hidden size says; the head widths the registry does not keep
    are DeepSeek-V3's, mla_qk_nope_head_dim and mla_v_head_dim)."""
    arch = shape.arch
    if arch.kind != "MLA":
        return float(arch.hidden_size)
    rope = max(0, arch.kv_latent - arch.kv_latent * 8 // 9)  # 64 of 576 when the brief gives none
    width = serving.mla_prefill_attention_width(arch.attention_heads, int(a.num("mla_qk_nope_head_dim")), rope,
                                                int(a.num("mla_v_head_dim")))
    return width or float(arch.hidden_size)


def _serving_gpu(s: Sizing, brief: Brief, shape: Shape, a: Assumptions, memo: Memo,
                 synchrony: float | None) -> _ServingGpu:
    gpu = s.gpu
    gkey = ("serving", id(gpu))
    kept = memo.get(gkey)
    if kept is not None and kept.gpu is gpu and kept.a is a and kept.tflops == s.tflops and kept.sync == synchrony:
        return kept
    g = _ServingGpu()
    g.gpu, g.a, g.tflops, g.sync, g.shape = gpu, a, s.tflops, synchrony, shape
    arch = shape.arch
    g.attn_width = attention_width(shape, a)
    # A prefill step reads neither the output length nor the sessions beyond its tokens: kept by GPU, width and
    # tokens in the memo's prefill table, which the missed-target search shares across the lengths it tries. The
    # engine's figures on the GPU (one toolchain: one brief's table) and a prompt's attention are kept there too.
    g.prefills = prefills = memo.setdefault(("prefill",), {})
    ekey = ("engine", id(gpu))
    on = prefills.get(ekey)
    if on is None or on[0] is not gpu or on[1] is not a:
        on = prefills[ekey] = (gpu, a, _engine_on(gpu, brief.toolchain, a))
    eff, g.up, g.link, g.fast_us, g.slow_us, g.tile, g.overlap, saturation_ms = on[2]
    if synchrony is not None:
        eff = dataclasses.replace(eff, prefill_first=min(1.0, max(0.0, synchrony)))
    g.eff = eff
    # An MoE's expert GEMMs run grouped, many small matrices a step, and keep only part of a dense GEMM's rate.
    g.mfu = mfu = eff.mfu * (a.num("moe_gemm_efficiency") if shape.routed or shape.moe_estimated else 1.0)
    g.attn_base = gpu.tflops_bf16 or s.tflops  # attention runs on 16-bit tensor cores
    busy = saturation(s.tflops, shape.sequences * shape.tokens_per_sequence, arch.hidden_size, saturation_ms)
    g.effective_tflops = s.tflops * mfu * busy
    g.c, g.s_in, g.s_out = c, s_in, s_out = shape.sequences, shape.input_tokens, shape.output_tokens
    g.p95_in = brief.traffic.p95_input_tokens or s_in
    # The others' prompts the engine does not prefill first ride in the decode steps (chunked prefill):
    # (c - 1) x input / output prompt tokens per step, that share of them.
    g.pps = pps = (c - 1) * s_in / (s_out if s_out > 1 else 1) * (1.0 - eff.prefill_first)  # max(1, s_out)
    rkey = ("decode_read", pps)
    if rkey not in memo:
        memo[rkey] = (
            # An MoE step reads the shared weights and the experts its tokens touch (every weight when dense).
            mem.weights_gb(shape.params_read_billion(c + pps), shape.bytes_per_param),
            mem.kv_cache_gb(arch, shape.avg_tokens_per_sequence, c, shape.kv_bytes),
            decode_attention_flops(shape, c),
        )
    g.weights, g.kv_read, g.decode_attn = memo[rkey]
    g.active = active = shape.active_params_billion * 1e9
    g.decode_flops = 2 * active * (c + pps)  # linear_flops untiled: decode's few rows per expert are read-bound
    attn = _attention(shape, prefills, s_in, g.attn_width)
    g.decode_prefill_attn = pps * attn / (s_in if s_in > 1 else 1)  # max(1, s_in)
    g.layers, g.hidden = arch.layers, arch.hidden_size
    g.ep_s = expert_parallel_s(brief, shape, gpu, a)
    g.host_s = prefill_host_s(shape, eff, a)
    memo[gkey] = g
    return g


EngineOn = tuple[Efficiency, int, float, float, float, int, float, float]
# (id(gpu), toolchain, id(rules' assumptions)) -> ((gpu, assumptions), EngineOn), by memo.keep_held.
_ENGINE_ON: dict[tuple[int, tuple[str, ...], int], tuple[tuple[object, ...], EngineOn]] = {}


def _engine_on(gpu: Gpu, toolchain: tuple[str, ...], a: Assumptions) -> EngineOn:
    """What serving reads of the GPU, its engine and the rules alone, never of the brief's model or traffic: the
    engine's figures on this GPU, the scale-up domain, the link's GB/s, the all-reduce latencies over a fast and a
    slow link, the MoE tile rows, the memory-compute overlap and the kernel saturation time. Kept per GPU,
    toolchain and rules version: every GPU of every generation brief asks."""
    def figures() -> EngineOn:
        return (
            efficiency(gpu, toolchain, a), scale_up(gpu), gpu.interconnect_gbs if gpu.interconnect_gbs > 0 else 0.0,
            a.num("tp_allreduce_latency_us_fast_link"), a.num("tp_allreduce_latency_us_slow_link"),
            int(a.num("moe_gemm_tile_rows")), a.num("memory_compute_overlap"), a.num("kernel_saturation_ms"),
        )

    return keep_held(_ENGINE_ON, (id(gpu), toolchain, id(a)), (gpu, a), figures, 4096)  # toolchains: the callers'


class _Width:
    """What serving reads of one GPU at one width that no output length changes: the step's floor and
    communication, the rates, serving_floor's TTFT but its step, and (once a width is sized) its prompts' prefill
    times. Kept in the brief's prefill table, which the missed-target search shares across the lengths it tries."""

    __slots__ = ("gpu", "tp", "stages", "overhead", "bw", "tflops", "attn_tflops", "read_rate", "math_rate",
                 "floor_head", "prefilled", "single", "chunk", "whole", "extra", "link")


def _width(g: _ServingGpu, n: int) -> _Width:
    gpu, eff = g.gpu, g.eff
    key = ("width", id(gpu), n, g.tflops, g.c, g.s_in, g.p95_in)
    w = g.prefills.get(key)
    if w is not None and w.gpu is gpu:
        return w
    w = _Width()
    w.gpu, w.prefilled = gpu, False
    w.tp = tp = min(n, g.up, MAX_TENSOR_PARALLEL)
    # Pipeline stages beyond the scale-up domain each read their weights once per micro-batch, so a token
    # still waits for the whole model to be read at one stage's bandwidth: stages add capacity, not speed.
    w.stages = stages = math.ceil(n / tp)
    w.overhead = eff.floor_s + parallel_overhead_s(gpu, n, tp, stages, g.layers, g.fast_us, g.slow_us) + g.ep_s
    w.link = g.link
    if tp > 1 and not gpu.fast_interconnect:  # a PCIe ring wider than one CPU socket's GPUs crosses the sockets
        a = g.a
        cross = float(a.values["pcie_cross_socket_gbs"].get(gpu.gpu_class, 0.0))  # by the host a class sits in
        w.link = serving.ring_link_gbs(g.link, tp, int(a.num("pcie_gpus_per_socket")), cross)
    w.bw = bw = gpu.bandwidth_tbs * n
    w.tflops = tflops = g.tflops * n
    w.attn_tflops = g.attn_base * n
    w.read_rate = bw * 1e12 * eff.mbu  # serving_floor's rates
    w.math_rate = tflops * 1e12 * g.mfu
    w.floor_head = None
    g.prefills[key] = w
    return w


def _traffic(g: _ServingGpu, w: _Width, tokens: float) -> float:
    """Tensor parallelism all-reduces each layer's 16-bit activations twice (Megatron): tokens x hidden x 2 bytes
    each, at the link's bandwidth (a PCIe ring across two CPU sockets: the sockets' link's); over PCIe a big prefill
    chunk pays for it, over NVLink hardly."""
    if w.tp <= 1 or w.link <= 0:
        return 0.0
    return 2 * g.layers * serving.allreduce_transfer_seconds(tokens * g.hidden * 2.0, w.tp, w.link)


def _serving_width(g: _ServingGpu, n: int) -> tuple[float, float, float]:
    """(decode step, mean TTFT, TTFT at the p95 prompt) of one model copy on n GPUs: serving_speed's figures, in
    its order of operations."""
    eff = g.eff
    c, s_in, s_out = g.c, g.s_in, g.s_out
    w = _width(g, n)
    step = _decode_step(g, w)
    if not w.prefilled:
        _prefill_times(g, w, n)
    single = w.single
    # Apart from the wave, a prompt that arrives alone waits for its own prefill and what of another's is in flight.
    alone = serving.lone_first_token(single, step, c - 1, s_out, eff.request_s)
    # A scheduler that polls for new requests every few decode steps holds a prompt that arrives while the others
    # decode until its next poll (one that arrives during a prefill is taken at the next step).
    alone += serving.receive_wait_s(step, eff.recv_interval, c - 1)
    # One session has no wave to arrive with: its prompt is alone however the client sends it.
    if c <= 1 or (eff.prefill_first == 0.0 and _wave_unread(g, w, single, step)):
        wave = alone
    else:
        if w.chunk is None:
            _wave_times(g, w, n)
        wave = serving.time_to_first_token(w.chunk, w.whole, c, s_in, eff.budget_tokens, step, eff.request_s)
    ttft_avg = serving.blend_arrivals(alone, wave, eff.prefill_first)
    ttft = ttft_avg
    if g.p95_in > s_in:  # a longer prompt waits for its own extra tokens on top
        ttft += w.extra
    return step, ttft_avg, ttft


def _decode_step(g: _ServingGpu, w: _Width) -> float:
    """One decode step of the copy: its sessions' tokens and the prompt tokens that ride with them (g.pps)."""
    return serving.step_seconds(
        g.weights * w.stages, g.decode_flops, g.kv_read, g.decode_attn, g.decode_prefill_attn, w.bw, g.eff.mbu,
        w.tflops, g.mfu, w.attn_tflops, w.overhead + _traffic(g, w, g.c + g.pps), g.overlap,
    )


_FAR = 1e300  # far below float's overflow (1.8e308): a few terms under it, summed or 6x one, stay finite


def _wave_unread(g: _ServingGpu, w: _Width, single: float, step: float) -> bool:
    """Whether blend_arrivals at prefill_first 0 (no engine named: prompts ride in the decode steps) returns what
    it returns with the wave taken as the prompt alone, so that the wave's prefill steps need not be worked out.
    It adds 0 x max(0, wave - alone), which is alone + 0.0 for any wave but +inf against a TTFT alone below +inf
    (0 x inf is NaN). That wave is finite here. Its step (a chunk of the wave's prompts, or all of them at once)
    has T = min(budget, c x s_in) tokens against the single prompt's t = s_in, or the same step as the single
    prompt's full chunks of the budget. With no term below 0, a step of T >= t tokens takes at most 3 T / t times
    one of t: the floor and host time the same; the weights read at most T / t times as much (concave in tokens,
    an MoE's shared parameters >= 0); the attention and all-reduce traffic T / t; the GEMM FLOPs at most 2 T / t
    (t's expert rows use their tiles at most twice as well as T's); a GEMM at least the larger of its read and
    math, at most their sum. At most c + 1 chunks of it, so the wave adds at most 6 c^2 x `single`: under 6e300
    when `single` x c^2 is under 1e300. The caller has checked c > 1 and prefill_first 0."""
    c = g.c
    return (single > 0.0 and single * c * c < _FAR and w.overhead >= 0.0 and g.host_s >= 0.0 and g.s_in >= 1
            and 0.0 <= g.eff.request_s < _FAR and step < _FAR and g.layers >= 0
            and (not g.shape.routed or g.shape.shared_params_billion >= 0.0))


def _prefill(g: _ServingGpu, w: _Width, n: int, tokens: int, prompt: int) -> float:
    """One prefill step of `tokens` tokens of `prompt`-token prompts on n GPUs, kept in the brief's prefill table by
    GPU, width, tokens and prompt."""
    gpu = g.gpu
    key = (id(gpu), n, tokens, prompt)
    prefills = g.prefills
    hit = prefills.get(key)
    if hit is not None and hit[0] is gpu:
        return hit[1]
    shape, eff = g.shape, g.eff
    rkey = ("prefill_read", tokens)  # the weights a prefill of `tokens` touches: no GPU, no width
    read = prefills.get(rkey)
    if read is None:
        read = prefills[rkey] = mem.weights_gb(shape.params_read_billion(tokens), shape.bytes_per_param)
    read = read * w.stages
    step = serving.step_seconds(read, _linear_flops(g, tokens), 0.0, 0.0,
                                _attention(shape, prefills, prompt, g.attn_width) * tokens / max(1, prompt), w.bw,
                                eff.mbu,
                                w.tflops, g.mfu, w.attn_tflops, w.overhead + _traffic(g, w, tokens), g.overlap)
    # The host launches a prefill step's kernels layer by layer (no CUDA graph): a short prompt's step takes at
    # least that and the step's own floor and communication latency; a long prompt's GPU time hides it.
    host = g.host_s + w.overhead
    step = step if step > host else host
    prefills[key] = (gpu, step)
    return step


def _chunked(g: _ServingGpu, w: _Width, n: int, prompt: int) -> float:
    """One prompt alone, chunk by chunk: its full chunks of the budget, then the last one with what is left."""
    budget = g.eff.budget_tokens
    full, rest = divmod(prompt, budget)
    return (_prefill(g, w, n, budget, prompt) * full if full else 0.0) + (_prefill(g, w, n, rest, prompt) if rest
                                                                          else 0.0)


def _prefill_times(g: _ServingGpu, w: _Width, n: int) -> None:
    """The width's prompt prefill times that the alone TTFT reads, none of which reads the output length: one
    prompt chunk by chunk and what the p95 prompt adds. The wave's (`_wave_times`) wait until one is read."""
    s_in = g.s_in
    w.single = single = _chunked(g, w, n, s_in)
    p95_in = g.p95_in
    w.extra = max(0.0, _chunked(g, w, n, p95_in) - single) if p95_in > s_in else 0.0
    w.chunk = w.whole = None
    w.prefilled = True


def _wave_times(g: _ServingGpu, w: _Width, n: int) -> None:
    """The width's wave prefill times: a chunk of the prompts that arrived together, and all of them in one step."""
    c, s_in, budget = g.c, g.s_in, g.eff.budget_tokens
    w.chunk = chunk = _prefill(g, w, n, min(budget, max(1, c * s_in)), s_in)
    if c * s_in <= budget:
        w.whole = chunk
    elif serving.wave_fits_one_step(c, s_in, budget):
        w.whole = _prefill(g, w, n, c * s_in, s_in)
    else:  # time_to_first_token reads the chunks alone: a step of every prompt at once is not worked out
        w.whole = 0.0


def _linear_flops(g: _ServingGpu, tokens: float) -> float:
    """A prefill's matmul FLOPs: 2 per active parameter per token, less the embedding and output matrices (a
    prompt's tokens are looked up and only its last token's logits are taken: vocab x hidden FLOPs, left out);
    an MoE's routed experts at the tile use their rows reach (decode runs its few rows per expert through
    small-tile GEMV-like kernels, bound by the read). The vocabulary is in the shared (every-token) parameters."""
    shape = g.shape
    vocab = shape.vocab_params_billion * 1e9
    active = g.active - vocab
    if not shape.routed:
        return 2 * active * tokens
    shared = max(0.0, min(shape.shared_params_billion * 1e9 - vocab, active))
    use = serving.grouped_gemm_tile_use(tokens, shape.experts, shape.experts_per_token, g.tile)
    return 2 * (shared + (active - shared) / use) * tokens


def prefill_host_s(shape: Shape, eff: Efficiency, a: Assumptions) -> float:
    """Host time of one prefill step: the engine's launch time per layer over the model's layers, an MoE layer
    counted `moe_layer_launches` times (router, top-k, permutation, grouped GEMMs and combine launch more kernels)."""
    if eff.prefill_layer_s <= 0:
        return 0.0
    moe = shape.routed or shape.moe_estimated
    factor = float(a.values.get("moe_layer_launches", 1.0)) if moe else 1.0
    return shape.arch.layers * eff.prefill_layer_s * factor


def decode_attention_flops(shape: Shape, sequences: int) -> float:
    """Attention FLOPs of one decode step over the sequences' cached context. MLA attends with every query head
    over the latent (compute that grows with context and concurrency: DeepSeek at thousands of sequences); GQA's
    decode attention is bound by its KV reads, which the step already counts."""
    arch = shape.arch
    if arch.kind != "MLA":
        return 0.0
    rope = max(0, arch.kv_latent - arch.kv_latent * 8 // 9)  # 64 of 576 when the brief gives none
    return sequences * serving.mla_decode_attention_flops(arch.layers, arch.attention_heads, arch.kv_latent, rope,
                                                         shape.avg_tokens_per_sequence)


def expert_parallel_s(brief: Brief, shape: Shape, gpu: Gpu, a: Assumptions) -> float:
    """Per-step latency of expert parallelism: each MoE layer dispatches tokens to their experts' GPUs and combines
    them back (two all-to-alls, DeepEP), when the brief spreads the experts over more than one GPU."""
    ep = brief.parallelism.expert_parallel
    if ep <= 1 or not shape.routed:
        return 0.0
    fast = gpu.fast_interconnect and ep <= max(gpu.nvlink_domain, 1)
    per = a.num("tp_allreduce_latency_us_fast_link" if fast else "tp_allreduce_latency_us_slow_link")
    return 2 * shape.arch.layers * per / 1e6
