"""Domain types for what a caller asks: the workload brief, its quotes and request options.

Enum-valued fields hold the proto enum name without its prefix ("REALTIME_INFERENCE", "FP8"); the zero value is
"UNSPECIFIED". Numeric fields use 0 for "not given" (the contract's convention), so a thin brief is representable
and turns into questions rather than errors. Tri-state booleans are None when the caller did not say.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import date
from typing import Any, get_type_hints

UNSPECIFIED = "UNSPECIFIED"

WORKLOADS = (
    "PRETRAINING",
    "FULL_FINETUNE",
    "ADAPTER_FINETUNE",
    "BATCH_INFERENCE",
    "REALTIME_INFERENCE",
    "EMBEDDING",
    "MEDIA_GENERATION",
    "EVALUATION",
    "NOTEBOOK",
)
TRAINING_WORKLOADS = ("PRETRAINING", "FULL_FINETUNE", "ADAPTER_FINETUNE")
PRECISIONS = ("FP32", "BF16", "FP16", "FP8", "INT8", "INT4", "FP4")
ATTENTION_KINDS = ("MHA", "GQA", "MQA", "MLA")
RUN_CYCLES = ("ALWAYS_ON", "SCHEDULED_BATCH", "BURST", "EXPERIMENTAL")
BOUNDARIES = ("PUBLIC_CLOUD", "PRIVATE_NETWORK", "DEDICATED_CLUSTER", "ON_PREM", "DATA_RESIDENCY")
SUCCESS_UNITS = (
    "TRAINING_RUN",
    "CHECKPOINT",
    "RESPONSE",
    "TOKEN",
    "TASK",
    "IMAGE",
    "VIDEO_SECOND",
    "RECORD",
    "EVAL_SUITE",
)
DEMANDS = ("UNCERTAIN", "VOLATILE", "STEADY")
ROUTE_KINDS = (
    "RENT_ON_DEMAND",
    "RENT_MARKETPLACE",
    "RESERVE",
    "BUY",
    "MODEL_API",
    "DEDICATED_CLUSTER",
    "PRIVATE_CLOUD",
)
LOCALES = ("en", "zh-CN")
# Which market a price comes from (catalog rows say it in lower case: on_demand, marketplace, ...).
# SPOT is capacity the provider may take back (apart from MARKETPLACE: community and marketplace hosts).
PRICE_TIERS = ("ON_DEMAND", "MARKETPLACE", "RESERVED", "LIST_PURCHASE", "SPOT")
RENT_TIERS = ("ON_DEMAND", "MARKETPLACE", "RESERVED", "SPOT")
DEFAULT_PRICE_TIER = "ON_DEMAND"
# What a cost per unit is per (the API's CostUnit): a SUCCESS_UNIT, except that tokens are counted in millions.
COST_UNITS = tuple("MILLION_OUTPUT_TOKENS" if u == "TOKEN" else u for u in SUCCESS_UNITS)
METRIC_KINDS = (
    "COST_PER_TRAINING_RUN",
    "COST_PER_ACCEPTED_CHECKPOINT",
    "COST_PER_ACCEPTED_RESPONSE",
    "COST_PER_ACCEPTED_RECORD",
    "COST_PER_ACCEPTED_ASSET",
    "COST_PER_EVAL_SUITE",
    "COST_PER_DEVELOPER_HOUR",
    "COST_PER_ACCEPTED_UNIT",
)


@dataclass(frozen=True)
class Model:
    params_billion: float = 0.0
    active_params_billion: float = 0.0
    precision: str = UNSPECIFIED
    context_tokens: int = 0
    layers: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    hidden_size: int = 0
    attention: str = UNSPECIFIED  # one of ATTENTION_KINDS
    kv_lora_rank: int = 0  # MLA latent width per layer
    rope_head_dim: int = 0  # MLA decoupled RoPE key width per layer
    sliding_window_tokens: int = 0  # 0 = full attention
    name: str = ""  # a model registry id; the registry's fields fill what the brief leaves at 0
    sliding_window_layers: int = 0  # layers limited to the window; 0 = all (when a window is given)
    experts: int = 0  # MoE routed experts per layer; 0 = dense
    experts_per_token: int = 0  # MoE top-k
    shared_params_billion: float = 0.0  # MoE parameters every token reads; 0 = estimated
    kv_cache_precision: str = UNSPECIFIED  # UNSPECIFIED = the weights' precision if FP8 or wider, else BF16
    # The embedding and output matrices' parameters (vocab x hidden, twice unless tied), part of params_billion and
    # active_params_billion: not an API field, the registry fills it for a named model (0 = unknown: none left out).
    vocab_params_billion: float = 0.0


@dataclass(frozen=True)
class Traffic:
    concurrent_sessions: int = 0
    batch_size: int = 0
    avg_input_tokens: int = 0
    p95_input_tokens: int = 0
    avg_output_tokens: int = 0
    requests_per_second: float = 0.0
    requests_per_month: float = 0.0  # batch and scale-out work: the month's volume (0 = not given)
    window_hours: float = 0.0  # hours that volume must finish in (0 = economics.hours_per_month)
    cached_input_share: float = 0.0  # of input tokens billed at a model API's cached price; 0 = not given


@dataclass(frozen=True)
class PlacementPolicy:
    """Where the GPUs may be rented; empty = anywhere."""

    providers: tuple[str, ...] = ()  # allow-list, compared case-insensitively
    regions: tuple[str, ...] = ()
    countries: tuple[str, ...] = ()  # ISO 3166-1 alpha-2 in any case; "EU" = the member states
    interruptible_ok: bool = False  # the work checkpoints: spot capacity may be used


@dataclass(frozen=True)
class Latency:
    p95_ms: float = 0.0
    p99_ms: float = 0.0
    ttft_ms: float = 0.0
    no_target: bool = False  # the latency question answered "no target"


@dataclass(frozen=True)
class Training:
    tokens_billion: float = 0.0
    target_days: float = 0.0
    global_batch_tokens: int = 0  # 0 = the rules' default


@dataclass(frozen=True)
class Economics:
    hours_per_month: float = 0.0
    horizon_months: float = 0.0
    utilization: float = 0.0
    budget_usd_per_hour: float = 0.0
    electricity_usd_per_kwh: float = 0.0
    needs_hardware_control: bool | None = None
    demand: str = UNSPECIFIED
    has_platform_team: bool | None = None
    acceptance_rate: float = 0.0
    price_tier: str = UNSPECIFIED  # compare at this tier's prices; UNSPECIFIED = on-demand
    no_budget_cap: bool = False  # the budget question answered "no cap"


@dataclass(frozen=True)
class Media:
    denoising_steps: int = 0  # 0 = the rules' default
    width_px: int = 0
    height_px: int = 0
    guidance_scale: float = 0.0  # 0 = default, 1 = none, > 1 = classifier-free guidance (two passes per step)
    frames: int = 0  # video; 0 = an image


@dataclass(frozen=True)
class Parallelism:
    """The shape of one model copy the brief pins (inference); 0 = the advisor chooses."""

    tensor_parallel: int = 0
    pipeline_parallel: int = 0
    expert_parallel: int = 0


@dataclass(frozen=True)
class Brief:
    workload: str = UNSPECIFIED
    model: Model = field(default_factory=Model)
    traffic: Traffic = field(default_factory=Traffic)
    latency: Latency = field(default_factory=Latency)
    run_cycle: str = UNSPECIFIED
    boundary: str = UNSPECIFIED
    success_unit: str = UNSPECIFIED
    toolchain: tuple[str, ...] = ()
    training: Training = field(default_factory=Training)
    economics: Economics = field(default_factory=Economics)
    placement: PlacementPolicy = field(default_factory=PlacementPolicy)
    media: Media = field(default_factory=Media)
    parallelism: Parallelism = field(default_factory=Parallelism)
    gpus: tuple[str, ...] = ()  # allow-list of catalog GPU ids; empty = every GPU


# Brief fields that take an enum, by path (values without their proto prefix, as rules write them).
ENUM_FIELDS: dict[str, tuple[str, ...]] = {
    "workload": WORKLOADS,
    "model.precision": PRECISIONS,
    "model.kv_cache_precision": PRECISIONS,
    "run_cycle": RUN_CYCLES,
    "boundary": BOUNDARIES,
    "success_unit": SUCCESS_UNITS,
    "economics.demand": DEMANDS,
}


def brief_field_kind(path: str) -> str | None:
    """number, int, bool, enum, string, list or None (no such field) for a dotted path in the brief."""
    cls: Any = Brief
    hint: Any = None
    for part in path.split("."):
        hints = get_type_hints(cls) if dataclasses.is_dataclass(cls) else {}
        if part not in hints:
            return None
        hint = cls = hints[part]
    if path in ENUM_FIELDS:
        return "enum"
    if dataclasses.is_dataclass(hint):
        return None  # a group (model, traffic...), not a field an answer fills
    return {float: "number", int: "int", bool | None: "bool", str: "string", tuple[str, ...]: "list"}.get(hint)


@dataclass(frozen=True)
class Quote:
    """A caller's own price: replaces the catalog's rent price of `gpu` for this request only."""

    gpu: str
    usd_per_hour: float
    provider: str = ""
    as_of: str = ""
    tier: str = UNSPECIFIED  # UNSPECIFIED = the tier the request compares at


@dataclass(frozen=True)
class AdviceRequest:
    brief: Brief = field(default_factory=Brief)
    quotes: tuple[Quote, ...] = ()
    locale: str = "en"
    max_candidates: int = 0  # 0 = the rules' default
    include_trace: bool = False
    trace_fired_only: bool = False  # rule tests need which rules fired, not why the others did not
    as_of: date | None = None  # replay prices valid on this date; None = today
    # VIEW_SUMMARY (wire/views.py): the answer given is the summary, so what it leaves out is not made
    summary_view: bool = False
    include_charts: bool = False  # RecommendRequest.include_charts: Advice.charts is made (decide/charts.py)
