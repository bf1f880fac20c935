"""A fact not seen before is matched by the place each number takes among the numbers its rules compare it with
(decide/matches.py, `_places`): whatever the values, on a bound, an ulp beside it or far from it, the rules the
memo says matched are the engine's, in any order of asking."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml.scalarfloat import ScalarFloat
from ruamel.yaml.scalarint import ScalarInt

from service.decide import matches as M
from service.engine.durable import DurableEngine
from service.engine.ir import Condition, Rule

BOUNDS = (-3, 0, 0.1, 0.3, 1, 2.5, 8, 1e-7, 123456.789, 1 / 3)
FIELDS = ("x", "n", "flag", "kind")


def _rule(i: int, branches: tuple[tuple[Condition, ...], ...]) -> Rule:
    return Rule(f"r{i}", "candidate", "g", "collect", 0, i, branches, (), "test:1")


def _near(v: float) -> list[float]:
    return [v, math.nextafter(v, -math.inf), math.nextafter(v, math.inf), v * 2, v / 2 - 1]


numbers = st.sampled_from(BOUNDS)
ops = st.sampled_from(("lt", "le", "gt", "ge", "eq", "ne"))
conditions = st.one_of(
    st.builds(Condition, st.sampled_from(("x", "n")), ops, numbers),
    st.builds(Condition, st.sampled_from(("x", "n")), st.sampled_from(("in", "not_in")),
              st.lists(numbers, min_size=1, max_size=3).map(tuple)),
    st.builds(Condition, st.just("flag"), st.sampled_from(("eq", "ne")), st.booleans()),
    st.builds(Condition, st.just("kind"), st.sampled_from(("eq", "ne")), st.sampled_from(("a", "b"))),
    # a number field compared with a bool: that field is never placed
    st.builds(Condition, st.just("n"), st.just("eq"), st.booleans()),
)
rule_sets = st.lists(st.lists(st.lists(conditions, min_size=1, max_size=3).map(tuple), min_size=1, max_size=2)
                     .map(tuple), min_size=1, max_size=8)
values = st.one_of(
    st.sampled_from(BOUNDS).flatmap(lambda b: st.sampled_from(_near(b))),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.integers(-10, 10),
    st.booleans(),
    st.sampled_from(("a", "b")),
)
facts = st.lists(st.fixed_dictionaries({}, optional={k: values for k in FIELDS}), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(branches=rule_sets, asked=facts, again=facts)
def test_placed_matches_are_the_engines(branches: list[Any], asked: list[dict[str, Any]],
                                        again: list[dict[str, Any]]) -> None:
    rules = tuple(_rule(i, b) for i, b in enumerate(branches))
    engine = DurableEngine(rules)
    try:
        memo = M.Matches()
        for batch in (asked, again, [*again, *asked]):
            batch = [{**f, "id": str(i)} for i, f in enumerate(batch)]
            want = engine.evaluate("candidate", batch)
            assert memo.evaluate(engine, "candidate", rules, batch) == want
            for f in batch:  # one at a time too: each from the memo, as the first of its place or as itself
                assert memo.evaluate(engine, "candidate", rules, [f]) == {f["id"]: want[f["id"]]}
    finally:
        engine.close()


def test_a_number_past_a_bound_is_asked_again() -> None:
    """Values on either side of a bound, or on it, never share what the memo kept."""
    rules = (_rule(0, ((Condition("x", "gt", 0.5),),)), _rule(1, ((Condition("x", "eq", 0.5),),)))
    engine = DurableEngine(rules)
    try:
        memo = M.Matches()
        got = [memo.evaluate(engine, "candidate", rules, [{"id": "a", "x": x}])["a"]
               for x in (0.1, 0.2, 0.5, math.nextafter(0.5, 1), 0.9, 0.4999)]
        assert got == [set(), set(), {"r1"}, {"r0"}, {"r0"}, set()]
        assert len(memo._placed["candidate"]) == 3  # below, on (the value itself) and above
    finally:
        engine.close()


def test_which_fields_are_placed() -> None:
    rules = (
        _rule(0, ((Condition("x", "lt", ScalarFloat(2.5)), Condition("n", "in", (ScalarInt(1), 3))),)),
        _rule(1, ((Condition("flag", "eq", True), Condition("kind", "eq", "a"), Condition("n", "gt", 2)),)),
        _rule(2, ((Condition("big", "lt", 2**60), Condition("nan", "lt", math.nan), Condition("b", "ne", 1)),)),
        _rule(3, ((Condition("b", "eq", False),),)),
    )
    fields = ("b", "big", "flag", "kind", "n", "nan", "x")
    cuts = dict(zip(fields, M._cuts(rules, fields), strict=True))
    assert cuts == {"b": None, "big": None, "flag": None, "kind": None, "n": (1, 2, 3), "nan": None, "x": (2.5,)}
    assert all(type(v) in (int, float) for v in (*cuts["n"], *cuts["x"]))  # type: ignore[misc]
    bounds = (1.0, 2.0)
    places = M._places((0.5, 1.0, 1.5, True, math.nan, 2**60, "s", 7), tuple((i, bounds) for i in range(8)))
    assert places[0] == (0,) and places[2] == (1,) and places[7] == (2,)
    assert places[1] == 1.0 and places[3] is True and places[5] == 2**60 and places[6] == "s"
    assert math.isnan(places[4])
    assert M._places((0.5, 0.5), ((1, bounds),)) == (0.5, (0,))  # a field without bounds stays itself
