"""Issue 23 item 10: B300 and GB300 (Blackwell Ultra), RTX PRO 6000 Blackwell (96 GB) and the China-market H20
in the catalog, each with its published dense figures and sources, and sized like any other GPU.

Published (see each row's spec_source): GB300 NVL72 rack 1,080 PFLOPS dense FP4, 360 FP8, 180 BF16, 20 TB HBM3e
at 576 TB/s over 72 GPUs, 1.4 kW a GPU; HGX B300 2.25 PFLOPS BF16, 4.5 FP8, 288 GB, 1.1 kW; RTX PRO 6000
Blackwell 96 GB GDDR7 at 1,792 GB/s, 4,000 sparse FP4 TOPS, 600 W; H20 96 GB HBM3 at 4.0 TB/s, 148 dense BF16
TFLOPS, 296 FP8, 400 W.
"""

from __future__ import annotations

from typing import Any

import pytest

from service.domain.brief import AdviceRequest, Brief, Model, Traffic

from .conftest import TODAY
from .test_catalog_data import _current, catalog, gpus  # noqa: F401 - the fixtures


def test_published_dense_figures(gpus):  # noqa: F811
    gb300, b300, pro, h20 = gpus["gb300"], gpus["b300"], gpus["rtx-pro-6000"], gpus["h20"]
    assert (gb300["tflops_fp4"] * 72, gb300["tflops_fp8"] * 72, gb300["tflops_bf16"] * 72) == (
        1_080_000, 360_000, 180_000)
    assert gb300["memory_gb"] == 288 and gb300["bandwidth_tbs"] * 72 == 576 and gb300["tdp_w"] == 1400
    assert gb300["nvlink_domain"] == 72 and gb300["rack_gpus"] == 72
    assert (b300["tflops_bf16"], b300["tflops_fp8"], b300["memory_gb"], b300["tdp_w"]) == (2250, 4500, 288, 1100)
    assert pro["memory_gb"] == 96 and pro["bandwidth_tbs"] == 1.792 and pro["tflops_fp4"] * 2 == 4000
    assert pro["interconnect"]["kind"] == "pcie" and pro["nvlink_domain"] == 1
    assert (h20["memory_gb"], h20["bandwidth_tbs"], h20["tflops_bf16"], h20["tflops_fp8"], h20["tdp_w"]) == (
        96, 4.0, 148, 296, 400)
    for g in (gb300, b300, pro, h20):
        assert g["spec_source"] and g["spec_as_of"], g["id"]
        for kind in ("rent", "purchase"):
            row = _current(g, kind)
            assert row["as_of"] and row["source"], (g["id"], kind)


@pytest.fixture(scope="module")
def bundle(catalog_bundle: Any) -> Any:  # noqa: ANN401
    return catalog_bundle


def test_the_h20_decodes_fast_and_prefills_slowly(bundle):
    # 4.0 TB/s against an H100's 3.35, 148 TFLOPS against 989: a 70B FP8 decode step is faster on the H20, a
    # prompt's prefill about 6.7x slower.
    brief = Brief(workload="REALTIME_INFERENCE", success_unit="RESPONSE",
                  model=Model(70, precision="FP8", context_tokens=8192),
                  traffic=Traffic(concurrent_sessions=1, avg_input_tokens=4000, avg_output_tokens=500))
    advice = bundle.advise(AdviceRequest(brief=brief, max_candidates=60, as_of=TODAY))
    c = {x.gpu: x for x in advice.candidates}
    h20, h100 = c["h20"].performance, c["h100-sxm"].performance
    assert h20.itl_ms < h100.itl_ms * (h100.tensor_parallel / max(1, h20.tensor_parallel)) + 1
    assert h20.ttft_ms > 3 * h100.ttft_ms


def test_288_gb_holds_a_70b_bf16_model_on_one_card(bundle):
    brief = Brief(workload="REALTIME_INFERENCE", success_unit="RESPONSE",
                  model=Model(70, precision="BF16", context_tokens=8192),
                  traffic=Traffic(concurrent_sessions=8, avg_input_tokens=2000, avg_output_tokens=500))
    advice = bundle.advise(AdviceRequest(brief=brief, max_candidates=60, as_of=TODAY))
    c = {x.gpu: x for x in advice.candidates}
    assert c["b300"].performance.tensor_parallel == 1 and c["gb300"].performance.tensor_parallel == 1
    assert c["b200"].performance.tensor_parallel == 1  # 192 GB as the driver reports it holds 140 GB too
    assert c["rtx-pro-6000"].performance.tensor_parallel >= 2  # 96 GB does not
