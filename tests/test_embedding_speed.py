"""Issue 23 item 8: a small embedder's speed depends on the GPU, and a brief without its input length is asked.

An encoder pass takes the longer of its FLOPs and its activation traffic, plus a fixed cost per layer
(service/physics/encoder.py; constants in rules/assumptions.yaml). The old saturation cap gave bge-large the same
tokens/s on an H100 as on a B200 (4 of each for 2,000 records/s of 512 tokens). Figures: bge-large-en-v1.5 is
24 layers x 1,024 hidden, 335M parameters (config.json); L4 121, H100 989, B200 2,250 dense BF16 TFLOPS (the catalog).
"""

from __future__ import annotations

from typing import Any

import pytest

from service.domain.brief import AdviceRequest, Brief, Model, Traffic
from service.physics.encoder import encoder_pass_seconds

from .conftest import TODAY


@pytest.fixture(scope="module")
def bundle(catalog_bundle: Any) -> Any:  # noqa: ANN401
    return catalog_bundle


def _by_gpu(bundle: Any, brief: Brief) -> dict[str, Any]:  # noqa: ANN401
    advice = bundle.advise(AdviceRequest(brief=brief, max_candidates=50, as_of=TODAY))
    return {c.gpu: c for c in advice.candidates}


def _bge(rps: float = 2000, batch: int = 0, inputs: int = 512) -> Brief:
    return Brief(workload="EMBEDDING", model=Model(name="bge-large-en-v1.5", params_billion=0.335,
                                                   precision="FP16", context_tokens=512),
                 traffic=Traffic(avg_input_tokens=inputs, requests_per_second=rps, batch_size=batch),
                 success_unit="RECORD")


def test_a_small_embedder_runs_faster_on_a_faster_gpu(bundle):
    c = _by_gpu(bundle, _bge())
    speed = {g: c[g].performance.tokens_per_second_per_replica for g in ("l4", "h100-sxm", "b200")}
    assert speed["l4"] < speed["h100-sxm"] < speed["b200"]
    # A batch of 16,384 tokens keeps each GPU compute-bound: the speed follows dense BF16 TFLOPS (less the
    # per-layer cost), not one cap for all.
    assert 6 <= speed["h100-sxm"] / speed["l4"] <= 989 / 121
    assert 1.8 <= speed["b200"] / speed["h100-sxm"] <= 2250 / 989
    # Counts follow: 2,000 records/s of 512 tokens needs fewer H100s than L4s and fewer B200s than H100s.
    assert c["b200"].count <= c["h100-sxm"].count < c["l4"].count


def test_the_2000_records_a_second_figures_still_hold(bundle):
    # tests/test_fidelity.py: 9-15 L4 or 4-6 A100 for bge-large at 2,000 x 512 tokens/s.
    c = _by_gpu(bundle, _bge())
    assert 9 <= c["l4"].count <= 15 and 4 <= c["a100-80gb"].count <= 6


def test_one_record_at_a_time_is_bounded_by_the_per_layer_cost_on_a_big_gpu(bundle):
    one = _by_gpu(bundle, _bge(rps=100, batch=1))["h100-sxm"].performance.tokens_per_second_per_replica
    full = _by_gpu(bundle, _bge())["h100-sxm"].performance.tokens_per_second_per_replica
    assert one < 0.6 * full  # 512 tokens are under a millisecond of compute; 24 layers x 40 us are not
    # The formula itself: compute-bound at a big batch, overhead-bound at one record.
    big = encoder_pass_seconds(0.335, 2, 16384, 512, 24, 1024, 989, 0.5, 3.35, 0.75, 60, 40e-6)
    small = encoder_pass_seconds(0.335, 2, 512, 512, 24, 1024, 989, 0.5, 3.35, 0.75, 60, 40e-6)
    assert small * 32 > 1.5 * big and small > 24 * 40e-6  # 32 passes of one record cost more than one of 32


def test_a_low_bandwidth_gpu_is_bounded_by_activation_traffic():
    # 16,384 tokens x 24 layers x 1,024 x 60 bytes = 24 GB of activation traffic: on 100 GB/s it outlasts the
    # FLOPs at 1,000 TFLOPS.
    slow = encoder_pass_seconds(0.335, 2, 16384, 512, 24, 1024, 1000, 0.5, 0.1, 1.0, 60, 0)
    assert slow == pytest.approx((0.335e9 * 2 + 16384 * 24 * 1024 * 60) / 0.1e12)


def test_an_embedding_brief_without_its_input_length_is_asked_and_says_what_it_assumed(bundle):
    brief = Brief(workload="EMBEDDING", model=Model(0.335, precision="FP16"),
                  traffic=Traffic(requests_per_second=2000), success_unit="RECORD")
    advice = bundle.advise(AdviceRequest(brief=brief, max_candidates=20, as_of=TODAY))
    question = next(q for q in advice.questions if q.field == "traffic.avg_input_tokens")
    assert question.assumed == 512 and "512" in question.text
    assert ("traffic.avg_input_tokens", "512") in advice.assumed
    assert any("512" in n.text and n.rule_id == "sizing.defaults" for n in advice.notes)
    # Never the half-context 2,048 it used to size silently; a given length is not asked.
    assert all("2,048" not in n.text for n in advice.notes)
    given = bundle.advise(AdviceRequest(brief=_bge(), max_candidates=5, as_of=TODAY))
    assert "traffic.avg_input_tokens" not in {q.field for q in given.questions}
