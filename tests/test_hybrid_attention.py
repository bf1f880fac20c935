"""Issue 15 item 3: only `sliding_window_layers` layers use the window; the rest attend fully. A window given
without it is sized as the worst case (every layer full), said in a note, and asked.

Published shapes (each model's config.json):
- Gemma 3 27B: 62 layers, 16 KV heads, head_dim 128, hidden 5,376, sliding_window 1,024, one global layer per
  five local (sliding_window_pattern 6): 52 windowed, 10 global. At 4 sessions x 128k tokens in BF16 it needs
  ~100 GB (issue 15: 95-135 GB; the all-windowed sizing said 63 GB, 1 x H100).
- gpt-oss-120b: 36 layers, 8 KV heads, head_dim 64, sliding_window 128 on every other layer (18 of 36).
- Mistral-7B-v0.1: 32 layers, 8 KV heads, head_dim 128, sliding_window 4,096 on every layer.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from service.domain.brief import AdviceRequest, Brief, Model, Traffic
from service.physics import compute
from service.physics import memory as mem

from .conftest import TODAY


@pytest.fixture(scope="module")
def bundle(catalog_bundle: Any) -> Any:  # noqa: ANN401
    """The figures as sized, on catalog prices: placement on offers rounds counts up to whole instances
    (tests/test_placement.py), which would hide the GPUs the physics asks for."""
    return catalog_bundle


def _gemma(window_layers: int, sessions: int = 4, tokens: int = 131_072) -> Brief:
    return Brief(workload="REALTIME_INFERENCE",
                 model=Model(27.4, precision="BF16", context_tokens=tokens, layers=62, kv_heads=16, head_dim=128,
                             hidden_size=5376, sliding_window_tokens=1024, sliding_window_layers=window_layers),
                 traffic=Traffic(concurrent_sessions=sessions, avg_input_tokens=tokens - 1000,
                                 avg_output_tokens=1000))


def _need(bundle, brief: Brief, gpu: str = "h200") -> tuple[float, int, tuple[str, ...]]:  # noqa: ANN001
    advice = bundle.advise(AdviceRequest(brief=brief, max_candidates=50, as_of=TODAY))
    c = next(c for c in advice.candidates if c.gpu == gpu)
    per_copy = c.memory.need_gb / max(1, c.performance.replicas)
    return per_copy, c.count, tuple(q.field for q in advice.questions)


def test_gemma3_27b_at_4_sessions_of_128k_needs_about_100_gb(bundle):
    need, count, asked = _need(bundle, _gemma(52))
    assert 95 <= need <= 135, need
    assert "model.sliding_window_layers" not in asked
    h100 = _need(bundle, _gemma(52), "h100-sxm")
    assert h100[1] >= 2  # not the single H100 an all-windowed sizing gave


def test_a_window_without_its_layers_is_sized_as_the_worst_case_and_asked(bundle):
    unknown_need, _, asked = _need(bundle, _gemma(0))
    assert "model.sliding_window_layers" in asked
    assert unknown_need > _need(bundle, _gemma(52))[0] > _need(bundle, _gemma(62))[0]
    advice = bundle.advise(AdviceRequest(brief=_gemma(0), locale="zh-CN", as_of=TODAY))
    assert any(n.rule_id == "sizing.window" for n in advice.notes)
    q = next(q for q in advice.questions if q.field == "model.sliding_window_layers")
    assert "1,024" in q.text or "1024" in q.text


def test_kv_of_hybrid_layers_counts_each_kind_of_layer():
    gemma = replace(mem.Architecture(62, 16, 128, 5376, 32, 262_144, True, window=1024), window_layers=52)
    per_seq = mem.kv_cache_gb(gemma, 131_072, 1)
    assert per_seq == pytest.approx(2 * 16 * 128 * 2 * (10 * 131_072 + 52 * 1024) / 1e9)
    # gpt-oss-120b: half the layers at a 128-token window halve a long context's KV cache.
    oss = mem.Architecture(36, 8, 64, 2880, 64, 201_088, True, window=128, window_layers=18)
    assert mem.kv_cache_gb(oss, 100_000, 1) == pytest.approx(
        mem.kv_cache_gb(replace(oss, window=0), 100_000, 1) / 2, rel=0.01)
    # Mistral 7B windows every layer: a 32k sequence keeps 4,096 tokens.
    mistral = mem.Architecture(32, 8, 128, 4096, 32, 32_000, True, window=4096, window_layers=32)
    assert mem.kv_cache_gb(mistral, 32_768, 1) == pytest.approx(mem.kv_cache_gb(mistral, 4096, 1))
    # Attention FLOPs follow the same split: full layers S², windowed S·W.
    assert compute.attention_flops(62, 131_072, 5376, 1024, 52) == pytest.approx(
        2 * 131_072 * 5376 * (10 * 131_072 + 52 * 1024))


def test_mistral_with_every_layer_windowed_keeps_a_32k_context_small(bundle):
    brief = Brief(workload="REALTIME_INFERENCE",
                  model=Model(7.2, precision="BF16", context_tokens=32_768, layers=32, kv_heads=8, head_dim=128,
                              hidden_size=4096, sliding_window_tokens=4096, sliding_window_layers=32),
                  traffic=Traffic(concurrent_sessions=16, avg_input_tokens=30_000, avg_output_tokens=500))
    windowed, _, _ = _need(bundle, brief, "l40s")
    full, _, _ = _need(bundle, replace(brief, model=replace(brief.model, sliding_window_tokens=0,
                                                            sliding_window_layers=0)), "l40s")
    assert windowed < full / 3


def test_gemma3_27b_by_name_gets_the_registry_s_hybrid_layers(bundle):
    # The same 95-135 GB as the explicit brief above: the registry (rules/models/gemma.yaml, from the model's
    # config.json: 62 layers, 5 local : 1 global, window 1,024) fills sliding_window_layers = 52.
    brief = Brief(workload="REALTIME_INFERENCE", model=Model(name="gemma-3-27b", context_tokens=131_072),
                  traffic=Traffic(concurrent_sessions=4))
    need, _, _ = _need(bundle, brief)
    assert 95 <= need <= 135, need
    explicit, _, _ = _need(bundle, _gemma(52))
    assert need == pytest.approx(explicit, rel=0.05)  # by name and by explicit layers size alike
