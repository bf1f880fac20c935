"""Issue 36, seventh pass: the FP4 rows of AIConfigurator's measurement file taken by a stated rule, the deployment
each row was measured with (InferenceX's exports count GPUs as tp x ep), and one expressibility rule for every row."""

from __future__ import annotations

import csv
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from service.accuracy.calibrate import merge_groups, serving_rows, source_folds
from service.accuracy.datasets import INFERENCEX_EXPORTS, Row, _aic_group, _deployment
from service.accuracy.harness import read_rows, unexpressed
from service.domain.brief import Brief, Traffic

FOLDER = Path(__file__).parents[1] / "calibration"
SAMPLE = FOLDER / "aiconfigurator-silicon_sample-fp4.csv"


def _row(source: str, backend: str, tp: str, adp: str, moe_tp: str, moe_ep: str, pp: str = "1") -> dict[str, str]:
    return {"silicon_data_source": source, "backend": backend, "tp_size": tp, "attention_dp_size": adp,
            "moe_tp_size": moe_tp, "moe_ep_size": moe_ep, "pp_size": pp, "model_path": "deepseek-ai/DeepSeek-R1",
            "system": "b200_sxm", "backend_version": "0.5.9", "id": "x"}


def test_the_same_measurement_reads_the_same_gpus_in_every_inferencex_export() -> None:
    # DeepSeek-R1 FP4 on B200, SGLang 0.5.9, InferenceX tp 8 ep 8 at 4 sessions (188.7 ms / 8.05 ms): the 2026-03-25
    # export files it as tp_size 8, the 2026-04-06 export and the database dump as tp_size 64, moe 8 x 8.
    early = _row("source_file=2026-03-25.csv; model=DeepSeek-R1", "sglang", "8", "1", "1", "8")
    late = _row("source_file=2026-04-06.csv; model=DeepSeek-R1", "sglang", "64", "1", "8", "8")
    dump = _row("db-dump/2026-04-27; config_id=201", "sglang", "64", "1", "8", "8")
    assert _deployment(early) == _deployment(late) == _deployment(dump) == (8, 1, 1)
    # TensorRT-LLM with attention DP: tp 4 ep 4 is attention_dp_size 4 in 2026-03-25, 16 (and moe 4 x 4) later
    assert _deployment(_row("source_file=2026-03-25.csv", "trtllm", "1", "4", "1", "4")) == (4, 4, 1)
    assert _deployment(_row("source_file=2026-04-06.csv", "trtllm", "1", "16", "4", "4")) == (4, 4, 1)
    # vLLM tp 4 ep 4 later reads attention_dp_size 4, moe_ep_size 16: 4 GPUs, attention tensor parallel
    assert _deployment(_row("db-dump/2026-04-27; config_id=635", "vllm", "4", "4", "1", "16")) == (4, 1, 1)
    # other files keep their columns: a gap-analysis TP8 EP8 copy is 8 GPUs, pipeline stages multiply
    assert _deployment(_row("source_file=deepseek_r1.csv", "trtllm", "8", "", "1", "8")) == (8, 1, 1)
    assert _deployment(_row("source_file=x.csv", "vllm", "8", "1", "8", "1", pp="2")) == (16, 1, 2)


def test_an_inferencex_campaign_is_one_group_whatever_its_deployments_and_model_name() -> None:
    one = _row("source_file=2026-04-06.csv; measured=2026-03-25T10:00:00Z", "sglang", "64", "1", "8", "8")
    two = _row("db-dump/2026-04-27; config_id=202; measured=2026-03-25T00:00:00.000Z", "sglang", "16", "1", "4", "4")
    two["model_path"] = "deepseek-ai/DeepSeek-V3"  # the dump's name for InferenceX's dsr1
    other_day = _row("source_file=2026-04-06.csv; measured=2026-03-26T10:00:00Z", "sglang", "64", "1", "8", "8")
    assert _aic_group(one) == _aic_group(two) != _aic_group(other_day)
    gap = _row("source_file=/a/b.csv; gtl_job_id=1", "trtllm", "8", "", "1", "8")
    assert _aic_group(gap) == "aiconfigurator:/a/b.csv"


def test_every_sample_row_is_what_the_stated_selection_rule_takes_once(catalog_bundle: Any) -> None:
    with SAMPLE.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    with (FOLDER / "aiconfigurator-silicon_refs.csv").open(newline="", encoding="utf-8") as f:
        refs = list(csv.DictReader(f))
    assert len(rows) == 294

    def key(r: dict[str, str]) -> tuple[str, ...]:
        return tuple(r[k] for k in ("system", "backend", "isl", "osl", "silicon_ttft_ms", "silicon_tpot_ms"))

    for r in rows:
        concurrency = int(re.search(r"silicon_concurrency=(\d+)", r["silicon_data_source"]).group(1))
        assert (r["mode"], r["gemm_quant_mode"]) == ("agg", "nvfp4")
        assert (r["isl"], r["osl"]) in {("1024", "1024"), ("8192", "1024")} and concurrency in {4, 16, 64}
        assert r["silicon_data_source"].split(";")[0] in INFERENCEX_EXPORTS
    assert len({key(r) for r in rows}) == len(rows) and not {key(r) for r in rows} & {key(r) for r in refs}
    read, skipped = read_rows(catalog_bundle, FOLDER)
    sample = [r for r in read if r.dataset == "aiconfigurator-sample"]
    assert len(sample) == len(rows) and not [s for s in skipped if s.dataset == "aiconfigurator-sample"]


