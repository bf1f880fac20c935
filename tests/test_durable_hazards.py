"""Each durable_rules hazard the design relies on avoiding (shared/design/durable_rules.md), tested through
the one module that talks to the engine. The reference evaluator in ir.py is the oracle."""

from __future__ import annotations

import math
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.engine.durable import DurableEngine, EngineError, encode
from service.engine.ir import Action, Condition, Rule

NOTE = (Action("note", (("message", "m"),)),)


def rule(rid: str, *branches: tuple[Condition, ...], fact: str = "candidate") -> Rule:
    return Rule(rid, fact, "g", "collect", 0, 0, tuple(branches), NOTE, "test.yaml:1")


def reference(rules: list[Rule], facts: list[dict]) -> dict[str, set[str]]:
    return {f["id"]: {r.id for r in rules if r.matches(f)} for f in facts}


@pytest.fixture
def engine_factory():
    made: list[DurableEngine] = []

    def make(rules: list[Rule], **kw) -> DurableEngine:
        e = DurableEngine(rules, **kw)
        made.append(e)
        return e

    yield make
    for e in made:
        e.close()


def test_facts_that_match_nothing_do_not_raise(engine_factory):
    # Without the sentinel, asserting unmatched facts raises and delete_state can free a bad pointer.
    e = engine_factory([rule("r", (Condition("gpu", "eq", "h100"),))])
    assert e.evaluate("candidate", [{"id": "a", "gpu": "l4"}]) == {"a": set()}
    assert e.evaluate("candidate", [{"id": "a", "gpu": "h100"}]) == {"a": {"r"}}


def test_numbers_python_writes_with_exponents_still_compare(engine_factory):
    rules = [rule("tiny", (Condition("x", "lt", 1e-5),)), rule("huge", (Condition("x", "gt", 1e20),))]
    e = engine_factory(rules)
    facts = [{"id": "a", "x": 1e-7}, {"id": "b", "x": 3e21}, {"id": "c", "x": 5.0}]
    assert e.evaluate("candidate", facts) == {"a": {"tiny"}, "b": {"huge"}, "c": set()}
    assert "e" not in encode({"x": 1e-7, "y": 3e21})


def test_non_finite_numbers_are_refused():
    with pytest.raises(EngineError):
        encode({"x": math.nan})
    with pytest.raises(EngineError):
        encode({"x": math.inf})


def test_or_fires_once_per_rule(engine_factory):
    both_true = rule("either", (Condition("a", "eq", 1),), (Condition("b", "eq", 2),))
    member = rule("member", (Condition("gpu", "in", ("h100", "h200")),))
    e = engine_factory([both_true, member])
    out = e.evaluate("candidate", [{"id": "f", "a": 1, "b": 2, "gpu": "h200"}])
    assert out == {"f": {"either", "member"}}


def test_rule_of_only_negative_tests_terminates_and_ignores_engine_state(engine_factory):
    e = engine_factory([rule("neg", (Condition("gpu", "ne", "l4"), Condition("gpu", "not_in", ("a", "b"))))])
    out = e.evaluate("candidate", [{"id": "x", "gpu": "h100"}, {"id": "y", "gpu": "l4"}])
    assert out == {"x": {"neg"}, "y": set()}


def test_text_against_a_number_is_the_hazard_typed_facts_avoid(engine_factory):
    # The engine compares "100" with 40 as text; the reference evaluator refuses to compare them. Facts are
    # therefore typed by the fact schema (tests/test_advisor.py checks every derived fact against it).
    r = rule("gt", (Condition("n", "gt", 40.0),))
    e = engine_factory([r])
    out = e.evaluate("candidate", [{"id": "num", "n": 100.0}, {"id": "text", "n": "100"}])
    assert out["num"] == {"gt"}
    assert reference([r], [{"id": "text", "n": "100"}])["text"] == set()


def test_many_rules_sharing_one_test_are_sharded(engine_factory):
    # 256 rules sharing one test segfault in one ruleset; sharding keeps each ruleset small.
    rules = [rule(f"r{i}", (Condition("v", "ge", float(i)),)) for i in range(300)]
    e = engine_factory(rules)
    assert e.ruleset_count >= 300 // 40
    out = e.evaluate("candidate", [{"id": "f", "v": 149.5}])
    assert out["f"] == {f"r{i}" for i in range(150)}


