"""Rule files and decision tables (YAML) → the intermediate form, reporting every problem with file:line:col.

Two file kinds hold logic:
- `kind: rules`: a list of rules, each `id`, `fact`, optional `priority`, `when` (all must hold) and/or
  `when_any` (a list of alternatives), and `then` (actions from a fixed vocabulary).
- `kind: decision_table`: rows that share `fact`, `hit_policy` and columns; each row is a rule with its own id,
  so an explanation can cite the row.

A test is a scalar (equality), a list (membership) or a mapping of operators, e.g. `{ge: 13, lt: 70}`.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from ..domain.brief import METRIC_KINDS
from .ir import OPS, Action, Condition, Rule
from .load import Doc, Problem, pos, value_pos
from .schema_errors import spelling_hint

HIT_POLICIES = ("collect", "first")


@dataclass(frozen=True)
class FieldSpec:
    type: str  # number | int | bool | enum | string
    doc: str
    values: tuple[str, ...] = ()  # for enum


FactSchema = dict[str, dict[str, FieldSpec]]


@dataclass(frozen=True)
class ActionSpec:
    facts: tuple[str, ...]
    required: dict[str, str]  # arg → type (number | string | message | enum:<name>)
    optional: dict[str, str]


ACTIONS: dict[str, ActionSpec] = {
    "score": ActionSpec(("candidate",), {"points": "number", "message": "message"}, {}),
    "exclude": ActionSpec(("candidate", "offer"), {"message": "message"}, {}),
    "caveat": ActionSpec(("candidate",), {"message": "message"}, {}),
    "note": ActionSpec(("brief", "candidate", "plan", "outcome"), {"message": "message"}, {}),
    "warn": ActionSpec(
        ("brief", "candidate", "plan", "outcome"),
        {"code": "string", "message": "message"},
        {"severity": "enum:severity"},
    ),
    "route": ActionSpec(("plan",), {"kind": "enum:route", "message": "message"}, {}),
    # assumes: the value the answer assumes while the question is open (a literal in the rules' enum form, or
    # assumes_from: the name of the assumption that holds it), so an assistant can say what it takes for granted.
    "ask": ActionSpec(
        ("brief",),
        {"field": "string", "message": "message"},
        {"unit": "string", "assumes": "scalar", "assumes_from": "string"},
    ),
    "metric": ActionSpec(("brief",), {"name": "string", "message": "message"}, {"kind": "enum:metric"}),
}
SEVERITIES = ("INFO", "WARNING", "CRITICAL")
RULE_KEYS = ("id", "description", "fact", "priority", "when", "when_any", "then")
TABLE_KEYS = ("kind", "id", "description", "fact", "hit_policy", "priority", "columns", "rows")
ROW_RESERVED = ("id", "then", "priority", "description")


def did_you_mean(word: str, options: Any) -> str:
    close = difflib.get_close_matches(str(word), [str(o) for o in options], n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


_WANTS = {"number": "a number", "int": "a whole number", "bool": "true or false", "string": "text"}


def type_message(op: str, field: str, spec: FieldSpec, got: Any) -> str:
    """`'lt' needs a number, got '15%' ('headroom' is a number; write 0.15 for 15%)`: the operator first, since
    that is what the author typed, then the field's type and, for the usual slips, the spelling that works."""
    want = _WANTS.get(spec.type, spec.type)
    if op in ("in", "not_in"):
        want = f"a list of {'numbers' if spec.type in ('number', 'int') else want}"
    head = f"'{op}' needs {want}" if op else f"'{field}' needs {want}"
    tail = f" ('{field}' is {_WANTS.get(spec.type, spec.type).replace(' or ', '/')})" if op else ""
    hint = spelling_hint(spec.type, got)
    if hint:
        tail = f"{tail[:-1]}; {hint})" if tail else f" ({hint})"
    return f"{head}, got {got!r}{tail}"


