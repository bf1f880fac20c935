"""Issue 36, ninth pass: the engine settings each InferenceX campaign ran with (calibration/
inferencex-deployments.csv, read from InferenceX's launch scripts at the commit the campaign ran), applied to every
row of the campaign."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from service.accuracy.datasets import DEPLOYMENT_COLUMNS, Deployment, _budget, read_deployments
from service.accuracy.harness import _at_width, _held, read_rows
from service.decide.models import resolve
from service.decide.sizing.shape import shape_of
from service.domain.brief import Brief, Model, Traffic

from .conftest import TODAY

FOLDER = Path(__file__).parents[1] / "calibration"
TABLE = FOLDER / "inferencex-deployments.csv"


def test_every_inferencex_campaign_of_the_fp4_rows_has_its_settings_cited(catalog_bundle: Any) -> None:
    table = read_deployments(TABLE)
    rows = [r for r in read_rows(catalog_bundle, FOLDER)[0] if r.dataset == "aiconfigurator-sample"]
    campaigns = {r.group for r in rows}
    assert len(campaigns) == 35 and campaigns == {g for g, q in table if q == "nvfp4"}
    # and the FP8 rows of aiconfigurator-silicon_refs.csv that ran a speculative configuration
    assert {g for g, q in table if q != "nvfp4"} <= {r.group for r in read_rows(catalog_bundle, FOLDER)[0]}
    for (group, quant), line in table.items():
        assert quant in ("nvfp4", "fp8")
        if line["kv_cache_precision"] or line["token_budget"] or line["memory_fraction"]:
            # a fact is read somewhere: the commit and the script it was read from
            assert line["commit"] and line["script"].startswith("benchmarks/"), group
        else:
            assert line["note"], group  # not found or not read: said why
    # a line's facts reach every row of its campaign
    for r in rows:
        line = table[(r.group, "nvfp4")]
        assert r.brief.model.kv_cache_precision == (line["kv_cache_precision"] or "UNSPECIFIED"), r.id
        assert (r.deployment.speculative == "mtp") == (line["speculative"] == "mtp"), r.id


def test_the_script_forms_of_a_token_budget() -> None:
    assert _budget("", 8192, 64) == 0  # the engine's default
    assert _budget("16384", 1024, 4) == 16384
    assert _budget("2xISL", 8192, 4) == 16384 and _budget("2xISL", 1024, 64) == 2048  # vLLM: ISL * 2
    # TensorRT-LLM: (CONC + ISL + 64 + 63) / 64 * 64, and at least 8192 where the script says so
    assert _budget("CONC+ISL", 1024, 4) == 1152 and _budget("CONC+ISL", 8192, 64) == 8320
    assert _budget("CONC+ISL>=8192", 1024, 4) == 8192
    with pytest.raises(ValueError, match="token_budget"):
        _budget("ISL*3", 1024, 4)


def test_a_table_that_does_not_read_right_is_refused(tmp_path: Path) -> None:
    with TABLE.open(newline="", encoding="utf-8") as f:
        line = next(csv.DictReader(f))
    for field, value, message in (("kv_cache_precision", "FP6", "kv_cache_precision"),
                                  ("memory_fraction_of", "", "memory_fraction_of"),
                                  ("speculative", "eagle", "speculative")):
        bad = tmp_path / f"{field}.csv"
        with bad.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, DEPLOYMENT_COLUMNS, lineterminator="\n")
            w.writeheader()
            w.writerow({**line, field: value})
        with pytest.raises(ValueError, match=message):
            read_deployments(bad)


def test_the_rows_carry_what_was_run(catalog_bundle: Any) -> None:
    rows = {r.id: r for r in read_rows(catalog_bundle, FOLDER)[0]}
    # MiniMax-M2.5 on B300, 8k prompts at 64 sessions: --kv-cache-dtype fp8, --max-num-batched-tokens ISL * 2
    minimax = rows["minimaxm2_5_b300_vllm_fp4_agg_8192x1024_c64_cfg728"]
    assert minimax.brief.model.kv_cache_precision == "FP8"
    assert (minimax.deployment.token_budget, minimax.deployment.memory_fraction) == (16384, 0.9)
    # gpt-oss-120b on H200 TensorRT-LLM: kv_cache_config dtype auto = the checkpoint's BF16 (no KV quantisation)
    h200 = [r for r in rows.values() if r.group.startswith("inferencex:gpt-oss-120b:h200_sxm:trtllm")]
    assert h200 and {r.brief.model.kv_cache_precision for r in h200} == {"BF16"}
    # DeepSeek-R1 FP4 on B200 TensorRT-LLM, the campaigns of 2026-01-14 and 2026-02-06 ran MTP: not expressed
    mtp = [r for r in rows.values() if r.deployment.speculative == "mtp"]
    assert all("speculative decoding" in r.unexpressed for r in mtp)
    fp4 = [r for r in mtp if r.dataset == "aiconfigurator-sample"]
    assert len(fp4) == 12 and {r.group.rsplit(":", 1)[1] for r in fp4} == {"2026-01-14", "2026-02-06"}
    assert {r.id for r in mtp if r.dataset == "aiconfigurator"} == {
        "2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x8192_c16_tp8_0_ep8_0_1260",
        "2026_04_06_deepseek_r1_b200_sxm_trtllm_fp8_agg_8192x1024_c32_tp8_ep1_577",
        "2026_04_06_qwen3_5_397b_b200_sxm_sglang_fp8_agg_1024x1024_c32_tp4_ep1_1913"}
    # a refs row of a listed campaign and quantisation takes its settings; another campaign's does not
    assert rows["dsr1_b300_sglang_fp4_agg_1024x1024_c32_cfg717"].deployment.token_budget == 16384
    # (and, sixteenth pass, the two DeepSeek-R1 FP8 SGLang campaigns of 2026-03-25, read at 12ba0ae0)
    fp8 = {"2026_04_06_deepseek_r1_b200_sxm_sglang_fp8_agg_1024x1024_c16_tp8_ep1_286",
           "2026_04_06_deepseek_r1_h200_sxm_sglang_fp8_agg_1024x1024_c16_tp8_ep1_238",
           "dsr1_h200_sglang_fp8_agg_1024x1024_c16_cfg81"}
    assert {rows[i].deployment.token_budget for i in fp8} == {32768}
    listed = {"dsr1_b300_sglang_fp4_agg_1024x1024_c32_cfg717", *(r.id for r in mtp), *fp8}
    refs = [r for r in rows.values() if r.dataset == "aiconfigurator" and r.group.startswith("inferencex:")
            and r.id not in listed]
    assert refs and all(r.deployment == Deployment() for r in refs)


def _brief(sessions: int, kv: str = "UNSPECIFIED", engine: str = "vllm") -> Brief:
    return Brief(workload="REALTIME_INFERENCE",
                 model=Model(name="MiniMaxAI/MiniMax-M2.5", precision="FP4", context_tokens=9216,
                             kv_cache_precision=kv),
                 traffic=Traffic(concurrent_sessions=sessions, avg_input_tokens=8192, avg_output_tokens=1024),
                 toolchain=(engine,))


def test_the_settings_move_the_sizing_the_way_the_engine_would(catalog_bundle: Any) -> None:
    book = catalog_bundle.book
    a = book.assumptions
    gpu = next(g for g in book.catalog if g.id == "b300")
    sixteen, fp8 = resolve(_brief(64), book.models), resolve(_brief(64, "FP8"), book.models)
    shape, shape8 = shape_of(sixteen, a), shape_of(fp8, a)
    # an FP8 cache holds more 9k-token sessions on one B300 than a 16-bit one
    assert 0 < _held(gpu, sixteen, shape, a, 1) < _held(gpu, fp8, shape8, a, 1)
    # a cap on running requests admits no more than it; vLLM's memory share as measured (0.9 = safety_headroom)
    assert _held(gpu, fp8, shape8, a, 1, Deployment(max_running=8)) == min(8, _held(gpu, fp8, shape8, a, 1))
    assert _held(gpu, fp8, shape8, a, 1, Deployment(memory_fraction=0.9)) == _held(gpu, fp8, shape8, a, 1)
    assert _held(gpu, fp8, shape8, a, 1, Deployment(memory_fraction=0.6)) < _held(gpu, fp8, shape8, a, 1)
    # SGLang's static pool: a smaller mem-fraction-static holds fewer
    sg = resolve(_brief(64, "FP8", "sglang"), book.models)
    assert _held(gpu, sg, shape_of(sg, a), a, 1, Deployment(memory_fraction=0.6)) < \
        _held(gpu, sg, shape_of(sg, a), a, 1, Deployment(memory_fraction=0.85))
    # a token budget as measured is the one the sizing steps with: 8k prompts at 16 sessions over one 2k-token
    # step each take longer to reach their first token than over the default 8k, and the shipped table is unchanged
    four = resolve(_brief(16, "FP8"), book.models)
    default = _at_width(catalog_bundle, four, gpu, 2, TODAY)["ttft"]
    small = _at_width(catalog_bundle, four, gpu, 2, TODAY, engine=Deployment(token_budget=2048))["ttft"]
    assert small > default
    assert a.values["serving_engines"]["vllm"]["token_budget"] == 8192
    assert _at_width(catalog_bundle, four, gpu, 2, TODAY, engine=Deployment(token_budget=8192))["ttft"] == default
    assert dataclasses.replace(Deployment(), token_budget=0) == Deployment()
