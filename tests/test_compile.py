"""Snapshot tests of the compiled intermediate form (like ansible-rulebook's tests/asts): a change to the
compiler shows up as a diff of the golden JSON. Regenerate deliberately with UPDATE_GOLDEN=1."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from service.decide.facts import SCHEMA
from service.domain.brief import ROUTE_KINDS
from service.engine.ir import apply_hit_policies
from service.engine.parse import compile_docs
from service.rulebook.files import read_yaml

FIXTURES = Path(__file__).parent / "fixtures" / "compile"
REPO_RULES = Path(__file__).parents[1] / "rules"


def compile_file(path: Path, shown: str):
    doc, problems = read_yaml(path, shown)
    assert doc is not None and not problems
    return compile_docs([doc], SCHEMA, ROUTE_KINDS)


def check_golden(golden: Path, data: dict) -> None:
    text = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if os.environ.get("UPDATE_GOLDEN") or not golden.exists():
        golden.write_text(text, encoding="utf-8")
        if not os.environ.get("UPDATE_GOLDEN"):
            pytest.fail(f"{golden.name} did not exist and was written; review and commit it")
    assert text == golden.read_text(encoding="utf-8"), f"compiled form changed: diff against {golden}"


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.yaml")), ids=lambda p: p.stem)
def test_fixture_snapshots(path: Path):
    rules, problems = compile_file(path, f"fixtures/{path.name}")
    assert problems == []
    check_golden(path.with_suffix(".ir.json"), {"rules": [r.to_dict() for r in rules]})


def _logic_files() -> list[Path]:
    yaml = YAML(typ="safe")
    return sorted(
        p for p in REPO_RULES.glob("*.yaml") if yaml.load(p.read_text(encoding="utf-8")).get("kind") in LOGIC_KINDS
    )


LOGIC_KINDS = ("rules", "decision_table")


@pytest.mark.parametrize("path", _logic_files(), ids=lambda p: p.stem)
def test_shipped_rule_snapshots(path: Path):
    rules, problems = compile_file(path, f"rules/{path.name}")
    assert [str(p) for p in problems] == []
    assert rules, f"{path.name} compiled to no rules"
    check_golden(
        Path(__file__).parent / "golden" / f"{path.stem}.ir.json", {"rules": [r.to_dict() for r in rules]}
    )


def test_or_branches_and_operators_compile_as_documented():
    rules, _ = compile_file(FIXTURES / "rules_basic.yaml", "fixtures/rules_basic.yaml")
    first, second = rules
    assert [(c.field, c.op) for c in first.branches[0]] == [
        ("workload", "eq"),
        ("gpu", "in"),
        ("headroom", "ge"),
        ("headroom", "lt"),
    ]
    assert len(second.branches) == 2 and all(b[0].field == "is_training" for b in second.branches)
    assert first.location == "fixtures/rules_basic.yaml:4"


def test_first_hit_policy_prefers_priority_then_order():
    rules, _ = compile_file(FIXTURES / "table_first.yaml", "fixtures/table_first.yaml")
    winners = apply_hit_policies(tuple(rules), {"t.route.low", "t.route.steady", "t.route.default"})
    assert [r.id for r in winners] == ["t.route.steady"]
    winners = apply_hit_policies(tuple(rules), {"t.route.low", "t.route.default"})
    assert [r.id for r in winners] == ["t.route.low"]