def test_more_sessions_than_the_engine_keeps_alive(engine_factory):
    # At most 1024 live sessions per ruleset: every evaluation deletes its session.
    e = engine_factory([rule("r", (Condition("v", "eq", 1),))])
    for i in range(1500):
        assert e.evaluate("candidate", [{"id": f"f{i}", "v": 1}]) == {f"f{i}": {"r"}}


def test_identical_facts_with_different_ids_both_match(engine_factory):
    e = engine_factory([rule("r", (Condition("v", "eq", 1),))])
    assert e.evaluate("candidate", [{"id": "a", "v": 1}, {"id": "b", "v": 1}]) == {"a": {"r"}, "b": {"r"}}


def test_concurrent_requests_get_their_own_answers(engine_factory):
    rules = [rule("low", (Condition("v", "lt", 50.0),)), rule("high", (Condition("v", "ge", 50.0),))]
    e = engine_factory(rules)
    errors: list[str] = []

    def worker(seed: int) -> None:
        for i in range(150):
            v = float((seed * 37 + i) % 100)
            fid = f"t{seed}-{i}"
            got = e.evaluate("candidate", [{"id": fid, "v": v}])
            want = {fid: {"low"} if v < 50 else {"high"}}
            if got != want:
                errors.append(f"{fid}: {got} != {want}")

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_closed_engine_refuses_and_close_is_idempotent():
    e = DurableEngine([rule("r", (Condition("v", "eq", 1),))])
    e.close()
    e.close()
    with pytest.raises(EngineError):
        e.evaluate("candidate", [{"id": "a", "v": 1}])


def test_ruleset_names_never_collide_across_versions():
    # A ruleset cannot be replaced: two live versions of the same rules must coexist.
    a = DurableEngine([rule("r", (Condition("v", "eq", 1),))])
    b = DurableEngine([rule("r", (Condition("v", "eq", 2),))])
    try:
        assert a.evaluate("candidate", [{"id": "x", "v": 1}]) == {"x": {"r"}}
        assert b.evaluate("candidate", [{"id": "x", "v": 1}]) == {"x": set()}
    finally:
        a.close()
        b.close()


# Facts are typed by the schema (a field is always a number, always text or always a boolean), so the
# property test draws conditions and facts per field type; mixing types is the hazard tested above.
numeric = st.one_of(
    st.integers(-5, 5).map(float), st.floats(-100, 100, allow_nan=False), st.floats(1e-9, 1e-3)
)
labels = st.sampled_from(["x", "y", "z"])
conditions = st.one_of(
    st.builds(
        Condition,
        st.sampled_from(["n1", "n2"]),
        st.sampled_from(["lt", "le", "gt", "ge", "eq", "ne"]),
        numeric,
    ),
    st.builds(Condition, st.just("s"), st.sampled_from(["eq", "ne"]), labels),
    st.builds(
        Condition,
        st.just("s"),
        st.sampled_from(["in", "not_in"]),
        st.lists(labels, min_size=1, max_size=3, unique=True).map(tuple),
    ),
    st.builds(Condition, st.just("b"), st.sampled_from(["eq", "ne"]), st.booleans()),
)
facts = st.fixed_dictionaries({"n1": numeric, "n2": numeric, "s": labels, "b": st.booleans()})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rule_specs=st.lists(
        st.lists(st.lists(conditions, min_size=1, max_size=3), min_size=1, max_size=2), min_size=1, max_size=8
    ),
    fact_list=st.lists(facts, min_size=1, max_size=5),
)
def test_engine_agrees_with_the_reference_evaluator(rule_specs, fact_list):
    rules = [rule(f"r{i}", *(tuple(b) for b in branches)) for i, branches in enumerate(rule_specs)]
    fs = [{"id": f"f{i}", **f} for i, f in enumerate(fact_list)]
    e = DurableEngine(rules)
    try:
        assert e.evaluate("candidate", fs) == reference(rules, fs)
    finally:
        e.close()


