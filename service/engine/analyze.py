"""Static analysis of compiled rules: can a set of conditions ever hold together?

Used by `rules-check` to find rules that can never fire and rules that overlap with conflicting outcomes.
Conditions are conjunctions over single fields, so satisfiability is decided field by field: numbers as an
interval minus excluded points, everything else as a set of allowed values (the enum's domain when known).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .ir import Condition
from .parse import FieldSpec


@dataclass
class _Range:
    lo: float = -math.inf
    lo_open: bool = False
    hi: float = math.inf
    hi_open: bool = False
    equal: set[float] | None = None  # None: no equality constraint yet
    not_equal: set[Any] = field(default_factory=set)

    def add(self, c: Condition) -> None:
        v = c.value
        if c.op == "lt":
            self._upper(float(v), True)
        elif c.op == "le":
            self._upper(float(v), False)
        elif c.op == "gt":
            self._lower(float(v), True)
        elif c.op == "ge":
            self._lower(float(v), False)
        elif c.op in ("eq", "in"):
            vals = {float(v)} if c.op == "eq" else {float(x) for x in v}  # type: ignore[union-attr, arg-type]
            self.equal = vals if self.equal is None else self.equal & vals
        elif c.op == "ne":
            self.not_equal.add(float(v))  # type: ignore[arg-type]
        elif c.op == "not_in":
            self.not_equal |= {float(x) for x in v}  # type: ignore[union-attr]

    def _upper(self, v: float, open_: bool) -> None:
        if v < self.hi or (v == self.hi and open_):
            self.hi, self.hi_open = v, open_

    def _lower(self, v: float, open_: bool) -> None:
        if v > self.lo or (v == self.lo and open_):
            self.lo, self.lo_open = v, open_

    def _inside(self, v: float) -> bool:
        above = v > self.lo or (v == self.lo and not self.lo_open)
        below = v < self.hi or (v == self.hi and not self.hi_open)
        return above and below and v not in self.not_equal

    def satisfiable(self, integer: bool) -> bool:
        if self.equal is not None:
            return any(self._inside(v) for v in self.equal)
        if self.lo > self.hi or (self.lo == self.hi and (self.lo_open or self.hi_open)):
            return False
        if integer:
            first = (
                self.lo
                if math.isinf(self.lo)
                else (math.floor(self.lo) + 1 if self.lo_open or self.lo != math.floor(self.lo) else self.lo)
            )
            last = (
                self.hi
                if math.isinf(self.hi)
                else (math.ceil(self.hi) - 1 if self.hi_open or self.hi != math.ceil(self.hi) else self.hi)
            )
            if first > last:
                return False
            if math.isinf(first) or math.isinf(last) or last - first >= len(self.not_equal):
                return True  # more integers in range than excluded points
            return any(v not in self.not_equal for v in range(int(first), int(last) + 1))
        return True  # a real interval with positive width, or a point not excluded, has a value left


_NEGATE = {"eq": "ne", "ne": "eq", "lt": "ge", "ge": "lt", "le": "gt", "gt": "le", "in": "not_in", "not_in": "in"}


def implies(premise: tuple[Condition, ...], conclusion: tuple[Condition, ...], fields: dict[str, FieldSpec]) -> bool:
    """Whether every fact satisfying `premise` also satisfies `conclusion` (premise ∧ ¬c is unsatisfiable for
    each condition c of the conclusion)."""
    return all(
        not satisfiable((*premise, Condition(c.field, _NEGATE[c.op], c.value)), fields) for c in conclusion
    )


def satisfiable(conds: Iterable[Condition], fields: dict[str, FieldSpec]) -> bool:
    """Whether some fact of this schema satisfies every condition at once."""
    numeric: dict[str, _Range] = {}
    discrete: dict[str, set[Any] | None] = {}
    excluded: dict[str, set[Any]] = {}
    for c in conds:
        spec = fields.get(c.field)
        if spec is None:
            return False
        if spec.type in ("number", "int"):
            numeric.setdefault(c.field, _Range()).add(c)
            continue
        domain: set[Any] | None
        if spec.type == "bool":
            domain = {True, False}
        elif spec.type == "enum":
            domain = set(spec.values)
        else:
            domain = None  # free text: unbounded
        allowed = discrete.get(c.field, domain)
        if c.op in ("eq", "in"):
            vals = {c.value} if c.op == "eq" else set(c.value)  # type: ignore[arg-type]
            allowed = vals if allowed is None else allowed & vals
        elif c.op in ("ne", "not_in"):
            vals = {c.value} if c.op == "ne" else set(c.value)  # type: ignore[arg-type]
            excluded.setdefault(c.field, set()).update(vals)
        discrete[c.field] = allowed
    for name, rng in numeric.items():
        if not rng.satisfiable(fields[name].type == "int"):
            return False
    for name, allowed in discrete.items():
        if allowed is not None and not (allowed - excluded.get(name, set())):
            return False
    return True
