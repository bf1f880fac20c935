"""Issue 15 item 4: FP4 weights (PRECISION_FP4) at the GPU's FP4 rate where it has one, emulated (weight-only,
16-bit compute) and said where it has not; FP8 and MoE training at published efficiencies.

Published figures:
- TensorRT-LLM docs/source/performance/perf-overview.md (v1.0, "Total Output Throughput", trtllm-bench at
  maximum load, ISL/OSL 1000/1000): Llama 3.3 70B FP4 on B200 TP1 7,007 tokens/s, GB200 TP1 7,326; Llama 3.1
  405B FP4 on B200 TP4 5,209, GB200 TP4 5,389. Every brief below is the same shape: 1,000 in / 1,000 out at a
  batch of 128 sequences (what one B200 holds beside Llama 3.3 70B's FP4 weights at 2,000 tokens each).
- DeepSeek-V3 technical report (2024), table 1 and section 3: pretraining on 14.8T tokens took 2.664M H800
  GPU-hours on 2,048 H800 in FP8 mixed precision; 671B total, 37B active; batch 15,360 sequences of 4,096.
  The H800 is not in the catalog: it is an H100 SXM with its NVLink cut to 400 GB/s (same 989/1,979 TFLOPS),
  so the brief is sized on h100-sxm.
- FP8 training speed-up 1.2-1.5x over BF16 (NVIDIA Megatron-Bridge tuning guide) and MoE MFU 0.64 of dense
  (NeMo AutoModel DGX-H100: DeepSeek-V3 250 vs Llama3 70B 389 model TFLOPS/GPU): rules/assumptions.yaml.
"""

from __future__ import annotations

from typing import Any

import pytest

from service.domain.brief import PRECISIONS, AdviceRequest, Brief, Model, Traffic, Training
from service.wire.api import pb

from .conftest import TODAY


@pytest.fixture(scope="module")
def bundle(catalog_bundle: Any) -> Any:  # noqa: ANN401
    """The figures as sized, on catalog prices: placement on offers rounds counts up to whole instances
    (tests/test_placement.py), which would hide the GPUs the physics asks for."""
    return catalog_bundle


def _within(value: float, published: float, rel: float) -> bool:
    return abs(value - published) <= rel * published


def _candidates(bundle: Any, brief: Brief) -> dict[str, Any]:  # noqa: ANN401
    advice = bundle.advise(AdviceRequest(brief=brief, max_candidates=50, as_of=TODAY))
    return {c.gpu: c for c in advice.candidates}


def test_fp4_is_a_precision_of_the_api():
    assert pb.PRECISION_FP4 == 7 and "FP4" in PRECISIONS


def _llama(params: float, layers: int, hidden: int, precision: str = "FP4") -> Brief:
    return Brief(workload="BATCH_INFERENCE",
                 model=Model(params, precision=precision, context_tokens=2000, layers=layers, kv_heads=8,
                             head_dim=128, hidden_size=hidden),
                 traffic=Traffic(batch_size=128, avg_input_tokens=1000, avg_output_tokens=1000),
                 success_unit="TOKEN")


def test_llama33_70b_fp4_on_one_b200_and_one_gb200_is_trtllm_s_throughput(bundle):
    c = _candidates(bundle, _llama(70.6, 80, 8192))
    for gpu, published in (("b200", 7_007), ("gb200", 7_326)):
        assert c[gpu].performance.tensor_parallel == 1
        tps = c[gpu].performance.tokens_per_second_per_replica
        assert _within(tps, published, 0.30), (gpu, tps)  # was 2,890 at the BF16 rate
        assert not any(r.rule_id == "eligibility.fp4-emulated" for r in c[gpu].caveats)


def test_llama31_405b_fp4_on_four_b200_is_trtllm_s_throughput(bundle):
    c = _candidates(bundle, _llama(405, 126, 16384))
    for gpu, published in (("b200", 5_209), ("gb200", 5_389)):
        assert c[gpu].performance.tensor_parallel == 4
        assert _within(c[gpu].performance.tokens_per_second_per_replica, published, 0.30), gpu


def test_fp4_without_fp4_tensor_cores_keeps_the_memory_win_and_says_the_compute_is_16_bit(bundle):
    fp4, fp8 = _candidates(bundle, _llama(70.6, 80, 8192)), _candidates(bundle, _llama(70.6, 80, 8192, "FP8"))
    h100 = fp4["h100-sxm"]
    assert any(r.rule_id == "eligibility.fp4-emulated" for r in h100.caveats)
    weights = [dict(c["h100-sxm"].memory.breakdown)["weights"] for c in (fp4, fp8)]
    assert weights[0] < 0.6 * weights[1]  # half the weight bytes of FP8 (the KV cache stays 16-bit under FP4) ...
    # ... read faster, computed at BF16 (989) rather than FP8 (1,979): slower than FP8 on this batch.
    assert h100.performance.tokens_per_second_per_replica < fp8["h100-sxm"].performance.tokens_per_second_per_replica
    assert fp4["b200"].performance.tokens_per_second_per_replica > fp8["b200"].performance.tokens_per_second_per_replica


def _pretrain(params: float, active: float, precision: str, tokens_billion: float, days: float,
              global_batch: int = 0) -> Brief:
    return Brief(workload="PRETRAINING",
                 model=Model(params, active, precision=precision, context_tokens=4096),
                 training=Training(tokens_billion=tokens_billion, target_days=days, global_batch_tokens=global_batch),
                 success_unit="TRAINING_RUN")


def test_deepseek_v3_style_fp8_moe_pretraining_lands_on_the_reports_gpu_hours(bundle):
    h100 = _candidates(bundle, _pretrain(671, 37, "FP8", 14_800, 54, 15_360 * 4096))["h100-sxm"]
    assert _within(h100.performance.gpu_hours, 2.664e6, 0.30), h100.performance  # was 1.15M
    assert _within(h100.count, 2048, 0.30)


def test_fp8_training_is_faster_than_bf16_by_its_measured_speedup_not_its_peak(bundle):
    # Dense 70B on 2T tokens: FP8 takes 1/1.3 of BF16's GPU-hours (1.2-1.5x measured), not half (2x the peak).
    bf16, fp8 = (_candidates(bundle, _pretrain(70, 0, p, 2000, 30))["h100-sxm"].performance.gpu_hours
                 for p in ("BF16", "FP8"))
    assert 1.2 <= bf16 / fp8 <= 1.5


def test_an_moe_run_costs_more_gpu_hours_per_active_parameter_than_a_dense_one(bundle):
    dense = _candidates(bundle, _pretrain(37, 0, "BF16", 1000, 30))["h100-sxm"].performance.gpu_hours
    moe = _candidates(bundle, _pretrain(671, 37, "BF16", 1000, 30))["h100-sxm"].performance.gpu_hours
    # Expert all-to-all and grouped GEMMs (1 / moe_training_efficiency = 1.8), and issue 41: the 671B model's
    # states span ~17x the GPUs of a dense 37B, which pays model_parallel_efficiency per doubling (NeMo AutoModel:
    # DeepSeek-V3 reaches 250 model TFLOPS/GPU on 256 H100, dense runs 400-550).
    assert 1.5 <= moe / dense <= 3.0
