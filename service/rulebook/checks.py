"""Checks that need the whole rules folder: messages and translations, placeholders, rules that can never fire,
conflicting overlaps, and the age of prices. Errors block a rules version; warnings are reported but served."""

from __future__ import annotations

import re
import string
from datetime import date
from itertools import combinations
from typing import Any

from ..decide.provisional import ROUTE_INPUTS, SIZING_DEFAULT_FIELDS
from ..domain.accuracy import CLASSES as ACCURACY_CLASSES
from ..domain.brief import ENUM_FIELDS, PRICE_TIERS, RENT_TIERS, ROUTE_KINDS, SUCCESS_UNITS, WORKLOADS, brief_field_kind
from ..domain.catalog import Gpu
from ..engine.analyze import implies, satisfiable
from ..engine.ir import Rule
from ..engine.load import Problem
from ..engine.parse import FactSchema, did_you_mean
from ..render.messages import ARTICLE, PLURAL, placeholders, plural_problem, spec_problem, unit_key
from .expectations import STRAY_SPACE

_FORMATTER = string.Formatter()

# Message keys the code itself renders (not named by any rule file).
CODE_MESSAGE_KEYS = (
    "note.assumed_default",
    "note.kv_estimated",
    "price.from_quote",
    "price.from_catalog",
    "interconnect.training",
    "interconnect.inference",
    "throughput.training",
    "throughput.inference",
    "score.formula",
    "ownership.formula",
    "ownership.never",
    "summary.title",
    "summary.provisional",
    "summary.top",
    "summary.top_no_unit",
    "summary.top_per_million",
    "summary.alternative",
    "summary.none_fit",
    "summary.none_fit_because",
    "summary.route",
    "summary.warnings_header",
    "summary.route_provisional",
    "summary.list_separator",
    "summary.not_shown",
    "summary.tier_fallback",
    "note.assumed_value",
    "summary.sizing_provisional",
    "note.utilization_assumed",
    "summary.assumption",
    *(f"field.{f}" for f in SIZING_DEFAULT_FIELDS),
    *(f"field.{f}" for f in ROUTE_INPUTS),
    "summary.warning",
    "summary.self_host",
    "summary.no_pick_workload",
    "summary.questions_header",
    "summary.unmet_p95",
    "summary.unmet_p95_outputs",
    "summary.unmet_ttft",
    "summary.unmet_days",
    "summary.unmet_budget",
    "summary.monthly",
    "summary.monthly_always_on",
    "summary.run_total",
    "note.arch_estimated_training",
    "summary.more_questions",
    "summary.newer_rules_rejected",
    # issue 24: the measured error beside the figures (service/render/accuracy.py, service/decide/accuracy.py)
    *(f"accuracy.class.{c}" for c in ACCURACY_CLASSES),
    *(f"accuracy.target.{f}" for f in ("latency.p95_ms", "latency.ttft_ms", "training.target_days")),
    "accuracy.figure_ms",
    "accuracy.figure_s",
    "accuracy.figure_days",
    "summary.accuracy_band",
    "summary.accuracy_at_risk",
    "summary.accuracy_unmeasured",
    "caveat.accuracy_at_risk",
    "summary.accuracy_near_miss",
    "caveat.accuracy_near_miss",
    "note.accuracy_none_class",
    "note.accuracy_none_any",
    "latency.target_p95",
    "latency.target_ttft",
    "latency.target_both",
    "field.training.global_batch_tokens",
    *(f"route.{k}" for k in ROUTE_KINDS),
    *(f"tier.{t}" for t in (*PRICE_TIERS, "UNSPECIFIED")),
    *(f"workload.{w}" for w in (*WORKLOADS, "UNSPECIFIED")),
    *(f"unit.{u}" for u in SUCCESS_UNITS),
)

# Figures a candidate's messages may use besides the candidate fact's own fields.
CANDIDATE_EXTRAS = (
    "name",
    "usd_per_unit",
    "unit",
    "tokens_per_second",
    "step_ms",
    "est_ttft_ms",
    "train_hours",
    "train_days",
    "capacity_gb",
    "copy_need_gb",
    "per_replica",
    "replicas",
    "compute_count",
    "memory_count",
    "usd_per_tflop_hour",
    "break_even_hours",
    "owned_usd_per_hour",
    "interconnect_gbs",
    "tflops",
    "rent_tier_name",
    "price_tier_name",
    "latency_targets",
)

