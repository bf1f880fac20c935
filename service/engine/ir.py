"""The engine-neutral intermediate form of the rules.

YAML rule files and decision tables compile to these plain values; an engine backend (durable.py) compiles them
further. The same values also carry a reference evaluator, used to explain why a rule did NOT fire and, in tests,
to cross-check the engine. Snapshot tests pin `to_dict()` so a change to the compiler shows up as a diff.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..memo import IdentityMemo

OPS = ("eq", "ne", "lt", "le", "gt", "ge", "in", "not_in")
OP_SYMBOL = {
    "eq": "==",
    "ne": "!=",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "in": "in",
    "not_in": "not in",
}

Scalar = str | int | float | bool


@dataclass(frozen=True)
class Condition:
    field: str
    op: str
    value: Scalar | tuple[Scalar, ...]

    def test(self, fact: dict[str, Any]) -> bool:
        if self.field not in fact:
            return False  # a missing field never matches, as in the engine
        actual = fact[self.field]
        try:
            match self.op:
                case "eq":
                    return _same(actual, self.value)
                case "ne":
                    return not _same(actual, self.value)
                case "lt":
                    return actual < self.value
                case "le":
                    return actual <= self.value
                case "gt":
                    return actual > self.value
                case "ge":
                    return actual >= self.value
                case "in":
                    return any(_same(actual, v) for v in self.value)  # type: ignore[union-attr]
                case "not_in":
                    return not any(_same(actual, v) for v in self.value)  # type: ignore[union-attr]
        except TypeError:
            return False
        raise ValueError(f"unknown operator {self.op}")

    def describe(self) -> str:
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return f"{self.field} {OP_SYMBOL[self.op]} {_show(value)}"


def _same(a: Any, b: Any) -> bool:
    # bool is an int in Python; the engine keeps them apart, so do we.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return a == b


def _show(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    return repr(v) if isinstance(v, str) else str(v)


@dataclass(frozen=True)
class Action:
    kind: str  # score | exclude | caveat | note | warn | route | ask | metric
    args: tuple[tuple[str, Any], ...]

    def get(self, key: str, default: Any = None) -> Any:
        return self._by_key.get(key, default)

    @cached_property
    def _by_key(self) -> dict[str, Any]:
        # An answer reads ~200 action arguments; the first of a repeated key is the one that counts, as in `args`.
        out: dict[str, Any] = {}
        for k, v in self.args:
            out.setdefault(k, v)
        return out


@dataclass(frozen=True)
class Rule:
    id: str
    fact: str  # brief | candidate | plan | outcome
    group: str  # the file or decision table the rule belongs to
    hit_policy: (
        str  # collect: every matching rule applies; first: per fact, only the best matching rule applies
    )
    priority: int  # higher wins under hit policy "first"; ties go to the earlier rule
    order: int  # position within its group
    branches: tuple[tuple[Condition, ...], ...]  # OR of ANDs; one branch is the common case
    actions: tuple[Action, ...]
    location: str  # path:line
    description: str = ""

    def matches(self, fact: dict[str, Any]) -> bool:
        """Any branch whose conditions all hold (plain loops: the counterfactual router asks ~25 times an answer)."""
        for branch in self.branches:
            for cond in branch:
                if not cond.test(fact):
                    break
            else:
                return True
        return False

    def first_failure(self, fact: dict[str, Any]) -> str:
        """For a rule that did not fire: the first failing condition of each branch, with the actual value."""
        parts = []
        for branch in self.branches:
            for cond in branch:
                if not cond.test(fact):
                    actual = fact.get(cond.field, "<missing>")
                    parts.append(f"{cond.describe()} was false (actual {_show(actual)})")
                    break
        return "; or ".join(parts) or "all conditions held"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "fact": self.fact,
            "group": self.group,
            "hit_policy": self.hit_policy,
            "priority": self.priority,
            "order": self.order,
            "location": self.location,
            "branches": [
                [
                    {
                        "field": c.field,
                        "op": c.op,
                        "value": list(c.value) if isinstance(c.value, tuple) else c.value,
                    }
                    for c in branch
                ]
                for branch in self.branches
            ],
            "actions": [{"kind": a.kind, **{k: v for k, v in a.args}} for a in self.actions],
        }


@dataclass(frozen=True)
class Program:
    """All rules of one rules folder, in a stable order."""

    rules: tuple[Rule, ...]

    def for_fact(self, fact: str) -> tuple[Rule, ...]:
        return self._by_fact.get(fact, ())

    @cached_property
    def _by_fact(self) -> dict[str, tuple[Rule, ...]]:
        # Asked for several times by every answer; the rules never change once loaded (a reload is a new Program).
        out: dict[str, list[Rule]] = {}
        for r in self.rules:
            out.setdefault(r.fact, []).append(r)
        return {fact: tuple(rules) for fact, rules in out.items()}

    def by_id(self) -> dict[str, Rule]:
        return {r.id: r for r in self.rules}

    def to_dict(self) -> dict[str, Any]:
        return {"rules": [r.to_dict() for r in self.rules]}


def apply_hit_policies(rules: tuple[Rule, ...], matched: set[str]) -> list[Rule]:
    """Rules that take effect for ONE fact, given the ids that matched it: `first` groups keep their best rule.
    The result is ordered by (-priority, group, order), ties as `sorted` left them over the collected rules
    followed by each group's best (tests/test_fast_paths.py holds the plain version equal to this one)."""
    if not matched:
        return []
    # Only the matched rules, walked in the order of the answer (a fact matches a few of the dozens of rules of
    # its type): a `first` group's best is the first of its rules met, and no sort by key is left to do.
    ranks, ranked = _ranks(rules)
    winners: list[Rule] = []
    taken: set[str] = set()
    for at in sorted([r for rule_id in matched for r in ranks.get(rule_id, ())]):
        rule = ranked[at]
        if rule.hit_policy == "collect":
            winners.append(rule)
        elif rule.group not in taken:
            taken.add(rule.group)
            winners.append(rule)
    return winners


def _rank(rules: tuple[Rule, ...]) -> tuple[dict[str, tuple[int, ...]], tuple[Rule, ...]]:
    """`rules` ranked as an answer orders them: by (-priority, group, order), a collected rule before a `first`
    one that ties with it (the plain version sorts the collected rules ahead of the groups' best), then by place
    (the earlier of equal rules wins its group); and rule id → its ranks. Kept per tuple (a Program's per-fact
    tuples live as long as it does)."""
    order = sorted(
        range(len(rules)),
        key=lambda i: (-rules[i].priority, rules[i].group, rules[i].order, rules[i].hit_policy != "collect", i),
    )
    places: dict[str, list[int]] = {}
    for rank, i in enumerate(order):
        places.setdefault(rules[i].id, []).append(rank)
    return {rule_id: tuple(at) for rule_id, at in places.items()}, tuple(rules[i] for i in order)


_ranks = IdentityMemo(_rank, limit=32)  # the few rules versions alive at once, four fact types each
