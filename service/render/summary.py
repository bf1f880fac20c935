"""The short markdown answer a chat bot can paste: top pick, alternatives, route, what to watch, what to ask.

Its sentences are message templates (summary.* in rules/messages), so rule authors translate and reword them.
"""

from __future__ import annotations

from typing import Any

from ..advice import Advice
from .messages import Messages

MAX_ALTERNATIVES = 2
MAX_WARNINGS = 3
MAX_QUESTIONS = 5


def render_summary(advice: Advice, msgs: Messages, locale: str, brief: dict[str, Any], sized: bool) -> str:
    def t(key: str, **params: Any) -> str:
        return msgs.text(key, locale, params)

    workload = t(f"workload.{brief['workload']}")
    lines = [t("summary.title", workload=workload)]
    if not sized:
        lines.append(t("summary.provisional"))
    if advice.candidates:
        c = advice.candidates[0]
        key = "summary.top" if c.cost.usd_per_unit > 0 else "summary.top_no_unit"
        lines.append(
            t(
                key,
                count=c.count,
                name=c.name,
                usd_per_hour=c.cost.usd_per_hour,
                usd_per_unit=c.cost.usd_per_unit,
                unit=c.cost.unit,
                need_gb=c.memory.need_gb,
                capacity_gb=c.memory.capacity_gb,
                headroom=c.memory.headroom,
            )
        )
        for alt in advice.candidates[1 : 1 + MAX_ALTERNATIVES]:
            lines.append(
                t(
                    "summary.alternative",
                    count=alt.count,
                    name=alt.name,
                    usd_per_hour=alt.cost.usd_per_hour,
                    score=alt.score,
                )
            )
    elif sized:
        lines.append(t("summary.none_fit"))
    for note in advice.notes:
        if note.rule_id.startswith("direction."):
            lines.append(f"- {note.text}")
    if advice.route:
        why = advice.route.rationale[0].text if advice.route.rationale else ""
        lines.append(t("summary.route", route=t(f"route.{advice.route.kind}"), why=why))
    if advice.warnings:
        lines.append(t("summary.warnings_header"))
        for w in advice.warnings[:MAX_WARNINGS]:
            lines.append(f"- `{w.code}`: {w.text}")
    if advice.questions:
        lines.append(t("summary.questions_header"))
        for q in advice.questions[:MAX_QUESTIONS]:
            lines.append(f"- {q.text}")
    return "\n".join(lines)