# Plan and outcome messages may also say whether the utilization was given ("" or a localized "(assumed)").
PLAN_EXTRAS = ("utilization_basis", "api_unit", "top_name")  # the last two: the model-API leg (decide/api_leg.py)
EXTRAS = {"candidate": CANDIDATE_EXTRAS, "plan": PLAN_EXTRAS, "outcome": PLAN_EXTRAS}

LOCALES = ("en", "zh-CN")
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")


def _where(location: str) -> tuple[str, int]:
    path, line = location.rsplit(":", 1)
    return path, int(line)


def message_problems(
    rules: list[Rule],
    messages: dict[str, dict[str, str]],
    locations: dict[str, dict[str, str]],
    content_keys: list[tuple[str, str]],  # (key, where) from benchmark plans and checklists
    schema: FactSchema,
) -> list[Problem]:
    out: list[Problem] = []
    used: list[tuple[str, str, str, Rule | None]] = []  # key, location, rule id, rule
    for r in rules:
        for a in r.actions:
            keys = [a.get("message")] + ([a.get("name")] if a.kind == "metric" else [])
            if a.kind == "warn" and a.get("code"):
                keys.append(f"warning.{a.get('code')}")  # the summary names a warning, never prints its code
            if a.kind == "ask" and a.get("unit"):
                keys.append(unit_key(a.get("unit")))  # a question's unit is read in the request's language
            used += [(k, r.location, r.id, r) for k in keys if k]
    used += [(k, where, "", None) for k, where in content_keys]
    bad_en: set[str] = set()  # keys whose en text uses a placeholder its fact lacks: reported once, there
    for locale in LOCALES:
        if locale not in messages:
            out.append(Problem("messages", 1, 1, "", f"no messages file for locale {locale}"))
    for key, location, rid, rule in used:
        path, line = _where(location)
        for locale in LOCALES:
            # Defined in another locale: a missing translation, reported at this locale's file below.
            if locale in messages and key not in messages[locale] and not _defined_elsewhere(key, locale, messages):
                near = did_you_mean(key, messages[locale])
                out.append(
                    Problem(path, line, 1, rid, f"message key '{key}' is not defined for {locale}{near}")
                )
        if rule is not None and key in messages.get("en", {}):
            allowed = set(schema[rule.fact]) | set(EXTRAS.get(rule.fact, ()))
            for name in _safe_placeholders(messages["en"][key]):
                if name not in allowed:
                    bad_en.add(key)
                    out.append(
                        Problem(
                            path,
                            line,
                            1,
                            rid,
                            f"message '{key}' uses {{{name}}}, which a {rule.fact} fact does not have"
                            f"{did_you_mean(name, sorted(allowed))}",
                        )
                    )
    for key in CODE_MESSAGE_KEYS:
        for locale in LOCALES:
            if locale in messages and key not in messages[locale] and not _defined_elsewhere(key, locale, messages):
                out.append(
                    Problem(
                        _locale_file(locations, locale),
                        1,
                        1,
                        "",
                        f"message key '{key}' (used by the service) is not defined for {locale}",
                    )
                )
    # Chinese text: no space between two CJK characters or beside full-width punctuation (filled-in values are
    # tidied when served; authored text is checked here, once, instead of on every answer).
    for key, template in messages.get("zh-CN", {}).items():
        literal = _PLACEHOLDER.sub("X", template)
        hit = STRAY_SPACE.search(literal)
        if hit:
            path, line = _where(locations["zh-CN"][key])
            shown = literal[max(0, hit.start() - 6) : hit.end() + 6]
            out.append(Problem(path, line, 1, key, f"stray space in Chinese text: '{shown}'", "warning"))
    # translations must cover the same keys with the same placeholders
    en, zh = messages.get("en", {}), messages.get("zh-CN", {})
    for key in sorted(set(en) | set(zh)):
        if key in en and key not in zh:
            out.append(missing_translation(key, "zh-CN", "en", messages, locations))
        elif key in zh and key not in en:
            out.append(missing_translation(key, "en", "zh-CN", messages, locations))
        else:
            for locale, table in (("en", en), ("zh-CN", zh)):
                try:
                    placeholders(table[key])
                except ValueError as exc:
                    path, line = _where(locations[locale][key])
                    out.append(Problem(path, line, 1, key, f"bad template: {exc}"))
            en_names, zh_names = set(_safe_placeholders(en[key])), set(_safe_placeholders(zh[key]))
            # An en placeholder already reported as one the fact lacks is the typo: zh-CN, which differs only by
            # not sharing it, is not reported again for the same mistake.
            if en_names != zh_names and key not in bad_en:
                path, line = _where(locations["zh-CN"][key])
                only_zh, only_en = sorted(zh_names - en_names), sorted(en_names - zh_names)
                detail = "; ".join(x for x in (
                    f"zh-CN has {', '.join('{' + n + '}' for n in only_zh)}" if only_zh else "",
                    f"en has {', '.join('{' + n + '}' for n in only_en)}" if only_en else "",
                ) if x)
                out.append(Problem(path, line, 1, key, f"placeholders differ from the en text ({detail})"))
    return out


