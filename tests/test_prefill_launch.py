"""Issue 36, round 5 third pass: what a short prompt's prefill waits for (the host launching its layers' kernels)
and a long prompt's last chunk (only the tokens left). docs/calibration.md "Round 5, third pass"."""

from __future__ import annotations

import pytest

from service.accuracy.harness import _at_width
from service.decide.models import resolve
from service.decide.sizing import width as width_module
from service.decide.sizing.engines import efficiency
from service.decide.sizing.shape import shape_of
from service.domain.brief import Brief, Model, Traffic
from service.physics import serving

from .conftest import TODAY


def _brief(model: str, prompt: int, engine: str = "vllm") -> Brief:
    return Brief(workload="REALTIME_INFERENCE", model=Model(name=model, precision="BF16", context_tokens=prompt + 64),
                 traffic=Traffic(concurrent_sessions=1, avg_input_tokens=prompt, avg_output_tokens=64),
                 toolchain=(engine,) if engine else ())


def _ttft(bundle, brief: Brief, gpu: str = "h100-sxm", width: int = 1) -> float:
    g = next(x for x in bundle.book.catalog if x.id == gpu)
    return _at_width(bundle, resolve(brief, bundle.book.models), g, width, TODAY)["ttft"]


def test_a_prompt_one_token_over_the_budget_pays_for_one_token_more_not_a_whole_chunk(bundle):
    # The engines' budget is 8,192 tokens a step: an 8,193-token prompt is a full chunk and a one-token chunk.
    at, over = (_ttft(bundle, _brief("llama-3.1-8b-instruct", n, "")) for n in (8192, 8193))
    assert at < over < 1.1 * at
    # 28,650 tokens are three full chunks and 4,074 tokens: well under four full chunks' time.
    full = _ttft(bundle, _brief("llama-3.1-8b-instruct", 3 * 8192, ""))
    assert full < _ttft(bundle, _brief("llama-3.1-8b-instruct", 28650, "")) < full * 4 / 3


def test_a_short_prefill_takes_at_least_the_host_s_launch_time_per_layer(bundle):
    a = bundle.book.assumptions
    gpu = next(x for x in bundle.book.catalog if x.id == "h100-sxm")
    eff = efficiency(gpu, ("vllm",), a)
    assert eff.prefill_layer_s > 0
    dense = shape_of(resolve(_brief("llama-3.1-8b-instruct", 280), bundle.book.models), a)
    moe = shape_of(resolve(_brief("mixtral-8x7b-instruct", 280), bundle.book.models), a)
    assert dense is not None and moe is not None
    assert width_module.prefill_host_s(dense, eff.prefill_layer_s, a) == dense.arch.layers * eff.prefill_layer_s
    # An MoE layer launches about twice a dense layer's kernels (router, top-k, permutation, grouped GEMMs).
    assert width_module.prefill_host_s(moe, eff.prefill_layer_s, a) == moe.arch.layers * eff.prefill_layer_s * a.num(
        "moe_layer_launches")
    # A 280-token prompt of an 8B model on one H100 computes in ~8 ms; the host's 32 layers hold it longer.
    ttft = _ttft(bundle, _brief("llama-3.1-8b-instruct", 280))
    assert ttft >= (eff.request_s + dense.arch.layers * eff.prefill_layer_s) * 1000


def test_the_launch_time_hides_under_a_long_prompt_and_is_absent_without_it(bundle):
    table = bundle.book.assumptions.values["serving_engines"]["vllm"]
    kept = dict(table)
    try:
        short_with, long_with = (_ttft(bundle, _brief("llama-3.1-8b-instruct", n)) for n in (280, 28650))
        table.update(prefill_layer_ms=0.0, prefill_step_layer_ms=0.0)
        width_module._ENGINE_ON.clear()
        short_without, long_without = (_ttft(bundle, _brief("llama-3.1-8b-instruct", n)) for n in (280, 28650))
    finally:
        table.update(kept)
        width_module._ENGINE_ON.clear()
    assert short_with > short_without + 10  # 32 layers x 0.7 ms less the ~8 ms of GPU time
    assert long_with == long_without  # each 8,192-token chunk's GPU time is far above 32 x 0.7 ms


