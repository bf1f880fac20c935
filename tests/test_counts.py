"""Counts explained (issue 25): a candidate with more GPUs than its memory needs says why, and a missed latency
target names the closest configuration a team would rent, not a rack a hair faster."""

from __future__ import annotations

from typing import Any

from google.protobuf.json_format import MessageToDict

from service.decide.sizing.common import Sizing
from service.decide.targets import unmet_targets
from service.domain.brief import Brief, Latency
from service.frontends.brief_file import load_request
from tests.test_user_text import REPO


class _Gpu:
    def __init__(self, gid: str):
        self.id, self.name = gid, gid.upper()


def _sized(gpu: str, count: int, usd: float, ms: float) -> Sizing:
    s = Sizing(gpu=_Gpu(gpu), count=count, usd_per_hour=usd, est_latency_ms=ms, latency_target=True, fits=True)
    s.memory_count = 1
    return s


def test_a_latency_miss_names_the_configuration_a_team_would_rent():
    brief = Brief(workload="REALTIME_INFERENCE", latency=Latency(p95_ms=2000))
    rack = _sized("gb200", 72, 432.0, 3162.0)
    node = _sized("b200", 8, 44.0, 3210.0)
    far = _sized("h100-sxm", 8, 23.6, 3600.0)
    fastest = unmet_targets(brief, [rack, node, far], [])[0]
    assert (fastest.gpu, fastest.count) == ("gb200", 72)  # without a tolerance: the raw fastest
    rentable = unmet_targets(brief, [rack, node, far], [], near=0.05)[0]
    assert (rentable.gpu, rentable.count, rentable.closest) == ("b200", 8, 3210.0)
    assert rentable.would_meet >= rentable.closest
    # Past the tolerance the faster one stays named, however dear.
    assert unmet_targets(brief, [rack, far], [], near=0.05)[0].gpu == "gb200"


def test_the_example_candidates_say_why_they_hold_more_gpus_than_memory_needs(stub: Any):
    req = load_request(REPO / "examples" / "realtime-70b-fp8.yaml")
    answer = MessageToDict(stub.Recommend(req, timeout=30), preserving_proto_field_name=True)
    top = answer["candidates"][0]
    assert top["count"] > 1
    why = [r["text"] for r in top.get("reasons", []) if r["rule_id"].startswith("count.")]
    assert why, top.get("reasons")
    assert any("6,000 ms p95" in w and "32 sessions" in w for w in why), why
