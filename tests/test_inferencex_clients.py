"""Issue 36, twelfth pass: the benchmark client each InferenceX campaign ran (calibration/
inferencex-deployments.csv `num_prompts` ... `client`, read at the campaign's commit): how many requests its figures
are over, and the lengths it drew, which the harness sizes at their mean."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from service.accuracy.datasets import DEPLOYMENT_COLUMNS, mean_length, read_deployments
from service.accuracy.harness import read_rows

FOLDER = Path(__file__).parents[1] / "calibration"
TABLE = FOLDER / "inferencex-deployments.csv"


def test_every_campaign_read_has_its_client_cited() -> None:
    for (group, _), line in read_deployments(TABLE).items():
        if line["commit"]:
            assert line["num_prompts"] in ("10xCONC", ">=10xCONC"), group
            assert (line["max_concurrency"], line["request_rate"], line["random_range_ratio"]) == ("CONC", "inf",
                                                                                                    "0.8")
            assert line["warmups"] in ("none", "2xCONC") and line["client"], group
        else:  # not read: blank, and the note says why
            assert not line["num_prompts"] and not line["client"] and line["note"], group


def test_a_client_that_does_not_read_right_is_refused(tmp_path: Path) -> None:
    with TABLE.open(newline="", encoding="utf-8") as f:
        line = next(csv.DictReader(f))
    for field, value in (("num_prompts", "10"), ("max_concurrency", "64"), ("request_rate", "8"),
                         ("warmups", "some"), ("random_range_ratio", "1.5"), ("client", "")):
        bad = tmp_path / f"{field}.csv"
        with bad.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, DEPLOYMENT_COLUMNS, lineterminator="\n")
            w.writeheader()
            w.writerow({**line, field: value})
        with pytest.raises(ValueError, match="client's invocation"):
            read_deployments(bad)


def test_the_drawn_lengths_mean() -> None:
    # uniform over [int(0.8 L), L]: 819-1,024 and 6,553-8,192
    assert mean_length(1024, {"random_range_ratio": "0.8"}) == 922
    assert mean_length(8192, {"random_range_ratio": "0.8"}) == 7373
    assert mean_length(1024, {"random_range_ratio": ""}) == mean_length(1024, {}) == 1024


def test_a_campaign_reads_its_mean_lengths_and_keeps_its_nominal_class(catalog_bundle: Any) -> None:
    rows = {r.id: r for r in read_rows(catalog_bundle, FOLDER)[0]}
    minimax = rows["minimaxm2_5_b300_vllm_fp4_agg_8192x1024_c64_cfg728"]
    traffic = minimax.brief.traffic
    assert (traffic.avg_input_tokens, traffic.avg_output_tokens) == (7373, 922)
    # the token budget is the script's ISL * 2 at the nominal ISL; the class is the nominal prompt's (long context)
    assert (minimax.deployment.token_budget, minimax.class_input_tokens) == (16384, 8192)
    assert minimax.brief.model.context_tokens == 8192 + 1024
    # a campaign whose client was not read keeps the file's lengths
    kimi = rows["2026_03_25_kimi_k2_5_b300_sxm_vllm_fp4_agg_8192x1024_c4_tp8_0_ep1_0_44"]
    assert kimi.brief.traffic.avg_input_tokens == 8192


def test_published_serving_rows_state_their_request_counts() -> None:
    with (FOLDER / "published-serving.csv").open(newline="", encoding="utf-8") as f:
        rows = {r["id"]: r for r in csv.DictReader(f)}
    assert rows["gpustack-qwen3-8b-h100-vllm-c4"]["requests"] == "100"
    assert rows["vllm-blog-llama-3.1-8b-h100-c8-20k"]["requests"] == "150"
    assert rows["lambda-minimax-m2.5-4xh100-sglang-c32"]["requests"] == "512"
    # a duration, not a count: blank
    assert rows["accelmark-llama3-8b-1xa100-40g-8sessions"]["requests"] == ""
