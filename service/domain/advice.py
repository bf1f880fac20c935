"""Domain types for what the advisor answers. `api.py` maps these to the proto response one to one."""

from __future__ import annotations

from dataclasses import dataclass, field

from .accuracy import Band
from .api_offers import ApiLeg
from .offers import Offer


@dataclass(frozen=True)
class Reason:
    rule_id: str
    text: str


@dataclass(frozen=True)
class MemoryFit:
    need_gb: float  # whole configuration
    capacity_gb: float  # whole configuration (count x per-GPU memory)
    headroom: float  # 1 - need/capacity
    breakdown: tuple[tuple[str, float], ...] = ()  # (component, GB), components sum to need_gb


@dataclass(frozen=True)
class Cost:
    usd_per_hour: float  # whole configuration
    usd_per_tflop_hour: float  # per dense BF16/FP16 TFLOP-hour
    usd_per_unit: float  # per accepted unit; 0 when it cannot be computed
    unit: str  # "accepted response", "training run", ...
    price_source: str = ""  # "catalog: <source> (as of ...)" or "quote: <provider> (as of ...)"
    price_as_of: str = ""
    unit_kind: str = ""  # COST_UNIT name without prefix: TRAINING_RUN, MILLION_OUTPUT_TOKENS, RECORD, ...
    price_tier: str = ""  # brief.PRICE_TIERS: the tier of the price used
    price_tier_fallback: bool = False  # no price in the compared tier: another tier's was used


@dataclass(frozen=True)
class Ownership:
    annual_power_usd: float
    owned_usd_per_hour: float
    break_even_hours: float
    break_even_months: float
    purchase_usd: float = 0.0
    purchase_source: str = ""  # the catalog row's source: checkable, but a file name, so never in a sentence
    purchase_as_of: str = ""


@dataclass(frozen=True)
class ScoreBreakdown:
    basis: str  # usd_per_unit | usd_per_month | usd_per_million_output_tokens | usd_per_effective_tflop_hour
    cost: float  # this candidate's, on that basis
    best_cost: float  # the lowest among the ranked candidates
    cost_points: float  # 100 x best_cost / cost
    rules: tuple[tuple[str, float], ...] = ()  # (rule id, points), in firing order


@dataclass(frozen=True)
class Performance:
    """The sizing's estimates as numbers; 0 where a figure does not apply to the workload."""

    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    e2e_p95_ms: float = 0.0
    tokens_per_second_per_replica: float = 0.0
    tensor_parallel: int = 0
    replicas: int = 0
    nodes: int = 0
    training_days: float = 0.0
    gpu_hours: float = 0.0
    cost_per_run_usd: float = 0.0
    power_kw_per_node: float = 0.0
    power_kw_per_rack: float = 0.0
    racks: int = 0
    spare_nodes: int = 0
    restart_overhead_days: float = 0.0
    scale_out_gbs_per_gpu: float = 0.0
    images_per_second_per_replica: float = 0.0
    accuracy: Band | None = None  # measured error for the candidate's class (rules/accuracy/results.yaml)


@dataclass(frozen=True)
class Placement:
    """A configuration on one offer: whole instances, priced for the whole configuration."""

    offer: Offer
    instances: int
    usd_per_hour: float
    usd_per_month: float = 0.0  # the brief's month (a reserved term at 730 h), whole configuration


@dataclass(frozen=True)
class MarketSpread:
    """One GPU's price per GPU-hour across the market's offers in one tier."""

    tier: str  # brief.PRICE_TIERS name
    min_usd_per_gpu_hour: float
    median_usd_per_gpu_hour: float
    max_usd_per_gpu_hour: float
    offers: int
    providers: int


@dataclass(frozen=True)
class Candidate:
    gpu: str
    name: str
    count: int
    score: float
    memory: MemoryFit
    cost: Cost
    ownership: Ownership
    reasons: tuple[Reason, ...] = ()
    caveats: tuple[Reason, ...] = ()
    interconnect: str = ""  # what the interconnect must carry, when count > 1
    throughput: str = ""  # human-readable estimate, e.g. "1,850 output tokens/s"
    score_breakdown: ScoreBreakdown | None = None
    performance: Performance | None = None
    placements: tuple[Placement, ...] = ()  # best first; cost.usd_per_hour is the first's
    market: MarketSpread | None = None
    gpus_needed: int = 0  # GPUs the sizing needs before whole-instance rounding (count >= it)
    spare_gpus: int = 0  # GPUs rented that do no work (a fixed load on a wider instance); 0 when work scales out
    usd_per_month: float = 0.0  # the brief's month at the candidate's cost (its first placement's)