def _defined_elsewhere(key: str, locale: str, messages: dict[str, dict[str, str]]) -> bool:
    return any(key in table for other, table in messages.items() if other != locale)


def _locale_file(locations: dict[str, dict[str, str]], locale: str) -> str:
    """The messages file of a locale (where its keys are), or a stand-in name when it has none yet."""
    for where in locations.get(locale, {}).values():
        return _where(where)[0]
    return f"messages/{locale}"


def missing_translation(
    key: str,
    locale: str,
    source: str,
    messages: dict[str, dict[str, str]],
    locations: dict[str, dict[str, str]],
) -> Problem:
    """A key `source` defines and `locale` does not, reported in the file the fix goes into: `locale`'s messages
    file, at the key the missing one follows in `source`'s order (before the file's first key when none does),
    naming where the `source` text is."""
    table, placed = messages.get(locale, {}), locations.get(locale, {})
    order = list(messages.get(source, {}))
    after = next((k for k in reversed(order[: order.index(key)]) if k in table), None)
    if after is not None:
        (path, line), where = _where(placed[after]), f"add it after '{after}'"
    elif placed:
        first = next(iter(placed))
        (path, line), where = _where(placed[first]), f"add it before '{first}'"
    else:
        path, line, where = _locale_file(locations, locale), 1, "add it"
    return Problem(
        path, line, 1, key, f"missing {locale} translation of '{key}' ({source} text at "
        f"{locations[source][key]}); {where}"
    )


def _safe_placeholders(template: str) -> list[str]:
    try:
        return placeholders(template)
    except ValueError:
        return []


def logic_problems(rules: list[Rule], schema: FactSchema) -> list[Problem]:
    out: list[Problem] = []
    for r in rules:
        fields = schema[r.fact]
        dead = [i for i, b in enumerate(r.branches) if not satisfiable(b, fields)]
        if len(dead) == len(r.branches):
            path, line = _where(r.location)
            out.append(
                Problem(path, line, 1, r.id, "rule can never fire: its conditions contradict each other")
            )
        elif dead:
            path, line = _where(r.location)
            out.append(
                Problem(
                    path,
                    line,
                    1,
                    r.id,
                    f"alternative(s) {', '.join(str(i + 1) for i in dead)} of when_any can never hold",
                    severity="warning",
                )
            )
    # A row of a first-hit table that an earlier row (at the same or a higher priority) always beats.
    for r in rules:
        if r.hit_policy != "first":
            continue
        for earlier in rules:
            if earlier is r:
                break
            if earlier.group != r.group or earlier.priority < r.priority:
                continue
            if all(any(implies(b, eb, schema[r.fact]) for eb in earlier.branches) for b in r.branches):
                path, line = _where(r.location)
                out.append(Problem(path, line, 1, r.id, f"never takes effect: {earlier.id} ({earlier.location}) "
                                                        "matches every fact this row matches and comes first"))
                break
    # Two rules that can match the same fact at the same priority and decide different things.
    deciding = [r for r in rules if any(a.kind in ("route", "metric") for a in r.actions)]
    for a, b in combinations(deciding, 2):
        if a.fact != b.fact or a.priority != b.priority:
            continue
        if a.group == b.group and a.hit_policy == "first":
            continue  # the table's hit policy resolves it, by row order
        for kind in ("route", "metric"):
            va = {x.get("kind") or x.get("name") for x in a.actions if x.kind == kind}
            vb = {x.get("kind") or x.get("name") for x in b.actions if x.kind == kind}
            if not va or not vb or va == vb:
                continue
            if any(satisfiable(ba + bb, schema[a.fact]) for ba in a.branches for bb in b.branches):
                # Blame the rule outside a first-hit table when there is one: that is usually the newcomer.
                here, other = (a, b) if b.hit_policy == "first" and a.hit_policy != "first" else (b, a)
                path, line = _where(here.location)
                out.append(
                    Problem(
                        path,
                        line,
                        1,
                        here.id,
                        f"overlaps with {other.id} ({other.location}) at "
                        f"priority {a.priority} with a different {kind}",
                    )
                )
    return out


