"""Issue 36, physics round 5: the terms added where the held-out rows missed (docs/accuracy.md "How it moved"):
an MLA prompt's attention at its decompressed heads' width; the calibration's fit kept inside the range each
engine's scheduler allows."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from service.accuracy import calibrate
from service.decide.models import resolve
from service.decide.sizing.shape import shape_of
from service.decide.sizing.width import attention_width
from service.domain.brief import Brief, Model, Traffic
from service.physics import compute, serving

from .conftest import TODAY

FOLDER = Path(__file__).parents[1] / "calibration"


def test_mla_prefill_attends_at_its_decompressed_heads_width():
    # DeepSeek-V3 config.json: 128 heads, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128.
    assert serving.mla_prefill_attention_width(128, 128, 64, 128) == 128 * (128 + 64 + 128) / 2
    assert serving.mla_prefill_attention_width(0, 128, 64, 128) == 0.0
    assert serving.mla_prefill_attention_width(128, 128, 64, 0) == 0.0
    # In compute.attention_flops' terms a GQA model's width is its hidden size: Llama-3 70B's 64 heads of 128.
    assert serving.mla_prefill_attention_width(64, 64, 64, 128) * 2 / (64 * (64 + 64 + 128)) == 1.0


def test_a_deepseek_prompt_attends_three_times_what_its_hidden_size_says(bundle):
    a = bundle.book.assumptions
    brief = Brief(workload="REALTIME_INFERENCE", model=Model(name="deepseek-r1", precision="FP8",
                                                             context_tokens=131072),
                  traffic=Traffic(concurrent_sessions=1, avg_input_tokens=131072, avg_output_tokens=16))
    shape = shape_of(resolve(brief, bundle.book.models), a)
    assert shape is not None and shape.arch.kind == "MLA"
    width = attention_width(shape, a)
    assert width == pytest.approx(20480)
    assert width / shape.arch.hidden_size == pytest.approx(2.857, rel=0.01)
    # A GQA model keeps its hidden size.
    llama = shape_of(resolve(replace(brief, model=Model(name="llama-3.1-70b-instruct", precision="FP8",
                                                                context_tokens=8192)), bundle.book.models), a)
    assert llama is not None and attention_width(llama, a) == llama.arch.hidden_size
    # At 128k tokens attention dominates the prompt: 2 x 61 x S^2 x 20,480 FLOPs against 2 x 37B x S.
    s = 131072
    assert compute.attention_flops(61, s, int(width)) > 3 * 2 * 37e9 * s



def test_the_fit_keeps_prefill_first_inside_the_engine_s_scheduler_range(catalog_bundle):
    # Three of GPUStack's one-H100 rows (vLLM, SGLang, TensorRT-LLM at 4 sessions): whatever they pull towards, a
    # chunked-prefill engine's share stays at most 0.3 and SGLang's at least 0.5.
    table = catalog_bundle.book.assumptions.values["serving_engines"]
    kept = {e: dict(v) for e, v in table.items()}
    try:
        rows = [r for r in calibrate.serving_rows(catalog_bundle, FOLDER) if r.id.startswith("gpustack-qwen3-8b-h100")]
        assert {calibrate.engine_of(r.brief.toolchain) for r in rows} == {"vllm", "sglang", "tensorrt-llm"}
        share = (("prefill_first", calibrate.PREFILL_FIRST),)
        chosen = calibrate.fit(catalog_bundle, rows, TODAY, passes=1, fields=share)
        for engine, values in chosen.items():
            lo, hi = calibrate.PREFILL_FIRST_RANGE[engine]
            assert lo <= values["prefill_first"] <= hi, (engine, values)
    finally:
        for e, v in kept.items():
            table[e].clear()
            table[e].update(v)
        calibrate.width_module._ENGINE_ON.clear()
