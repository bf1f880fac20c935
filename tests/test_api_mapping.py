"""proto ⇄ domain without a server: a full brief survives the round trip, enum names lose exactly their
prefix, optional bools keep "not said" apart from false, and every Advice field reaches the response."""

from __future__ import annotations

from datetime import date

import pytest
from google.protobuf.json_format import ParseDict
from google.protobuf.message import Message

from service.domain import advice as A
from service.domain import brief as B
from service.domain.catalog import Gpu, Price
from service.wire.api import (
    SERVICE_NAME,
    advice_to_proto,
    enum_name,
    enum_number,
    gpu_to_proto,
    pb,
    request_from_proto,
    request_to_proto,
    response_to_dict,
)

FULL_BRIEF = {
    "workload": "WORKLOAD_TYPE_REALTIME_INFERENCE",
    "model": {"params_billion": 70, "active_params_billion": 12.5, "precision": "PRECISION_FP8",
              "context_tokens": 32768, "layers": 80, "kv_heads": 8, "head_dim": 128, "hidden_size": 8192,
              "attention": "ATTENTION_KIND_GQA", "kv_lora_rank": 512, "rope_head_dim": 64,
              "sliding_window_tokens": 4096, "name": "mixtral-8x7b", "sliding_window_layers": 16,
              "experts": 8, "experts_per_token": 2, "shared_params_billion": 1.6,
              "kv_cache_precision": "PRECISION_FP8"},
    "traffic": {"concurrent_sessions": 64, "batch_size": 16, "avg_input_tokens": 2000,
                "p95_input_tokens": 9000, "avg_output_tokens": 400, "requests_per_second": 7.5,
                "requests_per_month": 2.5e6, "window_hours": 200, "cached_input_share": 0.25},
    # The "none" answers are set beside targets only to map every field (validate.py refuses them together).
    "latency": {"p95_ms": 2000, "p99_ms": 3500, "ttft_ms": 400, "no_latency_target": True},
    "run_cycle": "RUN_CYCLE_ALWAYS_ON",
    "boundary": "BOUNDARY_DATA_RESIDENCY",
    "success_unit": "SUCCESS_UNIT_TOKEN",
    "toolchain": ["vllm", "kubernetes"],
    "training": {"tokens_billion": 1.5, "target_days": 3, "global_batch_tokens": 4194304},
    "economics": {"hours_per_month": 730, "horizon_months": 24, "utilization": 0.65,
                  "budget_usd_per_hour": 80, "no_budget_cap": True, "electricity_usd_per_kwh": 0.12,
                  "needs_hardware_control": False,
                  "demand": "DEMAND_STEADY", "has_platform_team": True, "acceptance_rate": 0.93,
                  "price_tier": "PRICE_TIER_MARKETPLACE"},
    "placement": {"providers": ["aws", "Lambda"], "regions": ["eu-central-1"], "countries": ["EU", "ch"],
                  "interruptible_ok": True},
    "media": {"denoising_steps": 30, "width_px": 1344, "height_px": 768, "guidance_scale": 5.5, "frames": 121},
    "parallelism": {"tensor_parallel": 4, "pipeline_parallel": 2, "expert_parallel": 8},
    "gpus": ["h100-sxm", "h200"],
}
FULL_REQUEST = {
    "brief": FULL_BRIEF,
    "quotes": [{"gpu": "h200", "usd_per_hour": 3.1, "provider": "acme", "as_of": "2026-11-01",
                "tier": "PRICE_TIER_RESERVED"}],
    "locale": "zh-CN",
    "max_candidates": 7,
    "include_trace": True,
    "as_of": "2026-06-30",
    "view": "VIEW_FULL",  # the reply's shape: wire/views.py, not the domain request
    "include_charts": True,
}

# proto enum → the domain's tuple of names (brief.py); the two must never drift apart.
ENUMS = {
    "WorkloadType": B.WORKLOADS, "Precision": B.PRECISIONS, "RunCycle": B.RUN_CYCLES,
    "Boundary": B.BOUNDARIES, "SuccessUnit": B.SUCCESS_UNITS, "Demand": B.DEMANDS, "RouteKind": B.ROUTE_KINDS,
    "Severity": ("INFO", "WARNING", "CRITICAL"), "PriceTier": B.PRICE_TIERS, "CostUnit": B.COST_UNITS,
    "MetricKind": B.METRIC_KINDS,
}