def price_problems(catalog: tuple[Gpu, ...], today: date, max_age_days: int) -> list[Problem]:
    out: list[Problem] = []
    for g in catalog:
        path, line = _where(g.location)
        if g.price("rent", today) is None:
            out.append(Problem(path, line, 1, g.id, f"no rent price valid on {today.isoformat()}", "warning"))
        for p in g.prices:
            ppath, pline = _where(p.location)
            # The schema says so too; this keeps a folder without schemas honest.
            allowed = RENT_TIERS if p.kind == "rent" else ("LIST_PURCHASE", "MARKETPLACE")
            if p.tier not in allowed:
                out.append(
                    Problem(
                        ppath,
                        pline,
                        1,
                        g.id,
                        f"{p.kind} price tier '{p.tier.lower()}' must be one of "
                        + ", ".join(t.lower() for t in allowed),
                    )
                )
            if not p.valid_on(today):
                continue
            try:
                age = (today - date.fromisoformat(str(p.as_of))).days
            except ValueError:
                out.append(Problem(ppath, pline, 1, g.id, f"as_of '{p.as_of}' is not a date (YYYY-MM-DD)"))
                continue
            if age > max_age_days:
                out.append(
                    Problem(
                        ppath,
                        pline,
                        1,
                        g.id,
                        f"{p.kind} price is {age} days old (limit {max_age_days}):"
                        " refresh it or pass a quote",
                        "warning",
                    )
                )
            if age < 0:
                out.append(Problem(ppath, pline, 1, g.id, f"as_of {p.as_of} is in the future"))
        out += open_ended_overlaps(g)
    return out


def open_ended_overlaps(g: Gpu) -> list[Problem]:
    """Two price rows of one kind and tier with no valid_until both apply from their valid_from on: the newer
    silently wins (issue 25: an added rent row shadowed the old one, which still read as current). Say which is in
    effect and how to end the other."""
    out: list[Problem] = []
    groups: dict[tuple[str, str], list[Any]] = {}
    for p in g.prices:
        if p.valid_until is None:
            groups.setdefault((p.kind, p.tier), []).append(p)
    for (kind, tier), rows in groups.items():
        rows.sort(key=lambda p: (p.valid_from or date.min, str(p.as_of)))
        for older, newer in zip(rows, rows[1:], strict=False):
            path, line = _where(newer.location)
            _, old_line = _where(older.location)
            start = newer.valid_from.isoformat() if newer.valid_from else "its as_of"
            out.append(Problem(
                path, line, 1, g.id,
                f"two open-ended {kind} rows for {g.id} at {tier.lower()} (this one and line {old_line}): this one "
                f"(${newer.usd:g}) is in effect from {start}, the other (${older.usd:g}) no longer applies; give the "
                f"older row valid_until (the day before this one's valid_from), or remove it",
                "warning",
            ))
    return out


def _fits(kind: str, path: str, value: Any) -> bool:
    if kind == "enum":
        return value in ENUM_FIELDS[path]
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    return False


def question_problems(rules: list[Rule], assumptions: dict[str, Any]) -> list[Problem]:
    """An `ask` must name a brief field, and what it says the answer assumes must be a value that field takes:
    an assistant passes both on to a person."""
    out: list[Problem] = []
    for r in rules:
        for a in r.actions:
            if a.kind != "ask":
                continue
            path, line = _where(r.location)
            field = a.get("field")
            kind = brief_field_kind(field)
            if kind is None:
                out.append(Problem(path, line, 1, r.id, f"ask field '{field}' is not a field of the brief"))
                continue
            literal, name = a.get("assumes"), a.get("assumes_from")
            if literal is not None and name is not None:
                out.append(Problem(path, line, 1, r.id, "ask takes 'assumes' or 'assumes_from', not both"))
                continue
            if name is not None:
                if name not in assumptions:
                    out.append(Problem(path, line, 1, r.id,
                                       f"assumes_from: no assumption '{name}'{did_you_mean(name, assumptions)}"))
                    continue
                literal = assumptions[name]
            if literal is not None and not _fits(kind, field, literal):
                want = {"bool": "true or false", "int": "a whole number", "number": "a number"}.get(kind, "")
                if kind == "enum":
                    want = "one of " + ", ".join(ENUM_FIELDS[field])
                out.append(Problem(path, line, 1, r.id,
                                   f"assumes {literal!r} is not a value {field} takes: it wants {want}"))
    return out


