"""The short markdown answer a chat bot can paste: top pick, alternatives, route, what to watch, what to ask.

Its sentences are message templates (summary.* in rules/messages), so rule authors translate and reword them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from ..domain.advice import Advice, Candidate, UnmetTarget
from .accuracy import band_lines
from .messages import Messages
from .offer_lines import cheaper_line, no_offer_line, reserved_line, unplaced, where

MAX_ALTERNATIVES = 2
MAX_QUESTIONS = 5
TINY_UNIT_COST = 0.01  # below a cent per item, the summary prices a million of them
PER_ITEM_UNITS = ("RESPONSE", "TASK", "IMAGE", "VIDEO_SECOND", "RECORD")
HOURS_PER_MONTH = 730  # 8,760 h / 12: a month around the clock, when the brief gives no hours
UNMET_KEYS = {
    "latency.p95_ms": "summary.unmet_p95",
    "latency.ttft_ms": "summary.unmet_ttft",
    "training.target_days": "summary.unmet_days",
    "economics.budget_usd_per_hour": "summary.unmet_budget",
}


def render_summary(advice: Advice, msgs: Messages, locale: str, brief: dict[str, Any], sized: bool,
                   points: dict[str, tuple[tuple[str, float], ...]] | None = None) -> str:
    """`points`: each shown candidate's rule points by GPU id (the summary names those that rank a cheaper month
    lower; a VIEW_SUMMARY answer's candidates do not carry them)."""
    text = msgs.table(locale).text  # what msgs.text(key, locale, params) reads, looked up once

    def t(key: str, **params: Any) -> str:
        return text(key, params)

    workload = t(f"workload.{brief['workload']}")
    sep = t("summary.list_separator")
    lines = [t("summary.title", workload=workload)]
    # A rent answer with nothing rentable in the brief's scope says so before anything else.
    lines += [x for x in (no_offer_line(advice, t),) if x]
    # A target nobody meets is the headline, before any pick: a top pick that misses the brief must not read
    # as a yes.
    lines += [unmet_line(u, t) for u in advice.unmet]
    if not sized:
        lines.append(t("summary.provisional"))
    api_route = advice.route is not None and advice.route.kind == "MODEL_API"
    # A model API priced below the first pick is the headline (issue 35): the route line, then the break-even.
    api_first = api_route and advice.api is not None and advice.route is not None and bool(advice.route.rationale)
    if api_first:
        lines += _route_lines(advice, t, sep, sized)
    if advice.candidates and brief["workload"] == "UNSPECIFIED":
        # Sized as generation for want of a workload: a "top pick" would claim a fit nobody asked about.
        lines.append(t("summary.no_pick_workload"))
    elif advice.candidates:
        if advice.assumed:
            # The figures below rest on defaults the questions still ask about: say which, with their values.
            what = sep.join(t("summary.assumption", field=t(f"field.{f}"), value=v) for f, v in advice.assumed)
            lines.append(t("summary.sizing_provisional", assumptions=what))
        c = advice.candidates[0]
        # With a model API as the route, the best GPU is the self-hosting alternative, not a pick.
        key = "summary.self_host" if api_route else (
            "summary.top" if c.cost.usd_per_unit > 0 else "summary.top_no_unit"
        )
        if key == "summary.top" and c.cost.usd_per_unit < TINY_UNIT_COST and c.cost.unit_kind in PER_ITEM_UNITS:
            key = "summary.top_per_million"  # $0.44 per million records reads; $0.00000044 per record does not
        if key != "summary.self_host" and key != "summary.top_no_unit" and not brief.get("acceptance_given"):
            key += "_generated"  # no acceptance rate: the cost is per generated unit, never "per accepted"
        lines.append(
            t(
                key,
                count=c.count,
                name=c.name,
                usd_per_hour=c.cost.usd_per_hour,
                usd_per_unit=c.cost.usd_per_unit,
                usd_per_million=c.cost.usd_per_unit * 1e6,
                unit=c.cost.unit,
                need_gb=c.memory.need_gb,
                capacity_gb=c.memory.capacity_gb,
                headroom=c.memory.headroom,
                per_copy=t("summary.per_copy", replicas=c.performance.replicas)
                if c.performance is not None and c.performance.replicas > 1 else "",
                monthly=run_total(c.cost.usd_per_hour, c.performance.training_days, t,
                                  c.performance.cost_per_run_usd)
                if (brief.get("single_run") or brief.get("run_headline")) and c.performance.training_days > 0
                # a reserved term bills every hour of the month, whatever the brief's hours
                else monthly(c.cost.usd_per_hour, HOURS_PER_MONTH if _on_term(c)
                             else brief.get("hours_per_month", 0.0), t),
            )
            + where(c, t, advice.offers_loaded)
        )
        lines += band_lines(c.performance, brief, text)
        lines += [x for x in (reserved_line(advice, brief, t), cheaper_line(advice, t, points or {})) if x]
        for alt in ([] if api_route else advice.candidates[1 : 1 + MAX_ALTERNATIVES]):
            lines.append(
                t(
                    "summary.alternative_unplaced" if unplaced(alt, advice) else "summary.alternative",
                    count=alt.count,
                    name=alt.name,
                    usd_per_hour=alt.cost.usd_per_hour,
                    score=alt.score,
                )
            )
        fallback = [c.gpu for c in advice.candidates if c.cost.price_tier_fallback]
        if fallback:
            tier = t(f"tier.{advice.price_tier or 'ON_DEMAND'}")
            lines.append(t("summary.tier_fallback", price_tier_name=tier, gpus=sep.join(fallback)))
        if advice.not_shown:
            lines.append(
                t("summary.not_shown", not_shown_count=len(advice.not_shown), gpus=sep.join(advice.not_shown))
            )
    elif sized:
        lines.append(none_fit_line(advice, t))
    for note in advice.notes:
        if note.rule_id.startswith("direction."):
            lines.append(f"- {note.text}")
    if advice.route and not api_first:
        lines += _route_lines(advice, t, sep, sized)
    if advice.warnings:
        lines.append(t("summary.warnings_header"))
        # Every warning, one line each (issue 37: a cut at three hid a rule author's new warning from the CLI and
        # from MCP hosts, which pass only this text to their model). Warnings are deduplicated per code upstream.
        for w in advice.warnings:
            lines.append(t("summary.warning", title=w.title, text=w.text) if w.title else f"- {w.text}")
    if advice.questions:
        lines.append(t("summary.questions_header"))
        for q in advice.questions[:MAX_QUESTIONS]:
            lines.append(f"- {q.text}")
        if len(advice.questions) > MAX_QUESTIONS:
            lines.append(t("summary.more_questions", count=len(advice.questions) - MAX_QUESTIONS))
    return "\n".join(lines)


