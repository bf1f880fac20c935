"""Flat facts for the rules: one `brief` fact, one `candidate` fact per GPU, then `plan` and `outcome`.

Every value a rule tests is derived here into the fact it tests (the engine must never join facts), typed as the
schema says (a string never stands in for a number), and documented, because the schema is what rule authors
see in `rules/README.md` and what `rules-check` suggests names from.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..domain.brief import (
    BOUNDARIES,
    DEMANDS,
    PRECISIONS,
    PRICE_TIERS,
    RENT_TIERS,
    ROUTE_KINDS,
    RUN_CYCLES,
    SUCCESS_UNITS,
    TRAINING_WORKLOADS,
    UNSPECIFIED,
    WORKLOADS,
    Brief,
)
from ..domain.catalog import Gpu
from ..engine.ir import Rule
from ..engine.parse import FactSchema, FieldSpec
from ..memo import IdentityMemo
from .api_leg import API_FIELDS, NO_API
from .counts import COUNT_FIELDS, count_fields
from .freshness import FRESHNESS_FIELDS
from .job_size import JOB_FIELDS, job_fields
from .route_money import MONEY_FIELDS, NO_MONEY
from .sizing.common import Sizing, compared_tier
from .sizing.shape import INFERENCE_WORKLOADS, Shape

TRI = ("YES", "NO", "UNKNOWN")


def _enum(values: tuple[str, ...], doc: str) -> FieldSpec:
    return FieldSpec("enum", doc, (UNSPECIFIED, *values))


BRIEF_FIELDS: dict[str, FieldSpec] = {
    "workload": _enum(WORKLOADS, "what the GPUs do"),
    "precision": _enum(PRECISIONS, "weight precision as given (UNSPECIFIED when not)"),
    "run_cycle": _enum(RUN_CYCLES, "how the capacity is used over time"),
    "boundary": _enum(BOUNDARIES, "operating boundary"),
    "success_unit": _enum(SUCCESS_UNITS, "what an accepted output is"),
    "demand": _enum(DEMANDS, "how predictable demand is"),
    "hardware_control": FieldSpec("enum", "topology/runtime/weights/data boundary must be ours", TRI),
    "price_tier": _enum(
        PRICE_TIERS,
        "the tier every GPU's rent is compared at: the brief's; else SPOT for interruptible work the brief lets "
        "run on spot (placement.interruptible_ok); else ON_DEMAND",
    ),
    "platform_team": FieldSpec("enum", "someone owns drivers, CUDA, serving, on-call", TRI),
    "is_training": FieldSpec("bool", "pretraining, full or adapter fine-tuning"),
    "is_inference": FieldSpec("bool", "batch/realtime inference, embeddings, evaluation or notebooks"),
    "params_billion": FieldSpec("number", "total parameters, billions (0 = not given)"),
    "active_params_billion": FieldSpec("number", "parameters used per token (MoE), billions"),
    "context_tokens": FieldSpec("int", "context window used (0 = not given)"),
    "architecture_given": FieldSpec("bool", "layers and KV heads were given: the KV cache is exact"),
    "sliding_window_tokens": FieldSpec("int", "tokens a windowed layer attends to (0 = full attention)"),
    "sliding_window_layers": FieldSpec("int", "layers that use the window (0 = not given)"),
    "media_denoising_steps": FieldSpec("int", "denoising steps per image or video (0 = not given)"),
    "media_width_px": FieldSpec("int", "output width in pixels (0 = not given)"),
    "media_model_named": FieldSpec(
        "bool", "image/video generation: the brief named a registry model, so its denoiser's architecture is known"),
    "moe_routed": FieldSpec("bool", "MoE with its routing given (experts and experts_per_token)"),
    "kv_cache_precision_assumed": FieldSpec(
        "bool", "the KV cache's precision is assumed 16-bit: a generative workload, weights not given as 16-bit or "
        "wider, no engine named, no model.kv_cache_precision"),
    "moe_routing_estimated": FieldSpec(
        "bool", "MoE (active < total parameters) without its expert count: routing estimated from active / total"),
    "experts_touched": FieldSpec(
        "number", "share of routed experts one decode step at the brief's sequences reads (1 = dense or unknown)"
    ),
    "concurrent_sessions": FieldSpec("int", "concurrent sessions (0 = not given)"),
    "batch_size": FieldSpec("int", "batch size (0 = not given)"),
    "avg_input_tokens": FieldSpec("int", "average input tokens"),
    "p95_input_tokens": FieldSpec("int", "p95 input tokens"),
    "avg_output_tokens": FieldSpec("int", "average output tokens"),
    "requests_per_second": FieldSpec(
        "number", "offered load; for batch work with a volume, that volume over its window (requests_per_month)"),
    "requests_per_month": FieldSpec("number", "batch and scale-out work: requests a month (0 = not given)"),
    "p95_ms": FieldSpec("number", "p95 latency target (0 = none)"),
    "p99_ms": FieldSpec("number", "p99 latency target (0 = none)"),
    "ttft_ms": FieldSpec("number", "time-to-first-token target (0 = none)"),
    "no_latency_target": FieldSpec("bool", "the brief answered the latency question: no target"),
    "tokens_billion": FieldSpec("number", "training tokens, billions"),
    "target_days": FieldSpec("number", "training deadline, days"),
    "hours_per_month": FieldSpec("number", "GPU hours needed per month (0 = not given)"),
    "horizon_months": FieldSpec("number", "how long the capacity is needed (0 = not given)"),
    "utilization": FieldSpec("number", "expected busy fraction (the default when not given)"),
    "utilization_given": FieldSpec("bool", "the brief gave a utilization"),
    "budget_usd_per_hour": FieldSpec("number", "cap for the whole configuration (0 = none or not given)"),
    "no_budget_cap": FieldSpec("bool", "the brief answered the budget question: no cap"),
    "acceptance_rate": FieldSpec("number", "share of outputs that pass quality filters (0 = not given)"),
    "acceptance_given": FieldSpec("bool", "the brief gave an acceptance rate"),
    "toolchain_given": FieldSpec("bool", "the brief named its toolchain"),
    "cuda_only_toolchain": FieldSpec("bool", "the toolchain has a CUDA-only part (tensorrt-llm, triton...)"),
    "quotes_given": FieldSpec("int", "how many price quotes came with the request"),
    "sized": FieldSpec("bool", "the model size is known, so GPUs could be sized"),
    "fits_any": FieldSpec("bool", "at least one GPU type can hold the work"),
    "min_gpus": FieldSpec("int", "fewest GPUs any candidate needs (0 = not sized)"),
    "lightest_need_gb": FieldSpec(
        "number", "memory one model copy needs on the GPU type that needs least, GB (0 = not sized)"
    ),
    "lightest_capacity_gb": FieldSpec(
        "number", "memory of that GPU type's largest configuration tried for one copy, GB (0 = not sized)"
    ),
    "lightest_gpus": FieldSpec("int", "GPUs in that configuration (0 = not sized)"),
    "latency_met_any": FieldSpec("bool", "some GPU type that fits meets the latency target"),
    "best_latency_ms": FieldSpec("number", "fastest estimated latency of a GPU type that fits, ms (0 = no target)"),
    "global_batch_tokens": FieldSpec("int", "training tokens per optimizer step over all GPUs (0 = not given)"),
    "countries_given": FieldSpec("bool", "the brief names the countries its GPUs may be rented in"),
    "interruptible_ok": FieldSpec("bool", "the brief says the work checkpoints and may run on spot capacity"),
    **JOB_FIELDS,
}

CANDIDATE_FIELDS: dict[str, FieldSpec] = {
    **BRIEF_FIELDS,
    "gpu": FieldSpec("string", "catalog id, e.g. h100-sxm"),
    "vendor": FieldSpec("enum", "GPU vendor", ("nvidia", "amd")),
    "gpu_class": FieldSpec(
        "enum", "datacenter, workstation or consumer part", ("datacenter", "workstation", "consumer")
    ),
    "software": FieldSpec("enum", "software stack", ("cuda", "rocm")),
    "memory_gb": FieldSpec("number", "memory per GPU, GB"),
    "bandwidth_tbs": FieldSpec("number", "memory bandwidth per GPU, TB/s"),
    "tflops_bf16": FieldSpec("number", "dense BF16/FP16 TFLOPS per GPU"),
    "fp8_native": FieldSpec("bool", "the GPU has FP8 tensor cores"),
    "fp4_native": FieldSpec("bool", "the GPU has FP4 tensor cores (NVFP4/MXFP4)"),
    "interconnect": FieldSpec("enum", "scale-up link", ("nvlink", "xgmi", "pcie", "none")),
    "fast_interconnect": FieldSpec("bool", "NVLink or xGMI"),
    "mig": FieldSpec("int", "MIG partitions (0 = none)"),
    "count": FieldSpec("int", "GPUs in the configuration"),
    "nodes": FieldSpec("int", "nodes the configuration spans"),
    "multi_gpu": FieldSpec("bool", "count > 1"),
    "multi_node": FieldSpec("bool", "nodes > 1"),
    "gpus_talk": FieldSpec("bool", "its GPUs exchange data: a model copy split over several, or training's "
                                   "data parallelism (independent copies exchange nothing)"),
    "talk_across_nodes": FieldSpec("bool", "that exchange crosses nodes: a copy wider than a node, or training "
                                           "over nodes"),
    "fits": FieldSpec("bool", "the work fits in memory at this count with the safety headroom"),
    "fits_single": FieldSpec("bool", "one GPU holds one copy of the model"),
    "split_copies": FieldSpec(
        "int", "copies of the brief's pinned parallel shape that split the sessions, none holding them all (0 = "
        "not split)"),
    "sessions_per_copy": FieldSpec("int", "sessions each of those copies holds (0 = not split)"),
    "need_gb": FieldSpec("number", "memory need of the whole configuration, GB"),
    "headroom": FieldSpec("number", "1 - need/capacity"),
    "priced": FieldSpec("bool", "a rent price (catalog or quote) is known"),
    "price_from_quote": FieldSpec("bool", "the caller's quote set the price"),
    "rent_tier": _enum(PRICE_TIERS, "the tier of this GPU's rent price (UNSPECIFIED when unpriced)"),
    "price_tier_fallback": FieldSpec(
        "bool", "no rent price in the compared tier: another tier's price stands in (not like for like)"
    ),
    "usd_per_hour": FieldSpec("number", "rent for the whole configuration, $/h"),
    "usd_per_gpu_hour": FieldSpec("number", "rent per GPU, $/h"),
    "within_budget": FieldSpec("bool", "no budget, or usd_per_hour <= budget"),
    "cost_computable": FieldSpec("bool", "cost per accepted unit could be computed"),
    "latency_target": FieldSpec("bool", "the brief sets a latency target"),
    "meets_latency": FieldSpec("bool", "estimated latency meets the target (true when there is none)"),
    "latency_near_miss": FieldSpec("bool", "every latency target missed is missed by no more than the class's "
                                           "measured error (kept, at risk)"),
    "est_latency_ms": FieldSpec("number", "estimated end-to-end latency at the average request, ms"),
    "latency_vs_best": FieldSpec("number", "est_latency_ms / best_latency_ms (1 = the fastest; 0 = no target)"),
    "break_even_months": FieldSpec("number", "months until buying beats renting (-1 = never)"),
    "train_days": FieldSpec("number", "estimated training run, days (0 = not training or no token count)"),
    "gpu_hours": FieldSpec("number", "estimated training run, GPU-hours: count x hours (0 = as train_days)"),
    "placed": FieldSpec("bool", "priced from an offer a team can rent (provider, instance shape, region, tier)"),
    "placement_tier": _enum(RENT_TIERS, "the tier of the offer it is placed on (UNSPECIFIED when not placed)"),
    "instances": FieldSpec("int", "instances rented on that offer (0 when not placed)"),
    "gpus_per_instance": FieldSpec("int", "GPUs per instance of that offer (0 when not placed)"),
    "offer_stale": FieldSpec("bool", "that offer's price is older than max_offer_age_days"),
    "has_offers": FieldSpec("bool", "the rules' offer tables hold any offer of this GPU (in any scope)"),
    "offers_loaded": FieldSpec("bool", "the rules folder has offer tables at all"),
    "gpus_needed": FieldSpec("int", "GPUs the sizing needs before whole-instance rounding (count when not placed)"),
    "spare_gpus": FieldSpec(
        "int", "GPUs the placement rents that do no work: a fixed load on a wider instance (0 when the work "
        "scales out over them as copies or data-parallel width)"
    ),
    "extra_gpus": FieldSpec("int", "GPUs rented beyond gpus_needed (whole instances): spare, or put to work"),
    "scales_out": FieldSpec(
        "bool", "more GPUs do more of the work: a training run (data parallel); inference rents the copies its load "
        "or volume needs"),
    **COUNT_FIELDS,
}

# One fact per placement scope (provider, country, tier) among the offers, with the brief's fields that decide
# where its GPUs may be rented. Rules with `fact: offer` exclude scopes (rules/placement.yaml).
OFFER_FIELDS: dict[str, FieldSpec] = {
    "workload": _enum(WORKLOADS, "what the GPUs do"),
    "run_cycle": _enum(RUN_CYCLES, "how the capacity is used over time"),
    "boundary": _enum(BOUNDARIES, "operating boundary"),
    "is_training": FieldSpec("bool", "pretraining, full or adapter fine-tuning"),
    "latency_target": FieldSpec("bool", "the brief sets a latency target"),
    "interruptible_ok": FieldSpec("bool", "the brief says the work checkpoints and may run on spot capacity"),
    "provider": FieldSpec("string", "the offer's provider, as the offer tables name it"),
    "country": FieldSpec("string", "ISO 3166-1 alpha-2 of the offer's region ('' when not known)"),
    "country_known": FieldSpec("bool", "the offer's country is known"),
    "in_eu": FieldSpec("bool", "the offer's country is an EU member state"),
    "tier": _enum(RENT_TIERS, "the offer's tier: ON_DEMAND, RESERVED, SPOT (can be taken back) or MARKETPLACE"),
}

PLAN_FIELDS: dict[str, FieldSpec] = {
    **BRIEF_FIELDS,
    "candidates": FieldSpec("int", "how many GPU configurations survived the rules"),
    "top_gpu": FieldSpec("string", "first candidate's GPU id ('' when none)"),
    "top_count": FieldSpec("int", "first candidate's GPU count"),
    "top_nodes": FieldSpec("int", "nodes the first candidate spans"),
    "top_multi_gpu": FieldSpec("bool", "first candidate uses more than one GPU"),
    "top_multi_node": FieldSpec("bool", "first candidate spans nodes"),
    "top_fast_interconnect": FieldSpec("bool", "first candidate has NVLink/xGMI"),
    "top_gpus_talk": FieldSpec("bool", "first candidate's GPUs exchange data (gpus_talk)"),
    "top_talk_across_nodes": FieldSpec("bool", "first candidate's GPUs exchange data across nodes (talk_across_nodes)"),
    "top_headroom": FieldSpec("number", "first candidate's memory headroom"),
    "top_usd_per_hour": FieldSpec("number", "first candidate's $/h"),
    "top_break_even_months": FieldSpec("number", "first candidate's break-even months (-1 = never)"),
    "break_even_within_horizon": FieldSpec("bool", "buying pays back within horizon_months"),
    "monthly_usd": FieldSpec("number", "first candidate's rent for hours_per_month"),
    "api_comparable": FieldSpec("bool", "a model API could do this work (inference-like, no hardware control)"),
    "top_usd_per_million_tokens": FieldSpec(
        "number", "first candidate's $ per 1M output tokens at the expected utilization (-1 = n/a)"
    ),
    **API_FIELDS,  # the model-API leg (decide/api_leg.py)
    "top_train_days": FieldSpec("number", "first candidate's estimated training run, days (0 = not training)"),
    "top_train_hours": FieldSpec("number", "first candidate's estimated training run, hours (0 = not training)"),
    "top_gpu_hours": FieldSpec("number", "first candidate's estimated training run, GPU-hours (0 = not training)"),
    "long_run": FieldSpec(
        "bool", "the first candidate's run takes longer than long_training_run_days (assumptions) or the horizon"
    ),
    "fit_days": FieldSpec(
        "number", "days the run should fit in: the brief's horizon_months in days, else long_training_run_days"
    ),
    "top_count_to_fit": FieldSpec(
        "int", "GPUs of the first candidate's type that finish the run within fit_days (0 = not training)"
    ),
    **FRESHNESS_FIELDS,
    "placed": FieldSpec(
        "bool", "the first candidate is priced on an offer in the brief's scope (provider, shape, region, tier) "
        "or on the caller's quote"
    ),
    "offers_loaded": FieldSpec("bool", "the rules folder has offer tables at all"),
    "placed_candidates": FieldSpec("int", "how many surviving candidates an offer in the brief's scope prices"),
    **MONEY_FIELDS,  # the first pick's months by tier, the term's saving, buy break-even (decide/route_money.py)
}

OUTCOME_FIELDS: dict[str, FieldSpec] = {
    **PLAN_FIELDS,
    "route": _enum(ROUTE_KINDS, "the chosen route"),
    "self_run": FieldSpec("bool", "the route runs our own GPUs (anything but MODEL_API)"),
    "commitment": FieldSpec("bool", "the route commits money for months (BUY, RESERVE, DEDICATED_CLUSTER)"),
    "rent_route": FieldSpec(
        "bool", "the route takes capacity from providers (every route but BUY): candidates no offer in the "
        "brief's scope prices rank after every placed one"
    ),
}

SCHEMA: FactSchema = {
    "brief": BRIEF_FIELDS,
    "candidate": CANDIDATE_FIELDS,
    "plan": PLAN_FIELDS,
    "outcome": OUTCOME_FIELDS,
    "offer": OFFER_FIELDS,
}

CUDA_ONLY_TOOLS = ("tensorrt-llm", "tensorrt", "triton", "cuda", "flash-attention-3")


API_WORKLOADS = ("BATCH_INFERENCE", "REALTIME_INFERENCE", "EMBEDDING", "MEDIA_GENERATION", "EVALUATION")


def api_comparable(workload: str, hardware_control: str) -> bool:
    """A model API could do this work: inference-like, and the brief does not need to control the hardware."""
    return workload in API_WORKLOADS and hardware_control != "YES"


def _tri(v: bool | None) -> str:
    return "UNKNOWN" if v is None else ("YES" if v else "NO")


def brief_fact(
    brief: Brief, default_utilization: float, shape: Shape | None, sizings: list[Sizing], quotes: int,
    small_job: tuple[float, float] = (0.0, 0.0),
) -> dict[str, Any]:
    """`small_job`: the assumptions' small_job_gpu_hours and small_job_max_gpus (zeros: no job is small)."""
    m, t, lat, tr, e = brief.model, brief.traffic, brief.latency, brief.training, brief.economics
    tools = [x.strip().lower() for x in brief.toolchain]
    fitting = [s for s in sizings if s.fits]
    return {
        "id": "brief",
        "workload": brief.workload,
        "precision": m.precision,
        "run_cycle": brief.run_cycle,
        "boundary": brief.boundary,
        "success_unit": brief.success_unit,
        "demand": e.demand,
        "hardware_control": _tri(e.needs_hardware_control),
        "price_tier": compared_tier(brief),
        "platform_team": _tri(e.has_platform_team),
        "is_training": brief.workload in TRAINING_WORKLOADS,
        "is_inference": brief.workload in INFERENCE_WORKLOADS,
        "params_billion": float(m.params_billion),
        "active_params_billion": float(m.active_params_billion or m.params_billion),
        "context_tokens": int(m.context_tokens),
        "architecture_given": bool(shape and shape.arch.exact),
        "sliding_window_tokens": int(m.sliding_window_tokens),
        "sliding_window_layers": int(m.sliding_window_layers),
        "media_denoising_steps": int(brief.media.denoising_steps),
        "media_width_px": int(brief.media.width_px),
        "media_model_named": bool(shape and shape.denoiser is not None),
        "moe_routed": bool(shape and shape.routed),
        "kv_cache_precision_assumed": bool(shape and shape.kv_precision_open),
        "moe_routing_estimated": bool(shape and shape.moe_estimated),
        "experts_touched": round(_experts_touched(shape), 4),
        "concurrent_sessions": int(t.concurrent_sessions),
        "batch_size": int(t.batch_size),
        "avg_input_tokens": int(t.avg_input_tokens),
        "p95_input_tokens": int(t.p95_input_tokens),
        "avg_output_tokens": int(t.avg_output_tokens),
        "requests_per_second": float(t.requests_per_second),
        "requests_per_month": float(t.requests_per_month),
        "p95_ms": float(lat.p95_ms),
        "p99_ms": float(lat.p99_ms),
        "ttft_ms": float(lat.ttft_ms),
        "no_latency_target": bool(lat.no_target),
        "tokens_billion": float(tr.tokens_billion),
        "target_days": float(tr.target_days),
        "hours_per_month": float(e.hours_per_month),
        "horizon_months": float(e.horizon_months),
        "utilization": float(e.utilization or default_utilization),
        "utilization_given": e.utilization > 0,
        "budget_usd_per_hour": float(e.budget_usd_per_hour),
        "no_budget_cap": bool(e.no_budget_cap),
        "acceptance_rate": float(e.acceptance_rate),
        "acceptance_given": e.acceptance_rate > 0,
        "toolchain_given": bool(tools),
        "cuda_only_toolchain": any(t in CUDA_ONLY_TOOLS for t in tools),
        "quotes_given": quotes,
        "sized": shape is not None,
        "fits_any": bool(fitting),
        "min_gpus": min((s.count for s in fitting), default=0),
        **_lightest(sizings),
        "latency_met_any": any(s.latency_target and s.meets_latency for s in fitting),
        "best_latency_ms": round(
            min((s.est_latency_ms for s in fitting if s.latency_target and s.est_latency_ms > 0), default=0.0), 1
        ),
        "global_batch_tokens": int(tr.global_batch_tokens),
        "countries_given": bool(brief.placement.countries),
        "interruptible_ok": brief.placement.interruptible_ok,
        **job_fields(brief, sizings, *small_job),
    }


