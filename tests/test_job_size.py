"""Answers sized to the job (issue 25): the new expect keys, a training answer's notes (activations, not a KV
cache), and the command line's table pricing a single training run for the run, not for a month."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict, ParseDict

from service.frontends import cli
from service.rulebook.expectations import check
from service.wire.api import pb

RUN = {"workload": "WORKLOAD_TYPE_PRETRAINING", "model": {"params_billion": 7, "precision": "PRECISION_BF16",
                                                          "context_tokens": 4096},
       "training": {"tokens_billion": 200, "target_days": 14}}


@pytest.mark.parametrize(
    ("expect", "body", "ok"),
    [
        ({"questions_exclude": ["economics.horizon_months"]}, {"questions": [{"field": "run_cycle"}]}, True),
        ({"questions_exclude": ["economics.horizon_months"]}, {"questions": [{"field": "economics.horizon_months"}]},
         False),
        ({"warnings_critical_exclude": ["MISTAKE_PLATFORM_OWNERSHIP"]},
         {"warnings": [{"code": "MISTAKE_PLATFORM_OWNERSHIP", "severity": "SEVERITY_INFO"}]}, True),
        ({"warnings_critical_exclude": ["MISTAKE_PLATFORM_OWNERSHIP"]},
         {"warnings": [{"code": "MISTAKE_PLATFORM_OWNERSHIP", "severity": "SEVERITY_CRITICAL"}]}, False),
    ],
)
def test_checker_semantics(expect: dict[str, Any], body: dict[str, Any], ok: bool):
    assert (check(expect, "OK", body) == []) is ok


@pytest.mark.parametrize("locale", ["en", "zh-CN"])
def test_a_training_answer_estimates_activations_not_a_kv_cache(stub: Any, locale: str):
    req = ParseDict({"brief": RUN, "locale": locale}, pb.RecommendRequest())
    answer = MessageToDict(stub.Recommend(req, timeout=30), preserving_proto_field_name=True)
    notes = [n["text"] for n in answer.get("notes", []) if n["rule_id"] == "sizing.architecture"]
    assert notes and not any("KV" in n for n in notes), notes
    assert any(("activation" in n) if locale == "en" else ("激活" in n) for n in notes), notes


def test_the_table_prices_a_single_run_for_the_run(server: Any, tmp_path: Any, capsys: pytest.CaptureFixture[str]):
    brief = tmp_path / "run.yaml"
    brief.write_text("workload: pretraining\nmodel: {params_billion: 7, precision: bf16, context_tokens: 4096}\n"
                     "training: {tokens_billion: 200, target_days: 14}\n", encoding="utf-8")
    assert cli.main(["recommend", str(brief), "--addr", server.addr]) == 0
    out = capsys.readouterr().out
    assert "$/run" in out and "$/run = $/h x the run's days x 24" in out and "$/month at" not in out
    assert "for the whole run of" in out.splitlines()[0] or "for the whole run of" in out


def test_a_single_runs_route_waits_on_nothing_the_questions_do_not_ask(stub: Any):
    req = ParseDict({"brief": RUN}, pb.RecommendRequest())
    answer = MessageToDict(stub.Recommend(req, timeout=30), preserving_proto_field_name=True)
    asked = {q["field"] for q in answer.get("questions", [])}
    depends = set(answer["route"].get("depends_on", []))
    assert not depends & {"economics.hours_per_month", "economics.horizon_months", "economics.demand"}, depends
    assert depends <= asked | {"economics.utilization"}, (depends, asked)