def unmet_line(u: UnmetTarget, t: Callable[..., str]) -> str:
    """One missed target: by how much, the candidate that comes closest and the target it would meet."""
    key = UNMET_KEYS[u.field]
    if u.field == "latency.p95_ms" and u.output_tokens > 0:
        key = "summary.unmet_p95_outputs"
    return t(key, target=u.target, closest=u.closest, count=u.count, name=u.name, would_meet=u.would_meet,
             output_tokens=u.output_tokens)


def none_fit_line(advice: Advice, t: Callable[..., str]) -> str:
    """Nothing passed the rules: say so with the reason most GPUs were excluded for (one GPU's words for it)."""
    reasons = [x.reasons[0] for x in advice.excluded if x.reasons]
    if not reasons:
        return t("summary.none_fit")
    counts = Counter(r.rule_id for r in reasons)
    top = max(counts, key=lambda rid: counts[rid])
    example = next(r.text for r in reasons if r.rule_id == top)
    return t("summary.none_fit_because", count=counts[top], total=len(advice.excluded), reason=example)


def _on_term(c: Candidate) -> bool:
    return bool(c.placements) and c.placements[0].offer.tier == "reserved"


def monthly(usd_per_hour: float, hours_per_month: float, t: Callable[..., str]) -> str:
    """The month's total beside $/h: at the brief's hours a month, else around the clock."""
    if hours_per_month > 0:
        return t("summary.monthly", usd=usd_per_hour * hours_per_month, hours=hours_per_month)
    return t("summary.monthly_always_on", usd=usd_per_hour * HOURS_PER_MONTH, hours=HOURS_PER_MONTH)


def run_total(usd_per_hour: float, days: float, t: Callable[..., str], usd_per_run: float = 0.0) -> str:
    """A single training run's total beside $/h: what the run costs, not a month it will not last (the run's own
    cost when given: the days are rounded to 0.01)."""
    usd = usd_per_run if usd_per_run > 0 else usd_per_hour * days * 24
    hours = usd / usd_per_hour if usd_per_run > 0 and usd_per_hour > 0 else days * 24
    if hours < 24:  # a run of hours is said in hours: never "0.0 days"
        return t("summary.run_total_hours", usd=usd, hours=hours)
    return t("summary.run_total", usd=usd, days=hours / 24)


def _route_lines(advice: Advice, t: Callable[..., str], sep: str, sized: bool) -> list[str]:
    """The route and why; what the model-API leg found (its notes, rules/api_leg.yaml); what the route waits on."""
    assert advice.route is not None
    why = advice.route.rationale[0].text if advice.route.rationale else ""
    out = [t("summary.route", route=t(f"route.{advice.route.kind}"), why=why)]
    out += [f"- {n.text}" for n in advice.notes if n.rule_id.startswith("api.")]
    if advice.route.provisional and sized:
        fields = sep.join(t(f"field.{f}") for f in advice.route.depends_on)
        out.append(t("summary.route_provisional", fields=fields))
    return out
