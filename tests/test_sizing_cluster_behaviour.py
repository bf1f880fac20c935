"""The cluster a sizing is (decide/sizing/cluster.py), worked by hand on small frozen inputs: whole racks where a
part is sold by the rack (rounded up, never down; training's hours scale back, serving keeps its copies), power
per node and per rack, racks, and a training run's spare nodes. Each test calls the two functions directly."""

from __future__ import annotations

import math

import pytest

from service.decide.sizing.cluster import size_cluster, whole_racks
from service.decide.sizing.common import Sizing
from service.domain.assumptions import Assumptions
from service.domain.catalog import Gpu

# Round figures, so every expected value below is a sum done by hand.
A = Assumptions(values={
    "node_power_per_gpu_tdp": 1.5,
    "nodes_per_rack": 4,
    "interruptions_per_gpu_day": 0.001,
    "hardware_share_of_interruptions": 0.5,
    "node_repair_days": 3,
}, sources={})


def _gpu(*, rack: int = 0, per_node: int = 8, node_kw: float = 0.0, tdp: float = 1000.0) -> Gpu:
    return Gpu("g", "g", "nvidia", "datacenter", 80, "HBM3", 3.35, 989, 1979, 0, tdp, "nvlink", 900, per_node, 8, 7,
               0.7, "cuda", "", "", "", node_power_kw=node_kw, rack_gpus=rack)


def _s(gpu: Gpu, count: int, *, per_replica: int = 1, replicas: int = 1, hours: float = 0.0, nodes: int = 1
       ) -> Sizing:
    return Sizing(gpu=gpu, count=count, per_replica=per_replica, replicas=replicas, train_hours=hours, nodes=nodes)


# -- whole racks ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rack", [0, 1])
def test_a_part_not_sold_by_the_rack_keeps_its_count(rack: int) -> None:
    s = _s(_gpu(rack=rack), 5, per_replica=5, hours=10.0)
    whole_racks(s)
    assert (s.count, s.per_replica, s.train_hours) == (5, 5, 10.0)


@pytest.mark.parametrize("count", [72, 144])
def test_whole_racks_are_left_as_they_are(count: int) -> None:
    s = _s(_gpu(rack=72), count, per_replica=8, hours=10.0)
    whole_racks(s)
    assert (s.count, s.per_replica, s.train_hours) == (count, 8, 10.0)


def test_no_gpus_is_not_rounded_up_to_a_rack() -> None:
    s = _s(_gpu(rack=72), 0, per_replica=1, hours=10.0)
    whole_racks(s)
    assert (s.count, s.per_replica, s.train_hours) == (0, 1, 10.0)


@pytest.mark.parametrize(("count", "racked"), [(1, 72), (2, 72), (71, 72), (73, 144), (143, 144), (145, 216)])
def test_the_count_rounds_up_to_whole_racks(count: int, racked: int) -> None:
    s = _s(_gpu(rack=72), count, per_replica=1, replicas=count)
    whole_racks(s)
    assert s.count == racked
    # Serving keeps its copies: the rest of the rack is spare.
    assert (s.per_replica, s.replicas, s.train_hours) == (1, count, 0.0)


def test_serving_one_copy_over_all_its_gpus_keeps_that_copy() -> None:
    # One copy over 36 GPUs on a 72-GPU rack: the copy stays 36 wide, the other 36 are spare.
    s = _s(_gpu(rack=72), 36, per_replica=36)
    whole_racks(s)
    assert (s.count, s.per_replica, s.replicas) == (72, 36, 1)


def test_training_finishes_sooner_on_the_whole_rack() -> None:
    # 36 GPUs for 10 h on a 72-GPU rack: all 72 train, in 10 x 36 / 72 = 5 h.
    s = _s(_gpu(rack=72), 36, per_replica=36, hours=10.0)
    whole_racks(s)
    assert s.count == 72
    assert s.per_replica == 72
    assert s.train_hours == pytest.approx(5.0)


