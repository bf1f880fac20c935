"""Questions an assistant can ask well: each carries its field path, type, unit, choices, what the answer assumes
meanwhile and a priority. A thin brief answered one question at a time, highest priority first, converges; and
rules-check keeps what the rules say about each question true to the brief."""

from __future__ import annotations

import json
import shutil
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict, ParseDict

from service.rulebook.folder import load_rulebook
from service.wire.api import pb

RULES = Path(__file__).parents[1] / "rules"
SIZING_FIELDS = ("model.precision", "model.context_tokens", "traffic.concurrent_sessions",
                 "traffic.avg_output_tokens")

# "Serve a 70B model for my team": what the person knows when asked. Everything else they leave to the
# advisor, so the assumed value (or, with none, the first choice offered) is the answer.
KNOWS: dict[str, Any] = {
    "model.precision": "PRECISION_FP8",
    "traffic.concurrent_sessions": 40,
    "latency.p95_ms": 3000,
    "economics.hours_per_month": 730,
    "economics.horizon_months": 24,
    "economics.demand": "DEMAND_STEADY",
    "economics.has_platform_team": True,
    "run_cycle": "RUN_CYCLE_ALWAYS_ON",
    "economics.budget_usd_per_hour": 200,  # asked since issue 25: 0 (the assumed "none") cannot be sent as an answer
}


def _set(brief: dict[str, Any], path: str, value: Any) -> None:
    *groups, name = path.split(".")
    for g in groups:
        brief = brief.setdefault(g, {})
    brief[name] = value


def _typed(q: dict[str, Any], text: str) -> Any:
    value = json.loads(text) if q["type"] != "enum" else text
    expected = {"number": (int, float), "integer": int, "boolean": bool, "enum": str}[q["type"]]
    assert isinstance(value, expected) and (q["type"] != "integer" or not isinstance(value, bool)), q
    return value


def _ask(stub: Any, brief: dict[str, Any], locale: str) -> dict[str, Any]:
    req = ParseDict({"brief": brief, "locale": locale}, pb.RecommendRequest())
    return MessageToDict(stub.Recommend(req, timeout=30), preserving_proto_field_name=True)


def _top(answer: dict[str, Any]) -> tuple[str, int, str]:
    c = answer["candidates"][0]
    return c["gpu"], c["count"], answer["route"]["kind"]


def _assumed_notes(answer: dict[str, Any]) -> set[str]:
    # The notes say it in words (no brief paths in user text); `assumed` lists the paths, one note each at least.
    notes = [n["text"] for n in answer.get("notes", []) if n["rule_id"] == "sizing.defaults"]
    paths = {f for f in answer.get("assumed", []) if f in SIZING_FIELDS}
    assert len(notes) >= len(paths), (notes, paths)
    return paths


def dialogue(stub: Any, locale: str) -> list[dict[str, Any]]:
    brief: dict[str, Any] = {"workload": "WORKLOAD_TYPE_REALTIME_INFERENCE", "model": {"params_billion": 70}}
    answers = [_ask(stub, brief, locale)]
    while answers[-1].get("questions"):
        before = answers[-1]
        questions = before["questions"]
        priorities = [q.get("priority", 0) for q in questions]
        assert priorities == sorted(priorities, reverse=True), "questions must come highest priority first"
        for q in questions:
            assert q["type"] in ("number", "integer", "boolean", "enum"), q
            if q["type"] == "enum":
                assert q["allowed_values"] and (not q.get("assumed") or q["assumed"] in q["allowed_values"]), q
            if q.get("assumed"):
                _typed(q, q["assumed"])
        # It says what it still assumes: every sizing question still open is also a note on the answer, and
        # nothing answered is still called assumed.
        open_fields = {q["field"] for q in questions}
        assert _assumed_notes(before) == open_fields & set(SIZING_FIELDS)
        q = questions[0]
        if q["field"] in KNOWS:
            value = KNOWS[q["field"]]
            if q["type"] == "enum":
                assert value in q["allowed_values"], q
        else:
            value = _typed(q, q["assumed"]) if q.get("assumed") else q["allowed_values"][0]
        _set(brief, q["field"], value)
        after = _ask(stub, brief, locale)
        asked_after = [x["field"] for x in after.get("questions", [])]
        assert q["field"] not in asked_after, f"{q['field']} answered but still asked"
        assert len(asked_after) < len(questions), "each answer must shrink the questions"
        if q["field"] not in KNOWS and q.get("assumed"):
            # Accepting what the answer already assumed must not change the answer: the assumption was real.
            assert _top(after) == _top(before), f"accepting the assumed {q['field']} changed the answer"
        answers.append(after)
    return answers


