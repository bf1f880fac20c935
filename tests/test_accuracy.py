"""Issue 24: `make accuracy`'s harness, its checked-in results (what answers cite) and the classes both use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from service.accuracy.harness import Point, evaluate
from service.accuracy.results import dump, summary
from service.accuracy.run import RESULTS, produce
from service.domain.accuracy import AccuracyTable, Band, classes_of

from .conftest import TODAY

FOLDER = Path(__file__).parents[1] / "rules" / "accuracy"


def test_the_checked_in_results_are_what_make_accuracy_produces(catalog_bundle: Any) -> None:
    # Any change to the physics, the rules' constants or the datasets changes a row: regenerate with
    # `make accuracy ACCURACY_ARGS=--write`, so what answers cite is what the code does.
    produced = dump(produce(catalog_bundle, FOLDER, TODAY))
    assert produced == (FOLDER / RESULTS).read_text(encoding="utf-8"), (
        "rules/accuracy/results.yaml is stale: run `make accuracy ACCURACY_ARGS=--write`")


def test_every_row_is_compared_or_listed_with_why(catalog_bundle: Any) -> None:
    points, skipped = evaluate(catalog_bundle, FOLDER, TODAY)
    compared = {p.row for p in points}
    listed = {s.id: s.why for s in skipped}
    assert not compared & set(listed)
    assert len(compared) + len(listed) == 35 + 23  # aiconfigurator's rows, published.csv's
    disagg = [why for rid, why in listed.items() if "_disagg_" in rid]
    assert len(disagg) == 12 and all("disaggregated" in why for why in disagg)
    # A serving row is compared at the width it was measured on, and says when the answer chose another.
    nim = {p.estimate: p for p in points if p.row == "nim-llama-3.3-70b-fp8-2xh100-c1"}
    assert "the answer chose 1" in nim["itl"].note
    assert nim["itl"].measured == 18.58 and nim["itl"].estimated > 0


def _p(signed: float, estimate: str = "itl", row: str = "r") -> Point:
    return Point(row, "d", estimate, ("dense",), 100.0, 100.0 + signed)


def test_summary_is_the_median_absolute_error_the_share_within_25_and_the_signed_median() -> None:
    s = summary([_p(-50, row="a"), _p(10, row="b"), _p(-20, row="c"), _p(30, row="d")])
    assert s["points"] == 4
    assert s["median_abs_pct"] == pytest.approx(25.0)  # |errors| 10, 20, 30, 50
    assert s["within_25_pct"] == pytest.approx(50.0)
    assert s["median_signed_pct"] == pytest.approx(-5.0)
    assert [w["row"] for w in s["worst"]] == ["a", "d", "c"]
    # A memory figure is a ceiling: under it is no error, over it is.
    assert _p(-30, "memory").abs_pct == 0 and _p(10, "memory").abs_pct == pytest.approx(10)


def test_classes_are_the_same_for_a_row_and_a_candidate() -> None:
    assert classes_of("REALTIME_INFERENCE", "FP4", True, 8192, "nvidia", "datacenter") == (
        "fp4", "long_context", "moe")
    assert classes_of("BATCH_INFERENCE", "FP8", False, 1000, "amd", "datacenter") == ("amd", "dense")
    assert classes_of("PRETRAINING", "BF16", False, 0, "nvidia", "consumer") == ("consumer", "training")


def test_a_hardware_class_without_points_is_not_borrowed_from_another() -> None:
    table = AccuracyTable({"dense": Band("dense serving: d", 5, 10, 20, 30), "amd": Band("AMD GPUs: none", 0)})
    assert table.band_for(("amd", "dense")) == (None, "amd")
    assert table.band_for(("dense",))[1] == "dense"
    assert table.band_for(("moe",)) == (None, "")
    assert table.band_for(("fp4", "dense"))[1] == "dense"  # no FP4 points: the next class that has some
