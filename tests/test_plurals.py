"""Sentences a person would not correct (issue 37 item 6): "a on-demand", "1 GPUs", "1 GPU-hours", "All 1 open
questions", "1 of the candidates shown are priced" never appear, in any example's answer in either locale; the
message templates' plural (`{n!p:one|other}`) and article (`{x!i}`) conversions; zh-CN counts GPUs with 张."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict

from service.frontends.brief_file import load_request
from service.frontends.cli import print_advice
from service.frontends.mcp_server import recommendation_markdown
from service.render.messages import Messages, article, fill, placeholders
from service.rulebook.checks import format_spec_problems

ROOT = Path(__file__).parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
NOUNS = ("GPUs|GPU-hours|copies|nodes|replicas|sessions|days|months|hours|questions|layers|tokens|sequences|"
         "requests|configurations|instances|steps|experts|passes|frames|bytes")
EN_WRONG = [
    re.compile(r"\b[Aa] (?:[aeio]|8|1[18]\b)"),  # "a on-demand", "a 8B"
    re.compile(rf"(?<![\d.,])1 (?:more |spare |open )?(?:{NOUNS})\b"),  # "1 GPUs", "1 GPU-hours"
    re.compile(r"\bAll 1 open questions"),
    re.compile(r"(?<![\d.,])1 of the \w+ shown are\b"),
    re.compile(r"\w\((?:s|es)\)"),  # "configuration(s)"
]
ZH_WRONG = [re.compile(r"个 ?GPU")]  # GPUs are counted in 张 (cards), never 个


def _texts(answer: dict[str, Any]) -> list[str]:
    out: list[str] = []

    def walk(node: Any) -> None:  # noqa: ANN401
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("text", "summary", "title") and isinstance(value, str):
                    out.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(answer)
    return out


def _problems(text: str, locale: str) -> list[str]:
    patterns = ZH_WRONG if locale == "zh-CN" else EN_WRONG
    return [m.group(0) for p in patterns for m in p.finditer(text)]


@pytest.mark.parametrize("locale", ["en", "zh-CN"])
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_no_sentence_a_person_would_correct(stub: Any, path: Path, locale: str):
    request = load_request(path)
    request.locale, request.include_trace, request.max_candidates = locale, False, 50
    resp = stub.Recommend(request, timeout=60)
    answer = MessageToDict(resp, preserving_proto_field_name=True)
    printed = io.StringIO()
    print_advice(resp, printed, request)
    texts = [*_texts(answer), printed.getvalue(), recommendation_markdown(resp, locale)]
    found = {bad for text in texts for bad in _problems(text, locale)}
    assert not found, found


@pytest.fixture(scope="module")
def tables() -> dict[str, dict[str, str]]:
    from ruamel.yaml import YAML

    return {loc: dict(YAML(typ="safe").load((ROOT / "rules" / "messages" / f"{loc}.yaml").read_text(
        encoding="utf-8"))["messages"]) for loc in ("en", "zh-CN")}


def test_every_english_template_reads_right_at_one(tables: dict[str, dict[str, str]]):
    """Every template filled with 1 for every number and "on-demand" for every word: no "1 GPUs", no "a on"."""
    wrong = {}
    for key, template in tables["en"].items():
        values = {n: 1 for n in placeholders(template)}
        text = fill(template, values)
        words = fill(template, {n: "on-demand" for n in placeholders(template)})
        bad = _problems(text, "en") + [b for b in _problems(words, "en") if b.lower().startswith("a ")]
        if bad:
            wrong[key] = bad
    assert wrong == {}


def test_plural_and_article_conversions():
    m = Messages({"en": {"k": "Needs {n} {n!p:GPU|GPUs}; {d:.0f} {d!p:day|days|.0f}; {x!i} {x:g}B; {t!i} {t} rate"}})
    one = {"n": 1, "d": 0.6, "x": 8.0, "t": "on-demand"}
    assert m.text("k", "en", one) == "Needs 1 GPU; 1 day; an 8B; an on-demand rate"
    assert m.text("k", "en", {"n": 2, "d": 2.4, "x": 70, "t": "spot"}) == "Needs 2 GPUs; 2 days; a 70B; a spot rate"
    assert [article(v) for v in (11, 18, 80, 800, 110, 1.5, 11000)] == ["an", "an", "an", "an", "a", "a", "an"]


def test_rules_check_takes_plurals_and_articles_and_refuses_other_conversions():
    ok = {"en": {"a": "{n} {n!p:GPU|GPUs}", "b": "{x!i} {x}", "c": "{d!p:day|days|.0f}"}}
    bad = {"en": {"a": "{n!r}", "b": "{n!p:GPU}", "c": "{x!i:>9}", "d": "{n!p:a|b|>99999}"}}
    where = {"en": {k: "rules/messages/en.yaml:1" for k in ("a", "b", "c", "d")}}
    assert format_spec_problems(ok, where) == []
    assert len(format_spec_problems(bad, where)) == 4
