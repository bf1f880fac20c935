"""Which rules a fact matches, kept per rules version by the values of the fields those rules test.

A rule tests one fact at a time (engine/durable.py compiles one pattern per rule branch), so what matches a fact
is a function of the values of the fields its type's rules read, nothing else: the same brief, plan or GPU
figures asked again (another answer of the same shape, a reserve route's second pass) need not go through the
engine. The value's type is part of the key: the engine tells `true` from `1` and `1` from `1.0` as JSON does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any, Protocol

from ..engine.ir import Rule

LIMIT = 2048  # facts kept per rules version and fact type (~1 KB each at most); all are dropped past it
_MISSING = object()  # a field the fact lacks (it never matches)


class Evaluator(Protocol):
    def evaluate(self, fact_type: str, facts: list[dict[str, Any]]) -> dict[str, set[str]]: ...


class Matches:
    """One rules version's memo of engine matches (frozen sets of rule ids) by fact type and tested values."""

    def __init__(self) -> None:
        self._engine: Evaluator | None = None
        self._fields: dict[str, tuple[str, ...] | None] = {}
        self._getters: dict[str, Callable[[dict[str, Any]], Any]] = {}
        self._kept: dict[str, dict[tuple[Any, ...], frozenset[str]]] = {}

    def evaluate(self, engine: Evaluator, fact_type: str, rules: Sequence[Rule],
                 facts: list[dict[str, Any]]) -> dict[str, frozenset[str] | set[str]]:
        """engine.evaluate(fact_type, facts), asking the engine only about facts not seen before."""
        if "evaluate" in getattr(engine, "__dict__", ()):
            # `evaluate` replaced on the instance: someone watches or changes what the engine is asked (a test's
            # held engine counts the stages each answer reaches), so it sees every fact.
            return engine.evaluate(fact_type, facts)  # type: ignore[return-value]
        if engine is not self._engine:  # another evaluator over the same rules (a test's, the bench's reference)
            self._engine, self._kept = engine, {}
        fields = self._fields.get(fact_type, _MISSING)
        if fields is _MISSING:
            fields = self._fields[fact_type] = _tested(rules)
        if fields is None:
            return engine.evaluate(fact_type, facts)  # type: ignore[return-value]
        kept = self._kept.setdefault(fact_type, {})
        get = self._getters.get(fact_type)
        if get is None:
            get = self._getters[fact_type] = _getter(fields)
        out: dict[str, frozenset[str] | set[str]] = {}
        asked: dict[Any, dict[str, Any]] = {}  # key → the first unseen fact with it: the one the engine sees
        later: list[tuple[str, Any]] = []  # (fact id, key) of the unseen facts
        for f in facts:
            try:
                values = get(f)
            except KeyError:  # a field the fact lacks: it never matches, which the key must say
                values = tuple([f.get(k, _MISSING) for k in fields])
            key: Any = (values, tuple(map(type, values)))
            try:
                hit = kept.get(key)
            except TypeError:  # a tested field holds something unhashable: the engine sees this fact alone
                hit, key = None, object()
            fid = str(f["id"])
            if hit is not None:
                out[fid] = hit
            else:
                asked.setdefault(key, f)
                later.append((fid, key))
        if asked:
            firsts = list(asked.values())
            found = engine.evaluate(fact_type, firsts)
            if len(kept) + len(firsts) > LIMIT:
                kept.clear()
            got = {key: frozenset(found.get(str(f["id"]), ())) for key, f in asked.items()}
            for fid, key in later:
                out[fid] = got[key]
            for key, ids in got.items():
                if type(key) is tuple:
                    kept[key] = ids
        return out


def _getter(fields: tuple[str, ...]) -> Callable[[dict[str, Any]], Any]:
    """The tested values of a fact as a tuple (KeyError when one is missing)."""
    if len(fields) == 1:
        one = fields[0]
        return lambda f: (f[one],)
    return itemgetter(*fields) if fields else (lambda f: ())


def _tested(rules: Sequence[Rule]) -> tuple[str, ...] | None:
    """The fields the rules of one fact type test, or None when one tests the fact's id (the engine's batch sets
    that itself): such facts are not kept."""
    fields = sorted({cond.field for rule in rules for branch in rule.branches for cond in branch})
    return None if "id" in fields else tuple(fields)