@pytest.mark.parametrize("locale", ["en", "zh-CN"])
def test_serve_a_70b_model_for_my_team_converges(stub: Any, locale: str) -> None:
    answers = dialogue(stub, locale)
    first, last = answers[0], answers[-1]
    assert len(first["questions"]) >= 10 and "questions" not in last
    assert len(answers) == len(first["questions"]) + 1  # one answer per question, none asked twice
    # The two asked first are the sizing ones: precision and context change the memory need most.
    assert [q["field"] for q in first["questions"][:2]] == ["model.precision", "model.context_tokens"]
    # The route settles: the last answers (run cycle, boundary) leave it where the economics put it.
    routes = [a["route"]["kind"] for a in answers]
    assert routes[-1] == routes[-2] == routes[-3]
    assert last["candidates"] and _assumed_notes(last) == set()
    # What it still assumes at the end is said: the input length and the KV-cache shape were never given.
    still = [n for n in last.get("notes", []) if n["rule_id"].startswith("sizing.")]
    said = {"en": "average input tokens", "zh-CN": "平均输入 token 数"}[locale]  # in words, not the brief path
    assert any(said in n["text"] and "traffic." not in n["text"] for n in still)
    assert any(n["rule_id"] == "sizing.architecture" for n in still)
    if locale == "zh-CN":
        assert all(any("\u4e00" <= ch <= "\u9fff" for ch in q["text"]) for q in first["questions"])


def test_question_metadata_does_not_depend_on_the_locale(stub: Any) -> None:
    brief = {"workload": "WORKLOAD_TYPE_REALTIME_INFERENCE", "model": {"params_billion": 70}}
    en, zh = (_ask(stub, brief, loc)["questions"] for loc in ("en", "zh-CN"))
    # The text and the unit are read by people, in the request's language (issue 25); the rest is for machines.
    strip = [{k: v for k, v in q.items() if k not in ("text", "unit")} for q in en]
    assert strip == [{k: v for k, v in q.items() if k not in ("text", "unit")} for q in zh]
    assert [q["text"] for q in en] != [q["text"] for q in zh]
    assert [bool(q.get("unit")) for q in en] == [bool(q.get("unit")) for q in zh]
    hours = next(q for q in zh if q["field"] == "economics.hours_per_month")
    assert hours["unit"] == "小时/月" and any(q.get("unit") == "hours per month" for q in en)


def test_training_brief_assumes_cost_per_training_run(stub: Any) -> None:
    qs = _ask(stub, {"workload": "WORKLOAD_TYPE_PRETRAINING", "model": {"params_billion": 7}}, "en")["questions"]
    unit = next(q for q in qs if q["field"] == "success_unit")
    assert unit["assumed"] == "SUCCESS_UNIT_TRAINING_RUN" and unit["rule_id"] == "ask.success-unit.training"


# -- rules-check keeps the questions honest -----------------------------------------------------------------


@pytest.fixture
def rules(tmp_path: Path) -> Path:
    dst = tmp_path / "rules"
    shutil.copytree(RULES, dst)
    return dst


def _problems_after(rules: Path, old: str, new: str) -> list[str]:
    f = rules / "questions.yaml"
    text = f.read_text(encoding="utf-8")
    assert old in text
    f.write_text(text.replace(old, new, 1), encoding="utf-8")
    book, found = load_rulebook(rules, today=date(2026, 12, 1))
    errors = [str(p) for p in found if p.severity == "error"]
    assert book is None and errors
    return errors


def test_ask_for_a_field_the_brief_does_not_have(rules: Path) -> None:
    errors = _problems_after(rules, "field: model.context_tokens,", "field: model.context_length,")
    assert any("questions.yaml:" in e and "'model.context_length' is not a field of the brief" in e for e in errors)


def test_assumed_value_the_field_does_not_take(rules: Path) -> None:
    errors = _problems_after(rules, "assumes: BF16}", "assumes: BF17}")
    assert any("[ask.precision]" in e and "one of FP32, BF16" in e for e in errors), errors
    errors = _problems_after(rules, "unit: sessions, assumes: 1}", "unit: sessions, assumes: 1.5}")
    assert any("[ask.concurrency]" in e and "wants a whole number" in e for e in errors), errors


def test_assumes_from_names_an_assumption(rules: Path) -> None:
    errors = _problems_after(rules, "assumes_from: default_context_tokens", "assumes_from: default_context_token")
    assert any("no assumption 'default_context_token'" in e and "default_context_tokens" in e for e in errors)
