"""Rule authors' golden cases (rules/tests/*.yaml), run in-process against one rules version.

A case is a Recommend request in protobuf's JSON form plus `expect:` (the shared cases' vocabulary, and
`fired` / `not_fired` rule ids). The runner also reports coverage: shipped rules no case made fire. The store
runs the same cases before it activates a reloaded version, so a version that breaks them is never served.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..decide.advisor import advise
from ..domain.offers import COLUMNS, EXTRA_COLUMNS, OfferTable
from ..engine.load import Problem, plain, pos
from .expectations import check
from .files import read_yaml
from .folder import schema_problems
from .offer_checks import check_offers
from .offer_files import read_offers

if TYPE_CHECKING:
    from .version import Bundle


@dataclass(frozen=True)
class CaseResult:
    name: str
    location: str
    failures: tuple[str, ...]
    fired: frozenset[str] = frozenset()

    @property
    def passed(self) -> bool:
        return not self.failures


@dataclass
class Report:
    results: list[CaseResult] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    rule_ids: tuple[str, ...] = ()

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def failed(self) -> int:
        return len(self.results) - self.passed + len(self.problems)

    @property
    def fired(self) -> set[str]:
        return set().union(*(r.fired for r in self.results)) if self.results else set()

    @property
    def uncovered(self) -> list[str]:
        fired = self.fired
        return [r for r in self.rule_ids if r not in fired]

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "failed": self.failed,
            "cases": [
                {"name": r.name, "location": r.location, "passed": r.passed, "failures": list(r.failures)}
                for r in self.results
            ],
            "problems": [str(p) for p in self.problems],
            "coverage": {
                "rules": len(self.rule_ids),
                "covered": len(self.rule_ids) - len(self.uncovered),
                "uncovered": self.uncovered,
            },
        }


def load_cases(
    tests_dir: Path, shown_root: str
) -> tuple[list[tuple[str, str, dict[str, Any]]], list[Problem]]:
    cases: list[tuple[str, str, dict[str, Any]]] = []
    problems: list[Problem] = []
    schema_file = tests_dir.parent / "schema" / "rule_test.schema.json"
    schema = json.loads(schema_file.read_text(encoding="utf-8")) if schema_file.exists() else None
    for path in sorted(tests_dir.glob("*.yaml")):
        shown = f"{shown_root}/tests/{path.name}"
        doc, errs = read_yaml(path, shown)
        problems += errs
        if doc is None:
            continue
        data = doc.data
        if (
            not isinstance(data, dict)
            or data.get("kind") != "rule_test"
            or not isinstance(data.get("cases"), list)
        ):
            problems.append(
                Problem(shown, 1, 1, "", "a rule test file needs kind: rule_test and a list of cases")
            )
            continue
        if schema is not None:
            found = schema_problems(doc, schema)
            if found:
                problems += found
                continue
        for i, case in enumerate(data["cases"]):
            line, _ = pos(data["cases"], i)
            if not isinstance(case, dict) or "name" not in case or "expect" not in case:
                problems.append(Problem(shown, line, 1, "", "each case needs name, request and expect"))
                continue
            cases.append((str(case["name"]), f"{shown}:{line}", plain(case)))
    return cases, problems


def run_case(bundle: Bundle, case: dict[str, Any]) -> tuple[list[str], frozenset[str]]:
    from google.protobuf.json_format import ParseDict, ParseError

    from ..wire import api
    from ..wire.validate import MAX_ANSWER_BYTES, validate

    request = api.pb.RecommendRequest()
    try:
        ParseDict(_jsonable(case.get("request", {})), request)
    except ParseError as exc:
        return [f"request does not parse: {exc}"], frozenset()
    request.include_trace = True
    violations = validate(request, bundle.known_gpu_ids(), shapes=bundle.model_shapes(),
                          scale_up=bundle.scale_up_domains())
    if violations:
        return check(case["expect"], "INVALID_ARGUMENT", None, [v[0] for v in violations]), frozenset()
    domain = api.request_from_proto(request)
    if case.get("offers") is not None:
        # The case brings its own offer rows: what it tests then holds whatever the folder's tables hold.
        table, problems = case_offers(case["offers"], bundle.known_gpu_ids())
        if problems:
            return [f"offers: {p.message} (row {p.line - 1})" for p in problems], frozenset()
        book = replace(bundle.book, offers=table)
        advice = advise(book, bundle.engine, replace(domain, trace_fired_only=True))
    else:
        advice = bundle.advise(replace(domain, trace_fired_only=True))
    proto = api.advice_to_proto(advice)
    response = api.response_to_dict(proto)
    fired = frozenset(t.get("rule_id") for t in response.get("trace", []) if t.get("fired"))
    prices = catalog_prices(bundle, domain.as_of or date.today())
    failures = check(case["expect"], "OK", response, catalog=prices, catalog_size=len(bundle.book.catalog))
    size = proto.ByteSize()
    if size > MAX_ANSWER_BYTES:  # the server would refuse to send it: see wire/validate.py
        failures.append(f"the answer is {size:,} bytes, over the {MAX_ANSWER_BYTES:,}-byte limit the server sends: "
                        "shorten the messages it shows")
    return failures, fired


def case_offers(rows: list[dict[str, Any]], known_gpus: frozenset[str]) -> tuple[OfferTable, list[Problem]]:
    """A case's `offers:` rows (the offer CSV's columns as keys; `source` and `valid_from` may be left out) as an
    offer table, read by the same reader as `offers/*.csv`."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    columns = COLUMNS + EXTRA_COLUMNS  # a reserved row's term_months as well
    w.writerow(columns)
    for r in rows:
        r = {**r, "source": r.get("source", "rule test offer"), "valid_from": r.get("valid_from", r.get("as_of"))}
        w.writerow(["" if r.get(c) is None else str(_jsonable(r.get(c))) for c in columns])
    got, problems = read_offers("offers", buf.getvalue(), set(known_gpus))
    problems += [p for p in check_offers(got, set(known_gpus), date.today(), 10**6) if p.severity == "error"]
    return OfferTable(got), problems


def catalog_prices(bundle: Bundle, day: date) -> dict[str, dict[str, float]]:
    """GPU id → price kind → USD valid on `day`: the bases of ranges relative to the catalog."""
    out: dict[str, dict[str, float]] = {}
    for g in bundle.book.catalog:
        for kind in ("rent", "purchase"):
            price = g.price(kind, day)
            if price is not None:
                out.setdefault(g.id, {})[kind] = price.usd
    return out


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v


def run(bundle: Bundle, rules_dir: Path) -> Report:
    report = Report(rule_ids=tuple(r.id for r in bundle.book.program.rules))
    cases, report.problems = load_cases(rules_dir / "tests", rules_dir.name)
    for name, location, case in cases:
        try:
            failures, fired = run_case(bundle, case)
        except Exception as exc:  # a broken case is a failed case, not a crashed run
            failures, fired = [f"error: {exc!r}"], frozenset()
        report.results.append(CaseResult(name, location, tuple(failures), fired))
    return report


def self_test(rules_dir: Path):  # noqa: ANN201 - returns the store's SelfTest callable
    """For RuleStore: a reloaded version must pass its own rule tests before it is served."""

    def run_all(bundle: Bundle) -> list[str]:
        report = run(bundle, rules_dir)
        return [str(p) for p in report.problems] + [
            f"{r.location} {r.name}: {'; '.join(r.failures)}" for r in report.results if not r.passed
        ]

    return run_all
