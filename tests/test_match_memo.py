"""The matches kept per rules version (decide/matches.py) are the engine's: the same facts, facts that differ
only in a value's type, a fact missing a tested field, and a bound that drops them all."""

from __future__ import annotations

from typing import Any

import pytest

from service.decide import matches as M
from service.decide.advisor import advise
from service.decide.run import compiled
from service.rulebook.folder import load_rulebook
from service.rulebook.version import Bundle
from service.wire.api import request_from_proto
from service.wire.validate import validate
from tests.conftest import RULES, TODAY
from tests.fuzz_requests import request_from_seed


class Recording:
    """An evaluator that passes to the real one and keeps every batch it was asked."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.batches: list[tuple[str, list[dict[str, Any]]]] = []

    def evaluate(self, fact_type: str, facts: list[dict[str, Any]]) -> dict[str, set[str]]:
        self.batches.append((fact_type, [dict(f) for f in facts]))
        return self.engine.evaluate(fact_type, facts)


@pytest.fixture(scope="module")
def batches(bundle: Bundle) -> list[tuple[str, list[dict[str, Any]]]]:
    """Every batch of facts the answers to a few hundred generated requests sent to the engine."""
    rec = Recording(bundle.engine)
    memo = M.Matches()
    book = bundle.book
    for seed in range(300):
        r = request_from_seed(seed * 104729 + 3)
        if validate(r, bundle.known_gpu_ids()):
            continue
        req = request_from_proto(r)
        shared = compiled(book)
        saved, shared.matches = shared.matches, memo
        try:
            advise(book, rec, req)
        finally:
            shared.matches = saved
    return rec.batches


def test_kept_matches_are_the_engines(bundle: Bundle, batches: list[tuple[str, list[dict[str, Any]]]]) -> None:
    assert {t for t, _ in batches} >= {"brief", "candidate", "plan", "outcome"}
    engine, program = bundle.engine, bundle.book.program
    memo = M.Matches()
    for fact_type, facts in batches:
        want = engine.evaluate(fact_type, facts)
        rules = program.for_fact(fact_type)
        assert memo.evaluate(engine, fact_type, rules, facts) == want
        assert memo.evaluate(engine, fact_type, rules, facts) == want  # now from the memo


def test_type_and_missing_fields_are_part_of_the_key(bundle: Bundle,
                                                     batches: list[tuple[str, list[dict[str, Any]]]]) -> None:
    """`true`, 1 and 1.0 are different values to the engine; a missing field never matches."""
    engine, program = bundle.engine, bundle.book.program
    fact_type, facts = next((t, f) for t, f in batches if t == "brief")
    rules = program.for_fact(fact_type)
    memo = M.Matches()
    base = facts[0]
    fields = M._tested(rules)
    assert fields
    bools = [k for k in fields if isinstance(base.get(k), bool)]
    assert bools, "a brief fact has boolean fields the rules test"
    variants = [base]
    for k in bools:
        for v in (1, 1.0, 0, not base[k]):
            variants.append({**base, k: v})
    for k in fields[:5]:
        variants.append({kk: vv for kk, vv in base.items() if kk != k})
    for i, f in enumerate(variants):
        one = [{**f, "id": f"v{i}"}]
        assert memo.evaluate(engine, fact_type, rules, one) == engine.evaluate(fact_type, one)
    # once more, every one from the memo
    for i, f in enumerate(variants):
        one = [{**f, "id": f"v{i}"}]
        assert memo.evaluate(engine, fact_type, rules, one) == engine.evaluate(fact_type, one)


def test_bounded_and_per_evaluator(bundle: Bundle, batches: list[tuple[str, list[dict[str, Any]]]],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(M, "LIMIT", 10)
    engine, program = bundle.engine, bundle.book.program
    candidates = [(t, f) for t, f in batches if t == "candidate"]
    memo = M.Matches()
    for fact_type, facts in candidates:
        memo.evaluate(engine, fact_type, program.for_fact(fact_type), facts)
        assert len(memo._kept[fact_type]) <= max(10, len(facts))
    other = Recording(engine)  # another evaluator: nothing kept for the first is served to it
    t, facts = candidates[-1]
    memo.evaluate(other, t, program.for_fact(t), facts)
    assert other.batches


def test_a_new_rules_version_has_its_own(bundle: Bundle) -> None:
    """The memo lives in the rules version's Compiled: a reload's book starts with none."""
    book, _ = load_rulebook(RULES, today=TODAY)
    assert book is not None and book is not bundle.book
    assert compiled(book).matches is not compiled(bundle.book).matches


def test_an_evaluate_replaced_on_the_instance_sees_every_fact(bundle: Bundle,
                                                              batches: list[tuple[str, list[dict[str, Any]]]]) -> None:
    class Engine:
        def __init__(self, real: Any) -> None:
            self.real = real

        def evaluate(self, fact_type: str, facts: list[dict[str, Any]]) -> dict[str, set[str]]:
            return self.real.evaluate(fact_type, facts)

    engine = Engine(bundle.engine)
    asked: list[str] = []

    def watched(fact_type: str, facts: list[dict[str, Any]]) -> dict[str, set[str]]:
        asked.append(fact_type)
        return bundle.engine.evaluate(fact_type, facts)

    memo = M.Matches()
    t, facts = next((t, f) for t, f in batches if t == "brief")
    rules = bundle.book.program.for_fact(t)
    memo.evaluate(engine, t, rules, facts)
    engine.evaluate = watched  # type: ignore[method-assign]
    assert memo.evaluate(engine, t, rules, facts) == bundle.engine.evaluate(t, facts)
    assert memo.evaluate(engine, t, rules, facts) == bundle.engine.evaluate(t, facts)
    assert asked == [t, t]