class TestRawEngine:
    """The hazards themselves, shown on the C extension directly: why the wrapper does what it does."""

    @pytest.fixture
    def raw(self):
        import json

        import durable_rules_engine as dre

        handle = dre.create_ruleset("raw_hazard_probe", json.dumps({"r": {"all": [{"m": {"$and": [
            {"t": "c"}, {"v": 1}]}}]}}))
        yield dre, handle
        dre.delete_ruleset(handle)

    @staticmethod
    def actions(dre, handle, state) -> int:
        n, step = 0, dre.start_action_for_state(handle, state)
        while step:
            n += 1
            nxt = dre.complete_and_start_action(handle, state)
            step = (None, nxt) if nxt else None
        return n

    def test_identical_facts_collapse_into_one_match(self, raw):
        import json

        dre, handle = raw
        fact = {"sid": "1", "id": "same", "t": "c", "v": 1}
        result = dre.assert_facts(handle, json.dumps([fact, dict(fact)]))
        assert self.actions(dre, handle, result[1]) == 1  # the second was "observed", not matched
        dre.delete_state(handle, "1")

    def test_numbers_with_an_exponent_are_rejected(self, raw):
        import json

        dre, handle = raw
        with pytest.raises(dre.error):
            dre.assert_fact(handle, json.dumps({"sid": "2", "id": "x", "t": "c", "v": 1e-05}))
        assert "e" in json.dumps(1e-05) and "e" not in encode(1e-05)

    def test_a_fact_no_rule_matches_is_reported_as_unhandled(self, raw):
        import json

        dre, handle = raw
        code, _ = dre.assert_fact(handle, json.dumps({"sid": "3", "id": "y", "t": "c", "v": 2}))
        assert code == 1  # the Host layer turns this into MessageNotHandledException; we add a sentinel
        # No delete_state here: after a session where no action ran it can free an uninitialised pointer and
        # abort the process (the reason every session of ours carries a sentinel fact).


# -- the fast batch encoder must write what the hand-written one writes ---------------------------------------

_fact_values = st.one_of(
    st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.dictionaries(st.text(max_size=6), _fact_values, max_size=6), max_size=4))
def test_encode_batch_agrees_with_encode(facts):
    from service.engine.durable import encode_batch

    try:
        slow = encode(facts)
    except EngineError:
        with pytest.raises(EngineError):
            encode_batch(facts)
        return
    # The same text: floats keep their decimal point and never get an exponent, strings the same escapes.
    assert encode_batch(facts) == slow


def test_a_shard_sees_only_the_fields_its_rules_test(engine_factory):
    # Fields no rule reads are left out of the batch; a rule on a field the fact lacks still does not match.
    e = engine_factory([rule("r", (Condition("gpu", "eq", "h100"),)), rule("m", (Condition("absent", "eq", 1),))])
    shard = e._shards["candidate"][0]
    assert set(shard.fields) == {"gpu", "absent"}
    assert e.evaluate("candidate", [{"id": "a", "gpu": "h100", "noise": "x" * 1000}]) == {"a": {"r"}}


# Matches are read from the action text by search where the batch allows it; ids and texts that look like that
# text's keys (quotes, backslashes, `{"m":`, `"id":"`) must still be told apart, or parsed the slow way.
_tricky = st.one_of(
    st.text(max_size=8),
    st.sampled_from(['a","id":"b', '{"m":{"id":"x"}}', "\\", '\\"', "中文", 'id":"', "__sentinel__", "r0"]),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ids=st.lists(_tricky, min_size=1, max_size=4, unique=True), texts=st.lists(_tricky, min_size=4, max_size=4))
def test_matches_of_facts_with_tricky_ids_and_texts_reach_the_right_fact(ids, texts):
    rules = [rule("any", (Condition("n", "ge", 0),)), rule("text", (Condition("s", "ne", "zz"),)),
             rule("mark", (Condition("s", "eq", texts[0]),))]
    fs = [{"id": fid, "n": i, "s": texts[i % 4]} for i, fid in enumerate(ids)]
    e = DurableEngine(rules)
    try:
        assert e.evaluate("candidate", fs) == reference(rules, fs)
    finally:
        e.close()


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=40) | st.text(alphabet='e-+nul1.0",:{}[]x', max_size=40).map(str.encode))
def test_suspect_batches_are_found_as_by_plain_substring_tests(raw):
    from service.engine.durable import _suspect

    assert _suspect(raw) == (b"e-" in raw or b"e+" in raw or b"null" in raw)