def test_training_hours_scale_by_the_old_count_over_the_new() -> None:
    # 100 GPUs -> 144: 9 h becomes 9 x 100 / 144 = 6.25 h.
    s = _s(_gpu(rack=72), 100, per_replica=100, hours=9.0)
    whole_racks(s)
    assert (s.count, s.per_replica) == (144, 144)
    assert s.train_hours == pytest.approx(6.25)


def test_a_small_rack_rounds_the_same_way() -> None:
    s = _s(_gpu(rack=2), 3, per_replica=3, hours=3.0)
    whole_racks(s)
    assert (s.count, s.per_replica) == (4, 4)
    assert s.train_hours == pytest.approx(2.25)


# -- power, racks and spare nodes ----------------------------------------------------------------------------


def test_node_power_from_the_datasheet_when_given() -> None:
    s = _s(_gpu(node_kw=10.2), 8, nodes=1)
    size_cluster(s, A, training=False)
    assert s.power_kw_per_node == 10.2
    assert s.racks == 1
    assert s.power_kw_per_rack == 10.2


def test_node_power_estimated_from_tdp() -> None:
    # 8 GPUs x 1,000 W x 1.5 = 12 kW a node.
    s = _s(_gpu(tdp=1000.0), 8, nodes=1)
    size_cluster(s, A, training=False)
    assert s.power_kw_per_node == pytest.approx(12.0)


def test_a_part_with_no_node_size_is_a_node_of_one() -> None:
    # gpus_per_node 0 is read as 1: 1 x 500 W x 1.5 = 0.75 kW; 4 nodes a rack (the rules' default).
    s = _s(_gpu(per_node=0, tdp=500.0), 6, nodes=6)
    size_cluster(s, A, training=False)
    assert s.power_kw_per_node == pytest.approx(0.75)
    assert s.racks == 2  # 6 nodes, 4 a rack
    assert s.power_kw_per_rack == pytest.approx(3.0)


@pytest.mark.parametrize(("nodes", "racks", "in_rack"), [(1, 1, 1), (3, 1, 3), (4, 1, 4), (5, 2, 4), (9, 3, 4)])
def test_racks_of_the_rules_nodes_per_rack(nodes: int, racks: int, in_rack: int) -> None:
    s = _s(_gpu(tdp=1000.0), nodes * 8, nodes=nodes)
    size_cluster(s, A, training=False)
    assert s.racks == racks
    assert s.power_kw_per_rack == pytest.approx(12.0 * in_rack)


@pytest.mark.parametrize(("nodes", "racks", "in_rack"), [(8, 1, 8), (9, 1, 9), (10, 2, 9), (18, 2, 9), (19, 3, 9)])
def test_a_rack_part_has_rack_gpus_over_node_gpus_nodes_a_rack(nodes: int, racks: int, in_rack: int) -> None:
    # NVL72-like: 72 GPUs a rack, 4 a node -> 18 nodes a rack; here 36 a rack, 4 a node -> 9.
    s = _s(_gpu(rack=36, per_node=4, node_kw=5.0), nodes * 4, nodes=nodes)
    size_cluster(s, A, training=False)
    assert s.racks == racks
    assert s.power_kw_per_rack == pytest.approx(5.0 * in_rack)


def test_a_rack_smaller_than_a_node_is_one_node_a_rack() -> None:
    s = _s(_gpu(rack=2, per_node=8, node_kw=4.0), 16, nodes=2)
    size_cluster(s, A, training=False)
    assert s.racks == 2
    assert s.power_kw_per_rack == pytest.approx(4.0)


def test_no_nodes_still_counts_one_rack() -> None:
    s = _s(_gpu(node_kw=4.0), 0, nodes=0)
    size_cluster(s, A, training=False)
    assert s.racks == 1
    assert s.power_kw_per_rack == 0.0