def test_full_request_to_domain():
    r = request_from_proto(ParseDict(FULL_REQUEST, pb.RecommendRequest()))
    b = r.brief
    assert b.workload == "REALTIME_INFERENCE" and b.run_cycle == "ALWAYS_ON"
    assert b.boundary == "DATA_RESIDENCY" and b.success_unit == "TOKEN"
    assert b.model == B.Model(70, 12.5, "FP8", 32768, 80, 8, 128, 8192, "GQA", 512, 64, 4096, "mixtral-8x7b", 16, 8, 2,
                              1.6, "FP8")
    assert b.parallelism == B.Parallelism(4, 2, 8) and b.gpus == ("h100-sxm", "h200")
    assert b.traffic == B.Traffic(64, 16, 2000, 9000, 400, 7.5, 2.5e6, 200, 0.25)
    assert b.latency == B.Latency(2000, 3500, 400, True)
    assert b.training == B.Training(1.5, 3, 4194304)
    assert b.media == B.Media(30, 1344, 768, 5.5, 121)
    assert b.toolchain == ("vllm", "kubernetes")
    e = b.economics
    assert (e.hours_per_month, e.horizon_months, e.utilization, e.budget_usd_per_hour) == (730, 24, 0.65, 80)
    assert e.no_budget_cap is True and r.brief.latency.no_target is True
    assert (e.electricity_usd_per_kwh, e.demand, e.acceptance_rate) == (0.12, "STEADY", 0.93)
    assert e.needs_hardware_control is False and e.has_platform_team is True
    assert e.price_tier == "MARKETPLACE"
    assert r.quotes == (B.Quote("h200", 3.1, "acme", "2026-11-01", "RESERVED"),)
    assert b.placement == B.PlacementPolicy(("aws", "Lambda"), ("eu-central-1",), ("EU", "ch"), True)
    assert (r.locale, r.max_candidates, r.include_trace, r.as_of) == ("zh-CN", 7, True, date(2026, 6, 30))
    assert r.include_charts is True
    # Integers stay integers: the engine's facts are typed.
    assert isinstance(b.model.context_tokens, int) and isinstance(b.traffic.concurrent_sessions, int)


def test_round_trip_proto_domain_proto():
    proto = ParseDict(FULL_REQUEST, pb.RecommendRequest())
    again = request_to_proto(request_from_proto(proto))
    proto.ClearField("view")  # how much of the reply to send (wire/views.py): not part of the domain's request
    assert again == proto


def _unset_fields(msg: Message, prefix: str) -> list[str]:
    out = []
    for fd in msg.DESCRIPTOR.fields:
        path = f"{prefix}{fd.name}"
        if fd.type == fd.TYPE_MESSAGE and not fd.is_repeated:
            out += _unset_fields(getattr(msg, fd.name), path + ".")
        elif fd.is_repeated:
            out += [] if len(getattr(msg, fd.name)) else [path]
        elif not msg.HasField(fd.name) if fd.has_presence else not getattr(msg, fd.name):
            out.append(path)
    return out


def test_the_full_request_sets_every_field():
    """A field added to the proto but not to this test (and so maybe not to api.py) fails here."""
    assert _unset_fields(ParseDict(FULL_REQUEST, pb.RecommendRequest()), "") == []


def test_round_trip_domain_proto_domain():
    domain = request_from_proto(ParseDict(FULL_REQUEST, pb.RecommendRequest()))
    assert request_from_proto(request_to_proto(domain)) == domain


@pytest.mark.parametrize("value", [None, False, True])
@pytest.mark.parametrize("field", ["needs_hardware_control", "has_platform_team"])
def test_optional_bools_keep_missing_apart_from_false(field: str, value: bool | None):
    proto = pb.RecommendRequest()
    proto.brief.workload = pb.WORKLOAD_TYPE_BATCH_INFERENCE
    if value is not None:
        setattr(proto.brief.economics, field, value)
    domain = request_from_proto(proto)
    assert getattr(domain.brief.economics, field) is value
    back = request_to_proto(domain)
    assert back.brief.economics.HasField(field) is (value is not None)
    # The wire form too: an explicit false is sent, a missing one is not.
    decoded = pb.RecommendRequest.FromString(proto.SerializeToString())
    assert decoded.brief.economics.HasField(field) is (value is not None)


def test_empty_request_is_a_thin_brief_not_an_error():
    r = request_from_proto(pb.RecommendRequest())
    assert r.brief == B.Brief() and r.locale == "en" and r.as_of is None and r.quotes == ()


@pytest.mark.parametrize("enum", sorted(ENUMS))
def test_enum_names_strip_exactly_the_prefix(enum: str):
    desc = pb.DESCRIPTOR.enum_types_by_name[enum]
    assert desc.values_by_number[0].name.endswith("_UNSPECIFIED")
    assert enum_name(enum, 0) == "UNSPECIFIED" and enum_number(enum, "UNSPECIFIED") == 0
    names = []
    for value in desc.values:
        if value.number == 0:
            continue
        name = enum_name(enum, value.number)
        assert value.name.endswith("_" + name) and "_" + name != value.name
        assert enum_number(enum, name) == value.number
        names.append(name)
    assert tuple(names) == tuple(ENUMS[enum]), f"{enum} and the domain's names differ"


