"""The cluster a configuration is: whole racks where the part is sold by the rack, nodes, power per node and per
rack, and for training the spare nodes and the days lost to interruptions (Llama 3's failure record)."""

from __future__ import annotations

import math

from ...domain.assumptions import Assumptions
from .common import Sizing


def whole_racks(s: Sizing) -> None:
    """A GB200 comes by the NVL72 rack: the count rounds up to whole racks. Training finishes sooner on the
    extra GPUs (its hours scale back); serving keeps its replicas and the rest of the rack is spare."""
    unit = s.gpu.rack_gpus
    if unit <= 1 or s.count <= 0 or s.count % unit == 0:
        return
    racks = math.ceil(s.count / unit)
    new = racks * unit
    if s.train_hours > 0:
        s.train_hours = s.train_hours * s.count / new
    s.count = new
    if s.train_hours > 0:
        s.per_replica = new


def size_cluster(s: Sizing, a: Assumptions, training: bool) -> None:
    """Power per node (the datasheet's, else GPUs x TDP x node_power_per_gpu_tdp), racks and power per rack;
    for a training run, spare nodes for the nodes under repair and the days its interruptions cost."""
    g = s.gpu
    per_node = max(1, g.gpus_per_node)
    s.power_kw_per_node = g.node_power_kw or per_node * g.tdp_w * a.num("node_power_per_gpu_tdp") / 1000
    nodes_per_rack = max(1, g.rack_gpus // per_node) if g.rack_gpus > 0 else max(1, int(a.num("nodes_per_rack")))
    s.racks = max(1, math.ceil(s.nodes / nodes_per_rack))
    s.power_kw_per_rack = s.power_kw_per_node * min(nodes_per_rack, s.nodes)
    if not training or s.train_hours <= 0:
        return
    # The days interruptions cost are part of train_hours already (sizing/training.py all_in_hours).
    if s.nodes > 1:
        failures_per_day = a.num("interruptions_per_gpu_day") * a.num("hardware_share_of_interruptions") * s.count
        s.spare_nodes = math.ceil(failures_per_day * a.num("node_repair_days"))
