"""Issue 23: how a measurement's client sent its prompts is an input of the serving physics (the harness states
it per row where the evidence says), and the models the measured rows name are in the registry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from service.accuracy.datasets import ARRIVALS, read_published
from service.accuracy.harness import _at_width, evaluate
from service.decide.models import resolve
from service.domain.brief import Brief, Model, Traffic

from .conftest import TODAY

FOLDER = Path(__file__).parents[1] / "calibration"
# NVIDIA NIM LLM benchmarking 1.0.0, performance: Llama-3.3-70B-Instruct FP8 on 2 x H100 (TP2), 5000 in / 500 out.
NIM_TTFT_MS = {1: 406.77, 5: 546.7, 25: 688.69}


def _nim(sessions: int) -> Brief:
    model = Model(70.6, precision="FP8", context_tokens=5500, layers=80, kv_heads=8, head_dim=128, hidden_size=8192)
    return Brief(workload="REALTIME_INFERENCE", model=model, toolchain=("nim",),
                 traffic=Traffic(concurrent_sessions=sessions, avg_input_tokens=5000, avg_output_tokens=500))


def _gpu(bundle: Any, gid: str) -> Any:  # noqa: ANN401
    return next(g for g in bundle.book.catalog if g.id == gid)


def test_nim_prompts_under_load_cannot_have_arrived_together(catalog_bundle: Any) -> None:
    # 25 sessions' 5,000-token prompts prefilled as one burst take 25 x 5000 x 2 x 70.6B FLOPs: at the full FP8
    # peak of both H100s (2 x 1,979 TFLOPS) that is 4.5 s, yet NIM measured a mean TTFT of 0.69 s. So its client's
    # prompts were spread out (published.csv says `spread` for these rows), not a lockstep wave.
    h100 = _gpu(catalog_bundle, "h100-sxm")
    burst_s = 25 * 5000 * 2 * 70.6e9 / (2 * h100.tflops_fp8 * 1e12)
    assert burst_s > 4 * NIM_TTFT_MS[25] / 1000
    got = {}
    for sync in (ARRIVALS["spread"], ARRIVALS["together"]):
        got[sync] = _at_width(catalog_bundle, _nim(25), h100, 2, TODAY, sync)["ttft"]
    assert got[0.0] == pytest.approx(NIM_TTFT_MS[25], rel=0.25)  # spread: within 25% of the measured 689 ms
    assert got[1.0] > 4 * NIM_TTFT_MS[25]  # the wave: seconds
    # At 5 sessions the same: spread arrivals are within 25% of the measured 547 ms.
    five = _at_width(catalog_bundle, _nim(5), h100, 2, TODAY, ARRIVALS["spread"])["ttft"]
    assert five == pytest.approx(NIM_TTFT_MS[5], rel=0.25)
    # One session has nothing to arrive with: the pattern does not matter.
    one = [_at_width(catalog_bundle, _nim(1), h100, 2, TODAY, s)["ttft"] for s in (0.0, 1.0)]
    assert one[0] == pytest.approx(one[1])


def test_the_product_keeps_its_own_assumption_when_no_pattern_is_given(catalog_bundle: Any) -> None:
    # `synchrony` None is the engine's prefill_first (what answers use); an explicit value overrides it.
    h100 = _gpu(catalog_bundle, "h100-sxm")
    default = _at_width(catalog_bundle, _nim(25), h100, 2, TODAY)
    first = catalog_bundle.book.assumptions.values["serving_engines"]["tensorrt-llm"]["prefill_first"]
    explicit = _at_width(catalog_bundle, _nim(25), h100, 2, TODAY, first)
    assert default == pytest.approx(explicit)
    assert _at_width(catalog_bundle, _nim(25), h100, 2, TODAY, 0.0)["ttft"] < default["ttft"]


def test_published_rows_state_their_arrivals_and_a_wrong_word_is_refused(tmp_path: Path) -> None:
    rows = {r.id: r for r in read_published(FOLDER / "published.csv")}
    assert {rows[f"nim-llama-3.3-70b-fp8-2xh100-c{c}"].arrivals for c in (1, 5, 25)} == {"spread"}
    assert rows["baseten-mixtral-8x7b-int8-a100-c1"].arrivals == ""
    text = (FOLDER / "published.csv").read_text(encoding="utf-8").replace(",spread", ",lockstep", 1)
    bad = tmp_path / "published.csv"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="arrivals 'lockstep'"):
        read_published(bad)


def test_rows_with_a_stated_pattern_say_so(catalog_bundle: Any) -> None:
    points, _ = evaluate(catalog_bundle, FOLDER, TODAY)
    nim = {p.estimate: p for p in points if p.row == "nim-llama-3.3-70b-fp8-2xh100-c25"}
    assert "prompts arriving spread" in nim["ttft"].note
    assert nim["ttft"].abs_pct < 25


# Model cards: Kimi K2.5 1T total / 32B activated; MiniMax-M2.5 230B / 10B; Qwen3.5-397B-A17B 397B / 17B.
@pytest.mark.parametrize(("name", "active"), [
    ("moonshotai/Kimi-K2.5", 32.0), ("MiniMaxAI/MiniMax-M2.5", 10.0), ("Qwen/Qwen3.5-397B-A17B", 17.0),
])
def test_the_measured_rows_models_are_in_the_registry_and_their_shapes_add_up(catalog_bundle: Any, name: str,
                                                                             active: float) -> None:
    m = resolve(Brief(model=Model(name=name)), catalog_bundle.book.models).model
    assert m.params_billion > 0 and m.experts > m.experts_per_token > 0
    # One token reads the shared weights and k of E routed experts: the card's activated figure within 25%
    # (MiniMax: 12.3B by these shapes against its card's 10B).
    routed = m.params_billion - m.shared_params_billion
    assert m.shared_params_billion + routed * m.experts_per_token / m.experts == pytest.approx(active, rel=0.25)
    assert m.active_params_billion == active


def test_the_new_models_rows_are_compared(catalog_bundle: Any) -> None:
    points, skipped = evaluate(catalog_bundle, FOLDER, TODAY)
    assert not [s for s in skipped if "not in the registry" in s.why]
    rows = {p.row for p in points}
    assert {"minimaxm2_5_h200_vllm_fp8_agg_1024x1024_c32_cfg637", "qwen3_5_b300_sglang_fp8_agg_1024x1024_c32_cfg716",
            "2026_03_25_kimi_k2_5_b300_sxm_vllm_fp4_agg_1024x1024_c16_tp4_0_ep4_0_42"} <= rows


def test_calibration_scores_ttft_plus_half_tpot_over_the_engine_named_serving_rows(catalog_bundle: Any) -> None:
    from service.accuracy.calibrate import score, serving_rows

    rows = serving_rows(catalog_bundle, FOLDER)
    assert len(rows) >= 30 and all(r.gpus and r.brief.toolchain for r in rows)
    assert {r.arrivals for r in rows if r.id.startswith("nim-")} == {"spread"}
    # median |TTFT| 20 (of 10, 20, 30) + 0.5 x median |TPOT or throughput| 40 (of 40 and 40)
    errs = [("ttft", 10.0), ("ttft", 30.0), ("ttft", 20.0), ("itl", 40.0), ("throughput", 40.0)]
    assert score(errs) == (40.0, 20.0, 40.0)


def test_a_serving_row_states_the_kv_cache_dtype_it_ran_with_and_a_wrong_word_is_refused(tmp_path: Path) -> None:
    # published-serving.csv's kv_cache_precision: what the source says the engine kept (blank = the engine default)
    rows = {r.id: r for r in read_published(FOLDER / "published-serving.csv")}
    assert rows["trtllm-dsr1-fp4-8xb200-c3072-fp16kv"].brief.model.kv_cache_precision == "FP16"
    assert rows["vllm-blog-llama-3.1-8b-h100-c8-20k"].brief.model.kv_cache_precision == "BF16"
    assert rows["trtllm-dsr1-fp8-8xh200-c1024"].brief.model.kv_cache_precision == "UNSPECIFIED"
    text = (FOLDER / "published-serving.csv").read_text(encoding="utf-8").replace(",FP16,49152\n", ",FP12,49152\n", 1)
    bad = tmp_path / "published-serving.csv"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="kv_cache_precision 'FP12'"):
        read_published(bad)
