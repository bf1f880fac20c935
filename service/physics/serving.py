"""A serving engine's step and a prompt's time to first token: pure formulas over numbers (no service imports).

A step reads bytes (weights, KV cache) and computes FLOPs; the GPU overlaps the two, so a step takes the longer
of them, plus a floor no batch removes. A prefill is the same bound over many tokens at once: compute-bound for a
dense model, but an MoE's expert GEMMs see only tokens x k / E tokens each and can stay bound by reading the
experts. Time to first token is what a prompt waits for: the prompts that arrived with it, in chunks of the
engine's token budget, then one step.
"""

from __future__ import annotations

import functools
import math


def _check(**values: float) -> None:
    for name, v in values.items():
        if v is None or math.isnan(v) or v <= 0:
            raise ValueError(f"{name} must be positive, got {v!r}")


def bound_seconds(read_gb: float, flops: float, bandwidth_tbs: float, mbu: float, tflops: float, mfu: float,
                  attn_flops: float = 0.0, attn_tflops: float = 0.0, overlap: float = 1.0) -> float:
    """Reading `read_gb` at mbu x bandwidth against computing `flops` (plus attention FLOPs at the rate attention
    runs at) at mfu x peak: a kernel overlaps memory traffic and math (the roofline: the longer of the two), but
    near the ridge point not wholly; `overlap` is the share of the shorter one hidden (1 = the roofline's max)."""
    try:  # the common case compared directly (three calls a step, thousands an answer); _check says what is wrong
        ok = bandwidth_tbs > 0 and mbu > 0 and tflops > 0 and mfu > 0
    except TypeError:
        ok = False
    if not ok:
        _check(bandwidth_tbs=bandwidth_tbs, mbu=mbu, tflops=tflops, mfu=mfu)
    if not 0 <= overlap <= 1:
        raise ValueError(f"overlap must be in [0, 1], got {overlap!r}")
    return _roofline(read_gb, flops, bandwidth_tbs, mbu, tflops, mfu, attn_flops, attn_tflops, overlap)


def _roofline(read_gb: float, flops: float, bandwidth_tbs: float, mbu: float, tflops: float, mfu: float,
              attn_flops: float, attn_tflops: float, overlap: float) -> float:
    """`bound_seconds` on arguments it has checked."""
    # max and min of two written as the builtins pick (the first unless the second is strictly greater or less:
    # the same value, NaN and signed zero included), at a fraction of a call's cost: every kernel of every step.
    read = (read_gb if read_gb > 0.0 else 0.0) * 1e9 / (bandwidth_tbs * 1e12 * mbu)
    compute = (flops if flops > 0.0 else 0.0) / (tflops * 1e12 * mfu)
    if attn_flops > 0:
        compute += attn_flops / ((attn_tflops or tflops) * 1e12 * mfu)
    if compute > read:
        return compute + (1.0 - overlap) * read
    return read + (1.0 - overlap) * (compute if compute < read else read)


def step_seconds(weights_gb: float, linear_flops: float, kv_gb: float, decode_attn_flops: float,
                 prefill_attn_flops: float, bandwidth_tbs: float, mbu: float, tflops: float, mfu: float,
                 attn_tflops: float = 0.0, overhead_s: float = 0.0, overlap: float = 1.0) -> float:
    """One engine step, kernel by kernel (they run one after another; inside each the reads and the math overlap):
    the GEMMs take the longer of reading the weights and computing the linear FLOPs (a small prefill chunk hides
    under the read, a big one does not); decode attention the longer of reading the KV cache and its FLOPs (MLA's
    absorbed attention at thousands of sequences is compute); a prefill chunk's attention is compute; plus the
    step's floor (launches, sampling, scheduling, tensor-parallel all-reduces)."""
    gemm = bound_seconds(weights_gb, linear_flops, bandwidth_tbs, mbu, tflops, mfu, overlap=overlap)
    # The GEMM's call has checked the shared arguments (the rates and the overlap), so the attention kernels skip
    # those checks. A kernel with nothing to read and nothing to compute takes 0.0: skipped, as a prefill step has
    # no decode attention and a decode step often no prefill chunk.
    decode_attn = 0.0 if kv_gb <= 0 and decode_attn_flops <= 0 else _roofline(
        kv_gb, 0.0, bandwidth_tbs, mbu, tflops, mfu, decode_attn_flops, attn_tflops, overlap)
    prefill_attn = 0.0 if prefill_attn_flops <= 0 else _roofline(
        0.0, 0.0, bandwidth_tbs, mbu, tflops, mfu, prefill_attn_flops, attn_tflops, 1.0)
    return overhead_s + gemm + decode_attn + prefill_attn


