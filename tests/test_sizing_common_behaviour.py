"""What every sizing shares (decide/sizing/common.py), worked by hand on small frozen inputs and round constants:
the Sizing record's derived figures, parallel groups, usable memory, link efficiency, compute by precision, the
compared tier and its rent (a quote beats the catalog), the cost per unit of work by workload and unit, the cost
of owning and its break-even, a latency target met on both sides of each bound, engine overhead per GPU and the
compute saturation of a step."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import date

import pytest

from service.decide.sizing import common as c
from service.decide.sizing.common import Placed, Sizing
from service.decide.sizing.shape import Shape
from service.domain.assumptions import Assumptions
from service.domain.brief import (
    Brief,
    Economics,
    Latency,
    Media,
    PlacementPolicy,
    Quote,
    Traffic,
)
from service.domain.catalog import Gpu, Price
from service.domain.offers import Offer
from service.physics.memory import Architecture, MemoryBreakdown

DAY = date(2026, 6, 1)
A = Assumptions(values={
    "safety_headroom": 0.1, "training_safety_headroom": 0.05, "parallel_efficiency_fast_link": 0.9,
    "parallel_efficiency_pcie": 0.7, "mbu_decode": 0.8, "mbu_decode_consumer": 0.6, "max_inference_nodes": 4,
    "default_utilization": 0.5, "electricity_usd_per_kwh": 0.1, "pue": 1.5, "ownership_years": 4,
    "maintenance_fraction_per_year": 0.1, "hours_per_month": 730, "engine_overhead_gb": 2.0,
}, sources={})


def _rules(**change: object) -> Assumptions:
    return Assumptions(values={**A.values, **change}, sources={})


def _row(usd: float, tier: str, kind: str = "rent") -> Price:
    return Price(kind, usd, "2026-01-01", "test", valid_from=date(2026, 1, 1), tier=tier)


def _gpu(*, link: str = "nvlink", per_node: int = 8, domain: int = 8, bf16: float = 1000.0, fp8: float = 2000.0,
         fp4: float = 0.0, klass: str = "datacenter", mem: float = 80.0, reported: float = 0.0,
         prices: tuple[Price, ...] = ()) -> Gpu:
    return Gpu("g", "g", "nvidia", klass, mem, "HBM3", 3.35, bf16, fp8, fp4, 1000, link, 900, per_node, domain, 0,
               0.7, "cuda", "", "", "", prices=prices, memory_reported_gb=reported)


GPU = _gpu()


# -- the Sizing record --------------------------------------------------------------------------------------------


def test_a_blank_sizing_is_the_constructed_one_with_its_own_formulas() -> None:
    one, two = Sizing.blank(GPU, "SPOT"), Sizing.blank(GPU, "SPOT")
    assert one == Sizing(gpu=GPU, compared_tier="SPOT")
    one.formulas.append("x")
    assert two.formulas == []
    assert Sizing.blank(GPU, "ON_DEMAND").compared_tier == "ON_DEMAND"


def test_the_record_s_derived_figures() -> None:
    s = Sizing(gpu=GPU, count=4, train_hours=2.5, usd_per_hour=12.0)
    assert s.gpu_hours == 10.0
    assert s.usd_per_run == 30.0
    assert s.price_from_quote is False
    assert replace(s, quote=Quote(gpu="g", usd_per_hour=1.0)).price_from_quote is True
    offer = Offer("p", "i", "g", 8, None, None, "r", "US", "ON_DEMAND", 8.0, DAY, "test", DAY, None)
    assert Placed(offer, 3, 1.0, "ON_DEMAND").gpus == 24


def test_hours_on_another_count_scale_the_compute_not_the_start_up() -> None:
    # 10 h on 4 GPUs, 1 h of it start-up: on 8 GPUs 9 x 4 / 8 + 1 = 5.5 h; on 2, 19 h.
    s = Sizing(gpu=GPU, count=4, train_hours=10.0, fixed_hours=1.0)
    assert s.hours_at(8) == pytest.approx(5.5)
    assert s.hours_at(2) == pytest.approx(19.0)
    assert s.hours_at(4) == pytest.approx(10.0)
    assert s.hours_at(1) == pytest.approx(37.0)
    for gpus in (0, -1):
        assert s.hours_at(gpus) == 10.0
    assert replace(s, count=0).hours_at(8) == 10.0
    assert replace(s, train_hours=0.0).hours_at(8) == 0.0
    assert replace(s, train_hours=0.5, fixed_hours=0.0).hours_at(8) == pytest.approx(0.25)
    assert replace(s, count=1).hours_at(3) == pytest.approx(4.0)  # a run sized on one GPU: 9 / 3 + 1


@pytest.mark.parametrize(("tier", "compared", "allowed", "fallback"), [
    ("", "ON_DEMAND", False, False), ("ON_DEMAND", "ON_DEMAND", False, False), ("SPOT", "ON_DEMAND", False, True),
    ("SPOT", "ON_DEMAND", True, False),
])
def test_a_price_from_another_tier_is_a_fallback(tier: str, compared: str, allowed: bool, fallback: bool) -> None:
    s = Sizing(gpu=GPU, price_tier=tier, compared_tier=compared, tier_allowed=allowed)
    assert s.price_tier_fallback is fallback


# -- groups, memory, links, compute -------------------------------------------------------------------------------


@pytest.mark.parametrize(("gpu", "rules", "sizes"), [
    (_gpu(), A, (1, 2, 4, 8, 16, 24, 32)),  # 8 a node over NVLink, up to 4 nodes
    (_gpu(link="pcie", domain=0), A, (1, 2, 4, 8, 16, 24, 32)),  # the node is the scale-up domain
    (_gpu(per_node=4, domain=72), A, (1, 2, 4, 8, 16, 24, 32)),  # a 72-GPU domain: TP up to 8
    (_gpu(per_node=4, domain=4), A, (1, 2, 4, 8, 12, 16)),
    (_gpu(link="pcie", per_node=0, domain=0), A, (1, 2, 3, 4)),  # one GPU a node: stages of one
    (_gpu(), _rules(max_inference_nodes=2.9), (1, 2, 4, 8, 16)),
])
def test_group_sizes_are_tensor_parallel_then_whole_nodes(gpu: Gpu, rules: Assumptions, sizes: tuple) -> None:
    assert c.tp_group_sizes(gpu, rules) == sizes


def test_usable_memory_keeps_the_engine_s_or_training_s_headroom() -> None:
    assert c.usable_gb(_gpu(mem=80.0), A) == pytest.approx(72.0)
    assert c.usable_gb(_gpu(mem=80.0), A, training=True) == pytest.approx(76.0)
    assert c.usable_gb(_gpu(mem=80.0, reported=85.5), A) == pytest.approx(76.95)  # the driver's total


@pytest.mark.parametrize(("gpu", "n", "eff"), [
    (_gpu(), 1, 1.0), (_gpu(), 0, 1.0), (_gpu(), 2, 0.9), (_gpu(), 8, 0.9), (_gpu(), 9, 0.7),
    (_gpu(link="pcie"), 2, 0.7), (_gpu(link="xgmi"), 4, 0.9), (_gpu(domain=0), 2, 0.7), (_gpu(domain=1), 2, 0.7),
])
def test_a_group_within_the_fast_domain_runs_at_the_fast_link_s_efficiency(gpu: Gpu, n: int, eff: float) -> None:
    assert c.parallel_efficiency(gpu, n, A) == eff


def test_a_consumer_card_decodes_at_its_own_bandwidth_use() -> None:
    assert c.decode_mbu(_gpu(klass="consumer"), A) == 0.6
    assert c.decode_mbu(_gpu(klass="datacenter"), A) == 0.8
    assert c.decode_mbu(_gpu(klass="workstation"), A) == 0.8


@pytest.mark.parametrize(("gpu", "precision", "tflops"), [
    (_gpu(), "FP8", 2000.0), (_gpu(), "INT8", 2000.0), (_gpu(fp8=0.0), "FP8", 1000.0), (_gpu(), "BF16", 1000.0),
    (_gpu(fp4=4000.0), "FP4", 4000.0), (_gpu(), "FP4", 1000.0), (_gpu(fp4=4000.0), "INT4", 1000.0),
    (_gpu(fp4=4000.0), "FP8", 2000.0), (_gpu(), "FP16", 1000.0),
    # Any positive peak counts, however small (a fraction of a TFLOP).
    (_gpu(fp8=0.5), "FP8", 0.5), (_gpu(fp4=0.5), "FP4", 0.5),
])
def test_compute_is_the_precision_s_peak_where_the_gpu_has_it(gpu: Gpu, precision: str, tflops: float) -> None:
    assert c.compute_tflops(gpu, precision) == tflops


# -- the compared tier and the rent -------------------------------------------------------------------------------


@pytest.mark.parametrize("workload", c.INTERRUPTIBLE_WORKLOADS)
def test_interruptible_work_that_may_run_on_spot_is_compared_at_spot(workload: str) -> None:
    brief = Brief(workload=workload, placement=PlacementPolicy(interruptible_ok=True))
    assert c.compared_tier(brief) == "SPOT"
    assert c.compared_tier(replace(brief, run_cycle="ALWAYS_ON")) == "ON_DEMAND"
    assert c.compared_tier(replace(brief, placement=PlacementPolicy())) == "ON_DEMAND"
    assert c.compared_tier(replace(brief, economics=Economics(price_tier="RESERVED"))) == "RESERVED"


@pytest.mark.parametrize("workload", ["REALTIME_INFERENCE", "NOTEBOOK", "MEDIA_GENERATION", "UNSPECIFIED"])
def test_interactive_work_is_compared_on_demand(workload: str) -> None:
    brief = Brief(workload=workload, placement=PlacementPolicy(interruptible_ok=True))
    assert c.compared_tier(brief) == "ON_DEMAND"
    assert c.compared_tier(replace(brief, economics=Economics(price_tier="SPOT"))) == "SPOT"


def test_the_rent_is_the_compared_tier_s_else_the_next_one() -> None:
    gpu = _gpu(prices=(_row(4.0, "ON_DEMAND"), _row(1.5, "SPOT"), _row(20000.0, "LIST_PURCHASE", "purchase")))
    assert c.gpu_rent_price(gpu, (), DAY, "SPOT") == (_row(1.5, "SPOT"), None, 1.5, "SPOT")
    assert c.gpu_rent_price(gpu, (), DAY, "ON_DEMAND") == (_row(4.0, "ON_DEMAND"), None, 4.0, "ON_DEMAND")
    assert c.gpu_rent_price(gpu, (), DAY, "RESERVED") == (_row(4.0, "ON_DEMAND"), None, 4.0, "ON_DEMAND")
    assert c.gpu_rent_price(_gpu(), (), DAY, "ON_DEMAND") == (None, None, 0.0, "")


def test_a_quote_for_the_gpu_beats_the_catalog() -> None:
    gpu = _gpu(prices=(_row(4.0, "ON_DEMAND"),))
    quotes = (Quote(gpu="other", usd_per_hour=0.5), Quote(gpu="g", usd_per_hour=2.0),
              Quote(gpu="g", usd_per_hour=9.0))
    assert c.gpu_rent_price(gpu, quotes, DAY, "SPOT") == (_row(4.0, "ON_DEMAND"), quotes[1], 2.0, "SPOT")
    tiered = (Quote(gpu="g", usd_per_hour=3.0, tier="RESERVED"),)
    assert c.gpu_rent_price(gpu, tiered, DAY, "SPOT") == (_row(4.0, "ON_DEMAND"), tiered[0], 3.0, "RESERVED")
    assert c.gpu_rent_price(_gpu(), tiered, DAY, "SPOT") == (None, tiered[0], 3.0, "RESERVED")


# -- cost per unit of work ---------------------------------------------------------------------------------------

ARCH = Architecture(layers=10, kv_heads=8, head_dim=128, hidden_size=1000, attention_heads=8, vocab_size=1000,
                    exact=False)
SHAPE = Shape(8.0, 8.0, "BF16", 2.0, ARCH, 1200, 1100, 16, 1000, 200, ())


def _unit(workload: str, *, unit: str = "UNSPECIFIED", tps: float = 0.0, replicas: int = 1, usd: float = 10.0,
          hours: float = 0.0, rps: float = 0.0, util: float = 0.0, acceptance: float = 0.0, frames: int = 0
          ) -> Sizing:
    s = Sizing(gpu=GPU, tokens_per_second=tps, replicas=replicas, usd_per_hour=usd, train_hours=hours)
    brief = Brief(workload=workload, success_unit=unit, traffic=Traffic(requests_per_second=rps),
                  economics=Economics(utilization=util, acceptance_rate=acceptance), media=Media(frames=frames))
    c.size_unit_cost(s, brief, SHAPE, A)
    return s


@pytest.mark.parametrize("workload", ["PRETRAINING", "FULL_FINETUNE", "ADAPTER_FINETUNE"])
def test_a_training_run_is_priced_per_run(workload: str) -> None:
    s = _unit(workload, hours=4.0, usd=10.0)
    assert (s.unit, s.units_per_hour, s.usd_per_unit) == ("TRAINING_RUN", 0.25, 40.0)
    s = _unit(workload, unit="CHECKPOINT", hours=0.5, usd=10.0)
    assert (s.unit, s.units_per_hour, s.usd_per_unit) == ("CHECKPOINT", 2.0, 5.0)
    s = _unit(workload, unit="TOKEN", hours=4.0, tps=1000.0)  # a token is not a training unit
    assert (s.unit, s.units_per_hour, s.usd_per_unit) == ("TOKEN", 0.0, 0.0)
    s = _unit(workload, hours=0.0)
    assert (s.units_per_hour, s.usd_per_unit) == (0.0, 0.0)


def test_tokens_served_at_the_offered_load() -> None:
    # 2 copies x 1,000 tokens/s / 200 output tokens = 10 requests/s of capacity; 4 offered: 4 x 200 x 3600 =
    # 2.88M tokens an hour; $10/h -> $3.47 a million.
    s = _unit("REALTIME_INFERENCE", tps=1000.0, replicas=2, rps=4.0)
    assert s.unit == "TOKEN"
    assert s.units_per_hour == pytest.approx(2.88)
    assert s.usd_per_unit == pytest.approx(10.0 / 2.88)
    # More offered than the capacity: the capacity is served.
    s = _unit("REALTIME_INFERENCE", tps=1000.0, replicas=2, rps=40.0)
    assert s.units_per_hour == pytest.approx(10 * 200 * 3600 / 1e6)


def test_a_load_under_one_request_a_second_is_a_load() -> None:
    s = _unit("REALTIME_INFERENCE", unit="RESPONSE", tps=1000.0, replicas=2, rps=0.5)
    assert s.units_per_hour == pytest.approx(0.5 * 3600)


def test_a_slow_copy_is_still_priced() -> None:
    # 0.5 tokens/s over 200 output tokens: 0.0025 requests/s of capacity, all of it at 50% busy.
    s = _unit("BATCH_INFERENCE", unit="RESPONSE", tps=0.5)
    assert s.units_per_hour == pytest.approx(0.5 / 200 * 0.5 * 3600)
    assert s.usd_per_unit > 0


def test_with_no_offered_load_the_capacity_at_the_utilization_is_served() -> None:
    s = _unit("BATCH_INFERENCE", tps=1000.0, replicas=2)  # the rules' 50%
    assert s.units_per_hour == pytest.approx(10 * 0.5 * 200 * 3600 / 1e6)
    s = _unit("BATCH_INFERENCE", tps=1000.0, replicas=2, util=0.25)
    assert s.units_per_hour == pytest.approx(10 * 0.25 * 200 * 3600 / 1e6)


@pytest.mark.parametrize("unit", ["RESPONSE", "TASK", "RECORD"])
def test_a_response_task_or_record_is_one_request(unit: str) -> None:
    s = _unit("REALTIME_INFERENCE", unit=unit, tps=1000.0, replicas=2, rps=4.0)
    assert (s.unit, s.units_per_hour) == (unit, pytest.approx(4 * 3600))
    assert s.usd_per_unit == pytest.approx(10.0 / (4 * 3600))


def test_an_embedding_record_is_its_input() -> None:
    # 1,000 input tokens a record: 2 x 1,000 / 1,000 = 2 records/s of capacity, all served.
    s = _unit("EMBEDDING", unit="RECORD", tps=1000.0, replicas=2, rps=4.0)
    assert s.units_per_hour == pytest.approx(2 * 3600)
    s = _unit("EMBEDDING", tps=1000.0, replicas=2, rps=4.0)
    assert (s.unit, s.units_per_hour) == ("TOKEN", pytest.approx(2 * 1000 * 3600 / 1e6))


def test_a_unit_the_workload_cannot_count_is_not_priced() -> None:
    s = _unit("REALTIME_INFERENCE", unit="IMAGE", tps=1000.0, rps=4.0)
    assert (s.unit, s.units_per_hour, s.usd_per_unit) == ("IMAGE", 0.0, 0.0)
    s = _unit("REALTIME_INFERENCE", tps=0.0, rps=4.0)
    assert (s.units_per_hour, s.usd_per_unit) == (0.0, 0.0)


def test_images_served_at_the_offered_load_else_at_the_utilization() -> None:
    # 2 copies x 0.5 images/s = 1 image/s of capacity.
    s = _unit("MEDIA_GENERATION", unit="IMAGE", tps=0.5, replicas=2, rps=0.25)
    assert s.units_per_hour == pytest.approx(900.0)
    s = _unit("MEDIA_GENERATION", unit="IMAGE", tps=0.5, replicas=2, rps=3.0)
    assert s.units_per_hour == pytest.approx(3600.0)
    s = _unit("MEDIA_GENERATION", unit="IMAGE", tps=0.5, replicas=2)
    assert s.units_per_hour == pytest.approx(1800.0)
    s = _unit("MEDIA_GENERATION", unit="IMAGE", tps=0.5, replicas=2, util=0.1)
    assert s.units_per_hour == pytest.approx(360.0)
    assert s.usd_per_unit == pytest.approx(10.0 / 360.0)


def test_a_video_or_another_media_unit_is_not_priced_per_image() -> None:
    for s in (_unit("MEDIA_GENERATION", unit="IMAGE", tps=0.5, rps=0.25, frames=2),
              _unit("MEDIA_GENERATION", unit="IMAGE", tps=0.0, rps=0.25),
              _unit("MEDIA_GENERATION", tps=0.5, rps=0.25)):
        assert (s.units_per_hour, s.usd_per_unit) == (0.0, 0.0)
    assert _unit("MEDIA_GENERATION", unit="IMAGE", tps=0.5, rps=0.25, frames=1).units_per_hour == 0.0
    assert _unit("MEDIA_GENERATION", unit="IMAGE", tps=0.5, rps=0.25, frames=-1).units_per_hour == 900.0


def test_the_cost_is_per_accepted_unit() -> None:
    s = _unit("REALTIME_INFERENCE", unit="RESPONSE", tps=1000.0, replicas=2, rps=4.0, acceptance=0.5)
    assert s.usd_per_unit == pytest.approx(10.0 / (4 * 3600 * 0.5))
    s = _unit("REALTIME_INFERENCE", unit="RESPONSE", tps=1000.0, replicas=2, rps=4.0, usd=0.0)
    assert (s.units_per_hour, s.usd_per_unit) == (4 * 3600, 0.0)  # unpriced


# -- owning -------------------------------------------------------------------------------------------------------


def _owned(purchase: float | None = 20_000.0, *, count: int = 2, usd: float = 10.0, util: float = 0.0,
           kwh: float = 0.0, **kw: object) -> Sizing:
    p = None if purchase is None else _row(purchase, "LIST_PURCHASE", "purchase")
    s = Sizing(gpu=GPU, count=count, usd_per_hour=usd, purchase=p)
    c.size_ownership(s, Brief(economics=Economics(utilization=util, electricity_usd_per_kwh=kwh)), A, **kw)
    return s


def test_owning_worked_by_hand() -> None:
    # 2 GPUs x 1 kW at 50% busy, $0.10/kWh, PUE 1.5: 2 x 8,760 x 0.5 x 0.1 x 1.5 = $1,314 a year.
    # $40,000 bought, 10% a year upkeep: running 2 x 0.1 x 1.5 + 4,000 / 4,380 = $1.2132 a busy hour;
    # owned 40,000 / (4 x 8,760 x 0.5) + running = $3.4963/h; against $10/h rent: 40,000 / 8.7868 = 4,552 h,
    # 4,552 / (730 x 0.5) = 12.47 months.
    s = _owned()
    running = 0.3 + 4000 / 4380
    assert s.annual_power_usd == pytest.approx(1314.0)
    assert s.running_usd_per_busy_hour == pytest.approx(running)
    assert s.ownership_utilization == 0.5
    assert s.owned_usd_per_hour == pytest.approx(40000 / 17520 + running)
    assert s.break_even_hours == pytest.approx(40000 / (10 - running))
    assert s.break_even_months == pytest.approx(40000 / (10 - running) / 365)
    assert (s.break_even_rent, s.break_even_basis) == (10.0, "own")


def test_the_brief_s_utilization_and_electricity_are_used_when_given() -> None:
    s = _owned(util=0.25, kwh=0.2)
    running = 2 * 0.2 * 1.5 + 4000 / (8760 * 0.25)
    assert s.annual_power_usd == pytest.approx(2 * 8760 * 0.25 * 0.2 * 1.5)
    assert s.running_usd_per_busy_hour == pytest.approx(running)
    assert s.owned_usd_per_hour == pytest.approx(40000 / (4 * 8760 * 0.25) + running)
    assert s.break_even_months == pytest.approx(40000 / (10 - running) / (730 * 0.25))


def test_the_break_even_months_are_of_the_rules_month() -> None:
    s = Sizing(gpu=GPU, count=2, usd_per_hour=10.0, purchase=_row(20_000.0, "LIST_PURCHASE", "purchase"))
    c.size_ownership(s, Brief(), _rules(hours_per_month=500))
    assert s.break_even_months == pytest.approx(40000 / (10 - 0.3 - 4000 / 4380) / 250)


def test_a_named_rent_is_what_buying_is_weighed_against() -> None:
    s = _owned(rent=20.0, basis="market")
    assert (s.break_even_rent, s.break_even_basis) == (20.0, "market")
    assert s.break_even_hours == pytest.approx(40000 / (20 - 0.3 - 4000 / 4380))


def test_a_rent_under_the_running_cost_never_breaks_even() -> None:
    s = _owned(usd=1.0)
    assert s.break_even_hours == math.inf
    assert s.break_even_months == math.inf


def test_an_unpriced_rent_has_no_break_even() -> None:
    s = _owned(usd=0.0)
    assert (s.break_even_hours, s.break_even_months) == (0.0, 0.0)
    assert s.owned_usd_per_hour > 0


def test_a_gpu_with_no_purchase_price_is_only_powered() -> None:
    s = _owned(None)
    assert s.annual_power_usd == pytest.approx(1314.0)
    assert (s.owned_usd_per_hour, s.running_usd_per_busy_hour, s.break_even_hours, s.ownership_utilization) == (
        0.0, 0.0, 0.0, 0.0)
    assert (s.break_even_rent, s.break_even_basis) == (10.0, "own")


# -- latency, engine overhead, saturation -------------------------------------------------------------------------


@pytest.mark.parametrize(("p95", "ttft", "lat", "ok"), [
    (100.0, 10.0, Latency(), True),
    (100.0, 10.0, Latency(p95_ms=100.0), True), (100.0, 10.0, Latency(p95_ms=99.9), False),
    (100.0, 10.0, Latency(ttft_ms=10.0), True), (100.0, 10.0, Latency(ttft_ms=9.9), False),
    (100.0, 10.0, Latency(p95_ms=100.0, ttft_ms=10.0), True),
    (100.0, 10.0, Latency(p95_ms=99.0, ttft_ms=10.0), False),
    (100.0, 10.0, Latency(p95_ms=100.0, ttft_ms=9.0), False),
    # Targets under a millisecond are targets all the same.
    (0.6, 0.0, Latency(p95_ms=0.5), False), (0.0, 0.6, Latency(ttft_ms=0.5), False),
    (0.4, 0.4, Latency(p95_ms=0.5, ttft_ms=0.5), True),
])
def test_a_target_is_met_at_its_bound_and_missed_past_it(p95: float, ttft: float, lat: Latency, ok: bool) -> None:
    assert c.meets_latency(Sizing(gpu=GPU, est_latency_ms=p95, est_ttft_ms=ttft), lat) is ok


def test_engine_overhead_is_once_per_gpu() -> None:
    one = MemoryBreakdown((("weights", 10.0), ("engine", 2.0), ("kv_cache", 3.0)))
    assert c.with_engine_overhead(one, 1, A) is one
    assert c.with_engine_overhead(one, 0, A) is one
    assert c.with_engine_overhead(one, 2, A) == MemoryBreakdown((("weights", 10.0), ("engine", 4.0),
                                                                 ("kv_cache", 3.0)))
    assert c.with_engine_overhead(one, 4, A).components == (("weights", 10.0), ("engine", 8.0), ("kv_cache", 3.0))


def test_a_step_saturates_the_gpu_once_its_layer_takes_the_saturation_time() -> None:
    # 100 TFLOPS over 0.5 ms = 5e10 FLOPs; a layer of 100 tokens x 1,000^2 x 24 = 2.4e9: 4.8%.
    assert c.saturation(100.0, 100, 1000, 0.5) == 0.048  # exact: 2.4e9 / 5e10, both exact in binary
    assert c.saturation(100.0, 1000, 1000, 0.5) == pytest.approx(0.48)
    assert c.saturation(100.0, 10_000, 1000, 0.5) == 1.0
    assert c.saturation(100.0, 100, 1000, 0.0) == 1.0
    assert c.saturation(0.0, 100, 1000, 0.5) == 1.0
    # A step of no tokens fills nothing, however little compute the saturation time holds.
    assert c.saturation(100.0, 0, 1000, 0.5) == 0.0
    assert c.saturation(1e-12, 0, 1000, 1.0) == 0.0  # 0.001 FLOPs in the saturation time