@dataclass(frozen=True)
class Exclusion:
    gpu: str
    reasons: tuple[Reason, ...]


@dataclass(frozen=True)
class Route:
    kind: str  # one of brief.ROUTE_KINDS
    rationale: tuple[Reason, ...] = ()
    provisional: bool = False  # a field the brief did not give could change the route
    depends_on: tuple[str, ...] = ()  # those fields, as brief paths


@dataclass(frozen=True)
class Warning:
    code: str
    severity: str  # INFO | WARNING | CRITICAL
    text: str
    rule_id: str
    title: str = ""  # the warning's name in the request's locale


@dataclass(frozen=True)
class Question:
    field: str  # path in the brief, e.g. "model.params_billion"
    text: str
    rule_id: str = ""
    unit: str = ""  # of a numeric answer, e.g. "tokens"
    assumed: str | int | float | bool | None = None  # what the answer assumes meanwhile (domain form: "BF16")
    priority: int = 0  # the asking rule's priority: higher changes the answer more


@dataclass(frozen=True)
class UnmetTarget:
    """A brief target no candidate meets, the candidate that comes closest and the target it would meet."""

    field: str  # brief path: latency.p95_ms, latency.ttft_ms, training.target_days, economics.budget_usd_per_hour
    target: float  # the brief's value, in the field's unit
    closest: float  # the closest candidate's figure, same unit
    gpu: str = ""  # the closest candidate's catalog id
    name: str = ""  # its display name
    count: int = 0  # its GPUs
    would_meet: float = 0.0  # the target (same unit) the closest candidate meets
    output_tokens: int = 0  # latency.p95_ms: the longest average output the closest meets the target with (0: none)


@dataclass(frozen=True)
class Metric:
    name: str
    formula: str
    rule_id: str = ""
    kind: str = ""  # brief.METRIC_KINDS, locale-independent


@dataclass(frozen=True)
class BenchmarkStage:
    name: str
    steps: tuple[str, ...]
    record: tuple[str, ...]


@dataclass(frozen=True)
class ChecklistSection:
    name: str
    items: tuple[str, ...]


@dataclass(frozen=True)
class TraceEntry:
    rule_id: str
    location: str  # file:line
    fact: str  # "brief", "candidate:h100-sxm", ...
    fired: bool
    detail: str  # for a rule that did not fire: the first failing condition and the actual value


@dataclass(frozen=True)
class RulesetRef:
    revision: str
    content_hash: str


@dataclass(frozen=True)
class ChartSeries:
    name: str  # in the request's locale
    points: tuple[tuple[float, float], ...]  # (x, y)


@dataclass(frozen=True)
class ChartMark:
    x: float
    label: str


@dataclass(frozen=True)
class Chart:
    """A picture of figures the answer already gives, as data (RecommendRequest.include_charts)."""

    kind: str  # BREAK_EVEN | COST_LATENCY (ChartKind without its prefix)
    title: str
    x_label: str
    y_label: str
    series: tuple[ChartSeries, ...] = ()
    marks: tuple[ChartMark, ...] = ()


@dataclass(frozen=True)
class Advice:
    candidates: tuple[Candidate, ...] = ()
    excluded: tuple[Exclusion, ...] = ()
    route: Route | None = None
    warnings: tuple[Warning, ...] = ()
    questions: tuple[Question, ...] = ()
    metric: Metric | None = None
    benchmark_plan: tuple[BenchmarkStage, ...] = ()
    procurement_checklist: tuple[ChecklistSection, ...] = ()
    summary: str = ""
    ruleset: RulesetRef | None = None
    trace: tuple[TraceEntry, ...] = ()
    notes: tuple[Reason, ...] = field(default_factory=tuple)  # brief-level notes (assumptions made, hedges)
    provisional: bool = False  # nothing could be sized or classified, or the route depends on a missing field
    not_shown: tuple[str, ...] = ()  # GPU ids that passed the rules but were cut by max_candidates, best first
    price_tier: str = ""  # the tier candidates are compared at
    assumed: tuple[tuple[str, str], ...] = ()  # (brief path, assumed value as printed) the sizing depends on
    unmet: tuple[UnmetTarget, ...] = ()  # targets no candidate meets, most important first
    offers_loaded: bool = False  # the rules have offer tables: a candidate without placements has none in scope
    charts: tuple[Chart, ...] = ()  # only with AdviceRequest.include_charts (decide/charts.py)
    api: ApiLeg | None = None  # the cheapest model API in scope against the first candidate (decide/api_leg.py)