def lint_problems(rules: list[Rule], catalog: tuple[Gpu, ...]) -> list[Problem]:
    """Warnings about rules that work, but not as their author likely meant."""
    return _candidate_warn_lints(rules) + _unmatrixed_gpu_lints(rules, catalog)


def _candidate_warn_lints(rules: list[Rule]) -> list[Problem]:
    # Warnings belong to the answer (one per code), so a candidate rule's `warn` shows on the whole answer as
    # soon as any GPU matches: also one that is excluded or ranked below the shown candidates.
    out = []
    for r in rules:
        if r.fact == "candidate" and any(a.kind == "warn" for a in r.actions):
            path, line = _where(r.location)
            out.append(Problem(
                path, line, 1, r.id,
                "'warn' on a candidate fact becomes an answer-wide warning when any GPU matches, even one that "
                "is excluded or not shown; use 'caveat' for this candidate, or test the top pick on the plan fact",
                "warning",
            ))
    return out


def _unmatrixed_gpu_lints(rules: list[Rule], catalog: tuple[Gpu, ...]) -> list[Problem]:
    # The matrix: rows of candidate decision tables that test `gpu`. A catalog GPU none of them names gets no
    # workload points anywhere, usually because it was added to the catalog and forgotten in the matrix. A row
    # naming it with no points (a note) records that ranking it on cost alone is meant.
    rows = [
        r for r in rules
        if r.fact == "candidate" and not r.group.endswith((".yaml", ".yml"))
        and any(c.field == "gpu" for b in r.branches for c in b)
    ]
    if not rows:
        return []
    named: set[str] = set()
    for r in rows:
        for c in (c for b in r.branches for c in b if c.field == "gpu"):
            if c.op == "eq":
                named.add(str(c.value))
            elif c.op == "in" and isinstance(c.value, tuple):
                named.update(str(v) for v in c.value)
    tables = ", ".join(sorted({r.group for r in rows}))
    out = []
    for g in catalog:
        if g.id not in named:
            path, line = _where(g.location)
            out.append(Problem(
                path, line, 1, g.id,
                f"no row of {tables} names this GPU: it gets no workload points and is ranked on cost alone; "
                "add it to a row, or a row with a note saying cost alone is meant",
                "warning",
            ))
    return out


def format_spec_problems(
    messages: dict[str, dict[str, str]], locations: dict[str, dict[str, str]]
) -> list[Problem]:
    """Every template of every locale: no conversions (`!r`), and format specs within the plain mini-language
    and small widths and precisions. Templates are data; an answer must not grow by what one says.
    (Attribute and index access, `{gpu.__class__}` or `{0[0]}`, fail `placeholders` in message_problems.)"""
    out: list[Problem] = []
    for locale in sorted(messages):
        for key, template in messages[locale].items():
            try:
                fields = [(n, s, c) for _, n, s, c in _FORMATTER.parse(template) if n is not None]
            except ValueError:
                continue  # malformed: message_problems reports it
            path, line = _where(locations[locale][key])
            for name, spec, conv in fields:
                if conv == ARTICLE:
                    if spec:
                        out.append(Problem(path, line, 1, key, f"{{{name[:40]}!i}}: an article takes no spec"))
                    continue
                if conv == PLURAL:
                    why = plural_problem(spec)
                    if why:
                        out.append(Problem(path, line, 1, key, f"{{{name[:40]}!p}}: {why}"))
                    continue
                if conv:
                    out.append(Problem(path, line, 1, key,
                                       f"{{{name}!{conv}}}: conversions are not allowed (only !p, plural "
                                       "forms, and !i, an article)"))
                why = spec_problem(spec) if spec else None
                if why:
                    out.append(Problem(path, line, 1, key, f"{{{name[:40]}}}: {why}"))
    return out