def _experts_touched(shape: Shape | None) -> float:
    if shape is not None and shape.moe_estimated:
        return shape.params_read_billion(max(1, shape.sequences)) / shape.params_billion
    if shape is None or not shape.routed:
        return 1.0
    routed = shape.params_billion - shape.shared_params_billion
    if routed <= 0:
        return 1.0
    return (shape.params_read_billion(max(1, shape.sequences)) - shape.shared_params_billion) / routed


def _lightest(sizings: list[Sizing]) -> dict[str, Any]:
    """The configuration of one model copy that comes closest to fitting (least need over capacity): what an
    answer in which nothing fits says it would take."""
    best: tuple[float, float, int] | None = None
    for s in sizings:
        if s.memory is None or s.capacity_gb <= 0:
            continue
        copies = max(1, s.replicas)
        need, capacity = s.memory.total_gb / copies, s.capacity_gb / copies
        if best is None or need / capacity < best[0] / best[1]:
            best = (need, capacity, max(1, s.count // copies))
    if best is None:
        return {"lightest_need_gb": 0.0, "lightest_capacity_gb": 0.0, "lightest_gpus": 0}
    return {"lightest_need_gb": round(best[0], 1), "lightest_capacity_gb": round(best[1], 1),
            "lightest_gpus": best[2]}


def _finite(x: float, never: float = -1.0) -> float:
    return float(x) if math.isfinite(x) else never


def _gpu_fields(g: Gpu) -> dict[str, Any]:
    """A candidate's fields that are the catalog's (the same for every request while the rules serve)."""
    return {
        "id": f"candidate:{g.id}",
        "gpu": g.id,
        "vendor": g.vendor,
        "gpu_class": g.gpu_class,
        "software": g.software,
        "memory_gb": float(g.memory_gb),
        "bandwidth_tbs": float(g.bandwidth_tbs),
        "tflops_bf16": float(g.tflops_bf16),
        "fp8_native": g.tflops_fp8 > 0,
        "fp4_native": g.tflops_fp4 > 0,
        "interconnect": g.interconnect_kind,
        "fast_interconnect": g.fast_interconnect,
        "mig": int(g.mig),
    }


_gpu_fields_of: IdentityMemo[Gpu, dict[str, Any]] = IdentityMemo(_gpu_fields, limit=1024)


# Candidate fields that only a candidate's messages read while no candidate rule tests them (`fills_later`, asked
# per rules version by the advisor): rounded only for the ~10 candidates of an answer whose texts are said.
SHOWN_ONLY = ("need_gb", "usd_per_hour", "usd_per_gpu_hour", "est_latency_ms", "break_even_months", "train_days",
              "gpu_hours")


def tests_shown_only(rules: Sequence[Rule]) -> bool:
    """Some rule tests a SHOWN_ONLY field: a candidate's fact then holds them all from the start."""
    return any(cond.field in SHOWN_ONLY for rule in rules for branch in rule.branches for cond in branch)


# Whether the candidate rules (a program's rule tuple, by identity) leave the SHOWN_ONLY fields for later.
fills_later: IdentityMemo[tuple[Rule, ...], bool] = IdentityMemo(lambda rules: not tests_shown_only(rules), limit=8)


_SILENT = {"gpus_talk": False, "talk_across_nodes": False}


def _talk(s: Sizing, training: bool) -> dict[str, bool]:
    """Whether the configuration's GPUs exchange data, and across nodes (issue 37: independent image copies on two
    nodes exchange nothing, so no interconnect warning applies to them)."""
    per_node = s.gpu.gpus_per_node if s.gpu.gpus_per_node > 0 else 1
    return {"gpus_talk": s.count > 1 and (training or s.per_replica > 1),
            "talk_across_nodes": s.nodes > 1 and (training or s.per_replica > per_node)}


def candidate_fact(base: dict[str, Any], s: Sizing, later: bool = False) -> dict[str, Any]:
    """`later`: the SHOWN_ONLY fields hold None, in their places, until `shown_fields` fills them in."""
    budget = base["budget_usd_per_hour"]
    count, fits, placement = s.count, s.fits, s.placement
    best_ms = base["best_latency_ms"]
    fact = {
        **base,
        **_gpu_fields_of(s.gpu),  # "id" replaces the brief's in place: the keys keep the schema's order
        "count": int(count),
        "nodes": int(s.nodes),
        "multi_gpu": count > 1,
        "multi_node": s.nodes > 1,
        **_talk(s, base["is_training"]),
        "fits": bool(fits),
        "fits_single": s.memory_count == 1 and fits,
        "split_copies": int(s.split_copies),
        "sessions_per_copy": int(s.sessions_per_copy),
        "need_gb": None,
        "headroom": round(s.headroom, 4),
        "priced": s.usd_per_gpu_hour > 0,
        "price_from_quote": s.price_from_quote,
        "rent_tier": s.price_tier or UNSPECIFIED,
        "price_tier_fallback": s.price_tier_fallback,
        "usd_per_hour": None,
        "usd_per_gpu_hour": None,
        "within_budget": budget <= 0 or s.usd_per_hour <= budget,
        "cost_computable": s.usd_per_unit > 0,
        "latency_target": s.latency_target,
        "meets_latency": bool(s.meets_latency),
        "latency_near_miss": False,  # set with the class's measured error (decide/accuracy.mark_near_misses)
        "est_latency_ms": None,
        "latency_vs_best": round(s.est_latency_ms / best_ms, 3) if s.latency_target and best_ms > 0 else 0.0,
        "break_even_months": None,
        "train_days": None,
        "gpu_hours": None,
        "placed": placement is not None,
        "placement_tier": placement.offer_tier if placement else UNSPECIFIED,
        "instances": placement.instances if placement else 0,
        "gpus_per_instance": placement.offer.gpus_per_instance if placement else 0,
        "offer_stale": s.offer_stale,
        "has_offers": s.has_offers,
        "offers_loaded": s.offers_loaded,
        "gpus_needed": int(s.gpus_needed or count),
        "spare_gpus": int(s.spare_gpus),
        "extra_gpus": int(count - (s.gpus_needed or count)),
        "scales_out": scales_out_of(base),
        **count_fields(s),
    }
    if not later:
        fact.update(shown_fields(s))
    return fact


def shown_fields(s: Sizing) -> dict[str, Any]:
    """A candidate fact's SHOWN_ONLY fields. A zero is left as it is rather than rounded (round(0.0, n) is 0.0, and
    -0.0 stays -0.0): a training figure of an inference brief is zero, and round() costs as much as a field."""
    usd_per_hour, latency_ms, train_hours = s.usd_per_hour, s.est_latency_ms, s.train_hours
    train_days, gpu_hours = train_hours / 24, s.gpu_hours
    return {
        "need_gb": round(s.memory.total_gb if s.memory else 0.0, 3),
        "usd_per_hour": round(usd_per_hour, 4) if usd_per_hour else usd_per_hour,
        "usd_per_gpu_hour": round(s.usd_per_gpu_hour, 4),
        "est_latency_ms": round(latency_ms, 1) if latency_ms else latency_ms,
        "break_even_months": round(_finite(s.break_even_months), 2) if s.break_even_months else -1.0,
        "train_days": round(train_days, 2) if train_days else train_days,
        "gpu_hours": round(gpu_hours, 1) if gpu_hours else gpu_hours,
    }


@dataclass(frozen=True)
class RunFit:
    """The days a training run should fit in (the brief's horizon, else the rules' limit) and the GPUs of the top
    candidate's type that finish it in them."""

    days: float
    count: int


def gpu_usd_per_million_output_tokens(top: Sizing | None, utilization: float) -> float:
    """What the top configuration costs per million output tokens at the expected utilization (-1 = n/a)."""
    if top is None or top.tokens_per_second <= 0 or top.usd_per_hour <= 0:
        return -1.0
    produced = top.tokens_per_second * top.replicas * 3600 * utilization
    return top.usd_per_hour / produced * 1e6


def plan_fact(
    base: dict[str, Any],
    top: Sizing | None,
    candidates: int,
    hours_per_month: float,
    fit: RunFit | None = None,
    placed: int = 0,
) -> dict[str, Any]:
    """`fit`: how long a training run may take and what the top candidate's type needs to finish in it. The
    model-API fields start empty (NO_API): the advisor prices the leg (decide/api_leg.py) and fills them in."""
    horizon = base["horizon_months"]
    be = _finite(top.break_even_months) if top and top.break_even_months else -1.0
    # Images are not priced per token: no token comparison with a model API for media generation.
    media = base["workload"] == "MEDIA_GENERATION"
    gpu_per_m = -1.0 if media else gpu_usd_per_million_output_tokens(top, base["utilization"])
    return {
        **base,
        "id": "plan",
        "candidates": candidates,
        "top_gpu": top.gpu.id if top else "",
        "top_count": top.count if top else 0,
        "top_nodes": top.nodes if top else 0,
        "top_multi_gpu": bool(top and top.count > 1),
        "top_multi_node": bool(top and top.nodes > 1),
        "top_fast_interconnect": bool(top and top.gpu.fast_interconnect),
        **{f"top_{k}": v for k, v in (_talk(top, base["is_training"]) if top else _SILENT).items()},
        "top_headroom": round(top.headroom, 4) if top else 0.0,
        "top_usd_per_hour": round(top.usd_per_hour, 4) if top else 0.0,
        "top_break_even_months": round(be, 2),
        "break_even_within_horizon": be >= 0 and horizon > 0 and be <= horizon,
        "monthly_usd": round(top.usd_per_hour * hours_per_month, 2) if top else 0.0,
        "api_comparable": api_comparable(base["workload"], base["hardware_control"]),
        "top_usd_per_million_tokens": round(gpu_per_m, 4),
        **NO_API,
        "top_train_days": round(top.train_hours / 24, 2) if top else 0.0,
        "top_train_hours": round(top.train_hours, 1) if top else 0.0,
        "top_gpu_hours": round(top.gpu_hours, 1) if top else 0.0,
        "long_run": bool(fit and top and top.train_hours / 24 > fit.days),
        "fit_days": round(fit.days, 1) if fit else 0.0,
        "top_count_to_fit": fit.count if fit else 0,
        **dict.fromkeys(FRESHNESS_FIELDS, 0),  # advisor._route fills these in (decide/freshness.py)
        "placed": bool(top and (top.placement is not None or top.quote is not None)),
        "offers_loaded": bool(top and top.offers_loaded),
        "placed_candidates": placed,
        **NO_MONEY,  # advisor._plan_route fills these in for the first pick (decide/route_money.py)
    }


def scales_out_of(base: dict[str, Any]) -> bool:
    """The brief fact's view of placement.scales_out: a training run."""
    return bool(base["is_training"])


def outcome_fact(plan: dict[str, Any], route: str) -> dict[str, Any]:
    return {
        **plan,
        "id": "outcome",
        "route": route,
        "self_run": route != "MODEL_API",
        "commitment": route in ("BUY", "RESERVE", "DEDICATED_CLUSTER"),
        "rent_route": route not in OWN_ROUTES,
    }


OWN_ROUTES = ("BUY",)  # the routes that take no capacity from a provider's offers
