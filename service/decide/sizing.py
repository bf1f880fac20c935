"""Size one GPU type for one brief: how many, how much memory, how fast, what it costs, what owning it costs.

Pure computation over the physics/money functions and the rules' constants; no rules are applied here. Every
figure it produces is a fact the rules can test and a number the answer prints, with the formula beside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import MISSING, dataclass, field, fields
from datetime import date
from functools import lru_cache
from typing import Any

from ..assumptions import Assumptions
from ..brief import DEFAULT_PRICE_TIER, TRAINING_WORKLOADS, UNSPECIFIED, Brief, Quote
from ..catalog import Gpu, Price, tier_preference
from ..money import cost as money
from ..money import ownership as own
from ..physics import compute
from ..physics import memory as mem
from . import tables as tb
from .tables import MAX_TENSOR_PARALLEL

INFERENCE_WORKLOADS = ("BATCH_INFERENCE", "REALTIME_INFERENCE", "EMBEDDING", "EVALUATION", "NOTEBOOK")



@dataclass(frozen=True)
class Shape:
    """What the brief implies about the model and the traffic, with defaults filled in (and noted)."""

    params_billion: float
    active_params_billion: float
    precision: str
    bytes_per_param: float
    arch: mem.Architecture
    tokens_per_sequence: int  # memory is sized at this context (p95 input + output, else the context window)
    avg_tokens_per_sequence: int  # average context read per decode step
    sequences: int  # concurrent sequences per replica (sessions or batch)
    input_tokens: int
    output_tokens: int
    defaults_used: tuple[str, ...]  # brief fields we had to assume


@dataclass
class Sizing:
    gpu: Gpu
    count: int = 0
    per_replica: int = 1  # GPUs holding one copy of the model (tensor/pipeline parallel)
    replicas: int = 1
    nodes: int = 1
    fits: bool = False
    memory: mem.MemoryBreakdown | None = None
    capacity_gb: float = 0.0
    headroom: float = 0.0
    price: Price | None = None
    quote: Quote | None = None
    usd_per_gpu_hour: float = 0.0
    usd_per_hour: float = 0.0
    compared_tier: str = DEFAULT_PRICE_TIER  # the tier every candidate is compared at
    price_tier: str = ""  # the tier of the price used ("" when unpriced)
    tflops: float = 0.0  # dense TFLOPS per GPU at the precision used for compute
    effective_tflops: float = 0.0  # what one GPU delivers on this work: peak x MFU-scaling x saturation
    usd_per_tflop_hour: float = 0.0
    unit: str = ""  # SUCCESS_UNIT name the cost is per (the brief's, else a workload default); rendered by messages
    units_per_hour: float = 0.0  # accepted-or-not outputs per hour; 0 = cannot be computed
    usd_per_unit: float = 0.0  # per ACCEPTED unit
    tokens_per_second: float = 0.0
    step_ms: float = 0.0
    est_latency_ms: float = 0.0
    est_ttft_ms: float = 0.0
    latency_target: bool = False
    meets_latency: bool = True
    train_hours: float = 0.0
    itl_ms: float = 0.0  # time per output token per sequence under the brief's load
    micro_tokens: int = 0  # training: tokens per GPU per forward pass the saturation model used
    compute_count: int = 0
    memory_count: int = 0
    purchase: Price | None = None
    annual_power_usd: float = 0.0
    owned_usd_per_hour: float = 0.0
    break_even_hours: float = 0.0
    break_even_months: float = 0.0
    running_usd_per_busy_hour: float = 0.0  # power x PUE + maintenance, per busy hour, whole configuration
    ownership_utilization: float = 0.0
    formulas: list[str] = field(default_factory=list)

    @classmethod
    def blank(cls, gpu: Gpu, compared_tier: str) -> Sizing:
        """Sizing(gpu=gpu, compared_tier=compared_tier), without the generated __init__ assigning some fifty
        defaults one by one (several microseconds, for each GPU of each request)."""
        s = cls.__new__(cls)
        s.__dict__.update(_BLANK)
        s.gpu, s.compared_tier, s.formulas = gpu, compared_tier, []
        return s

    @property
    def price_from_quote(self) -> bool:
        return self.quote is not None

    @property
    def gpu_hours(self) -> float:
        return self.count * self.train_hours

    @property
    def usd_per_run(self) -> float:
        return self.usd_per_hour * self.train_hours

    @property
    def price_tier_fallback(self) -> bool:
        """Priced, but not in the tier the candidates are compared at."""
        return bool(self.price_tier) and self.price_tier != self.compared_tier


_BLANK = {f.name: f.default for f in fields(Sizing) if f.default is not MISSING}


def shape_of(brief: Brief, a: Assumptions) -> Shape | None:
    m, t = brief.model, brief.traffic
    if m.params_billion <= 0:
        return None
    defaults: list[str] = []
    precision = m.precision
    if precision == "UNSPECIFIED":
        precision = "BF16"
        defaults.append("model.precision")
    arch = mem.resolve_architecture(
        m.params_billion, m.layers, m.kv_heads, m.head_dim, m.hidden_size, tb.bands(a), kind=m.attention,
        kv_lora_rank=m.kv_lora_rank, rope_head_dim=m.rope_head_dim, window=m.sliding_window_tokens,
        mla_default=(int(a.num("mla_kv_lora_rank")), int(a.num("mla_rope_head_dim"))),
    )
    context = m.context_tokens
    if context <= 0:
        context = int(a.num("default_context_tokens"))
        defaults.append("model.context_tokens")
    inp = t.avg_input_tokens or 0
    out = t.avg_output_tokens or 0
    if t.p95_input_tokens > 0:
        size_tokens = (
            min(context, t.p95_input_tokens + (out or 0))
            if m.context_tokens > 0
            else (t.p95_input_tokens + out)
        )
    else:
        size_tokens = context
    if inp <= 0:
        inp = max(1, int(context * 0.5)) if out <= 0 else max(1, min(context - out, int(context * 0.5)))
        defaults.append("traffic.avg_input_tokens")
    if out <= 0:
        out = max(1, min(512, context // 4))
        defaults.append("traffic.avg_output_tokens")
    avg_tokens = min(size_tokens, inp + out // 2)
    if brief.workload == "REALTIME_INFERENCE":
        seqs = t.concurrent_sessions or t.batch_size
    else:
        seqs = t.batch_size or t.concurrent_sessions
    if seqs <= 0:
        seqs = 1
        defaults.append(
            "traffic.concurrent_sessions" if brief.workload == "REALTIME_INFERENCE" else "traffic.batch_size"
        )
    if brief.workload == "PRETRAINING" and brief.training.global_batch_tokens <= 0 and t.batch_size <= 0:
        defaults.append("training.global_batch_tokens")
    unused = _UNUSED_DEFAULTS.get(brief.workload, ())
    defaults = [d for d in defaults if d not in unused]
    active = m.active_params_billion if 0 < m.active_params_billion <= m.params_billion else m.params_billion
    return Shape(
        params_billion=m.params_billion,
        active_params_billion=active,
        precision=precision,
        bytes_per_param=a.bytes_per_param(precision),
        arch=arch,
        tokens_per_sequence=size_tokens,
        avg_tokens_per_sequence=avg_tokens,
        sequences=seqs,
        input_tokens=inp,
        output_tokens=out,
        defaults_used=tuple(defaults),
    )


# Defaults a workload never reads: noting them would claim an assumption that changed nothing.
_TRAFFIC_SHAPE = ("traffic.avg_input_tokens", "traffic.avg_output_tokens")
_UNUSED_DEFAULTS: dict[str, tuple[str, ...]] = {
    "PRETRAINING": (*_TRAFFIC_SHAPE, "traffic.batch_size"),  # the global batch sets the micro-batch
    "FULL_FINETUNE": _TRAFFIC_SHAPE,
    "ADAPTER_FINETUNE": _TRAFFIC_SHAPE,
    "EMBEDDING": ("traffic.avg_output_tokens",),  # an embedding is its input
}

# Figures that depend on the brief but not on the GPU, computed once per request (see size_all).
Memo = dict[tuple[Any, ...], Any]

_scale_up = tb.scale_up
# A handful of distinct (domain, node) pairs in a catalog, asked for by every GPU of every request.
_tp_sizes_of = lru_cache(maxsize=256)(tb.tp_sizes)


def _tp_sizes(gpu: Gpu, a: Assumptions) -> tuple[int, ...]:
    """GPU counts that can hold one model copy: powers of two up to 8 inside the scale-up domain, then whole
    nodes of pipeline stages."""
    return _tp_sizes_of(min(_scale_up(gpu), MAX_TENSOR_PARALLEL), max(1, gpu.gpus_per_node),
                        int(a.num("max_inference_nodes")))


def _usable(gpu: Gpu, a: Assumptions) -> float:
    return gpu.memory_gb * (1.0 - a.num("safety_headroom"))


def _par_eff(gpu: Gpu, n: int, a: Assumptions) -> float:
    if n <= 1:
        return 1.0
    if gpu.fast_interconnect and n <= max(gpu.nvlink_domain, 1):
        return a.num("parallel_efficiency_fast_link")
    return a.num("parallel_efficiency_pcie")


def _mbu(gpu: Gpu, a: Assumptions) -> float:
    return a.num("mbu_decode_consumer") if gpu.gpu_class == "consumer" else a.num("mbu_decode")


def compute_tflops(gpu: Gpu, precision: str) -> float:
    """Dense TFLOPS used for compute: FP8 where the GPU has it and the model runs in 8 bits, else BF16/FP16."""
    if precision in ("FP8", "INT8") and gpu.tflops_fp8 > 0:
        return gpu.tflops_fp8
    return gpu.tflops_bf16


def compared_tier(brief: Brief) -> str:
    return brief.economics.price_tier if brief.economics.price_tier != UNSPECIFIED else DEFAULT_PRICE_TIER


def _price(
    gpu: Gpu, quotes: tuple[Quote, ...], day: date, tier: str
) -> tuple[Price | None, Quote | None, float, str]:
    """The rent price in the compared tier, else the next tier that has one; a caller's quote beats both."""
    quote = next((q for q in quotes if q.gpu == gpu.id), None)
    row = gpu.rent_price(day, tier_preference(tier))
    if quote is not None:
        return row, quote, quote.usd_per_hour, quote.tier if quote.tier != UNSPECIFIED else tier
    return row, None, row.usd if row else 0.0, row.tier if row else ""