def test_each_chunk_pays_the_launch_time_and_the_prompt_its_host_time_once():
    # Four chunks of 20 ms GPU time each hide a 5 ms launch each; a 90 ms host time a prompt costs once adds to them.
    assert serving.chunked_prefill_seconds(3, 0.020, 0.020, 0.005) == pytest.approx(0.080)
    assert serving.chunked_prefill_seconds(3, 0.020, 0.020, 0.005, 0.090) == pytest.approx(0.170)
    # Small chunks below the launch time each pay it: 4 steps x 30 ms.
    assert serving.chunked_prefill_seconds(3, 0.002, 0.001, 0.030) == pytest.approx(0.120)
    # No last chunk: only the full ones; no full chunk: only the last one.
    assert serving.chunked_prefill_seconds(2, 0.020, 0.0, 0.005) == pytest.approx(0.040)
    assert serving.chunked_prefill_seconds(0, 0.0, 0.003, 0.005) == pytest.approx(0.005)
    with pytest.raises(ValueError):
        serving.chunked_prefill_seconds(-1, 0.02, 0.0, 0.0)


def test_a_smaller_token_budget_multiplies_the_launch_time_but_not_the_prompt_s_host_time(bundle):
    # One 7,373-token prompt of an 8B model on an H100 (~0.2 s of GPU time), in one 8,192-token step or in four
    # 2,048-token steps, with a host time of 10 ms a layer (320 ms: above a chunk's GPU time, to show how it is
    # charged): once a prompt it adds 320 ms whatever the budget; once a step, each of the four steps takes 320 ms.
    table = bundle.book.assumptions.values["serving_engines"]["vllm"]
    kept = dict(table)
    try:
        table.update(prefill_layer_ms=0.0, prefill_prompt_layer_ms=0.0)
        width_module._ENGINE_ON.clear()
        gpu_only = _ttft(bundle, _brief("llama-3.1-8b-instruct", 7373))
        table.update(prefill_prompt_layer_ms=10.0)
        width_module._ENGINE_ON.clear()
        big = _ttft(bundle, _brief("llama-3.1-8b-instruct", 7373))
        table.update(token_budget=2048)
        width_module._ENGINE_ON.clear()
        small = _ttft(bundle, _brief("llama-3.1-8b-instruct", 7373))
        table.update(prefill_layer_ms=10.0, prefill_prompt_layer_ms=0.0)
        width_module._ENGINE_ON.clear()
        per_step = _ttft(bundle, _brief("llama-3.1-8b-instruct", 7373))
    finally:
        table.clear()
        table.update(kept)
        width_module._ENGINE_ON.clear()
    assert big == pytest.approx(gpu_only + 320, rel=1e-9)
    assert small == pytest.approx(big, rel=0.05)  # four small steps' GPU time is about the one big step's
    assert per_step >= 4 * 320


def test_an_mla_attention_layer_adds_its_extra_launches_to_the_prefill_host_time(bundle):
    # DeepSeek-R1: 61 layers, MoE and MLA. Absent from the rules the MLA term is 0 (the shipped estimates); set, each
    # layer costs the host moe_layer_launches + mla_attention_launches dense layers' worth; a GQA model is unmoved.
    a = bundle.book.assumptions
    mla = shape_of(resolve(_brief("deepseek-r1", 1024), bundle.book.models), a)
    gqa = shape_of(resolve(_brief("mixtral-8x7b-instruct", 1024), bundle.book.models), a)
    assert mla is not None and gqa is not None and mla.arch.kind == "MLA" and gqa.arch.kind != "MLA"
    moe = a.num("moe_layer_launches")
    assert "mla_attention_launches" not in a.values
    assert width_module.prefill_host_s(mla, 0.001, a) == pytest.approx(mla.arch.layers * 0.001 * moe)
    try:
        a.values["mla_attention_launches"] = 0.6
        assert width_module.prefill_host_s(mla, 0.001, a) == pytest.approx(mla.arch.layers * 0.001 * (moe + 0.6))
        assert width_module.prefill_host_s(gqa, 0.001, a) == pytest.approx(gqa.arch.layers * 0.001 * moe)
    finally:
        a.values.pop("mla_attention_launches", None)
