"""One GPU sized for one brief (decide/sizing/per_gpu.py) on GPUs built here, with their own prices, and the
rules' assumptions: the figures `size` adds around the workload's sizing (the configuration's memory, headroom,
nodes, whole racks, the rent of every GPU, the cost per TFLOP-hour, training's spare nodes), which workload
sizing it runs, and the per-request fast path (`size_all`, `latency_of`) giving the same answer as `size`."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import date

import pytest

from service.decide.sizing import per_gpu
from service.decide.sizing.common import Sizing
from service.decide.sizing.shape import shape_of
from service.domain.brief import Brief, Latency, Model, PlacementPolicy, Quote, Traffic, Training
from service.domain.catalog import Gpu, Price
from tests.test_width_pruning import book  # noqa: F401  (the module's rules fixture)

DAY = date(2026, 11, 15)


def _prices(rent: float, purchase: float | None = 25_000.0, spot: float | None = None) -> tuple[Price, ...]:
    rows = [Price("rent", rent, "2026-01-01", "test", valid_from=date(2026, 1, 1), tier="ON_DEMAND")]
    if spot is not None:
        rows.append(Price("rent", spot, "2026-01-01", "test", valid_from=date(2026, 1, 1), tier="SPOT"))
    if purchase is not None:
        rows.append(Price("purchase", purchase, "2026-01-01", "test", valid_from=date(2026, 1, 1),
                          tier="LIST_PURCHASE"))
    return tuple(rows)


def _gpu(gid: str = "big", *, mem: float = 80, bf16: float = 1000.0, fp8: float = 2000.0, rack: int = 0,
         per_node: int = 8, rent: float = 4.0, spot: float | None = None, purchase: float | None = 25_000.0,
         node_kw: float = 10.0, gpu_class: str = "datacenter") -> Gpu:
    return Gpu(gid, gid, "nvidia", gpu_class, mem, "HBM3", 3.35, bf16, fp8, 0, 700, "nvlink", 900, per_node, 8, 7,
               0.7, "cuda", "", "", "", prices=_prices(rent, purchase, spot), node_power_kw=node_kw,
               rack_gpus=rack, scale_out_gbs=50.0)


BIG = _gpu()
RACK = _gpu("rack", mem=180, bf16=2500.0, fp8=5000.0, rack=72, per_node=4, rent=6.0, node_kw=0.0)
SMALL = _gpu("small", mem=24, bf16=160.0, fp8=0.0, rent=0.5, purchase=2_000.0, node_kw=0.0, gpu_class="consumer")
GPUS = (BIG, RACK, SMALL)

SERVE = Brief(workload="REALTIME_INFERENCE", model=Model(params_billion=8),
              traffic=Traffic(concurrent_sessions=16, avg_input_tokens=1000, avg_output_tokens=200),
              latency=Latency(p95_ms=5000))
PRETRAIN = Brief(workload="PRETRAINING", model=Model(params_billion=1), training=Training(tokens_billion=20,
                                                                                          target_days=7))
FINETUNE = Brief(workload="FULL_FINETUNE", model=Model(params_billion=8), training=Training(tokens_billion=1,
                                                                                           target_days=2))
ADAPTER = Brief(workload="ADAPTER_FINETUNE", model=Model(params_billion=8), training=Training(tokens_billion=0.5,
                                                                                             target_days=1))
IMAGE = Brief(workload="MEDIA_GENERATION", model=Model(params_billion=3), traffic=Traffic(requests_per_second=1),
              success_unit="IMAGE")
BRIEFS = {"serve": SERVE, "pretrain": PRETRAIN, "finetune": FINETUNE, "adapter": ADAPTER, "image": IMAGE}


def _size(book, gpu: Gpu, brief: Brief, quotes: tuple[Quote, ...] = ()) -> Sizing:  # noqa: ANN001, F811
    a = book.assumptions
    return per_gpu.size(gpu, brief, shape_of(brief, a), a, quotes, DAY)


@pytest.mark.parametrize("name", list(BRIEFS))
def test_the_configuration_s_figures_follow_from_its_count(book, name: str) -> None:  # noqa: ANN001, F811
    for gpu in GPUS:
        s = _size(book, gpu, BRIEFS[name])
        assert s.count >= 1
        assert s.capacity_gb == s.count * gpu.capacity_gb
        assert s.headroom == pytest.approx(1.0 - s.memory.total_gb / s.capacity_gb)
        assert s.nodes == math.ceil(s.count / gpu.gpus_per_node)
        assert s.usd_per_gpu_hour == gpu.rent_price(DAY, ("ON_DEMAND",)).usd
        assert s.usd_per_hour == pytest.approx(s.usd_per_gpu_hour * s.count)
        assert s.usd_per_tflop_hour == pytest.approx(s.usd_per_gpu_hour / gpu.tflops_bf16)
        assert s.purchase == gpu.price("purchase", DAY)
        assert s.compared_tier == "ON_DEMAND"
        assert s.usd_per_unit > 0
        assert s.owned_usd_per_hour > 0  # the cost of owning is sized
        assert s.power_kw_per_node > 0  # and the cluster's power
        if gpu.rack_gpus:
            assert s.count % gpu.rack_gpus == 0


def test_a_node_of_no_gpus_is_counted_as_one_gpu_a_node(book) -> None:  # noqa: ANN001, F811
    s = _size(book, replace(SMALL, gpus_per_node=0), FINETUNE)
    assert s.count > 1
    assert s.nodes == s.count


@pytest.mark.parametrize(("name", "component", "training"), [
    ("serve", "kv_cache", False), ("image", "activations", False), ("pretrain", "optimizer", True),
    ("finetune", "optimizer", True), ("adapter", "adapter_states", True),
])
def test_each_workload_is_sized_by_its_own_sizing(book, name: str, component: str,  # noqa: ANN001, F811
                                                  training: bool) -> None:
    s = _size(book, BIG, BRIEFS[name])
    assert component in dict(s.memory.components)
    assert (s.train_hours > 0) is training
    assert (s.unit == "TRAINING_RUN") is training
    assert (s.tokens_per_second > 0) is not training


def test_the_precision_s_compute_is_the_gpu_s_at_that_precision(book) -> None:  # noqa: ANN001, F811
    fp8 = replace(SERVE, model=replace(SERVE.model, precision="FP8"))
    assert _size(book, BIG, fp8).tflops == 2000.0
    assert _size(book, BIG, SERVE).tflops == 1000.0
    assert _size(book, SMALL, fp8).tflops == 160.0  # no FP8 tensor cores: 16-bit compute


def test_a_rack_part_serves_one_copy_on_a_whole_rack(book) -> None:  # noqa: ANN001, F811
    s = _size(book, RACK, SERVE)
    assert (s.count, s.per_replica, s.replicas) == (72, 1, 1)
    assert s.nodes == 18
    assert s.racks == 1
    assert s.capacity_gb == 72 * 180


def test_a_rack_part_trains_on_the_whole_rack_sooner(book) -> None:  # noqa: ANN001, F811
    s = _size(book, RACK, PRETRAIN)
    assert (s.count, s.per_replica) == (72, 72)
    one = _size(book, BIG, PRETRAIN)
    assert s.train_hours < one.train_hours


def test_only_a_training_run_over_several_nodes_keeps_spare_nodes(book) -> None:  # noqa: ANN001, F811
    a = book.assumptions
    s = _size(book, RACK, PRETRAIN)
    assert s.nodes > 1
    assert s.spare_nodes == math.ceil(a.num("interruptions_per_gpu_day") * a.num("hardware_share_of_interruptions")
                                      * s.count * a.num("node_repair_days"))
    assert s.spare_nodes >= 1
    s = _size(book, RACK, SERVE)
    assert s.nodes > 1
    assert s.spare_nodes == 0
    s = _size(book, BIG, ADAPTER)
    assert s.spare_nodes == 0  # one node


def test_a_quote_sets_the_rent(book) -> None:  # noqa: ANN001, F811
    s = _size(book, BIG, SERVE, (Quote(gpu="other", usd_per_hour=1.0), Quote(gpu="big", usd_per_hour=2.5)))
    assert s.usd_per_gpu_hour == 2.5
    assert s.quote == Quote(gpu="big", usd_per_hour=2.5)
    assert s.usd_per_hour == pytest.approx(2.5 * s.count)
    assert s.price_tier == "ON_DEMAND"


def test_interruptible_work_is_compared_at_spot(book) -> None:  # noqa: ANN001, F811
    brief = replace(PRETRAIN, placement=PlacementPolicy(interruptible_ok=True))
    s = _size(book, _gpu(spot=1.5), brief)
    assert (s.compared_tier, s.price_tier, s.usd_per_gpu_hour) == ("SPOT", "SPOT", 1.5)
    s = _size(book, _gpu(), brief)  # no spot row: the next tier's rent
    assert (s.compared_tier, s.price_tier, s.usd_per_gpu_hour) == ("SPOT", "ON_DEMAND", 4.0)


def test_an_unpriced_gpu_costs_nothing_and_cannot_be_owned(book) -> None:  # noqa: ANN001, F811
    bare = replace(BIG, prices=())
    s = _size(book, bare, SERVE)
    assert (s.price, s.usd_per_gpu_hour, s.usd_per_hour, s.usd_per_tflop_hour, s.price_tier) == (
        None, 0.0, 0.0, 0.0, "")
    assert (s.purchase, s.owned_usd_per_hour, s.usd_per_unit) == (None, 0.0, 0.0)
    assert s.count >= 1


def test_a_gpu_with_no_16_bit_figure_has_no_cost_per_tflop(book) -> None:  # noqa: ANN001, F811
    # An FP8-only part (no 16-bit figure) training in FP8: sized, but never costed per 16-bit TFLOP.
    s = _size(book, replace(BIG, tflops_bf16=0.0), replace(PRETRAIN, model=replace(PRETRAIN.model, precision="FP8")))
    assert s.train_hours > 0
    assert s.usd_per_tflop_hour == 0.0
    assert s.usd_per_hour > 0


def test_a_gpu_with_no_memory_has_no_headroom(book) -> None:  # noqa: ANN001, F811
    s = _size(book, replace(BIG, memory_gb=0.0), SERVE)
    assert s.capacity_gb == 0.0
    assert s.headroom == 0.0
    assert s.fits is False


def test_under_a_gigabyte_of_memory_the_headroom_is_still_worked_out(book) -> None:  # noqa: ANN001, F811
    # One copy on one 0.5 GB GPU: 15 GB needed, headroom 1 - 15 / 0.5 = -29 (short), not a blank 0.
    s = _size(book, replace(BIG, memory_gb=0.5), IMAGE)
    assert (s.count, s.capacity_gb, s.fits) == (1, 0.5, False)
    assert s.headroom == pytest.approx(1.0 - s.memory.total_gb / 0.5)
    assert s.headroom < -1


def test_a_memo_given_is_filled_and_read(book) -> None:  # noqa: ANN001, F811
    a = book.assumptions
    shape = shape_of(FINETUNE, a)
    memo: dict = {}
    first = per_gpu.size(BIG, FINETUNE, shape, a, (), DAY, memo)
    assert any(k[0] == "training" for k in memo)
    assert per_gpu.size(BIG, FINETUNE, shape, a, (), DAY, memo) == first
    assert per_gpu.size(BIG, FINETUNE, shape, a, (), DAY) == first


def test_longer_deadlines_never_need_more_gpus_and_more_tokens_never_fewer(book) -> None:  # noqa: ANN001, F811
    counts = [_size(book, SMALL, replace(PRETRAIN, training=Training(tokens_billion=20, target_days=d))).count
              for d in (1, 2, 4, 8, 30)]
    assert counts == sorted(counts, reverse=True)
    assert counts[0] > counts[-1]
    counts = [_size(book, SMALL, replace(PRETRAIN, training=Training(tokens_billion=t, target_days=3))).count
              for t in (1, 5, 20, 80)]
    assert counts == sorted(counts)
    assert counts[0] < counts[-1]


# -- the fast path gives size's answer ------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(BRIEFS))
def test_size_all_is_size_for_every_gpu(book, name: str) -> None:  # noqa: ANN001, F811
    a = book.assumptions
    brief = BRIEFS[name]
    shape = shape_of(brief, a)
    quotes = (Quote(gpu="small", usd_per_hour=0.4),)
    got = per_gpu.size_all(GPUS, brief, shape, a, quotes, DAY)
    assert [g.gpu.id for g in got] == [g.id for g in GPUS]
    for s, gpu in zip(got, GPUS, strict=True):
        assert s == per_gpu.size(gpu, brief, shape, a, quotes, DAY)


def test_latency_of_is_size_s_fit_and_latency(book) -> None:  # noqa: ANN001, F811
    a = book.assumptions
    for brief in (SERVE, replace(SERVE, traffic=replace(SERVE.traffic, avg_output_tokens=800))):
        shape = shape_of(brief, a)
        for gpu in GPUS:
            s = per_gpu.size(gpu, brief, shape, a, (), DAY)
            needs: dict = {}
            assert per_gpu.latency_of(gpu, brief, shape, a, DAY, needs) == (s.fits, s.est_latency_ms)
            assert needs  # the memory needs given are the ones filled, for the next length to read
            assert per_gpu.latency_of(gpu, brief, shape, a, DAY, needs) == (s.fits, s.est_latency_ms)
            prefills: dict = {}
            assert per_gpu.latency_of(gpu, brief, shape, a, DAY, {}, prefills) == (s.fits, s.est_latency_ms)
            assert prefills  # the prefill steps given are the ones filled