def size_all(
    gpus: Iterable[Gpu], brief: Brief, shape: Shape, a: Assumptions, quotes: tuple[Quote, ...], day: date
) -> list[Sizing]:
    """`size` for each GPU, with what depends only on the brief worked out once per request (_Request) and what
    depends only on the GPU and the rules once per rules load (tables.py). `size` stays the plain version and
    the reference: tests/test_fast_paths.py holds the two equal."""
    t = tb.tables(a)
    req = _Request(brief, shape, a, t.constants, quotes, day)
    return [req.size(t.gpu(g)) for g in gpus]


def size(
    gpu: Gpu, brief: Brief, shape: Shape, a: Assumptions, quotes: tuple[Quote, ...], day: date,
    memo: Memo | None = None,
) -> Sizing:
    """`memo`: memory breakdowns already computed for this brief, shape and assumptions (by `size_all`)."""
    memo = {} if memo is None else memo
    s = Sizing(gpu=gpu, compared_tier=compared_tier(brief))
    s.price, s.quote, s.usd_per_gpu_hour, s.price_tier = _price(gpu, quotes, day, s.compared_tier)
    s.purchase = gpu.price("purchase", day)
    s.tflops = compute_tflops(gpu, shape.precision)
    w = brief.workload
    if w in ("PRETRAINING", "FULL_FINETUNE"):
        _size_full_training(s, brief, shape, a, memo)
    elif w == "ADAPTER_FINETUNE":
        _size_adapter(s, brief, shape, a)
    else:
        _size_inference(s, brief, shape, a, memo)
    s.capacity_gb = s.count * gpu.memory_gb
    need = s.memory.total_gb if s.memory else 0.0
    s.headroom = 1.0 - need / s.capacity_gb if s.capacity_gb > 0 else 0.0
    s.nodes = max(1, math.ceil(s.count / max(1, gpu.gpus_per_node)))
    s.usd_per_hour = s.usd_per_gpu_hour * s.count
    s.usd_per_tflop_hour = (
        money.usd_per_tflop_hour(s.usd_per_gpu_hour, gpu.tflops_bf16) if gpu.tflops_bf16 else 0.0
    )
    _unit_cost(s, brief, shape, a)
    _ownership(s, brief, a)
    return s


