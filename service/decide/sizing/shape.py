"""What a brief implies about the model and the traffic (`Shape`), with the defaults it had to assume."""

from __future__ import annotations

from dataclasses import dataclass

from ...domain.assumptions import Assumptions
from ...domain.brief import Brief
from ...domain.models import Denoiser
from ...physics import compute, serving
from ...physics import memory as mem
from .. import tables as tb
from .engines import engine_of

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
    # MoE routing (0 = dense or unknown: every step reads every weight). shared = params every token reads.
    experts: int = 0
    experts_per_token: int = 0
    shared_params_billion: float = 0.0
    shared_estimated: bool = False  # shared_params_billion came from total and active, not from the brief
    window_layers_unknown: bool = False  # a window was given without sliding_window_layers: sized as all full
    kv_precision: str = "BF16"  # the KV cache's element type
    kv_bytes: float = 2.0  # bytes per K or V element
    kv_precision_default: bool = True  # the brief left model.kv_cache_precision unset
    kv_engine: str = ""  # the engine whose default KV precision was taken ("" = none named: 16-bit assumed)
    kv_precision_open: bool = False  # neither the engine nor the KV precision is known: the rules ask
    moe_estimated: bool = False  # active < total without an expert count: routing estimated from active / total
    denoiser: Denoiser | None = None  # image and video generation: the named model's (None = the rules' default)
    # The embedding and output matrices (part of params and active params): a prompt looks its tokens up and takes
    # logits for its last token only, so its prefill's FLOPs leave them out; decode's logits keep the output one.
    vocab_params_billion: float = 0.0

    @property
    def routed(self) -> bool:
        return self.experts > 0 and 0 < self.experts_per_token <= self.experts

    def params_read_billion(self, tokens: float) -> float:
        """Parameters a forward step over `tokens` tokens reads (MoE: shared + the routed experts touched)."""
        if not self.routed:
            if self.moe_estimated:
                return self.params_billion * serving.moe_read_fraction_unknown_experts(
                    self.active_params_billion, self.params_billion, tokens)
            return self.params_billion
        return compute.moe_params_read_billion(self.params_billion, self.shared_params_billion, self.experts,
                                               self.experts_per_token, tokens)


