"""One answer's working state: the rules version's shared, compiled parts (message tables, each candidate
rule's effects), the request's run (rules fired per stage, the trace, warnings and notes said so far) and a
candidate being scored.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..domain.advice import (
    Reason,
    TraceEntry,
    Warning,
)
from ..domain.brief import AdviceRequest
from ..engine.ir import Rule, apply_hit_policies
from ..memo import keep, keep_held
from ..render.messages import Messages
from .book import Rulebook
from .matches import Matches
from .sizing.common import Sizing


class Evaluator(Protocol):
    def evaluate(self, fact_type: str, facts: list[dict[str, Any]]) -> dict[str, set[str]]: ...


# A rule's message for one candidate, rendered only if the answer shows it: (rule id, message key), or None
# for an action without a message. Survivors past max_candidates are listed by id alone.
Said = tuple[str, str] | None


# What a candidate rule does, read from its actions once per rules version: whether it has an action
# `Run.common` handles on a candidate (warn), and its (kind, message, points) for exclude, score, caveat and note.
Effects = tuple[bool, tuple[tuple[str, Said, float], ...]]


CANDIDATE_KINDS = ("exclude", "score", "caveat", "note")

# What the candidate rules in effect on a candidate do: the rules whose warnings `Run.common` says, the points
# summed, and its exclusions, (rule, points) parts, reasons and caveats, each in the rules' order.
Summed = tuple[tuple[Rule, ...], float, tuple[Said, ...], tuple[tuple[str, float], ...], tuple[Said, ...],
               tuple[Said, ...]]


@dataclass
class Scored:
    sizing: Sizing
    fact: dict[str, Any]
    points: float = 0.0
    reasons: list[Said] = field(default_factory=list)
    caveats: list[Said] = field(default_factory=list)
    exclusions: list[Said] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)  # what its messages are filled from
    score: float = 0.0
    basis: float = 0.0
    basis_kind: str = ""
    best: float = 0.0
    cost_points: float = 0.0
    parts: list[tuple[str, float]] = field(default_factory=list)


class Run:
    def __init__(self, book: Rulebook, engine: Evaluator, req: AdviceRequest):
        self.book, self.engine, self.req = book, engine, req
        self.shared = compiled(book)
        self.msgs = self.shared.msgs
        self.locale = req.locale or "en"
        # text(key, params): the message `key` in this request's locale, filled from `params`.
        self.text: Callable[[str, Mapping[str, Any]], str] = self.msgs.table(self.locale).text
        self.trace: list[TraceEntry] = []
        self.warnings: list[Warning] = []
        self.notes: list[Reason] = []
        self._names: dict[str, str] = {}
        self.latency_targets: str | None = None  # the brief's latency targets in words, once said (advisor)
        self.api: Any = None  # the model-API leg priced for the route (decide/api_leg.Priced), for the answer

    def name(self, key: str) -> str:
        """A message without placeholders (a tier's or unit's name), looked up once per request."""
        if key not in self._names:
            self._names[key] = self.text(key, {})
        return self._names[key]

    def title(self, code: str) -> str:
        """A warning's name (`warning.<code>`); rules-check requires one for every code, "" keeps a gap silent."""
        key = f"warning.{code}"
        return self.text(key, {}) if self.msgs.has(key, self.locale) or self.msgs.has(key, "en") else ""

    def fire(self, fact_type: str, facts: list[dict[str, Any]],
             summary: Callable[[dict[str, Any]], str] | None = None) -> dict[str, Sequence[Rule]]:
        """Rules in effect per fact id, after hit policies; records the trace when asked. `summary` names a fact
        in a summarised trace: with it and more than SUMMARY_OVER facts, the trace holds one entry per rule and
        outcome (how many facts, an example) instead of one per rule and fact."""
        start = len(self.trace)
        out = self._fire(fact_type, facts)
        if summary is not None and self.req.include_trace and len(facts) > SUMMARY_OVER:
            self.trace[start:] = summarise(self.trace[start:], fact_type, {str(f["id"]): f for f in facts}, summary)
        return out

    def effects(self, winners: Sequence[Rule]) -> Summed:
        """What the candidate rules in effect on one candidate do, summed in their order (`Summed`); kept per
        rules version for the sets of rules `fire` keeps, which come back for candidate after candidate."""
        if type(winners) is tuple:  # a set `fire` keeps
            return keep_held(self.shared.summed, id(winners), (winners,), lambda: self._summed(winners), WINNERS_KEPT)
        return self._summed(winners)

    def _summed(self, winners: Sequence[Rule]) -> Summed:
        table = self.shared.effects
        said, exclusions, parts, reasons, caveats = [], [], [], [], []
        points = 0.0
        for rule in winners:
            common, acts = table.get(id(rule)) or effects_of(table, rule)
            if common:
                said.append(rule)
            for kind, reason, pts in acts:
                if kind == "exclude":
                    exclusions.append(reason)
                elif kind == "score":
                    points += pts
                    parts.append((rule.id, pts))
                    reasons.append(reason)
                elif kind == "caveat":
                    caveats.append(reason)
                else:  # note
                    reasons.append(reason)
        return tuple(said), points, tuple(exclusions), tuple(parts), tuple(reasons), tuple(caveats)

    def _fire(self, fact_type: str, facts: list[dict[str, Any]]) -> dict[str, Sequence[Rule]]:
        rules = self.book.program.for_fact(fact_type)
        matched: Mapping[str, AbstractSet[str]] = (
            self.shared.matches.evaluate(self.engine, fact_type, rules, facts) if rules
            else {str(f["id"]): set() for f in facts})
        out: dict[str, Sequence[Rule]] = {}
        kept = self.shared.winners.setdefault(fact_type, {})
        for fact in facts:
            fid = str(fact["id"])
            ids = matched.get(fid, _NONE)
            if type(ids) is frozenset:  # a kept match (matches.py): the same few sets come back for every brief
                found = kept.get(ids)
                if found is None:
                    found = keep(kept, ids, lambda ids=ids: tuple(apply_hit_policies(rules, ids)), WINNERS_KEPT)
                winners: Sequence[Rule] = found  # read, never changed, by every caller
            else:
                winners = apply_hit_policies(rules, ids)
            out[fid] = winners
            if self.req.include_trace:
                won = {r.id for r in winners}
                for r in rules:
                    if self.req.trace_fired_only and r.id not in won:
                        continue
                    if r.id in won:
                        detail = "fired"
                    elif r.id in matched.get(fid, set()):
                        detail = f"matched, but a higher-priority row of {r.group} took effect (hit policy first)"
                    else:
                        detail = r.first_failure(fact)
                    self.trace.append(TraceEntry(r.id, r.location, fid, r.id in won, detail))
        return out

    def common(self, rule: Rule, fact: dict[str, Any]) -> None:
        """Actions that mean the same on every fact: warn and brief-level notes."""
        for act in rule.actions:
            if act.kind == "warn":
                self.warnings.append(
                    Warning(
                        act.get("code"),
                        act.get("severity", "WARNING"),
                        self.text(act.get("message"), fact),
                        rule.id,
                        self.title(act.get("code")),
                    )
                )
            elif act.kind == "note" and fact["id"] in ("brief", "plan", "outcome"):
                self.notes.append(Reason(rule.id, self.text(act.get("message"), fact)))


