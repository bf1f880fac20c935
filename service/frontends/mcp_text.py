"""The open questions as text, for MCP hosts that hand the model only a tool result's text (issue 25): every
question, not the summary's first few, each with the brief path its answer goes to, the answer's type and unit,
the values an enum takes, and what the answer assumes meanwhile in words (the contract's own words for a zero,
never a bare '0'), in the request's language around the paths and enum names an assistant sends back."""

from __future__ import annotations

import re
from typing import Any

_ZERO_MEANS = re.compile(r"\b0 = ([^;.]+)")

# The few fixed words around each question; the question and its unit come from the service, localized.
PHRASES = {
    "en": {
        "intro": "All {n} open questions, highest priority first. Put each answer in the brief at its field path "
                 "and call recommend_gpus again; until then the answer assumes what each line says:",
        "intro_one": "One open question. Put its answer in the brief at its field path and call recommend_gpus "
                     "again; until then the answer assumes what the line says:",
        "one_of": "one of {values}", "assumed": "Assumed until answered: {words}.",
        "waits": "nothing: the answer waits for this", "zero": "{meaning} (0)",
        "not_given": "not given (0): the answer goes on without it",
        "true": "true, taken as yes", "false": "false, taken as no",
    },
    "zh-CN": {
        "intro": "全部 {n} 个待回答的问题（优先级从高到低）。把每个回答放到 brief 中该字段路径处，"
                 "再调用 recommend_gpus；在此之前，回答按每行所写的假设计算：",
        "intro_one": "1 个待回答的问题。把回答放到 brief 中该字段路径处，再调用 recommend_gpus；"
                     "在此之前，回答按该行所写的假设计算：",
        "one_of": "取值之一：{values}", "assumed": "回答之前的假设：{words}。",
        "waits": "无：回答等待此项", "zero": "0（{meaning}）", "not_given": "0（未给出：回答不依赖此项继续）",
        "true": "true，按“是”处理", "false": "false，按“否”处理",
    },
}
# What a zero means in the contract's field comments ("0 = none"), in Chinese.
ZERO_ZH = {"none": "无", "no target": "无目标", "not given": "未给出", "the default": "默认值",
           "the rules' default": "规则的默认值", "use the rules' default": "规则的默认值", "estimated": "估算",
           "always on": "全天候运行", "full attention": "全注意力"}


def _spec(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """The request schema's property at a brief path (model.precision), or {} when the schema has none."""
    node = schema.get("properties", {}).get("brief", {})
    for part in path.split("."):
        node = node.get("properties", {}).get(part, {})
    return node


def _number(text: str) -> str:
    try:
        value = float(text)
    except ValueError:
        return text
    return f"{value:g}"


def assumed_words(q: Any, spec: dict[str, Any], locale: str = "en") -> str:
    """What the answer takes for `q.field` until it is answered, in words."""
    words = PHRASES.get(locale, PHRASES["en"])
    if not q.assumed:
        return words["waits"]
    if q.type in ("number", "integer"):
        value = _number(q.assumed)
        if value != "0":
            # "fraction 0..1" and the like read as a note on the value, "tokens" as its unit
            if any(ch.isdigit() for ch in q.unit):
                return f"{value} ({q.unit})"
            unit = q.unit
            if value == "1" and locale == "en" and unit.split(" ")[0].endswith("s"):
                first, _, rest = unit.partition(" ")  # "1 session", "1 hour per month": English's one
                unit = f"{first[:-1]} {rest}".strip()
            return f"{value} {unit}".strip()
        zero = _ZERO_MEANS.search(str(spec.get("description", "")))
        if zero is None:
            return words["not_given"]
        meaning = zero.group(1).strip()
        if locale != "en":
            meaning = ZERO_ZH.get(meaning, "")
            if not meaning:
                return words["not_given"]
        return words["zero"].format(meaning=meaning)
    if q.type == "boolean":
        return words["true" if q.assumed.lower() == "true" else "false"]
    return q.assumed


def questions_lines(questions: Any, schema: dict[str, Any], locale: str = "en") -> list[str]:
    """Every open question, highest priority first, as lines a model can act on."""
    if not questions:
        return []
    words = PHRASES.get(locale, PHRASES["en"])
    lines = [words["intro_one" if len(questions) == 1 else "intro"].format(n=len(questions))]
    for i, q in enumerate(questions, 1):
        spec = _spec(schema, q.field)
        kind = q.type or spec.get("type", "")
        values = list(q.allowed_values) or list(spec.get("enum", []))
        shape = words["one_of"].format(values=", ".join(values)) if values else (
            f"{kind}, {q.unit}" if q.unit else kind)
        assumed = words["assumed"].format(words=assumed_words(q, spec, locale))
        lines.append(f"{i}. `{q.field}` ({shape}): {q.text} {assumed}")
    return lines


def with_all_questions(summary: str, questions: Any, schema: dict[str, Any], locale: str = "en") -> str:
    """The summary with its first few questions (and its "…and N more" line) replaced by every question with
    its field, type, choices and assumption: each question is said once."""
    if not questions:
        return summary
    lines = summary.split("\n")
    asked = {f"- {q.text}" for q in questions}
    at = [i for i, line in enumerate(lines) if line in asked]
    if not at:
        return "\n".join([summary, "", *questions_lines(questions, schema, locale)])
    first, last = at[0], at[-1]
    if len(at) < len(questions) and last + 1 < len(lines):
        last += 1  # the summary's "…and N more questions" line: all of them follow
    return "\n".join([*lines[:first], *questions_lines(questions, schema, locale), *lines[last + 1:]])