def allreduce_transfer_seconds(nbytes: float, gpus: int, link_gbs: float) -> float:
    """Transfer time of one ring all-reduce of `nbytes` over `gpus` GPUs: each sends and receives
    2 x (n - 1) / n of the data (NCCL's algorithm bandwidth), one way at half the link's bidirectional GB/s. The
    latency term is apart (tp_allreduce_latency_us)."""
    if gpus <= 1 or nbytes <= 0:
        return 0.0
    try:  # compared directly (twice a step of every width sized); _check says what is wrong
        ok = link_gbs > 0
    except TypeError:
        ok = False
    if not ok:
        _check(link_gbs=link_gbs)
    return 2.0 * (gpus - 1) / gpus * nbytes / (link_gbs / 2 * 1e9)


def ring_link_gbs(link_gbs: float, gpus: int, gpus_per_socket: int, cross_socket_gbs: float) -> float:
    """The bidirectional GB/s a ring all-reduce over `gpus` PCIe GPUs runs at (allreduce_transfer_seconds' link):
    the PCIe link's, but a ring wider than one CPU socket's GPUs crosses the sockets' interconnect (a ring goes at
    its slowest hop: NCCL's topology search rates that SYS path at the CPU link's `cross_socket_gbs` one way, where a
    GPU's own PCIe x16 path is faster). `gpus_per_socket` <= 0: no socket boundary known."""
    if gpus_per_socket <= 0 or gpus <= gpus_per_socket or cross_socket_gbs <= 0 or link_gbs <= 0:
        return link_gbs
    cross = 2.0 * cross_socket_gbs  # one way each direction, as the link's bidirectional figure counts it
    return cross if cross < link_gbs else link_gbs