def test_examples_of_enum_mapping():
    assert enum_name("WorkloadType", pb.WORKLOAD_TYPE_REALTIME_INFERENCE) == "REALTIME_INFERENCE"
    assert enum_name("SuccessUnit", pb.SUCCESS_UNIT_VIDEO_SECOND) == "VIDEO_SECOND"
    assert enum_number("RouteKind", "RENT_MARKETPLACE") == pb.ROUTE_KIND_RENT_MARKETPLACE
    assert enum_number("Severity", "CRITICAL") == pb.SEVERITY_CRITICAL
    assert enum_name("WorkloadType", 999) == "UNSPECIFIED"  # validate.py rejects it before mapping
    assert enum_number("RouteKind", "NOT_A_ROUTE") == 0
    assert SERVICE_NAME == "gpuadvisor.v1.GpuAdvisor"


def _advice() -> A.Advice:
    r = A.Reason
    cand = A.Candidate(
        gpu="h100-sxm", name="NVIDIA H100 SXM5 80GB", count=2, score=91.5,
        memory=A.MemoryFit(need_gb=120.0, capacity_gb=160.0, headroom=0.25,
                           breakdown=(("weights", 70.0), ("kv_cache", 50.0))),
        cost=A.Cost(usd_per_hour=6.3, usd_per_tflop_hour=0.0032, usd_per_unit=0.0021,
                    unit="accepted response", price_source="catalog: seed", price_as_of="2025-12-01",
                    unit_kind="RESPONSE", price_tier="MARKETPLACE", price_tier_fallback=True),
        ownership=A.Ownership(annual_power_usd=2100.0, owned_usd_per_hour=2.2, break_even_hours=8000.0,
                              break_even_months=-1.0, purchase_usd=50000.0),
        reasons=(r("matrix.x", "fits"),), caveats=(r("caveat.y", "watch PCIe"),),
        interconnect="NVLink 900 GB/s", throughput="1,850 output tokens/s",
    )
    return A.Advice(
        candidates=(cand,),
        excluded=(A.Exclusion("rtx-4090", (r("eligibility.z", "too small"),)),),
        route=A.Route("RESERVE", (r("routing.reserve", "steady"),), True, ("economics.demand",)),
        warnings=(A.Warning("MISTAKE_HOURLY_RATE", "CRITICAL", "by $/h", "mistake.hourly", "Choosing by $/h"),),
        questions=(A.Question("model.params_billion", "how big?", "ask.params"),
                   A.Question("model.precision", "which?", "ask.precision", assumed="BF16", priority=80),
                   A.Question("traffic.avg_output_tokens", "how many?", "ask.output-tokens", unit="tokens",
                              assumed=512.0, priority=70),
                   A.Question("economics.has_platform_team", "a team?", "ask.platform-team", assumed=False)),
        metric=A.Metric("cost per accepted response", "usd_per_hour / accepted", "metric.realtime",
                        "COST_PER_ACCEPTED_RESPONSE"),
        benchmark_plan=(A.BenchmarkStage("smoke", ("run it",), ("p95",)),),
        procurement_checklist=(A.ChecklistSection("contract", ("exit clause",)),),
        summary="**H100**", ruleset=A.RulesetRef("abc123", "abc123def"),
        trace=(A.TraceEntry("routing.reserve", "rules/routing.yaml:40", "plan", True, ""),
               A.TraceEntry("routing.buy", "rules/routing.yaml:50", "plan", False, "horizon < 18")),
        notes=(r("assume.bf16", "BF16 assumed"),),
        provisional=True, not_shown=("l4", "rtx-4090"), price_tier="ON_DEMAND",
        assumed=(("model.precision", "BF16"),),
    )


