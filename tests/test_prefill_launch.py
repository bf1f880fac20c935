"""Issue 36, round 5 third pass: what a short prompt's prefill waits for (the host launching its layers' kernels)
and a long prompt's last chunk (only the tokens left). docs/calibration.md "Round 5, third pass"."""

from __future__ import annotations

from service.accuracy.harness import _at_width
from service.decide.models import resolve
from service.decide.sizing import width as width_module
from service.decide.sizing.engines import efficiency
from service.decide.sizing.shape import shape_of
from service.domain.brief import Brief, Model, Traffic

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
    assert width_module.prefill_host_s(dense, eff, a) == dense.arch.layers * eff.prefill_layer_s
    # An MoE layer launches about twice a dense layer's kernels (router, top-k, permutation, grouped GEMMs).
    assert width_module.prefill_host_s(moe, eff, a) == moe.arch.layers * eff.prefill_layer_s * a.num(
        "moe_layer_launches")
    # A 280-token prompt of an 8B model on one H100 computes in ~8 ms; the host's 32 layers hold it longer.
    ttft = _ttft(bundle, _brief("llama-3.1-8b-instruct", 280))
    assert ttft >= (eff.request_s + dense.arch.layers * eff.prefill_layer_s) * 1000


def test_the_launch_time_hides_under_a_long_prompt_and_is_absent_without_it(bundle):
    table = bundle.book.assumptions.values["serving_engines"]["vllm"]
    kept = table["prefill_layer_ms"]
    try:
        short_with, long_with = (_ttft(bundle, _brief("llama-3.1-8b-instruct", n)) for n in (280, 28650))
        table["prefill_layer_ms"] = 0.0
        width_module._ENGINE_ON.clear()
        short_without, long_without = (_ttft(bundle, _brief("llama-3.1-8b-instruct", n)) for n in (280, 28650))
    finally:
        table["prefill_layer_ms"] = kept
        width_module._ENGINE_ON.clear()
    assert short_with > short_without + 10  # 32 layers x 0.7 ms less the ~8 ms of GPU time
    assert long_with == long_without  # each 8,192-token chunk's GPU time is far above 32 x 0.7 ms