@functools.lru_cache(maxsize=4096, typed=True)  # a sum over up to 10,000 prompts, asked per GPU and width tried
def mean_chunks_to_first_token(sessions: int, prompt_tokens: int, budget_tokens: int) -> float:
    """Prompts that arrive together (a closed-loop client population started at once, and held in step by equal
    lengths) are prefilled first come first served in chunks of `budget_tokens`; prompt i is done with chunk
    ceil(i x prompt / budget), i = 1..sessions. The mean of that, in chunks: summed over whichever is fewer, the
    prompts or the chunks (chunk j completes the prompts i with (j - 1) x budget < i x prompt <= j x budget); past
    10,000 of them, the integral's value (the mean of i x prompt / budget plus half a chunk)."""
    c, s, b = max(1, sessions), max(1, prompt_tokens), max(1, budget_tokens)
    if c * s <= b:
        return 1.0
    chunks = -(-c * s // b)
    if min(c, chunks) > 10_000:
        return max(float(-(-s // b)), (c + 1) * s / (2 * b) + 0.5)
    if c <= chunks:
        return sum(-(-i * s // b) for i in range(1, c + 1)) / c
    total, done = 0, 0
    for j in range(1, chunks + 1):
        upto = min(c, j * b // s)  # prompts complete by the end of chunk j
        total += j * (upto - done)
        done = upto
    return total / c


def time_to_first_token(chunk_s: float, whole_s: float, sessions: int, prompt_tokens: int, budget_tokens: int,
                        step_s: float, request_s: float = 0.0) -> float:
    """Mean TTFT of `sessions` prompts of `prompt_tokens` that arrive together: when they all fit one step
    (`whole_s`: the prefill of all of them) they finish together; otherwise each full chunk of `budget_tokens`
    takes `chunk_s` and a prompt waits for the chunks up to its last token. Then one decode step emits the first
    token, and `request_s` is the serving front end's own time per request (HTTP, tokenizing, detokenizing)."""
    if wave_fits_one_step(sessions, prompt_tokens, budget_tokens):
        return request_s + whole_s + step_s
    return request_s + chunk_s * mean_chunks_to_first_token(sessions, prompt_tokens, budget_tokens) + step_s


def wave_fits_one_step(sessions: int, prompt_tokens: int, budget_tokens: int) -> bool:
    """Whether time_to_first_token reads `whole_s` (every prompt of the wave in one step) rather than `chunk_s`:
    a caller need not work out the prefill it will not read."""
    # max(1, x) written as the builtin picks (1 unless x is strictly greater; NaN included): asked by every width
    # sized of every GPU, three times a width.
    return ((sessions if sessions > 1 else 1) * (prompt_tokens if prompt_tokens > 1 else 1)
            <= (budget_tokens if budget_tokens > 1 else 1))


def lone_first_token(prefill_s: float, step_s: float, others: int, output_tokens: int, request_s: float = 0.0,
                     iterations: int = 30) -> float:
    """TTFT of a prompt that arrives on its own while `others` sessions cycle: the step in flight when it arrives
    (half a decode step on average while others decode; none when the engine is idle), its own prefill, which
    emits the first token (the step that runs it carries the decoding batch too, so it takes at least a decode
    step), and the residual half of another prompt's prefill that holds the engine when it arrives with
    probability rho (M/D/1: rho x prefill / 2). rho, the share of time the engine spends on prompts, = others x
    prefill / cycle, and the cycle (TTFT + output x step) depends on it: solved together. (Issue 36: at light load
    a prompt waits for no whole extra step: 30-60 ms measured for 8B-70B on H100.)"""
    in_flight = 0.5 * step_s if others > 0 else 0.0
    base = request_s + in_flight + (step_s if step_s > prefill_s else prefill_s)  # max(prefill_s, step_s)
    if others <= 0 or prefill_s <= 0:
        return base
    ttft = base
    decode = (output_tokens if output_tokens > 0 else 0) * step_s  # max(0, output_tokens), NaN included
    busy = others * prefill_s  # the same product each pass (the same float): sizing solves this per width tried
    for _ in range(iterations):
        cycle = ttft + decode
        if cycle > 0:
            rho = busy / cycle
            rho = rho if rho < 0.95 else 0.95  # min(0.95, rho), NaN included
        else:
            rho = 0.0
        nxt = base + rho * prefill_s / 2
        if abs(nxt - ttft) <= 1e-9 * (1e-12 if ttft < 1e-12 else ttft):  # max(ttft, 1e-12), NaN included
            return nxt
        ttft = nxt
    return ttft


def receive_wait_s(step_s: float, interval: int, others: int) -> float:
    """What a prompt waits, beyond the step in flight (lone_first_token's half step), for a scheduler that takes new
    requests from its front end only every `interval` decode steps (SGLang `--scheduler-recv-interval`: each decode
    iteration adds 1 to a counter, a prefill 1,000, and the scheduler polls when the counter reaches the interval,
    so right after a prefill and every `interval` steps while the engine decodes). A prompt arriving at a uniform
    point of that cycle waits on average (interval - 1) / 2 whole steps more. None while no other session decodes
    (an idle engine polls at once) or at an interval of 1 (every step: the default)."""
    if others <= 0 or interval <= 1 or not step_s > 0:
        return 0.0
    return (interval - 1) / 2 * step_s


def blend_arrivals(alone_s: float, wave_s: float, synchrony: float) -> float:
    """Mean TTFT between prompts that arrive alone (`alone_s`) and prompts that arrive together with every other
    session's (`wave_s`): `synchrony` is the share of the wave's extra wait a prompt meets (0 = clients arrive
    independently, 1 = all in step)."""
    if not 0 <= synchrony <= 1:
        raise ValueError(f"synchrony must be in [0, 1], got {synchrony!r}")
    extra = wave_s - alone_s
    return alone_s + synchrony * (extra if extra > 0.0 else 0.0)  # max(0.0, extra), NaN and signed zero included


def grouped_gemm_tile_use(tokens: float, experts: int, experts_per_token: int, tile_rows: int) -> float:
    """Share of an MoE expert GEMM's tensor-core work that is useful when `tokens` tokens are routed top-k over E
    experts: each expert sees M = tokens x k / E rows, padded up to whole tiles of `tile_rows` (CUTLASS / DeepGEMM
    grouped GEMMs tile M by 64-128), so M / (ceil(M / tile) x tile). A prefill of a thousand tokens over 256 experts
    gives each 32 rows: a quarter of a 128-row tile."""
    if experts <= 0 or experts_per_token <= 0 or tile_rows <= 0 or tokens <= 0:
        return 1.0
    k = min(experts_per_token, experts)
    touched = 1.0 - (1.0 - k / experts) ** max(1.0, tokens)  # experts that get any row run; the others do not
    m = tokens * k / (experts * touched)
    return m / (math.ceil(m / tile_rows) * tile_rows)


def moe_read_fraction_unknown_experts(active_params_billion: float, params_billion: float, tokens: float) -> float:
    """Share of an MoE's weights `tokens` tokens read when its expert count is unknown: one token reads its active
    parameters, so take the routed share k/E = active/total and assume every weight is routed (the shared part
    unknown): 1 - (1 - A/P)^tokens. One token reads A of P; many read nearly all."""
    if params_billion <= 0 or active_params_billion <= 0 or active_params_billion >= params_billion:
        return 1.0
    r = active_params_billion / params_billion
    return 1.0 - (1.0 - r) ** max(1.0, tokens)


def mla_decode_attention_flops(layers: int, heads: int, kv_latent: int, rope_dim: int, context: float) -> float:
    """FLOPs one decoded token spends attending over `context` cached tokens with MLA's absorbed form (DeepSeek-V2
    section 2.1.4: the up-projections fold into the query and output): per layer and cached token, every query
    head takes a dot product with the (latent + rope)-wide key and a weighted sum of the latent-wide value,
    2 x heads x (kv_latent + (kv_latent - rope_dim)) FLOPs; kv_latent here is the cached width, rope included."""
    if layers <= 0 or heads <= 0 or kv_latent <= 0 or context <= 0:
        return 0.0
    value_width = max(1, kv_latent - max(0, rope_dim))
    return 2.0 * layers * heads * (kv_latent + value_width) * context


def mla_prefill_attention_width(heads: int, qk_nope_dim: int, rope_dim: int, v_dim: int) -> float:
    """The width an MLA prefill's attention runs at, in compute.attention_flops' terms (2 x layers x S^2 x width,
    causal): a prompt is not attended in the absorbed form decode uses but as multi-head attention over the
    decompressed keys and values (DeepSeek-V2 section 2.1; FlashMLA serves decode, FlashAttention's MHA prefill),
    every head's QK^T at (nope + rope) and its softmax x V at v wide: heads x (qk + v) / 2 where a GQA model's
    is its hidden size. DeepSeek-V3: 128 x (128 + 64 + 128) / 2 = 20,480 against hidden 7,168 (2.9x)."""
    if heads <= 0 or qk_nope_dim + rope_dim <= 0 or v_dim <= 0:
        return 0.0
    return heads * (max(0, qk_nope_dim) + max(0, rope_dim) + v_dim) / 2.0


def expert_all_to_all_seconds(tokens: float, experts_per_token: int, hidden: int, latency_s: float,
                              gbs: float, dispatch_bytes: float = 1.0, combine_bytes: float = 2.0) -> float:
    """One MoE layer's expert-parallel dispatch and combine on one GPU (DeepEP's low-latency kernels): each sends
    its `tokens` tokens' activations to their `experts_per_token` experts (FP8 out, `dispatch_bytes` an element)
    and takes their outputs back (16-bit, `combine_bytes`), each all-to-all its latency plus its bytes at the GPU's
    measured all-to-all rate `gbs` (one way)."""
    if tokens <= 0 or experts_per_token <= 0 or hidden <= 0:
        return 0.0
    _check(gbs=gbs)
    moved = tokens * experts_per_token * hidden * (dispatch_bytes + combine_bytes)
    return 2.0 * max(0.0, latency_s) + moved / (gbs * 1e9)


def attention_dp_decode_step_s(gpus: int, shared_gb: float, experts_gb: float, linear_flops: float, kv_gb: float,
                               attn_flops: float, bandwidth_tbs: float, mbu: float, tflops: float, mfu: float,
                               attn_tflops: float, floor_s: float, overlap: float, moe_layers: int,
                               sequences: int, experts_per_token: int, hidden: int, a2a_latency_s: float,
                               a2a_gbs: float) -> float:
    """One decode step of an MoE copy on `gpus` GPUs with attention data parallel and the experts expert-parallel
    over the same GPUs (SGLang `--enable-dp-attention` with DeepEP, TensorRT-LLM attention DP with wide EP): each
    GPU decodes its own share of the `sequences`, so no tensor-parallel all-reduce; it reads the weights every
    token uses (`shared_gb`: attention, dense layers, shared experts, embeddings) whole, and its share of the routed
    experts the step touches (`experts_gb` over all GPUs) and of the KV cache; its FLOPs are its tokens'. Each MoE
    layer then dispatches and combines its tokens (expert_all_to_all_seconds). The figures given are the whole
    copy's (the step's weights, FLOPs and KV over every GPU); the rates are one GPU's."""
    if gpus < 1:
        raise ValueError(f"gpus must be at least 1, got {gpus!r}")
    step = step_seconds(shared_gb + experts_gb / gpus, linear_flops / gpus, kv_gb / gpus, attn_flops / gpus, 0.0,
                        bandwidth_tbs, mbu, tflops, mfu, attn_tflops, floor_s, overlap)
    if gpus == 1:
        return step
    per_gpu = sequences / gpus
    return step + max(0, moe_layers) * expert_all_to_all_seconds(per_gpu, experts_per_token, hidden, a2a_latency_s,
                                                                 a2a_gbs)
