"""Which missing brief fields could change the route: the answer is provisional while any of them is unknown.

A route decided on a silently assumed default flips from one conversation turn to the next as the caller fills
the brief in. Instead of guessing which rows "depend" on a field, each unknown field is tried at a few plausible
values, one at a time, against the same plan rules (the reference evaluator over the compiled rules: no engine
call, no join); the fields whose values change the route are the ones the answer depends on.

The operating boundary is not tried: a brief that names none has none (public cloud), otherwise every answer
would be provisional on it. Derived plan fields (api_comparable, api_cheaper, break_even_within_horizon) are
recomputed from the varied field, so a counterfactual fact is one the real pipeline could have produced.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..engine.ir import Rule
from ..memo import IdentityMemo, keep
from .api_leg import cheaper
from .facts import api_comparable

# Brief fields the sizing fills with a default when missing (sizing.shape_of); while the questions still ask for
# one, the candidates' figures rest on its default and the answer says so.
SIZING_DEFAULT_FIELDS = (
    "model.precision",
    "model.context_tokens",
    "traffic.avg_input_tokens",
    "traffic.avg_output_tokens",
    "traffic.concurrent_sessions",
    "traffic.batch_size",
    "model.kv_cache_precision",  # issue 36: 16-bit when neither the engine nor the KV precision is said
)


def _within_horizon(fact: dict[str, Any]) -> bool:
    be, horizon = fact["top_break_even_months"], fact["horizon_months"]
    return be >= 0 and horizon > 0 and be <= horizon


def _with_utilization(fact: dict[str, Any], util: float) -> dict[str, Any]:
    # $ per 1M tokens of the top pick is rent / (tokens/s x utilization): it scales as 1 / utilization.
    out = {**fact, "utilization": util}
    for key in ("top_usd_per_million_tokens", "top_usd_per_unit"):  # both per unit of work done: 1 / utilization
        if fact[key] > 0:
            out[key] = fact[key] * fact["utilization"] / util
    return out


# brief path → (is it unknown in this plan fact?, the counterfactual facts to try)
Variants = Callable[[dict[str, Any]], list[dict[str, Any]]]
ROUTE_INPUTS: dict[str, tuple[Callable[[dict[str, Any]], bool], Variants]] = {
    "economics.hours_per_month": (
        lambda f: f["hours_per_month"] <= 0,
        lambda f: [{**f, "hours_per_month": h} for h in (50.0, 300.0, 730.0)],
    ),
    "economics.horizon_months": (
        lambda f: f["horizon_months"] <= 0,
        lambda f: [{**f, "horizon_months": m} for m in (6.0, 36.0)],
    ),
    "economics.demand": (
        lambda f: f["demand"] == "UNSPECIFIED",
        lambda f: [{**f, "demand": d} for d in ("UNCERTAIN", "VOLATILE", "STEADY")],
    ),
    "run_cycle": (
        lambda f: f["run_cycle"] == "UNSPECIFIED",
        lambda f: [{**f, "run_cycle": c} for c in ("ALWAYS_ON", "SCHEDULED_BATCH", "BURST", "EXPERIMENTAL")],
    ),
    "economics.needs_hardware_control": (
        lambda f: f["hardware_control"] == "UNKNOWN",
        lambda f: [{**f, "hardware_control": v} for v in ("YES", "NO")],
    ),
    "economics.has_platform_team": (
        lambda f: f["platform_team"] == "UNKNOWN",
        lambda f: [{**f, "platform_team": v} for v in ("YES", "NO")],
    ),
    "economics.utilization": (
        lambda f: not f["utilization_given"],
        lambda f: [_with_utilization(f, u) for u in (0.2, 0.9)],
    ),
}


# The plan fields each counterfactual sets, with the ones _derive recomputes: the only fields in which a variant
# can differ from the plan (a test holds every variant to this). A path missing here compares every field.
_DERIVED = ("api_comparable", "api_cheaper", "break_even_within_horizon")
VARIES: dict[str, tuple[str, ...]] = {
    "economics.hours_per_month": ("hours_per_month", *_DERIVED),
    "economics.horizon_months": ("horizon_months", *_DERIVED),
    "economics.demand": ("demand", *_DERIVED),
    "run_cycle": ("run_cycle", *_DERIVED),
    "economics.needs_hardware_control": ("hardware_control", *_DERIVED),
    "economics.has_platform_team": ("platform_team", *_DERIVED),
    "economics.utilization": ("utilization", "top_usd_per_million_tokens", "top_usd_per_unit", *_DERIVED),
}


def _derive(fact: dict[str, Any]) -> dict[str, Any]:
    return {
        **fact,
        "api_comparable": api_comparable(fact["workload"], fact["hardware_control"]),
        "api_cheaper": cheaper(fact),
        "break_even_within_horizon": _within_horizon(fact),
    }


def route_rules(rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
    """The rules that give a route, in the order the advisor reads rules in effect (apply_hit_policies)."""
    with_route = (r for r in rules if any(a.kind == "route" for a in r.actions))
    return tuple(sorted(with_route, key=lambda r: (-r.priority, r.group, r.order)))


def route_of(ordered: tuple[Rule, ...], fact: dict[str, Any]) -> str | None:
    """The route `fact` gets, as the advisor picks it: the first rule in effect with a route. In that order the
    first matching rule is always in effect (it is the best of its group), so the search stops there."""
    for rule in ordered:
        if rule.matches(fact):
            return next(str(a.get("kind")) for a in rule.actions if a.kind == "route")
    return None


def route_depends_on(
    rules: tuple[Rule, ...], plan: dict[str, Any], route: str, default: str
) -> tuple[str, ...]:
    """Brief paths, not given in `plan`, that change `route` when given (each tried alone). `default` is the
    route when no rule gives one. Kept per rules version by the values of the plan fields it reads (the route
    rules' and the counterfactuals'), with their types as in matches.py: a repeated brief whose first pick reads
    the same does not try every counterfactual again."""
    fields, kept = _kept(rules)
    if fields is None:
        return _route_depends_on(rules, plan, route, default)
    values = tuple([plan.get(k, _ABSENT) for k in fields])
    key = (route, default, values, tuple(map(type, values)))
    try:
        found = kept.get(key)
    except TypeError:  # an unhashable value: worked out, not kept
        return _route_depends_on(rules, plan, route, default)
    if found is None:
        found = keep(kept, key, lambda: _route_depends_on(rules, plan, route, default), DEPENDS_KEPT)
    return found


DEPENDS_KEPT = 1024  # plan facts kept per rules version; all are dropped past it
# The plan fields ROUTE_INPUTS' tests and counterfactuals and _derive read, besides those the route rules test.
_INPUTS_READ = ("hours_per_month", "horizon_months", "demand", "run_cycle", "hardware_control", "platform_team",
                "utilization_given", "utilization", "top_usd_per_million_tokens", "workload",
                "api_scope", "api_usd_per_unit", "top_usd_per_unit", "top_break_even_months")


def _fields_read(rules: tuple[Rule, ...]) -> tuple[tuple[str, ...] | None, dict[Any, tuple[str, ...]]]:
    """The plan fields route_depends_on reads (None: a path whose counterfactual may change any field, so every
    field counts and nothing is kept), and the store of its results."""
    if any(path not in VARIES for path in ROUTE_INPUTS):
        return None, {}
    reads = {f for _, fields, _ in _route_table(rules) for f in fields}
    return tuple(sorted(reads | set(_INPUTS_READ))), {}


_kept = IdentityMemo(_fields_read, limit=8)


def _route_depends_on(
    rules: tuple[Rule, ...], plan: dict[str, Any], route: str, default: str
) -> tuple[str, ...]:
    """route_depends_on, worked out.

    `route_of` over every counterfactual fact, computed incrementally: a rule's match depends only on the fields
    it reads, so it is re-tested only when the counterfactual changed one of them (a value that is not the very
    object `plan` holds counts as changed) and otherwise read from its match on `plan`, tested once."""
    table = _route_table(rules)
    on_plan: list[bool | None] = [None] * len(table)  # each rule's match on `plan`, tested when first needed
    out = []
    for path, (unknown, variants) in ROUTE_INPUTS.items():
        if not unknown(plan):
            continue
        touched = VARIES.get(path)
        for variant in variants(plan):
            fact = _derive(variant)
            keys = fact if touched is None else touched
            changed = {k for k in keys if fact.get(k, _ABSENT) is not plan.get(k, _ABSENT)}
            got = default
            for i, (rule, reads, kind) in enumerate(table):
                if reads.isdisjoint(changed):
                    hit = on_plan[i]
                    if hit is None:
                        hit = on_plan[i] = rule.matches(plan)
                else:
                    hit = rule.matches(fact)
                if hit:
                    got = kind or default
                    break
            if got != route:
                out.append(path)
                break
    return tuple(out)


_ABSENT = object()
_Table = tuple[tuple[Rule, frozenset[str], str], ...]


def _build_route_table(rules: tuple[Rule, ...]) -> _Table:
    """Per route rule in `route_rules` order: the rule, the fields it reads, the route it gives."""
    return tuple(
        (r, frozenset(c.field for branch in r.branches for c in branch),
         next(str(a.get("kind")) for a in r.actions if a.kind == "route"))
        for r in route_rules(rules)
    )


# Kept per rules version: a few are alive at once at most (one serving, one loading, tests).
_route_table = IdentityMemo(_build_route_table, limit=8)
