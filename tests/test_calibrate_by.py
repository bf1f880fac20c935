"""Issue 36, round 5's sixteenth pass: `calibrate --by FEATURE` groups the rows' held-out errors by a feature of the
rows (engine, GPU, model, attention, experts, sessions, prompt, GPUs, token budget, poll interval, source), to say
which feature the error follows."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

from service.accuracy.calibrate import BY, by_feature, main, serving_rows

FOLDER = Path(__file__).parents[1] / "calibration"


def test_held_out_errors_grouped_by_a_feature_of_their_rows(catalog_bundle: Any) -> None:
    rows = serving_rows(catalog_bundle, FOLDER)
    sglang = [r for r in rows if r.id.startswith("dsr1_b300_sglang_fp4_agg_1024x1024_c")]
    vllm = [r for r in rows if r.id.startswith("minimaxm2_5_b300_vllm_fp4_agg_1024x1024_c64_")]
    assert len(sglang) >= 3 and len(vllm) >= 3
    per_row = [(r.id, "ttft", -40.0 - i) for i, r in enumerate(sglang)] + [(r.id, "ttft", 10.0) for r in vllm]
    per_row.append((sglang[0].id, "itl", -5.0))
    text = by_feature(sglang + vllm, per_row, "engine", catalog_bundle)
    lines = {line.split()[0]: line for line in text.splitlines()[2:]}
    median = statistics.median(-40.0 - i for i in range(len(sglang)))
    assert f"{len(sglang)}: {median:+.1f} / {abs(median):.1f}" in lines["sglang"]
    assert "1: -5.0 / 5.0" in lines["sglang"]
    assert f"{len(vllm)}: +10.0 / 10.0" in lines["vllm"] and lines["vllm"].rstrip().endswith("-")
    # the largest group first
    first = text.splitlines()[2].split()[0]
    assert first == ("sglang" if len(sglang) + 1 >= len(vllm) else "vllm")
    # InferenceX's SGLang scripts polled every 10 steps under 16 sessions and every 30 at 16 or more
    polls = by_feature(sglang, [(r.id, "ttft", 0.0) for r in sglang], "recv_interval", catalog_bundle)
    assert {line.split()[0] for line in polls.splitlines()[2:]} == {"10", "30"}


def test_every_feature_reads_every_row(catalog_bundle: Any) -> None:
    rows = serving_rows(catalog_bundle, FOLDER)
    per_row = [(r.id, "ttft", 0.0) for r in rows]
    for feature in BY:
        text = by_feature(rows, per_row, feature, catalog_bundle)
        # each line: two spaces, the level in 40 characters, then the TTFT cell "points: signed / abs"
        counted = sum(int(line[42:].split(":")[0]) for line in text.splitlines()[2:])
        assert counted == len(rows), feature


def test_an_unknown_feature_is_refused() -> None:
    with pytest.raises(SystemExit):
        main(["--by", "colour"])
