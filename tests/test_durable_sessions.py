"""A shard reuses one engine session, emptied after each batch (service/engine/durable.py `_run`): what one batch
asserted never shows in the next, and a batch that fails leaves no session behind."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.engine import durable
from service.engine.durable import DurableEngine, EngineError
from service.engine.ir import Condition
from tests.test_durable_hazards import conditions, facts, reference, rule


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rule_specs=st.lists(
        st.lists(st.lists(conditions, min_size=1, max_size=3), min_size=1, max_size=2), min_size=1, max_size=8
    ),
    batches=st.lists(st.lists(facts, min_size=1, max_size=5), min_size=2, max_size=6),
)
def test_successive_batches_on_one_engine_agree_with_the_reference(rule_specs, batches):
    rules = [rule(f"r{i}", *(tuple(b) for b in branches)) for i, branches in enumerate(rule_specs)]
    e = DurableEngine(rules, shard_size=3)  # several shards, each with its own session
    try:
        # Each batch twice: the same facts asserted again into the emptied session must match again.
        for fact_list in [b for batch in batches for b in (batch, batch)]:
            fs = [{"id": f"f{i}", **f} for i, f in enumerate(fact_list)]
            assert e.evaluate("candidate", fs) == reference(rules, fs)
    finally:
        e.close()


def test_a_fact_that_matched_before_does_not_match_after_it_is_gone():
    e = DurableEngine([rule("r", (Condition("v", "eq", 1),))])
    try:
        assert e.evaluate("candidate", [{"id": "a", "v": 1}, {"id": "b", "v": 1}]) == {"a": {"r"}, "b": {"r"}}
        assert e.evaluate("candidate", [{"id": "a", "v": 2}]) == {"a": set()}
        assert e.evaluate("candidate", [{"id": "b", "v": 2}, {"id": "a", "v": 1}]) == {"b": set(), "a": {"r"}}
    finally:
        e.close()


class _FailingOnce:
    """The extension, but `complete_and_start_action` raises the engine's error once."""

    def __init__(self) -> None:
        self.failed = False

    def __getattr__(self, name: str) -> Any:  # noqa: ANN401
        return getattr(durable._dre_module, name)

    def complete_and_start_action(self, handle: int, state: int) -> Any:  # noqa: ANN401
        if not self.failed:
            self.failed = True
            raise durable._dre_module.error("injected")
        return durable._dre_module.complete_and_start_action(handle, state)


def test_a_batch_that_fails_midway_deletes_its_session_and_the_next_starts_clean(monkeypatch):
    rules = [rule("low", (Condition("v", "lt", 50.0),)), rule("high", (Condition("v", "ge", 50.0),))]
    e = DurableEngine(rules)
    try:
        e.evaluate("candidate", [{"id": "a", "v": 1.0}])
        (shard,) = e._shards["candidate"]
        kept = shard.sid
        assert kept  # the emptied session is kept for the next batch
        monkeypatch.setattr(durable, "_dre_module", durable._dre, raising=False)
        monkeypatch.setattr(durable, "_dre", _FailingOnce())
        with pytest.raises(EngineError, match="injected"):
            e.evaluate("candidate", [{"id": "a", "v": 99.0}, {"id": "b", "v": 2.0}])
        assert shard.sid == ""  # deleted, not kept half full
        assert e.evaluate("candidate", [{"id": "b", "v": 70.0}]) == {"b": {"high"}}
        assert shard.sid not in ("", kept)
    finally:
        e.close()


def test_a_batch_the_engine_never_saw_keeps_the_empty_session():
    e = DurableEngine([rule("r", (Condition("v", "ge", 0.0),))])
    try:
        e.evaluate("candidate", [{"id": "a", "v": 1.0}])
        (shard,) = e._shards["candidate"]
        kept = shard.sid
        for _ in range(1500):  # more than the 1024 sessions the engine keeps alive, were each one left behind
            with pytest.raises(EngineError):
                e.evaluate("candidate", [{"id": "a", "v": math.inf}])
        assert shard.sid == kept
        assert e.evaluate("candidate", [{"id": "a", "v": 1.0}]) == {"a": {"r"}}
    finally:
        e.close()


def test_a_kept_session_holds_no_fact_between_batches():
    e = DurableEngine([rule("r", (Condition("v", "ge", 0.0),)), rule("s", (Condition("w", "eq", "x"),))])
    try:
        for batch in ([{"id": "a", "v": 1.0, "w": "x"}, {"id": "b", "v": -1.0, "w": "y"}], [{"id": "a", "v": 2.0}]):
            e.evaluate("candidate", batch)
            (shard,) = e._shards["candidate"]
            assert shard.sid and durable._dre.get_facts(shard.handle, shard.sid) == "[]"
    finally:
        e.close()