TrainingNeed = Callable[[int, int], mem.MemoryBreakdown]  # (GPUs, sequences per GPU) -> whole configuration


def _size_full_training(
    s: Sizing, brief: Brief, shape: Shape, a: Assumptions, memo: Memo, fast_need: TrainingNeed | None = None
) -> None:
    """`fast_need`: size_all's equal of the memory need below, built from parts it keeps per request."""
    gpu = s.gpu
    micro = max(1, brief.traffic.batch_size or 1)
    recompute = a.text("recompute_full_finetune")

    def need(n: int, sequences: int = micro) -> mem.MemoryBreakdown:
        if fast_need is not None:
            return fast_need(n, sequences)
        key = ("training", n, sequences)  # the GPU does not enter: only how many and how many sequences
        if key not in memo:
            memo[key] = _full_training_need(shape, a, recompute, n, sequences)
        return memo[key]

    usable = _usable(gpu, a)
    # Model states shard over GPUs (ZeRO-3/FSDP) and activations split over data-parallel replicas, so the
    # whole-configuration total must fit in n x usable memory; what grows per GPU is only the engine overhead.
    n = 1
    while need(n).total_gb > n * usable and n < MAX_GPUS:
        n = max(n + 1, math.ceil(need(n).total_gb / usable))
    s.memory_count = n
    s.fits = need(n).total_gb <= n * usable
    flops = compute.training_flops(shape.active_params_billion, brief.training.tokens_billion)
    deadline = brief.training.tokens_billion > 0 and brief.training.target_days > 0
    if brief.traffic.batch_size > 0 or brief.workload != "PRETRAINING":
        # The brief's micro-batch as given (fine-tuning without one keeps one sequence per GPU).
        s.micro_tokens = micro * shape.tokens_per_sequence
        mfu = _mfu(gpu, a, s.tflops, s.micro_tokens, shape.arch.hidden_size)
        if deadline:
            s.compute_count = _deadline_count(flops, s.tflops, mfu, brief.training.target_days)
    else:
        # No micro-batch given: each GPU runs its share of the global batch (Llama: 4M tokens) in micro-batches
        # as large as its memory allows. The share depends on the count and the count on the MFU, so iterate.
        global_tokens = brief.training.global_batch_tokens or int(a.num("default_global_batch_tokens"))
        count = max(1, s.memory_count)
        mfu = a.num("mfu_training")
        for _ in range(8):
            s.micro_tokens = _micro_tokens(count, global_tokens, shape, need, usable)
            mfu = _mfu(gpu, a, s.tflops, s.micro_tokens, shape.arch.hidden_size)
            if not deadline:
                break
            nxt = max(s.memory_count, _deadline_count(flops, s.tflops, mfu, brief.training.target_days))
            if nxt == count:
                break
            count = nxt
        if deadline:
            s.compute_count = _deadline_count(flops, s.tflops, mfu, brief.training.target_days)
    s.effective_tflops = s.tflops * mfu
    count = min(max(s.memory_count, s.compute_count, 1), MAX_GPUS)
    if s.compute_count >= MAX_GPUS:
        s.fits = False  # no cluster we would size finishes by the deadline
    if count > 1 and gpu.gpus_per_node > 1 and count > gpu.gpus_per_node:
        count = math.ceil(count / gpu.gpus_per_node) * gpu.gpus_per_node
    elif count > 1:
        count = 1 << (count - 1).bit_length() if count <= gpu.gpus_per_node else count
    s.count = s.per_replica = count
    s.memory = need(count)
    if brief.training.tokens_billion > 0:
        # The MFU the count was sized at already includes communication (Llama 3 measured 38-43% on 16k
        # H100s end to end), so run time uses the same MFU: a count sized for a deadline meets it.
        s.train_hours = compute.training_seconds(flops, count, s.tflops, mfu) / 3600
    s.formulas.append(
        f"training FLOPs = 6 x {shape.active_params_billion:g}e9 params x {brief.training.tokens_billion:g}e9 tokens"
        f" = {flops:.3g}; GPUs for the deadline = FLOPs / ({s.tflops:g} TFLOPS x MFU {mfu:.2f} x days)"
    )


def _full_training_need(
    shape: Shape, a: Assumptions, recompute: str, n: int, sequences: int
) -> mem.MemoryBreakdown:
    return mem.full_training_memory(
        shape.params_billion,
        shape.arch,
        shape.tokens_per_sequence,
        sequences,
        a.num("adam_state_bytes_per_param"),
        recompute,
        a.num("engine_overhead_gb"),
        gpus=n,
    )