class _Compiler:
    def __init__(self, schema: FactSchema, route_kinds: tuple[str, ...]):
        self.schema = schema
        self.route_kinds = route_kinds
        self.problems: list[Problem] = []
        self.rules: list[Rule] = []

    def problem(self, doc: Doc, node: Any, key: Any, rule_id: str, msg: str, value: bool = False) -> None:
        line, col = value_pos(node, key) if value else pos(node, key)
        self.problems.append(Problem(doc.path, line, col, rule_id, msg))

    # -- tests ------------------------------------------------------------------------------------------------
    def conditions(self, doc: Doc, fact: str, node: Any, rule_id: str) -> tuple[Condition, ...]:
        if not isinstance(node, dict):
            self.problem(doc, node, None, rule_id, "conditions must be a mapping of fact field → test")
            return ()
        fields = self.schema.get(fact, {})
        out: list[Condition] = []
        for field, test in node.items():
            spec = fields.get(str(field))
            if spec is None:
                self.problem(
                    doc, node, field, rule_id, f"unknown {fact} fact '{field}'{did_you_mean(field, fields)}"
                )
                continue
            out.extend(self.test(doc, node, field, spec, test, rule_id))
        return tuple(out)

    def test(self, doc: Doc, node: Any, field: Any, spec: FieldSpec, test: Any, rid: str) -> list[Condition]:
        if isinstance(test, dict):
            pairs = [(op, v, test, op) for op, v in test.items()]
        elif isinstance(test, list):
            pairs = [("in", test, node, field)]
        else:
            pairs = [("eq", test, node, field)]  # problems point at the field for scalar tests
        out = []
        for op, value, holder, where in pairs:
            if op not in OPS:
                self.problem(doc, holder, op, rid, f"unknown operator '{op}'{did_you_mean(op, OPS)}")
                continue
            if op in ("in", "not_in"):
                if not isinstance(value, list) or not value:
                    self.problem(doc, holder, where, rid, f"'{op}' takes a non-empty list")
                    continue
                values = [self.typed(doc, holder, where, spec, field, v, rid, op) for v in value]
                if any(v is _BAD for v in values):
                    continue
                out.append(Condition(str(field), op, tuple(values)))
            else:
                if op in ("lt", "le", "gt", "ge") and spec.type not in ("number", "int"):
                    self.problem(
                        doc, holder, where, rid, f"'{op}' needs a numeric field; '{field}' is {spec.type}"
                    )
                    continue
                v = self.typed(doc, holder, where, spec, field, value, rid, op if holder is test else "")
                if v is not _BAD:
                    out.append(Condition(str(field), op, v))
        return out

    def typed(
        self, doc: Doc, holder: Any, key: Any, spec: FieldSpec, field: Any, v: Any, rid: str, op: str = ""
    ) -> Any:
        ok = True
        if spec.type in ("number", "int"):
            ok = isinstance(v, int | float) and not isinstance(v, bool)
            if ok:
                v = float(v) if spec.type == "number" else v
        elif spec.type == "bool":
            ok = isinstance(v, bool)
        elif spec.type == "enum":
            ok = isinstance(v, str) and v in spec.values
            if isinstance(v, str) and not ok:
                self.problem(
                    doc,
                    holder,
                    key,
                    rid,
                    f"'{v}' is not a value of '{field}'{did_you_mean(v, spec.values)}; "
                    f"allowed: {', '.join(spec.values)}",
                    value=True,
                )
                return _BAD
        else:
            ok = isinstance(v, str)
        if not ok:
            self.problem(doc, holder, key, rid, type_message(op, str(field), spec, v), value=True)
            return _BAD
        return v

    # -- actions ----------------------------------------------------------------------------------------------
    def actions(self, doc: Doc, fact: str, node: Any, rid: str) -> tuple[Action, ...]:
        if not isinstance(node, dict) or not node:
            self.problem(doc, node, None, rid, "'then' must be a mapping of action → arguments")
            return ()
        out = []
        for kind, args in node.items():
            spec = ACTIONS.get(str(kind))
            if spec is None:
                self.problem(doc, node, kind, rid, f"unknown action '{kind}'{did_you_mean(kind, ACTIONS)}")
                continue
            if fact not in spec.facts:
                self.problem(
                    doc,
                    node,
                    kind,
                    rid,
                    f"action '{kind}' applies to {'/'.join(spec.facts)} facts, not {fact}",
                )
                continue
            if not isinstance(args, dict):
                self.problem(doc, node, kind, rid, f"action '{kind}' takes a mapping of arguments")
                continue
            good = True
            for name in spec.required:
                if name not in args:
                    self.problem(doc, node, kind, rid, f"action '{kind}' needs '{name}'")
                    good = False
            allowed = {**spec.required, **spec.optional}
            for name, value in args.items():
                want = allowed.get(str(name))
                if want is None:
                    self.problem(
                        doc, args, name, rid, f"unknown argument '{name}'{did_you_mean(name, allowed)}"
                    )
                    good = False
                elif not self.arg_ok(want, value):
                    self.problem(
                        doc, args, name, rid, f"'{name}' must be {self.arg_doc(want)}, got {value!r}", value=True
                    )
                    good = False
            if good:
                out.append(Action(str(kind), tuple(sorted((str(k), v) for k, v in args.items()))))
        return tuple(out)

    def arg_ok(self, want: str, value: Any) -> bool:
        if want == "scalar":
            return isinstance(value, str | int | float | bool)
        if want == "number":
            return isinstance(value, int | float) and not isinstance(value, bool)
        if want == "enum:severity":
            return value in SEVERITIES
        if want == "enum:route":
            return value in self.route_kinds
        if want == "enum:metric":
            return value in METRIC_KINDS
        return isinstance(value, str) and bool(value)

    def arg_doc(self, want: str) -> str:
        if want == "enum:severity":
            return "one of " + ", ".join(SEVERITIES)
        if want == "enum:route":
            return "one of " + ", ".join(self.route_kinds)
        if want == "scalar":
            return "a string, number or boolean"
        if want == "enum:metric":
            return "one of " + ", ".join(METRIC_KINDS)
        return "a number" if want == "number" else "a non-empty string"

    # -- files --------------------------------------------------------------------------------------------
    def fact_of(self, doc: Doc, node: Any, rid: str, default: Any = None) -> str | None:
        fact = node.get("fact", default) if isinstance(node, dict) else default
        if fact not in self.schema:
            where = "fact" if isinstance(node, dict) and "fact" in node else None
            self.problem(
                doc,
                node,
                where,
                rid,
                f"'fact' must be one of {', '.join(self.schema)}; got {fact!r}{did_you_mean(fact, self.schema)}",
            )
            return None
        return str(fact)

    def priority_of(self, doc: Doc, node: Any, rid: str, default: int = 0) -> int:
        value = node.get("priority", default)
        if not isinstance(value, int) or isinstance(value, bool):
            self.problem(doc, node, "priority", rid, "'priority' must be a whole number", value=True)
            return default
        return value

    def rule_file(self, doc: Doc, group: str) -> None:
        items = doc.data.get("rules")
        if not isinstance(items, list):
            self.problem(
                doc, doc.data, "rules" if "rules" in doc.data else None, "", "'rules' must be a list"
            )
            return
        for order, item in enumerate(items):
            if not isinstance(item, dict):
                self.problem(doc, items, order, "", "each rule must be a mapping")
                continue
            rid = str(item.get("id", ""))
            if not rid:
                self.problem(doc, items, order, "", "rule has no 'id'")
                continue
            for key in item:
                if key not in RULE_KEYS:
                    self.problem(doc, item, key, rid, f"unknown key '{key}'{did_you_mean(key, RULE_KEYS)}")
            fact = self.fact_of(doc, item, rid, doc.data.get("fact"))
            if fact is None:
                continue
            branches = self.branches(doc, fact, item, rid)
            actions = self.actions(doc, fact, item.get("then"), rid)
            if branches is None or not actions:
                continue
            line, _ = pos(items, order)
            self.rules.append(
                Rule(
                    id=rid,
                    fact=fact,
                    group=group,
                    hit_policy="collect",
                    priority=self.priority_of(doc, item, rid),
                    order=order,
                    branches=branches,
                    actions=actions,
                    location=f"{doc.path}:{line}",
                    description=str(item.get("description", "")),
                )
            )

    def branches(self, doc: Doc, fact: str, item: Any, rid: str) -> tuple[tuple[Condition, ...], ...] | None:
        before = len(self.problems)
        common = self.conditions(doc, fact, item["when"], rid) if "when" in item else ()
        alternatives = item.get("when_any")
        if alternatives is None:
            branches: tuple[tuple[Condition, ...], ...] = (common,)
        elif not isinstance(alternatives, list) or not alternatives:
            self.problem(
                doc, item, "when_any", rid, "'when_any' must be a non-empty list of condition mappings"
            )
            return None
        else:
            branches = tuple(common + self.conditions(doc, fact, alt, rid) for alt in alternatives)
        if len(self.problems) > before:
            return None
        if not any(branches):
            self.problem(doc, item, None, rid, "rule has no conditions: give 'when' or 'when_any'")
            return None
        return branches

    def table_file(self, doc: Doc) -> None:
        data = doc.data
        tid = str(data.get("id", ""))
        if not tid:
            self.problem(doc, data, None, "", "decision table has no 'id'")
            return
        for key in data:
            if key not in TABLE_KEYS:
                self.problem(doc, data, key, tid, f"unknown key '{key}'{did_you_mean(key, TABLE_KEYS)}")
        fact = self.fact_of(doc, data, tid)
        policy = data.get("hit_policy")
        if policy not in HIT_POLICIES:
            self.problem(
                doc,
                data,
                "hit_policy" if "hit_policy" in data else None,
                tid,
                f"'hit_policy' must be one of {', '.join(HIT_POLICIES)}",
            )
            return
        columns = data.get("columns", [])
        if not isinstance(columns, list):
            self.problem(doc, data, "columns", tid, "'columns' must be a list of fact fields")
            columns = []
        rows = data.get("rows")
        if fact is None:
            return
        for col in columns:
            if str(col) not in self.schema[fact]:
                self.problem(
                    doc,
                    columns,
                    columns.index(col),
                    tid,
                    f"unknown {fact} fact '{col}'{did_you_mean(col, self.schema[fact])}",
                )
        if not isinstance(rows, list) or not rows:
            self.problem(
                doc, data, "rows" if "rows" in data else None, tid, "'rows' must be a non-empty list"
            )
            return
        table_priority = self.priority_of(doc, data, tid)
        for order, row in enumerate(rows):
            if not isinstance(row, dict) or not row.get("id"):
                self.problem(doc, rows, order, tid, "each row must be a mapping with an 'id'")
                continue
            rid = str(row["id"])
            tests = {k: v for k, v in row.items() if k not in ROW_RESERVED}
            if columns:
                for key in tests:
                    if key not in columns:
                        self.problem(
                            doc,
                            row,
                            key,
                            rid,
                            f"'{key}' is not a column of table {tid}{did_you_mean(key, columns)}",
                        )
            before = len(self.problems)
            conds = self.conditions(doc, fact, _Sub(row, tests), rid) if tests else ()
            actions = self.actions(doc, fact, row.get("then"), rid)
            if len(self.problems) > before or not actions:
                continue
            line, _ = pos(rows, order)
            self.rules.append(
                Rule(
                    id=rid,
                    fact=fact,
                    group=tid,
                    hit_policy=str(policy),
                    priority=self.priority_of(doc, row, rid, table_priority),
                    order=order,
                    branches=(conds,),
                    actions=actions,
                    location=f"{doc.path}:{line}",
                    description=str(row.get("description", "")),
                )
            )


class _Sub(dict):
    """A row's test columns, keeping the row's positions for problem reports."""

    def __init__(self, row: Any, tests: dict[str, Any]):
        super().__init__(tests)
        self.lc = row.lc


_BAD = object()


def compile_docs(
    docs: list[Doc], schema: FactSchema, route_kinds: tuple[str, ...]
) -> tuple[list[Rule], list[Problem]]:
    """Compile every `rules` and `decision_table` document; other kinds are ignored here."""
    c = _Compiler(schema, route_kinds)
    for doc in docs:
        if not isinstance(doc.data, dict):
            continue
        kind = doc.data.get("kind")
        if kind == "rules":
            c.rule_file(doc, group=doc.path)
        elif kind == "decision_table":
            c.table_file(doc)
    seen: dict[str, Rule] = {}
    for rule in c.rules:
        if rule.id in seen:
            path, line = rule.location.rsplit(":", 1)
            c.problems.append(
                Problem(
                    path,
                    int(line),
                    1,
                    rule.id,
                    f"duplicate rule id; first defined at {seen[rule.id].location}",
                )
            )
        else:
            seen[rule.id] = rule
    return c.rules, c.problems
