"""Which rules a fact matches, kept per rules version by the values of the fields those rules test.

A rule tests one fact at a time (engine/durable.py compiles one pattern per rule branch), so what matches a fact
is a function of the values of the fields its type's rules read, nothing else: the same brief, plan or GPU
figures asked again (another answer of the same shape) need not go through the
engine. The value's type is part of the key: the engine tells `true` from `1` and `1` from `1.0` as JSON does.

A fact whose values were not seen is looked up once more by what its rules can tell of them: a number that the
rules of its type only compare with numbers (lt, le, gt, ge, eq, ne, in, not_in) counts by the place it takes
among those numbers, so a first-time brief of 34 sessions is answered as one of 33 when no rule tells them apart
(tests/test_match_cuts.py holds the two equal to the engine's, values on and beside every bound included). A
number equal to a bound stays itself, and so does anything else: a bool, a string, a NaN, an int past 2**53.
"""

from __future__ import annotations

from bisect import bisect_left
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
        # Per fact type: for each tested field, the numbers its rules compare it with (None: kept as it is), and
        # the matches by the place each value takes among them (`_placed`).
        self._cuts: dict[str, tuple[tuple[int, tuple[float, ...]], ...]] = {}  # (field's place, its bounds)
        self._placed: dict[str, dict[tuple[Any, ...], frozenset[str]]] = {}

    def evaluate(self, engine: Evaluator, fact_type: str, rules: Sequence[Rule],
                 facts: list[dict[str, Any]]) -> dict[str, frozenset[str] | set[str]]:
        """engine.evaluate(fact_type, facts), asking the engine only about facts not seen before."""
        if "evaluate" in getattr(engine, "__dict__", ()):
            # `evaluate` replaced on the instance: someone watches or changes what the engine is asked (a test's
            # held engine counts the stages each answer reaches), so it sees every fact.
            return engine.evaluate(fact_type, facts)  # type: ignore[return-value]
        if engine is not self._engine:  # another evaluator over the same rules (a test's, the bench's reference)
            self._engine, self._kept, self._placed = engine, {}, {}
        fields = self._fields.get(fact_type, _MISSING)
        if fields is _MISSING:
            fields = self._fields[fact_type] = _tested(rules)
        if fields is None:
            return engine.evaluate(fact_type, facts)  # type: ignore[return-value]
        kept = self._kept.setdefault(fact_type, {})
        get = self._getters.get(fact_type)
        if get is None:
            get = self._getters[fact_type] = _getter(fields)
        cuts = self._cuts.get(fact_type)
        if cuts is None:
            cuts = self._cuts[fact_type] = tuple((i, b) for i, b in enumerate(_cuts(rules, fields)) if b is not None)
        placed = self._placed.setdefault(fact_type, {})
        out: dict[str, frozenset[str] | set[str]] = {}
        asked: dict[Any, dict[str, Any]] = {}  # place key → the first unseen fact with it: the one the engine sees
        later: list[tuple[str, Any, Any]] = []  # (fact id, key, place key) of the unseen facts
        for f in facts:
            try:
                values = get(f)
            except KeyError:  # a field the fact lacks: it never matches, which the key must say
                values = tuple([f.get(k, _MISSING) for k in fields])
            types = tuple(map(type, values))
            key: Any = (values, types)
            try:
                hit = kept.get(key)
            except TypeError:  # a tested field holds something unhashable: the engine sees this fact alone
                hit, key = None, object()
            fid = str(f["id"])
            if hit is not None:
                out[fid] = hit
                continue
            where: Any = (_places(values, cuts), types) if type(key) is tuple else key
            hit = placed.get(where)
            if hit is not None:
                out[fid] = _keep(kept, key, hit)
            else:
                asked.setdefault(where, f)
                later.append((fid, key, where))
        if asked:
            firsts = list(asked.values())
            found = engine.evaluate(fact_type, firsts)
            if len(placed) + len(firsts) > LIMIT:
                placed.clear()
            got = {where: frozenset(found.get(str(f["id"]), ())) for where, f in asked.items()}
            for fid, key, where in later:
                out[fid] = got[where]
                if type(key) is tuple:
                    _keep(kept, key, got[where])
            for where, ids in got.items():
                if type(where) is tuple:
                    placed[where] = ids
        return out


def _keep(kept: dict[tuple[Any, ...], frozenset[str]], key: tuple[Any, ...], ids: frozenset[str]) -> frozenset[str]:
    if len(kept) >= LIMIT:
        kept.clear()
    kept[key] = ids
    return ids


_EXACT = 2**53  # ints within this compare with any float the way the engine (in doubles) compares them


def _cuts(rules: Sequence[Rule], fields: tuple[str, ...]) -> tuple[tuple[float, ...] | None, ...]:
    """For each tested field: the numbers its rules compare it with, sorted; None when some condition on it
    compares with anything else (a bool, a string, a NaN, an int past _EXACT)."""
    found: dict[str, set[float] | None] = {k: set() for k in fields}
    for rule in rules:
        for branch in rule.branches:
            for cond in branch:
                numbers = found.get(cond.field)
                if numbers is None:
                    continue
                values = cond.value if isinstance(cond.value, tuple) else (cond.value,)
                # A rule file's numbers may be the YAML reader's int and float subclasses: their plain values.
                plain = [float(v) if isinstance(v, float) else int(v) if isinstance(v, int) and not isinstance(
                    v, bool) else v for v in values]
                if all(_number(v) for v in plain):
                    numbers.update(plain)
                else:
                    found[cond.field] = None
    return tuple(None if found[k] is None else tuple(sorted(found[k])) for k in fields)  # type: ignore[arg-type]


def _number(v: Any) -> bool:  # noqa: ANN401
    """An int or a float (never a bool) that orders and compares exactly against every other such number."""
    if type(v) is float:
        return v == v
    return type(v) is int and -_EXACT < v < _EXACT


def _places(values: tuple[Any, ...], cuts: tuple[tuple[int, tuple[float, ...]], ...]) -> tuple[Any, ...]:
    """Each value as its rules can tell it: a number between two of its field's bounds (`cuts`: the tested
    fields' places that have bounds, and those bounds) as the place between them (a one-item tuple: the value's
    type, kept beside in the key, tells it from a tuple value), any other value as itself."""
    out = list(values)
    for i, bounds in cuts:
        v = out[i]
        # _number(v), inline: ~10 tested numbers per fact, ~20 facts per first-time answer
        if type(v) is float and v == v or type(v) is int and -_EXACT < v < _EXACT:
            at = bisect_left(bounds, v)
            # Equal to none of the bounds: the first bound not below it (if any) is above it. For numbers that
            # order totally (no NaN), as bisect_right(bounds, v) == at tells.
            if at == len(bounds) or bounds[at] != v:
                out[i] = (at,)
    return tuple(out)


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