class Compiled:
    """What one rules version's answers share and compute once: its message tables, and each candidate rule's
    effects (`effects_of`)."""

    def __init__(self, book: Rulebook):
        self.msgs = Messages(book.messages)
        self.effects: dict[int, Effects] = {}  # id(rule) → effects; the rules live as long as the book
        self.matches = Matches()  # the rules each fact matched, by the values its rules test
        # (brief fields an offer fact holds, day) → the placement scopes no offer rule excludes
        self.scopes: dict[tuple[Any, ...], frozenset[tuple[str, str, str]]] = {}
        # (allowed scopes, day, the brief's allow-lists) → per GPU and tier, each shape's cheapest offers
        self.leaders: dict[tuple[Any, ...], tuple[Any, Any, Any]] = {}  # (leaders, markets, options) per scope
        self.scope_list: dict[Any, tuple[tuple[str, str, str], ...]] = {}  # day → placement.scopes_of
        self.by_scope: dict[Any, Any] = {}  # day → its offers by scope, on hosts large enough (placement.by_scope)
        # fact type → the rules that take effect (apply_hit_policies) for each set of rule ids a fact matched
        self.winners: dict[str, dict[frozenset[str], tuple[Rule, ...]]] = {}
        self.summed: dict[int, tuple[tuple[object, ...], Summed]] = {}  # id(kept winners) → ((them,), Run.effects)


def compiled(book: Rulebook) -> Compiled:
    found = COMPILED.get(id(book))
    if found is None:
        found = Compiled(book)
        if COMPILED.setdefault(id(book), found) is found:
            weakref.finalize(book, COMPILED.pop, id(book), None)
    return found


def messages_of(book: Rulebook) -> Messages:
    """The rules' message tables, compiled once per rules version and dropped with it."""
    return compiled(book).msgs


WINNERS_KEPT = 1024  # matched sets kept per fact type and rules version; all are dropped past it
_NONE: frozenset[str] = frozenset()  # what a fact the engine left out matched


# Rulebook id → what its answers share. Not a field of the (frozen, hashed) Rulebook; each entry leaves when its
# Rulebook is freed, before that id can be reused.
COMPILED: dict[int, Compiled] = {}


def effects_of(table: dict[int, Effects], rule: Rule) -> Effects:
    acts = tuple(
        (act.kind, (rule.id, act.get("message")) if act.get("message") else None,
         float(act.get("points")) if act.kind == "score" else 0.0)
        for act in rule.actions if act.kind in CANDIDATE_KINDS
    )
    # `Run.common` on a candidate's fact says its warnings; its notes are the candidate's own (acts), not the answer's
    found = (any(act.kind == "warn" for act in rule.actions), acts)
    table[id(rule)] = found
    return found


# Offer facts are one per scope (provider, country, tier): 4,800 scopes at 50,000 synthetic offers made a trace of
# 24,000 entries and a 3.2 MB answer, over the answer cap. Beyond this many facts the trace is summarised.
SUMMARY_OVER = 20


def summarise(entries: list[TraceEntry], fact_type: str, facts: dict[str, dict[str, Any]],
              name: Callable[[dict[str, Any]], str]) -> list[TraceEntry]:
    """One entry per rule and outcome, in first-seen order: on how many of the facts, and the first as example."""
    groups: dict[tuple[str, bool, str], list[TraceEntry]] = {}
    for e in entries:
        groups.setdefault((e.rule_id, e.fired, e.detail), []).append(e)
    total = len(facts)
    out = []
    for (_rule, _fired, detail), group in groups.items():
        first = group[0]
        example = name(facts[first.fact]) if first.fact in facts else first.fact
        out.append(TraceEntry(first.rule_id, first.location, f"{fact_type} ({len(group):,} of {total:,})",
                              first.fired, f"{detail} (e.g. {example})"))
    return out