# -- the engine sees short field names and batch places; answers must not change ------------------------------


def test_aliases_are_short_distinct_and_never_the_engines_own_keys():
    from service.engine.durable import _aliases

    fields = [f"field_{i}" for i in range(200)]
    alias = _aliases(fields)
    assert list(alias) == fields
    assert len(set(alias.values())) == 200
    assert not set(alias.values()) & {"t", "sid", "id", "m"}
    assert all(a.isalpha() and a.islower() and len(a) <= 2 for a in alias.values())


def test_fields_named_like_other_fields_aliases_keep_their_own_values(engine_factory):
    # "b" is tested first and so is sent as "a", while the fact's own "a" is sent as "b": no value may cross over.
    rules = [rule("b_big", (Condition("b", "gt", 5.0),)), rule("a_big", (Condition("a", "gt", 5.0),))]
    e = engine_factory(rules)
    fs = [{"id": "x", "a": 9.0, "b": 1.0}, {"id": "y", "a": 1.0, "b": 9.0}, {"id": "z", "a": 9.0}]
    assert e.evaluate("candidate", fs) == reference(rules, fs) == {"x": {"a_big"}, "y": {"b_big"}, "z": {"a_big"}}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    picks=st.lists(st.tuples(st.integers(0, 59), st.sampled_from(["lt", "ge", "eq"]), st.integers(0, 3)),
                   min_size=1, max_size=30),
    rows=st.lists(st.lists(st.integers(0, 3), min_size=60, max_size=60), min_size=1, max_size=4),
)
def test_rules_over_more_fields_than_letters_agree_with_the_reference(picks, rows):
    # 60 fields: the later ones get two-letter engine names; facts are known to the engine by their batch place,
    # and ids that repeat share one entry, as before.
    rules = [rule(f"r{i}", (Condition(f"v{f}", op, float(x)),)) for i, (f, op, x) in enumerate(picks)]
    fs = [{"id": f"f{i % 3}", **{f"v{j}": float(v) for j, v in enumerate(row)}} for i, row in enumerate(rows)]
    e = DurableEngine(rules, shard_size=7)
    try:
        got = e.evaluate("candidate", fs)
    finally:
        e.close()
    want: dict[str, set[str]] = {}
    for f in fs:
        want.setdefault(f["id"], set()).update(r.id for r in rules if r.matches(f))
    assert got == want


@pytest.mark.parametrize("cap", [1, 2, 10_000])
def test_a_rules_matches_arrive_together_up_to_its_cap_and_all_reach_their_facts(monkeypatch, cap):
    # Each action carries up to `cap` of one rule's matches; batches whose strings hold braces or brackets are
    # read by parsing, the rest by search: both must credit every fact that matched, and only those.
    import service.engine.durable as durable

    monkeypatch.setattr(durable, "_CAP", cap)
    rules = [rule("big", (Condition("n", "ge", 2.0),)), rule("word", (Condition("s", "eq", "{[x]}"),)),
             rule("any", (Condition("n", "ge", 0.0),))]
    fs = [{"id": f"f{i}", "n": float(i % 5), "s": "{[x]}" if i % 3 == 0 else "plain"} for i in range(23)]
    plain = [dict(f, s="plain") for f in fs]
    e = DurableEngine(rules)
    try:
        assert e.evaluate("candidate", fs) == reference(rules, fs)
        assert e.evaluate("candidate", plain) == reference(rules, plain)
    finally:
        e.close()


def test_an_action_with_several_matches_is_read_as_parsing_reads_it():
    from service.engine.durable import _read

    out: list[set[str]] = [set(), set(), set()]
    _read('{"r0":[{"m":{"a":1,"id":"2"}},{"m":{"a":"]}","id":"0"}}],"__sentinel__":{"m":{"id":"__sentinel__"}}}',
          {"r0": "rule"}, out)
    assert out == [{"rule"}, set(), {"rule"}]