def test_a_fraction_of_a_rack_default_is_read_whole() -> None:
    a = Assumptions(values={**A.values, "nodes_per_rack": 2.9}, sources={})
    s = _s(_gpu(node_kw=4.0), 24, nodes=3)
    size_cluster(s, a, training=False)
    assert s.racks == 2  # 2 nodes a rack, not 2.9
    assert s.power_kw_per_rack == pytest.approx(8.0)


def test_a_rack_default_under_one_is_one_node_a_rack() -> None:
    a = Assumptions(values={**A.values, "nodes_per_rack": 0}, sources={})
    s = _s(_gpu(node_kw=4.0), 24, nodes=3)
    size_cluster(s, a, training=False)
    assert s.racks == 3
    assert s.power_kw_per_rack == pytest.approx(4.0)


def test_a_training_run_keeps_spare_nodes_for_repairs() -> None:
    # 2,000 GPUs x 0.001 interruptions a GPU-day x 0.5 hardware = 1 a day; 3 days' repair -> 3 spare nodes.
    s = _s(_gpu(node_kw=10.0), 2000, hours=100.0, nodes=250)
    size_cluster(s, A, training=True)
    assert s.spare_nodes == 3


def test_spare_nodes_round_up() -> None:
    # 100 GPUs: 0.05 a day x 3 days = 0.15 -> 1 spare node.
    s = _s(_gpu(node_kw=10.0), 100, hours=100.0, nodes=13)
    size_cluster(s, A, training=True)
    assert s.spare_nodes == 1
    # 1,001 GPUs: 0.5005 a day x 3 = 1.5015 -> 2.
    s = _s(_gpu(node_kw=10.0), 1001, hours=100.0, nodes=126)
    size_cluster(s, A, training=True)
    assert s.spare_nodes == 2


@pytest.mark.parametrize(("training", "hours", "nodes"), [(False, 100.0, 250), (True, 0.0, 250), (True, 100.0, 1)])
def test_no_spare_nodes_for_serving_an_unsized_run_or_one_node(training: bool, hours: float, nodes: int) -> None:
    s = _s(_gpu(node_kw=10.0), 2000 if nodes > 1 else 8, hours=hours, nodes=nodes)
    size_cluster(s, A, training=training)
    assert s.spare_nodes == 0
    assert s.power_kw_per_node == 10.0  # the power is sized all the same


def test_two_nodes_is_enough_for_spares() -> None:
    s = _s(_gpu(node_kw=10.0), 16, hours=100.0, nodes=2)
    size_cluster(s, A, training=True)
    assert s.spare_nodes == math.ceil(16 * 0.001 * 0.5 * 3) == 1


def test_a_run_under_an_hour_is_still_a_training_run() -> None:
    # The comparisons are with 0 hours, not 1: half an hour on 36 of 72 GPUs is a quarter of an hour on 72.
    s = _s(_gpu(rack=72), 36, per_replica=36, hours=0.5)
    whole_racks(s)
    assert (s.count, s.per_replica) == (72, 72)
    assert s.train_hours == pytest.approx(0.25)
    s = _s(_gpu(node_kw=10.0), 2000, hours=0.5, nodes=250)
    size_cluster(s, A, training=True)
    assert s.spare_nodes == 3


def test_nodes_a_rack_are_whole_nodes() -> None:
    # 36 GPUs a rack, 5 a node: 7 whole nodes a rack (not 7.2): 15 nodes are 3 racks of 7 x 2 kW = 14 kW.
    s = _s(_gpu(rack=36, per_node=5, node_kw=2.0), 75, nodes=15)
    size_cluster(s, A, training=False)
    assert s.racks == 3
    assert s.power_kw_per_rack == pytest.approx(14.0)


def test_a_rack_of_one_gpu_is_one_node_a_rack_not_the_rules_default() -> None:
    s = _s(_gpu(rack=1, per_node=8, node_kw=4.0), 24, nodes=3)
    size_cluster(s, A, training=False)
    assert s.racks == 3
    assert s.power_kw_per_rack == pytest.approx(4.0)