def test_the_rows_read_with_the_deployment_inferencex_ran(catalog_bundle: Any) -> None:
    rows = {r.id: r for r in read_rows(catalog_bundle, FOLDER)[0]}
    b300 = rows["dsr1_b300_sglang_fp4_agg_1024x1024_c32_cfg717"]  # TP4 EP4, not TP16 over two nodes
    assert (b300.gpus, b300.attention_dp, b300.unexpressed) == (4, 1, "")
    kimi = rows["kimi_k2_5_gap_analysis_kimi_k2_5_gap_analysis_b200_sxm_vllm_fp4_agg_1024x1024_c16_tp4_ep4_5"]
    assert (kimi.gpus, kimi.attention_dp, kimi.unexpressed) == (4, 1, "")
    # the sample's copy of the same configuration 635 (the export's attention_dp_size 4, moe_ep_size 16) agrees
    assert {(r.gpus, r.attention_dp) for r in rows.values() if r.id.endswith("_cfg635")} <= {(4, 1)}


def _brief(sessions: int, output: int) -> Brief:
    return Brief(workload="REALTIME_INFERENCE", traffic=Traffic(concurrent_sessions=sessions, avg_output_tokens=output))


def test_one_expressibility_rule_for_every_row(catalog_bundle: Any) -> None:
    gpus = {g.id: g for g in catalog_bundle.book.catalog}
    base = Row("r", "d", _brief(16, 1000), "b200", 8, {"ttft": 500.0, "itl": 20.0})
    assert unexpressed(base, gpus["b200"]) == ""
    assert "attention data parallel 8" in unexpressed(replace(base, attention_dp=8), gpus["b200"])
    # wider tensor parallelism than the product's group (8), on a rack-scale NVLink domain too
    assert "tensor parallel 36" in unexpressed(replace(base, gpu="gb200", gpus=36), gpus["gb200"])
    assert unexpressed(replace(base, gpus=16, pipeline=2), gpus["b200"]) == ""  # TP8 x 2 stages: the product's shape
    # a TTFT as long as the whole decode at 16 sessions is a queue the source does not record; one session is not
    queued = replace(base, measured={"ttft": 20_000.0, "itl": 20.0})
    assert "queue" in unexpressed(queued, gpus["b200"])
    assert unexpressed(replace(queued, brief=_brief(1, 1000)), gpus["b200"]) == ""
    # the two GB200 gap-analysis rows and the TensorRT-LLM guide's attention-DP rows are marked, and kept out of
    # the folds unless asked for both ways
    read = {r.id: r for r in read_rows(catalog_bundle, FOLDER)[0]}
    marked = {i for i, r in read.items() if r.unexpressed and r.dataset != "aiconfigurator-sample"}
    assert marked == {"deepseek_r1_deepseek_r1_gb200_trtllm_agg_4000x1000_c_tp8_epnone_1",
                      "qwen3_32b_qwen3_32b_gb200_trtllm_agg_4000x1000_c_tp2_epnone_2",
                      "trtllm-dsr1-fp4-8xb200-c3072-fp16kv", "trtllm-dsr1-fp8-8xh200-c1024",
                      # ninth pass: InferenceX runs of MTP configurations (inferencex-deployments.csv)
                      "2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x8192_c16_tp8_0_ep8_0_1260",
                      "2026_04_06_deepseek_r1_b200_sxm_trtllm_fp8_agg_8192x1024_c32_tp8_ep1_577",
                      "2026_04_06_qwen3_5_397b_b200_sxm_sglang_fp8_agg_1024x1024_c32_tp4_ep1_1913"}
    kept = {r.id for r in serving_rows(catalog_bundle, FOLDER)}
    both = {r.id for r in serving_rows(catalog_bundle, FOLDER, unexpressed=True)}
    assert not kept & marked and marked <= both


def test_a_harness_can_be_held_out_as_one_source() -> None:
    # `calibrate --merge-groups inferencex:`: every InferenceX campaign in one fold, whatever the fold count
    rows = [Row(f"r{i}", "d", _brief(4, 100), "b200", 4, {"ttft": 1.0}, group=g)
            for i, g in enumerate(["inferencex:a:1", "inferencex:b:2", "nim", "accelmark:x", "inferencex:c:3"])]
    merged = [merge_groups(r, ["inferencex:"]) for r in rows]
    assert [r.group for r in merged] == ["inferencex:", "inferencex:", "nim", "accelmark:x", "inferencex:"]
    folds = source_folds(merged, 3)
    assert sorted(r.id for r in folds[0]) == ["r0", "r1", "r4"]
    assert merge_groups(rows[2], []) is rows[2]