def shape_of(brief: Brief, a: Assumptions, arch: mem.Architecture | None = None) -> Shape | None:
    """`arch`: the architecture already resolved for this brief's model (it reads the model and the rules only), so
    a brief sized again with other traffic does not resolve it again."""
    m, t = brief.model, brief.traffic
    if m.params_billion <= 0:
        return None
    defaults: list[str] = []
    precision = m.precision
    if precision == "UNSPECIFIED":
        precision = "BF16"
        defaults.append("model.precision")
    if arch is None:
        arch = mem.resolve_architecture(
            m.params_billion, m.layers, m.kv_heads, m.head_dim, m.hidden_size, tb.bands(a), kind=m.attention,
            kv_lora_rank=m.kv_lora_rank, rope_head_dim=m.rope_head_dim, window=m.sliding_window_tokens,
            mla_default=(int(a.num("mla_kv_lora_rank")), int(a.num("mla_rope_head_dim"))),
            # A window without the layers that use it: hybrid models (Gemma 3, gpt-oss, Llama 4) window only some,
            # so the worst case for memory is that none does (a note says so and a question asks).
            window_layers=m.sliding_window_layers if m.sliding_window_layers > 0 else 0,
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
    if inp <= 0 and brief.workload == "EMBEDDING":
        # An embedding is its input: a record of a retrieval chunk's length, not half a context (a question asks).
        inp = max(1, min(context, int(a.num("embedding_default_input_tokens"))))
        defaults.append("traffic.avg_input_tokens")
    elif inp <= 0:
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
    kv_precision, kv_engine, kv_open = m.kv_cache_precision, "", False
    if kv_precision == "UNSPECIFIED":
        kv_precision, kv_engine = _default_kv_precision(brief, precision, a)
        # No engine named and the weights not known to be 16-bit or wider: whether the KV cache follows quantized
        # weights is the operator's switch, so the safe side of an OOM (16-bit) is sized, stated, and asked.
        kv_open = not kv_engine and m.precision not in _KV_AS_ACTIVATIONS and brief.workload not in _NO_KV
        if kv_open and precision not in _KV_AS_ACTIVATIONS:
            defaults.append("model.kv_cache_precision")
    unused = _UNUSED_DEFAULTS.get(brief.workload, ())
    defaults = [d for d in defaults if d not in unused]
    active = m.active_params_billion if 0 < m.active_params_billion <= m.params_billion else m.params_billion
    experts = m.experts if 0 < m.experts_per_token <= m.experts else 0
    k = m.experts_per_token if experts else 0
    shared, estimated = 0.0, False
    if experts:
        if 0 < m.shared_params_billion <= m.params_billion:
            shared = m.shared_params_billion
        else:
            shared, estimated = compute.moe_shared_params_billion(m.params_billion, active, experts, k), True
    kv_table = a.values.get("kv_cache_bytes_by_precision", {})
    kv_bytes = float(kv_table[kv_precision] if kv_precision in kv_table else a.num("kv_cache_bytes"))
    # A frozen dataclass's __init__ sets each of its 23 fields through object.__setattr__: built here as the
    # fields' dict instead (the same Shape: equal, same hash and repr), once per brief and per output length the
    # missed-target search tries.
    shape = object.__new__(Shape)
    shape.__dict__.update(
        params_billion=m.params_billion,
        active_params_billion=active,
        precision=precision,
        bytes_per_param=weight_bytes_per_param(brief.workload, precision, a),
        arch=arch,
        tokens_per_sequence=size_tokens,
        avg_tokens_per_sequence=avg_tokens,
        sequences=seqs,
        input_tokens=inp,
        output_tokens=out,
        defaults_used=tuple(defaults),
        experts=experts,
        experts_per_token=k,
        shared_params_billion=shared,
        shared_estimated=estimated,
        window_layers_unknown=m.sliding_window_tokens > 0 and m.sliding_window_layers <= 0,
        kv_precision=kv_precision,
        kv_bytes=kv_bytes,
        kv_precision_default=m.kv_cache_precision == "UNSPECIFIED",
        kv_engine=kv_engine,
        kv_precision_open=kv_open,
        moe_estimated=not experts and active < m.params_billion,
        denoiser=None,
        vocab_params_billion=m.vocab_params_billion if 0 < m.vocab_params_billion < active else 0.0,
    )
    return shape


# Weight types an engine computes in: its KV cache "auto" type is theirs; below 16 bits it is the activations' BF16.
_KV_AS_ACTIVATIONS = ("FP32", "BF16", "FP16")


def _default_kv_precision(brief: Brief, precision: str, a: Assumptions) -> tuple[str, str]:
    """The KV cache's type when the brief does not say, and the engine whose default it is ('' = none named).
    rules/assumptions.yaml `kv_cache_precision_by_engine` maps a weight precision to the KV type the named engine
    keeps by default (TensorRT-LLM's FP8/NVFP4 checkpoints: FP8); a weight precision it does not list keeps the
    activations' type (vLLM and SGLang `--kv-cache-dtype auto`)."""
    engine = engine_of(brief.toolchain)
    table = a.values.get("kv_cache_precision_by_engine", {})
    row = table.get(engine) if engine in table else table.get("none", {})
    activations = precision if precision in _KV_AS_ACTIVATIONS else "BF16"
    return str((row or {}).get(precision, activations)), engine


def weight_bytes_per_param(workload: str, precision: str, a: Assumptions) -> float:
    """A 4-bit base under adapter fine-tuning is QLoRA's NF4 with double quantization (4.127 bits), not a
    serving format's 4-bit with per-group scales."""
    if workload == "ADAPTER_FINETUNE" and precision == "INT4":
        return a.num("qlora_bytes_per_param")
    return a.bytes_per_param(precision)


# Defaults a workload never reads: noting them would claim an assumption that changed nothing.
_TRAFFIC_SHAPE = ("traffic.avg_input_tokens", "traffic.avg_output_tokens")


_KV = ("model.kv_cache_precision",)  # training, embedding and diffusion keep no KV cache
_NO_KV = ("PRETRAINING", "FULL_FINETUNE", "ADAPTER_FINETUNE", "EMBEDDING", "MEDIA_GENERATION")


_UNUSED_DEFAULTS: dict[str, tuple[str, ...]] = {
    "PRETRAINING": (*_TRAFFIC_SHAPE, "traffic.batch_size", *_KV),  # the global batch sets the micro-batch
    "FULL_FINETUNE": (*_TRAFFIC_SHAPE, *_KV),
    "ADAPTER_FINETUNE": (*_TRAFFIC_SHAPE, *_KV),
    "EMBEDDING": ("traffic.avg_output_tokens", *_KV),  # an embedding is its input
    # A diffusion pipeline is sized from media.* (steps, resolution, guidance), not from tokens.
    "MEDIA_GENERATION": ("model.context_tokens", *_TRAFFIC_SHAPE, "traffic.batch_size", *_KV),
}