def test_advice_to_proto_carries_every_field():
    resp = advice_to_proto(_advice())
    d = response_to_dict(resp)
    c = d["candidates"][0]
    assert (c["gpu"], c["count"], c["score"]) == ("h100-sxm", 2, 91.5)
    assert c["memory"] == {
        "need_gb": 120.0, "capacity_gb": 160.0, "headroom": 0.25,
        "breakdown": [{"component": "weights", "gb": 70.0}, {"component": "kv_cache", "gb": 50.0}],
    }
    assert c["cost"]["unit"] == "accepted response" and c["cost"]["price_as_of"] == "2025-12-01"
    assert c["ownership"]["break_even_months"] == -1.0 and c["ownership"]["purchase_usd"] == 50000.0
    assert c["reasons"] == [{"rule_id": "matrix.x", "text": "fits"}]
    assert c["caveats"][0]["rule_id"] == "caveat.y"
    assert c["interconnect"] and c["throughput"]
    assert d["excluded"] == [{"gpu": "rtx-4090",
                              "reasons": [{"rule_id": "eligibility.z", "text": "too small"}]}]
    assert resp.route.kind == pb.ROUTE_KIND_RESERVE and d["route"]["kind"] == "ROUTE_KIND_RESERVE"
    w = resp.warnings[0]
    assert w.severity == pb.SEVERITY_CRITICAL and w.code == "MISTAKE_HOURLY_RATE" and w.rule_id
    # The rules give unit, assumed value and priority; the contract gives the type and the enum choices.
    assert d["questions"] == [
        {"field": "model.params_billion", "text": "how big?", "rule_id": "ask.params", "type": "number"},
        {"field": "model.precision", "text": "which?", "rule_id": "ask.precision", "type": "enum",
         "allowed_values": ["PRECISION_FP32", "PRECISION_BF16", "PRECISION_FP16", "PRECISION_FP8", "PRECISION_INT8",
                            "PRECISION_INT4", "PRECISION_FP4"], "assumed": "PRECISION_BF16", "priority": 80},
        {"field": "traffic.avg_output_tokens", "text": "how many?", "rule_id": "ask.output-tokens",
         "type": "integer", "unit": "tokens", "assumed": "512", "priority": 70},
        {"field": "economics.has_platform_team", "text": "a team?", "rule_id": "ask.platform-team",
         "type": "boolean", "assumed": "false"},
    ]
    assert d["metric"]["rule_id"] == "metric.realtime"
    assert d["benchmark_plan"] == [{"name": "smoke", "steps": ["run it"], "record": ["p95"]}]
    assert d["procurement_checklist"] == [{"name": "contract", "items": ["exit clause"]}]
    assert d["ruleset"] == {"revision": "abc123", "content_hash": "abc123def"}
    assert [t.fired for t in resp.trace] == [True, False] and resp.trace[1].detail == "horizon < 18"
    assert d["notes"] == [{"rule_id": "assume.bf16", "text": "BF16 assumed"}]
    # Numbers and kinds a program needs are fields beside the localized text (issue 6 items 7, 9-11).
    assert c["cost"]["unit_kind"] == "COST_UNIT_RESPONSE" and c["cost"]["price_tier"] == "PRICE_TIER_MARKETPLACE"
    assert c["cost"]["price_tier_fallback"] is True
    assert d["route"]["provisional"] is True and d["route"]["depends_on"] == ["economics.demand"]
    assert w.title == "Choosing by $/h"
    assert d["metric"]["kind"] == "METRIC_KIND_COST_PER_ACCEPTED_RESPONSE"
    assert d["provisional"] is True and d["price_tier"] == "PRICE_TIER_ON_DEMAND"
    assert d["not_shown_count"] == 2 and d["not_shown"] == ["l4", "rtx-4090"]
    assert d["assumed"] == ["model.precision"]


def test_empty_advice_leaves_optional_messages_unset():
    resp = advice_to_proto(A.Advice(summary="ask first"))
    assert not resp.HasField("route") and not resp.HasField("metric") and not resp.HasField("ruleset")
    assert resp.summary == "ask first"


def test_gpu_to_proto_dated_prices_and_derived_cost():
    gpu = Gpu(
        id="h100-sxm", name="H100", vendor="nvidia", gpu_class="datacenter", memory_gb=80, memory_type="HBM3",
        bandwidth_tbs=3.35, tflops_bf16=989, tflops_fp8=1979, tflops_fp4=0, tdp_w=700,
        interconnect_kind="nvlink", interconnect_gbs=900, gpus_per_node=8, nvlink_domain=8, mig=7,
        matmul_efficiency=0.7, software="cuda", notes="n", spec_source="sheet", spec_as_of="2025-01-01",
        prices=(
            Price("rent", 4.0, "2025-01-01", "old", valid_until=date(2025, 12, 31)),
            Price("rent", 3.0, "2026-01-01", "new", valid_from=date(2026, 1, 1)),
            Price("purchase", 25000, "2026-01-01", "list"),
        ),
    )
    now = gpu_to_proto(gpu, date(2026, 6, 1))
    assert now.id == "h100-sxm" and now.interconnect == "nvlink" and now.mig == 7 and now.spec_as_of
    assert now.usd_per_tflop_hour == pytest.approx(3.0 / 989, rel=1e-4)
    assert [(p.kind, p.current) for p in now.prices] == [("rent", False), ("rent", True), ("purchase", True)]
    assert now.prices[0].valid_until == "2025-12-31" and now.prices[1].valid_from == "2026-01-01"
    assert all(p.as_of and p.source for p in now.prices)
    then = gpu_to_proto(gpu, date(2025, 6, 1))  # replaying a past date picks the price valid then
    assert then.usd_per_tflop_hour == pytest.approx(4.0 / 989, rel=1e-4)