def _micro_tokens(
    count: int, global_tokens: int, shape: Shape, need, usable: float  # noqa: ANN001 - need(n, sequences)
) -> int:
    """Tokens one GPU runs per forward pass: its data-parallel share of the global batch, but no more
    sequences than fit beside its share of the model states (the rest goes to gradient accumulation)."""
    seq = max(1, shape.tokens_per_sequence)
    share = max(1, global_tokens // max(1, count) // seq)
    per_seq = need(count, 2).total_gb - need(count, 1).total_gb  # activations + logits of one sequence
    free = count * usable - need(count, 1).total_gb
    fit = 1 + int(free / (per_seq * count)) if per_seq > 0 and free > 0 else 1
    return min(share, max(1, fit)) * seq


MAX_GPUS = 1_000_000  # beyond any real cluster: a brief that needs more is infeasible, not a number to print


def _deadline_count(flops: float, tflops: float, mfu: float, days: float) -> int:
    try:
        return min(compute.gpus_for_deadline(flops, tflops, mfu, days), MAX_GPUS)
    except (OverflowError, ValueError):
        return MAX_GPUS


def _mfu(gpu: Gpu, a: Assumptions, tflops: float, tokens_per_step: int, hidden: int) -> float:
    """mfu_training is what a well-tuned run reaches on the reference GPU. GPUs whose achievable matmul
    fraction (MAMF) is lower reach proportionally less, and a step too small to keep a big GPU busy reaches
    less again: one layer's forward matmuls (24·t·h² FLOPs) must last `kernel_saturation_ms` at peak."""
    base = a.num("mfu_training") * gpu.matmul_efficiency / a.num("reference_matmul_efficiency")
    return base * saturation(tflops, tokens_per_step, hidden, a.num("kernel_saturation_ms"))


def saturation(tflops: float, tokens_per_step: int, hidden: int, saturation_ms: float) -> float:
    layer_flops = 24.0 * tokens_per_step * hidden * hidden
    needed = tflops * 1e12 * saturation_ms / 1000
    return min(1.0, layer_flops / needed) if needed > 0 else 1.0


def _size_adapter(s: Sizing, brief: Brief, shape: Shape, a: Assumptions) -> None:
    gpu = s.gpu
    micro = max(1, brief.traffic.batch_size or 1)
    breakdown = mem.adapter_training_memory(
        shape.params_billion,
        shape.bytes_per_param,
        shape.arch,
        shape.tokens_per_sequence,
        micro,
        int(a.num("lora_rank")),
        int(a.num("lora_targets_per_layer")),
        a.text("recompute_adapter"),
        a.num("engine_overhead_gb"),
    )
    usable = _usable(gpu, a)
    n = next(
        (
            k
            for k in _tp_sizes(gpu, a)
            if breakdown.total_gb + (k - 1) * a.num("engine_overhead_gb") <= k * usable
        ),
        0,
    )
    s.fits = n > 0
    n = n or _tp_sizes(gpu, a)[-1]
    s.memory_count = n
    flops = compute.training_flops(
        shape.active_params_billion, brief.training.tokens_billion, a.num("adapter_flops_per_param_token")
    )
    mfu = _mfu(gpu, a, s.tflops, micro * shape.tokens_per_sequence, shape.arch.hidden_size)
    s.effective_tflops = s.tflops * mfu
    if brief.training.tokens_billion > 0 and brief.training.target_days > 0:
        s.compute_count = _deadline_count(flops, s.tflops, mfu, brief.training.target_days)
    s.count = s.per_replica = min(max(n, s.compute_count), MAX_GPUS)
    if s.compute_count >= MAX_GPUS:
        s.fits = False
    s.memory = _with_engine(breakdown, s.count, a)
    if brief.training.tokens_billion > 0:
        s.train_hours = (
            compute.training_seconds(flops, s.count, s.tflops, mfu) / 3600  # same MFU as the count
        )
    s.formulas.append(
        f"adapter training FLOPs = {a.num('adapter_flops_per_param_token'):g} x {shape.active_params_billion:g}e9"
        f" x {brief.training.tokens_billion:g}e9 tokens = {flops:.3g} (frozen base: no weight gradients,"
        " plus recomputation)"
    )


def _with_engine(b: mem.MemoryBreakdown, gpus: int, a: Assumptions) -> mem.MemoryBreakdown:
    """Engine overhead is per GPU: a breakdown sized for one GPU gains it once per extra GPU."""
    if gpus <= 1:
        return b
    extra = (gpus - 1) * a.num("engine_overhead_gb")
    return mem.MemoryBreakdown(tuple((n, v + extra if n == "engine" else v) for n, v in b.components))


def _inference_need(gpu: Gpu, brief: Brief, shape: Shape, a: Assumptions, n: int) -> mem.MemoryBreakdown:
    if brief.workload == "MEDIA_GENERATION":
        return mem.MemoryBreakdown(
            (
                ("weights", mem.weights_gb(shape.params_billion, shape.bytes_per_param)),
                ("activations", a.num("media_activation_peak_gb") * max(1, brief.traffic.batch_size or 1)),
                ("engine", a.num("engine_overhead_gb") * n),
            )
        )
    # Up to the scale-up domain the GPUs split each layer (tensor parallel: KV heads are replicated once TP
    # exceeds them); beyond it they hold different layers (pipeline stages: nothing is replicated).
    tp = min(n, _scale_up(gpu), MAX_TENSOR_PARALLEL)
    one_stage_set = mem.inference_memory(
        shape.params_billion,
        shape.bytes_per_param,
        shape.arch,
        shape.tokens_per_sequence,
        shape.sequences,
        a.num("kv_cache_bytes"),
        a.num("inference_activation_peak_gb"),
        a.num("engine_overhead_gb"),
        tensor_parallel=tp,
    )
    per_gpu = ("activations", "engine")
    return mem.MemoryBreakdown(
        tuple((c, v * n / tp if c in per_gpu else v) for c, v in one_stage_set.components)
    )


def _size_inference(
    s: Sizing, brief: Brief, shape: Shape, a: Assumptions, memo: Memo
) -> None:
    gpu = s.gpu
    usable = _usable(gpu, a)
    sizes = _tp_sizes(gpu, a)

    def need(n: int) -> mem.MemoryBreakdown:
        # The GPU enters only through the tensor-parallel width its scale-up domain allows.
        key = ("inference", n, min(n, _scale_up(gpu), MAX_TENSOR_PARALLEL))
        if key not in memo:
            memo[key] = _inference_need(gpu, brief, shape, a, n)
        return memo[key]

    n = next((k for k in sizes if need(k).total_gb <= k * usable), 0)
    s.fits = n > 0
    n = n or sizes[-1]
    s.memory_count = n
    lat = brief.latency
    s.latency_target = lat.p95_ms > 0 or lat.ttft_ms > 0
    _speed(s, brief, shape, a, n, memo)
    if s.latency_target and brief.workload == "REALTIME_INFERENCE":
        # More tensor parallelism inside the fast-link domain shortens each decode step; stop at the node.
        for k in sizes:
            if k <= n or k > min(_scale_up(gpu), MAX_TENSOR_PARALLEL):
                continue
            if _meets(s, lat):
                break
            n = k
            _speed(s, brief, shape, a, n, memo)
        s.meets_latency = _meets(s, lat)
    _replicate(s, n, brief.workload, shape, brief.traffic.requests_per_second, need(n))


def _replicate(s: Sizing, n: int, workload: str, shape: Shape, offered: float,
               one_replica: mem.MemoryBreakdown) -> None:
    """Replicas of `n` GPUs each for the offered requests/s: per_replica, replicas, count and the memory of all
    of them (`fits` turns False past MAX_GPUS)."""
    s.per_replica = n
    # Requests/s one replica sustains: an embedding request is its input tokens, a generation its output tokens.
    per_request = shape.input_tokens if workload == "EMBEDDING" else shape.output_tokens
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


def _meets(s: Sizing, lat) -> bool:  # noqa: ANN001 - Latency
    ok = True
    if lat.p95_ms > 0:
        ok = ok and s.est_latency_ms <= lat.p95_ms
    if lat.ttft_ms > 0:
        ok = ok and s.est_ttft_ms <= lat.ttft_ms
    return ok


def _parallel_overhead_s(gpu: Gpu, n: int, layers: int, a: Assumptions) -> float:
    """Per-step communication latency of one model copy on n GPUs: tensor parallelism inside the scale-up
    domain all-reduces twice per layer (Megatron); pipeline stages beyond it pass activations once per stage
    boundary over the slower link."""
    if n <= 1:
        return 0.0
    tp = min(n, _scale_up(gpu), MAX_TENSOR_PARALLEL)
    stages = math.ceil(n / tp)
    fast = gpu.fast_interconnect and tp <= max(gpu.nvlink_domain, 1)
    per_allreduce = a.num("tp_allreduce_latency_us_fast_link" if fast else "tp_allreduce_latency_us_slow_link")
    tp_s = 2 * layers * per_allreduce / 1e6 if tp > 1 else 0.0
    return tp_s + (stages - 1) * a.num("tp_allreduce_latency_us_slow_link") / 1e6


def _prefill_only_tokens(brief: Brief, shape: Shape, a: Assumptions) -> int:
    """Tokens per forward pass of embedding-style work: the brief's batch, else what a server batches from
    queued requests under load (text-embeddings-inference's default token budget)."""
    if brief.traffic.batch_size > 0:
        return brief.traffic.batch_size * shape.tokens_per_sequence
    return max(shape.tokens_per_sequence, int(a.num("default_prefill_batch_tokens")))


def prefill_batch_sequences(brief: Brief, shape: Shape, a: Assumptions) -> int:
    """Requests per forward pass that embedding sizing assumes when the brief gives no batch."""
    return max(1, _prefill_only_tokens(brief, shape, a) // max(1, shape.tokens_per_sequence))


def _speed(s: Sizing, brief: Brief, shape: Shape, a: Assumptions, n: int, memo: Memo) -> None:
    """Decode is memory-bound (bytes read per step / bandwidth) with a per-step floor, prefill compute-bound
    (2·N per token plus attention); under load the other sequences' prefills share the steps.

    `memo` keeps what depends on the brief alone (bytes read per step, attention FLOPs of a prompt), asked
    for by every GPU and every tensor-parallel width tried."""
    gpu = s.gpu
    arch = shape.arch
    mfu = a.num("mfu_prefill")
    attn_tflops = (gpu.tflops_bf16 or s.tflops) * n  # 16-bit KV: attention runs on BF16 tensor cores
    if brief.workload in ("EMBEDDING", "MEDIA_GENERATION"):
        # Prefill-only work is throughput-bound by its input tokens: every token costs 2·N FLOPs plus its
        # attention over the sequence, at the utilization a batch of this size reaches.
        tokens = _prefill_only_tokens(brief, shape, a) if brief.workload == "EMBEDDING" else (
            shape.sequences * shape.tokens_per_sequence
        )
        busy = saturation(s.tflops, tokens, arch.hidden_size, a.num("kernel_saturation_ms"))
        s.effective_tflops = s.tflops * mfu * busy
        seq = shape.input_tokens if brief.workload == "EMBEDDING" else shape.tokens_per_sequence
        per_token = 2 * shape.active_params_billion * 1e9 + compute.attention_flops(
            arch.layers, seq, arch.hidden_size, arch.window
        ) / max(1, seq)
        s.tokens_per_second = s.tflops * n * 1e12 * mfu * busy * _par_eff(gpu, n, a) / per_token
        s.step_ms = s.itl_ms = 0.0
        s.est_ttft_ms = s.est_latency_ms = 0.0
        return
    busy = saturation(
        s.tflops, shape.sequences * shape.tokens_per_sequence, arch.hidden_size, a.num("kernel_saturation_ms")
    )
    s.effective_tflops = s.tflops * mfu * busy
    c, s_in, s_out = shape.sequences, shape.input_tokens, shape.output_tokens
    if ("decode_read",) not in memo:
        memo[("decode_read",)] = (
            mem.weights_gb(shape.params_billion, shape.bytes_per_param),
            mem.kv_cache_gb(arch, shape.avg_tokens_per_sequence, c, a.num("kv_cache_bytes")),
        )
    weights, kv_read = memo[("decode_read",)]

    def attention(tokens: int) -> float:
        key = ("attention", tokens)
        if key not in memo:
            memo[key] = compute.attention_flops(arch.layers, tokens, arch.hidden_size, arch.window)
        return memo[key]

    # While one sequence decodes, the other c - 1 start new requests: their prompts are prefilled in the same
    # steps (chunked prefill), (c - 1) x input / output prompt tokens per step on average.
    prefill_per_step = (c - 1) * s_in / max(1, s_out)
    active = shape.active_params_billion * 1e9
    overhead = a.num("decode_step_floor_ms") / 1000 + _parallel_overhead_s(gpu, n, arch.layers, a)
    # Pipeline stages beyond the scale-up domain each read their weights once per micro-batch, so a token
    # still waits for the whole model to be read at one stage's bandwidth: stages add capacity, not speed.
    stages = math.ceil(n / min(n, _scale_up(gpu), MAX_TENSOR_PARALLEL))
    step = compute.step_seconds(
        weights * stages, kv_read, gpu.bandwidth_tbs * n, _mbu(gpu, a),
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


def _unit_cost(s: Sizing, brief: Brief, shape: Shape, a: Assumptions) -> None:
    acceptance = brief.economics.acceptance_rate
    unit_kind = brief.success_unit
    if unit_kind == "UNSPECIFIED":
        unit_kind = "TRAINING_RUN" if brief.workload in TRAINING_WORKLOADS else "TOKEN"
    s.unit = unit_kind
    if brief.workload in TRAINING_WORKLOADS:
        if s.train_hours > 0 and unit_kind in ("TRAINING_RUN", "CHECKPOINT"):
            s.units_per_hour = 1.0 / s.train_hours
    elif brief.workload == "MEDIA_GENERATION":
        pass  # images and video seconds per hour depend on the pipeline (steps, resolution): benchmark stage 2
    elif s.tokens_per_second > 0:
        # An embedding record is its input; a generated output is its output tokens.
        out = shape.input_tokens if brief.workload == "EMBEDDING" else shape.output_tokens
        util = brief.economics.utilization or a.num("default_utilization")
        offered = brief.traffic.requests_per_second
        capacity_rps = s.tokens_per_second * s.replicas / out
        # Offered load when the brief gives it (capacity beyond it idles and is still paid for); otherwise the
        # capacity at the expected utilization.
        served_rps = min(offered, capacity_rps) if offered > 0 else capacity_rps * util
        if unit_kind == "TOKEN":
            s.units_per_hour = served_rps * out * 3600 / 1e6
        elif unit_kind in ("RESPONSE", "TASK", "RECORD"):
            s.units_per_hour = served_rps * 3600
    if s.units_per_hour > 0 and s.usd_per_hour > 0:
        s.usd_per_unit = money.usd_per_accepted_unit(s.usd_per_hour, s.units_per_hour, acceptance)


def _ownership(s: Sizing, brief: Brief, a: Assumptions) -> None:
    e = brief.economics
    util = e.utilization or a.num("default_utilization")
    kwh = e.electricity_usd_per_kwh or a.num("electricity_usd_per_kwh")
    pue = a.num("pue")
    years = a.num("ownership_years")
    n = s.count
    s.annual_power_usd = own.annual_power_usd(s.gpu.tdp_w * n, util, kwh, pue)
    if s.purchase is None:
        return
    purchase = s.purchase.usd * n
    maintenance = a.num("maintenance_fraction_per_year") * purchase
    running = own.running_usd_per_busy_hour(s.gpu.tdp_w * n, kwh, pue, maintenance, util)
    s.running_usd_per_busy_hour = running
    s.ownership_utilization = util
    s.owned_usd_per_hour = own.owned_usd_per_hour(purchase, years, 0.0, running, util)
    if s.usd_per_hour > 0:
        s.break_even_hours = own.break_even_hours(purchase, s.usd_per_hour, running)
        if math.isfinite(s.break_even_hours):
            s.break_even_months = own.break_even_months(s.break_even_hours, util, a.num("hours_per_month"))
        else:
            s.break_even_months = math.inf


class _Request:
    """`size` for every GPU of one request, the fast way. What depends on the brief alone (the bytes a decode
    step reads, its FLOPs, a prompt's attention, the memory of one model copy at each width, the ownership
    inputs) is worked out here once; what depends on the GPU and the rules alone comes from its GpuTable.
    The formulas are `size`'s, written out over those figures with every operation in the same order, so the
    floats are the same bits. Where a figure would fail a physics or money function's own check (a hand-built
    GPU with no bandwidth, a negative price), the plain function is called instead and raises what it raises."""

    def __init__(
        self, brief: Brief, shape: Shape, a: Assumptions, c: tb.Constants, quotes: tuple[Quote, ...], day: date
    ) -> None:
        self.brief, self.shape, self.a, self.c, self.day = brief, shape, a, c, day
        self.memo: Memo = {}  # the plain functions' per-request memo (training, prefill-only speed)
        self.tier = compared_tier(brief)
        self.tiers = tier_preference(self.tier)
        self.quote_of: dict[str, Quote] = {}
        for q in quotes:
            self.quote_of.setdefault(q.gpu, q)  # the first quote for a GPU wins, as in _price
        w = brief.workload
        self.workload = w
        self.decode = w not in ("PRETRAINING", "FULL_FINETUNE", "ADAPTER_FINETUNE", "EMBEDDING", "MEDIA_GENERATION")
        self.needs: dict[tuple[int, int], mem.MemoryBreakdown] = {}  # by (n, tp)
        self.training_needs: dict[tuple[int, int], mem.MemoryBreakdown] = {}  # by (n, sequences)
        self.training_parts: dict[int, tuple[tuple[str, float], ...]] = {}  # all but the engine, by sequences
        inference = w not in ("PRETRAINING", "FULL_FINETUNE", "ADAPTER_FINETUNE")
        self.weights = mem.weights_gb(shape.params_billion, shape.bytes_per_param) if inference else 0.0
        # Every part of an inference breakdown but the weights is >= 0 when these are, so a width whose usable
        # memory is below the weights alone cannot fit and need not be worked out.
        self.weights_bound = min(c.kv_cache_bytes, c.inference_activation_peak_gb, c.engine_overhead_gb,
                                 c.media_activation_peak_gb) >= 0
        lat = brief.latency
        self.latency = lat
        self.latency_target = lat.p95_ms > 0 or lat.ttft_ms > 0
        e = brief.economics
        self.util = e.utilization or c.default_utilization
        unit = brief.success_unit
        self.unit = unit if unit != "UNSPECIFIED" else ("TRAINING_RUN" if w in TRAINING_WORKLOADS else "TOKEN")
        self.unit_tokens = shape.input_tokens if w == "EMBEDDING" else shape.output_tokens  # one unit's tokens
        self.kwh = e.electricity_usd_per_kwh or c.electricity_usd_per_kwh
        # The ownership functions' own checks, of the inputs every GPU shares.
        self.own_ok = (
            0 < self.util <= 1 and self.kwh >= 0 and c.pue >= 0 and c.ownership_years > 0 and c.hours_per_month > 0
        )
        if self.decode:
            self._decode_figures()

    def _decode_figures(self) -> None:
        shape, c = self.shape, self.c
        arch = shape.arch
        seqs, s_in, s_out = shape.sequences, shape.input_tokens, shape.output_tokens
        self.kv_read = mem.kv_cache_gb(arch, shape.avg_tokens_per_sequence, seqs, c.kv_cache_bytes)
        prefill_per_step = (seqs - 1) * s_in / max(1, s_out)
        active = shape.active_params_billion * 1e9
        self.linear_flops = 2 * active * (seqs + prefill_per_step)
        attn_in = compute.attention_flops(arch.layers, s_in, arch.hidden_size, arch.window)
        self.step_attn_flops = prefill_per_step * attn_in / max(1, s_in)
        self.layer_flops = 24.0 * (seqs * shape.tokens_per_sequence) * arch.hidden_size * arch.hidden_size
        self.floor_s = c.decode_step_floor_ms / 1000
        self.tp_layers = 2 * arch.layers
        # A prompt's prefill: linear FLOPs (2·N per token) and attention FLOPs, at the average and p95 input.
        self.prompt_avg = (2 * shape.active_params_billion * 1e9 * max(0, s_in), attn_in)
        p95_in = self.brief.traffic.p95_input_tokens or s_in
        self.prompt_p95 = None if p95_in == s_in else (
            2 * shape.active_params_billion * 1e9 * max(0, p95_in),
            compute.attention_flops(arch.layers, p95_in, arch.hidden_size, arch.window),
        )

    def size(self, gt: tb.GpuTable) -> Sizing:
        gpu = gt.gpu
        s = Sizing.blank(gpu, self.tier)
        row = gt.rent_price(self.day, self.tiers)
        quote = self.quote_of.get(gpu.id)
        if quote is not None:
            s.price, s.quote, s.usd_per_gpu_hour = row, quote, quote.usd_per_hour
            s.price_tier = quote.tier if quote.tier != UNSPECIFIED else self.tier
        else:
            s.price, s.usd_per_gpu_hour, s.price_tier = row, row.usd if row else 0.0, row.tier if row else ""
        s.purchase = gt.purchase_price(self.day)
        s.tflops = compute_tflops(gpu, self.shape.precision)
        w = self.workload
        if w in ("PRETRAINING", "FULL_FINETUNE"):
            _size_full_training(s, self.brief, self.shape, self.a, self.memo, self._training_need)
        elif w == "ADAPTER_FINETUNE":
            _size_adapter(s, self.brief, self.shape, self.a)
        else:
            self._size_inference(s, gt)
        s.capacity_gb = s.count * gpu.memory_gb
        need = s.memory.total_gb if s.memory else 0.0
        s.headroom = 1.0 - need / s.capacity_gb if s.capacity_gb > 0 else 0.0
        s.nodes = max(1, math.ceil(s.count / gt.per_node))
        s.usd_per_hour = s.usd_per_gpu_hour * s.count
        if not gpu.tflops_bf16:
            s.usd_per_tflop_hour = 0.0
        elif s.usd_per_gpu_hour >= 0 and gpu.tflops_bf16 > 0:
            s.usd_per_tflop_hour = s.usd_per_gpu_hour / gpu.tflops_bf16
        else:
            s.usd_per_tflop_hour = money.usd_per_tflop_hour(s.usd_per_gpu_hour, gpu.tflops_bf16)
        self._unit_cost(s)
        self._ownership(s)
        return s

    def _training_need(self, n: int, sequences: int) -> mem.MemoryBreakdown:
        """_full_training_need(n, sequences): of its parts only the engine overhead (per GPU) depends on n, so
        the rest is worked out once per sequence count and the engine's share appended per n."""
        key = (n, sequences)
        hit = self.training_needs.get(key)
        if hit is None:
            parts = self.training_parts.get(sequences)
            if parts is None:
                one = _full_training_need(self.shape, self.a, self.a.text("recompute_full_finetune"), 1, sequences)
                parts = self.training_parts[sequences] = one.components[:-1]  # the engine comes last
            engine = ("engine", self.c.engine_overhead_gb * max(1, n))  # full_training_memory's own product
            hit = self.training_needs[key] = mem.MemoryBreakdown((*parts, engine))
        return hit

    def _need(self, gt: tb.GpuTable, n: int) -> mem.MemoryBreakdown:
        # The GPU enters only through the tensor-parallel width its scale-up domain allows.
        key = (n, min(n, gt.tp_domain))
        hit = self.needs.get(key)
        if hit is None:
            hit = self.needs[key] = _inference_need(gt.gpu, self.brief, self.shape, self.a, n)
        return hit

    def _size_inference(self, s: Sizing, gt: tb.GpuTable) -> None:
        usable = gt.usable_gb
        sizes = gt.sizes
        n = 0
        for k in sizes:
            if self.weights_bound and self.weights > k * usable:
                continue
            if self._need(gt, k).total_gb <= k * usable:
                n = k
                break
        s.fits = n > 0
        n = n or sizes[-1]
        s.memory_count = n
        lat = self.latency
        s.latency_target = self.latency_target
        fast = self.decode and gt.gpu.bandwidth_tbs > 0 and gt.mbu > 0 and s.tflops > 0 and self.c.mfu_prefill > 0
        widen = s.latency_target and self.workload == "REALTIME_INFERENCE"
        if fast and widen:
            n = self._widen(s, gt, n)
        else:
            speed = self._decode_speed if fast else self._plain_speed
            speed(s, gt, n)
            if widen:
                # More tensor parallelism inside the fast-link domain shortens each decode step; stop at the node.
                for k in sizes:
                    if k <= n or k > gt.tp_domain:
                        continue
                    if _meets(s, lat):
                        break
                    n = k
                    speed(s, gt, n)
        if widen:
            s.meets_latency = _meets(s, lat)
        _replicate(s, n, self.workload, self.shape, self.brief.traffic.requests_per_second, self._need(gt, n))

    def _plain_speed(self, s: Sizing, gt: tb.GpuTable, n: int) -> None:
        _speed(s, self.brief, self.shape, self.a, n, self.memo)

    def _widen(self, s: Sizing, gt: tb.GpuTable, n: int) -> int:
        """_size_inference's latency search: from the width memory needs, the first wider tensor-parallel width
        inside the fast-link domain that meets the target, else the widest; `s` holds the speed at the width
        returned. A width whose latency cannot meet the target even before its prompt waits behind others (TTFT
        is at least prefill + one step, in floats too: every operation after is monotone) is passed over without
        solving its TTFT; the plain loop would have computed it only to find it too slow and move on."""
        widths = [n, *(k for k in gt.sizes if n < k <= gt.tp_domain)]
        lat = self.latency
        last = widths[-1]
        for k in widths:
            if k != last and self._too_slow(s.tflops, gt, k, lat):
                continue
            self._decode_speed(s, gt, k)
            if k == last or _meets(s, lat):
                return k
        return last  # not reached: the last width always returns

    def _too_slow(self, tflops: float, gt: tb.GpuTable, n: int, lat) -> bool:  # noqa: ANN001 - Latency
        step, linear_den, attn_den = self._step(tflops, gt, n)
        lin, att = self.prompt_p95 or self.prompt_avg  # the prompt est_ttft_ms is for
        ttft_ms = (lin / linear_den + (att / attn_den if att > 0 else 0.0) + step) * 1000
        return (lat.ttft_ms > 0 and ttft_ms > lat.ttft_ms) or (
            lat.p95_ms > 0 and ttft_ms + self.shape.output_tokens * (step * 1000) > lat.p95_ms
        )

    def _step(self, tflops: float, gt: tb.GpuTable, n: int) -> tuple[float, float, float]:
        """compute.step_seconds and _parallel_overhead_s written out: one decode step on n GPUs (seconds), and
        the denominators of linear and attention FLOPs (prefill_seconds's)."""
        gpu, width, mfu = gt.gpu, gt.widths[n], self.c.mfu_prefill
        tflops_total = tflops * n
        attn_tflops = (gpu.tflops_bf16 or tflops) * n
        linear_den = tflops_total * 1e12 * mfu
        attn_den = (attn_tflops or tflops_total) * 1e12 * mfu
        bw = gpu.bandwidth_tbs * n * 1e12 * gt.mbu
        if n <= 1:
            comm = 0.0
        else:
            comm = (self.tp_layers * width.allreduce_us / 1e6 if width.tp > 1 else 0.0) + width.pipeline_s
        overhead = self.floor_s + comm
        linear = max(self.weights * width.stages * 1e9 / bw, self.linear_flops / linear_den)
        attention = self.step_attn_flops / attn_den if self.step_attn_flops > 0 else 0.0
        return overhead + linear + self.kv_read * 1e9 / bw + attention, linear_den, attn_den

    def _decode_speed(self, s: Sizing, gt: tb.GpuTable, n: int) -> None:
        """_speed's decode branch over the request's figures."""
        c = self.c
        mfu = c.mfu_prefill
        tflops = s.tflops
        needed = tflops * 1e12 * c.kernel_saturation_ms / 1000
        busy = min(1.0, self.layer_flops / needed) if needed > 0 else 1.0
        s.effective_tflops = tflops * mfu * busy
        step, linear_den, attn_den = self._step(tflops, gt, n)
        lin, att = self.prompt_avg
        avg_prefill = lin / linear_den + (att / attn_den if att > 0 else 0.0)
        shape = self.shape
        others, s_out = shape.sequences - 1, shape.output_tokens
        ttft_avg = compute.time_to_first_token(avg_prefill, step, others, avg_prefill, s_out)
        if self.prompt_p95 is None:
            ttft = ttft_avg
        else:
            lin, att = self.prompt_p95
            p95_prefill = lin / linear_den + (att / attn_den if att > 0 else 0.0)
            ttft = compute.time_to_first_token(p95_prefill, step, others, avg_prefill, s_out)
        s.step_ms = s.itl_ms = step * 1000
        s.tokens_per_second = shape.sequences * s_out / (ttft_avg + s_out * step)
        s.est_ttft_ms = ttft * 1000
        s.est_latency_ms = s.est_ttft_ms + s_out * s.step_ms

    def _unit_cost(self, s: Sizing) -> None:
        """_unit_cost with money.usd_per_accepted_unit written out (the plain one where its checks refuse)."""
        s.unit = self.unit
        w = self.workload
        if w in TRAINING_WORKLOADS:
            if s.train_hours > 0 and self.unit in ("TRAINING_RUN", "CHECKPOINT"):
                s.units_per_hour = 1.0 / s.train_hours
        elif w == "MEDIA_GENERATION":
            pass
        elif s.tokens_per_second > 0:
            out = self.unit_tokens
            offered = self.brief.traffic.requests_per_second
            capacity_rps = s.tokens_per_second * s.replicas / out
            served_rps = min(offered, capacity_rps) if offered > 0 else capacity_rps * self.util
            if self.unit == "TOKEN":
                s.units_per_hour = served_rps * out * 3600 / 1e6
            elif self.unit in ("RESPONSE", "TASK", "RECORD"):
                s.units_per_hour = served_rps * 3600
        if s.units_per_hour > 0 and s.usd_per_hour > 0:
            acceptance = self.brief.economics.acceptance_rate
            if 0 <= acceptance <= 1:
                s.usd_per_unit = s.usd_per_hour / (s.units_per_hour * (acceptance if acceptance > 0 else 1.0))
            else:
                s.usd_per_unit = money.usd_per_accepted_unit(s.usd_per_hour, s.units_per_hour, acceptance)

    def _ownership(self, s: Sizing) -> None:
        """_ownership with the money.ownership functions written out; any input their checks would refuse
        goes to the plain version, which raises."""
        c = self.c
        n = s.count
        power_w = s.gpu.tdp_w * n
        if not (self.own_ok and power_w >= 0):
            _ownership(s, self.brief, self.a)
            return
        util, kwh, pue = self.util, self.kwh, c.pue
        s.annual_power_usd = power_w / 1000 * own.HOURS_PER_YEAR * util * kwh * pue
        if s.purchase is None:
            return
        purchase = s.purchase.usd * n
        maintenance = c.maintenance_fraction_per_year * purchase
        running = power_w / 1000 * kwh * pue + maintenance / (own.HOURS_PER_YEAR * util)
        if not (purchase >= 0 and maintenance >= 0 and running >= 0 and s.usd_per_hour >= 0):
            _ownership(s, self.brief, self.a)
            return
        years = c.ownership_years
        s.running_usd_per_busy_hour = running
        s.ownership_utilization = util
        s.owned_usd_per_hour = (purchase + years * 0.0) / (years * own.HOURS_PER_YEAR * util) + running
        if s.usd_per_hour > 0:
            margin = s.usd_per_hour - running
            s.break_even_hours = math.inf if margin <= 0 else purchase / margin
            if math.isfinite(s.break_even_hours):
                s.break_even_months = s.break_even_hours / (c.hours_per_month * util)
            else:
                s.break_even_months = math.inf
