"""Issue 36, round 5's sixteenth pass: SGLang's scheduler polls for new requests every `--scheduler-recv-interval`
decode steps (default 1); InferenceX's SGLang scripts ran 10, or 30 at 16 or more concurrent requests, and a prompt
that arrives while the others decode waits for the next poll (physics/serving.py receive_wait_s)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from service.accuracy.datasets import DEPLOYMENT_COLUMNS, Deployment, _recv_interval, read_deployments
from service.accuracy.harness import _at_width, read_rows
from service.decide.models import resolve
from service.decide.sizing.engines import efficiency
from service.domain.brief import Brief, Model, Traffic
from service.physics.serving import receive_wait_s

from .conftest import TODAY

FOLDER = Path(__file__).parents[1] / "calibration"
TABLE = FOLDER / "inferencex-deployments.csv"


def test_a_prompt_waits_half_the_poll_interval_in_decode_steps() -> None:
    # beyond the step in flight: (interval - 1) / 2 whole steps at a uniform arrival phase
    assert receive_wait_s(0.008, 10, 3) == pytest.approx(0.036)
    assert receive_wait_s(0.010, 30, 15) == pytest.approx(0.145)
    # every step (the engines' default), an idle engine (no other session decoding) or no step: no wait
    assert receive_wait_s(0.010, 1, 15) == 0.0
    assert receive_wait_s(0.010, 30, 0) == 0.0
    assert receive_wait_s(0.0, 30, 15) == 0.0
    assert receive_wait_s(float("nan"), 30, 15) == 0.0


def test_the_script_forms_of_a_poll_interval(tmp_path: Path) -> None:
    assert _recv_interval("", 64) == 0  # the engine's default
    assert _recv_interval("10", 64) == 10
    # InferenceX's SGLang scripts: 10, or 30 when CONC >= 16
    assert [_recv_interval("10,CONC>=16:30", c) for c in (4, 15, 16, 64)] == [10, 10, 30, 30]
    for bad in ("0", "ten", "10,CONC>16:30", "10,CONC>=16:0"):
        with pytest.raises(ValueError, match="scheduler_recv_interval"):
            _recv_interval(bad, 4)
    with TABLE.open(newline="", encoding="utf-8") as f:
        line = next(csv.DictReader(f))
    bad_table = tmp_path / "bad.csv"
    with bad_table.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, DEPLOYMENT_COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerow({**line, "scheduler_recv_interval": "every 10"})
    with pytest.raises(ValueError, match="scheduler_recv_interval"):
        read_deployments(bad_table)


def test_every_sglang_campaign_read_ran_it_and_no_other_engine_has_it(catalog_bundle: Any) -> None:
    table = read_deployments(TABLE)
    sglang = {k: v for k, v in table.items() if ":sglang " in k[0] and v["commit"]}
    # DeepSeek-R1 FP8 on H200 (dsr1_fp8_h200.sh) is the one SGLang script read that sets none: SGLang's default
    h200 = ("inferencex:deepseek-r1:h200_sxm:sglang 0.5.9:2026-03-25", "fp8")
    assert len(sglang) == 9 and not sglang.pop(h200)["scheduler_recv_interval"]
    assert {v["scheduler_recv_interval"] for v in sglang.values()} == {"10,CONC>=16:30"}
    assert all(not v["scheduler_recv_interval"] for k, v in table.items() if k not in sglang)
    rows = {r.id: r for r in read_rows(catalog_bundle, FOLDER)[0]}
    assert rows["dsr1_b300_sglang_fp4_agg_1024x1024_c32_cfg717"].deployment.recv_interval == 30
    assert rows["dsr1_b300_sglang_fp4_agg_1024x1024_c4_cfg717"].deployment.recv_interval == 10
    assert rows["minimaxm2_5_b300_vllm_fp4_agg_8192x1024_c64_cfg728"].deployment.recv_interval == 0
    # the same model, engine and day on 8 B200 (30 at 16 sessions) and on 8 H200 (the default)
    b200, h200 = (rows[f"2026_04_06_deepseek_r1_{gpu}_sxm_sglang_fp8_agg_1024x1024_c16_tp8_ep1_{n}"]
                  for gpu, n in (("b200", 286), ("h200", 238)))
    assert (b200.deployment.recv_interval, h200.deployment.recv_interval) == (30, 0)


def _brief(sessions: int) -> Brief:
    return Brief(workload="REALTIME_INFERENCE",
                 model=Model(name="deepseek-ai/DeepSeek-R1", precision="FP4", context_tokens=2048,
                             kv_cache_precision="FP8"),
                 traffic=Traffic(concurrent_sessions=sessions, avg_input_tokens=1024, avg_output_tokens=1024),
                 toolchain=("sglang",))


def test_a_measured_poll_interval_lengthens_the_first_token_by_its_wait(catalog_bundle: Any) -> None:
    book = catalog_bundle.book
    gpu = next(g for g in book.catalog if g.id == "b300")
    # the shipped table polls every step (SGLang's default): a deployment that says 1 is the answer's own sizing
    assert efficiency(gpu, ("sglang",), book.assumptions).recv_interval == 1
    brief = resolve(_brief(32), book.models)
    default = _at_width(catalog_bundle, brief, gpu, 4, TODAY)
    assert _at_width(catalog_bundle, brief, gpu, 4, TODAY, engine=Deployment(recv_interval=1)) == default
    # prompts that arrive on their own (no wave of others' prompts) each wait 14.5 decode steps at an interval of 30
    alone = _at_width(catalog_bundle, brief, gpu, 4, TODAY, 0.0)
    polled = _at_width(catalog_bundle, brief, gpu, 4, TODAY, 0.0, Deployment(recv_interval=30))
    assert polled["ttft"] - alone["ttft"] == pytest.approx(14.5 * alone["itl"])
    assert polled["itl"] == alone["itl"] and polled["throughput"] < alone["throughput"]
    # a share of the prompts meets the others' prefill (the engine's prefill_first): the scheduler polls after a
    # prefill at once, so those do not wait; the mean waits less, but waits
    mixed = _at_width(catalog_bundle, brief, gpu, 4, TODAY, engine=Deployment(recv_interval=30))["ttft"]
    assert default["ttft"] < mixed < default["ttft"] + 14.5 * default["itl"]
    # one session: the engine is idle when its prompt arrives, and polls at once
    lone = resolve(_brief(1), book.models)
    assert _at_width(catalog_bundle, lone, gpu, 4, TODAY, engine=Deployment(recv_interval=30)) == \
        _at_width(catalog_bundle, lone, gpu, 4, TODAY)
