"""The watcher's second look (issue 38 item 7): once the folder holds still, an offer table that looks
half-written (its last line unfinished, or most of its rows gone against the table last accepted) must hold still
for the longer suspect time before it is loaded. A careless writer pausing past the 1 s settle time had a
truncated lambda table served in 5 of 10 trials. Events and bounded polling, no sleeps."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from service.rulebook.settle import Table, read_table, unfinished
from service.rulebook.store import RuleStore
from tests.test_last_good import folder_hash


def _until(predicate: Callable[[], bool], timeout: float = 60) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)  # a poll, not an ordering: the condition is what is waited for
    return predicate()


def _store(rules: Path, suspect: float) -> tuple[RuleStore, list[str]]:
    store = RuleStore(rules, poll_seconds=0.05, settle_seconds=0.1, suspect_seconds=suspect)
    assert store.reload().ok
    activated: list[str] = []
    store.on_activate.append(lambda b: activated.append(b.content_hash))
    store.start_watching()
    return store, activated


def _halves(path: Path) -> tuple[str, str]:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    return "".join(lines[: len(lines) // 3]), text.replace(",2026-12-01,", ",2026-12-02,", 1)


def test_a_table_cut_at_a_row_boundary_waits_for_the_writer(rules_copy: Path) -> None:
    lam = rules_copy / "offers" / "lambda.csv"
    third, final = _halves(lam)
    store, activated = _store(rules_copy, suspect=600)
    try:
        before = store.active().content_hash  # type: ignore[union-attr]
        lam.write_text(third, encoding="utf-8")  # the writer's first part, then its pause
        assert store.suspect_seen.wait(60), "the watcher never judged the settled change"
        assert any("offers/lambda.csv:" in r and "rows where the last accepted table had" in r
                   for r in store.suspects[0]), store.suspects
        assert store.active().content_hash == before and activated == []  # type: ignore[union-attr]
        lam.write_text(final, encoding="utf-8")  # the writer finishes: the table is whole again
        assert _until(lambda: store.active().content_hash == folder_hash(rules_copy))  # type: ignore[union-attr]
        assert len(activated) == 1, "only the finished table was ever served"
    finally:
        store.close()


def test_a_table_that_really_shrank_is_loaded_after_the_longer_hold(rules_copy: Path) -> None:
    lam = rules_copy / "offers" / "lambda.csv"
    third, _ = _halves(lam)
    store, _activated = _store(rules_copy, suspect=0.5)
    try:
        lam.write_text(third, encoding="utf-8")
        assert store.suspect_seen.wait(60)
        assert _until(lambda: store.active().content_hash == folder_hash(rules_copy))  # type: ignore[union-attr]
    finally:
        store.close()


def test_an_unfinished_last_line_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("a,b,c\n1,2,3\n4,5")
    assert read_table(path) == Table(2, False)
    path.write_text("a,b,c\n1,2,3\n4,5,6")  # a whole row without the final newline: still being written?
    assert read_table(path) == Table(2, False)
    path.write_text("a,b,c\n1,2,3\n4,\"5,6\n")  # an open quote
    assert read_table(path) == Table(2, False)
    path.write_text("a,b,c\n1,2,3\n4,5,6\n")
    assert read_table(path) == Table(2, True)
    assert unfinished({"t.csv": Table(10, True)}, {"t.csv": Table(5, True)}, 0.5) == []
    assert unfinished({"t.csv": Table(10, True)}, {"t.csv": Table(4, True)}, 0.5) == [
        "offers/t.csv: 4 rows where the last accepted table had 10"]
