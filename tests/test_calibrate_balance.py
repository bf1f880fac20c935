"""Issue 36, thirteenth pass: `calibrate --balance` weighs every source (or every class) equally in the fit's
objective, so one harness's many campaigns cannot choose the engines' values for every other source."""

from __future__ import annotations

import statistics
from types import SimpleNamespace
from typing import Any

import pytest

from service.accuracy import calibrate
from service.accuracy.calibrate import Err, objective, source_score, weighted_median

# One big source (A: 9 MoE points at 10%) and two small ones (B, C: 3 dense points each at 50% and 60%).
SKEWED: list[Err] = ([("ttft", 10.0, ("moe",), "A")] * 9 + [("ttft", 50.0, ("dense",), "B")] * 3
                     + [("ttft", 60.0, ("dense",), "C")] * 3)


@pytest.mark.parametrize("values", [[1.0], [1.0, 2.0], [3.0, 1.0, 2.0], [4.0, 1.0, 3.0, 2.0]])
def test_equal_weights_give_the_plain_median(values: list[float]) -> None:
    assert weighted_median([(v, 1.0) for v in values]) == statistics.median(values)


def test_weighted_median_follows_the_weights() -> None:
    assert weighted_median([(10.0, 1.0), (50.0, 3.0)]) == 50.0
    assert weighted_median([(10.0, 3.0), (50.0, 1.0)]) == 10.0


def test_the_plain_objective_follows_the_big_source() -> None:
    assert objective(SKEWED) == objective(SKEWED, "none") == 10.0


def test_sources_balance_weighs_every_source_the_same() -> None:
    # A, B and C weigh one third each: the median lands in B's points, not A's
    assert objective(SKEWED, "sources") == 50.0
    # a source's weight does not grow with its points: doubling A changes nothing
    assert objective(SKEWED + SKEWED[:9], "sources") == 50.0


def test_sources_balance_weighs_ttft_and_tpot_apart() -> None:
    errs: list[Err] = [("itl", 40.0, ("moe",), "A")] * 5 + [("itl", 20.0, ("dense",), "B")] + SKEWED
    total, ttft, tpot = source_score(errs)
    assert (ttft, tpot) == (50.0, 30.0)  # A's 5 TPOT points weigh as much as B's one
    assert total == 50.0 + 0.5 * 30.0


def test_classes_balance_is_the_mean_of_each_class_objective() -> None:
    # MoE 10%, dense median of 50 x3 and 60 x3 = 55%: (10 + 55) / 2
    assert objective(SKEWED, "classes") == 32.5
    # a class with no points is left out, not counted as 0
    assert objective(SKEWED[:9], "classes") == 10.0


def test_fit_minimises_the_balanced_objective(monkeypatch: pytest.MonkeyPatch) -> None:
    # A's 9 rows are right at prefill_first 0, B's and C's 3 rows each at 0.3: the plain fit keeps A's value,
    # the source-balanced fit takes the value two sources of three agree on.
    rows = [SimpleNamespace(brief=SimpleNamespace(toolchain="vllm"), group=g) for g in "A" * 9 + "B" * 3 + "C" * 3]
    table = {"vllm": {"prefill_first": 0.15}}
    bundle = SimpleNamespace(book=SimpleNamespace(assumptions=SimpleNamespace(values={"serving_engines": table})))

    def fake_errors(_bundle: Any, mine: list[Any], _day: Any) -> list[Err]:  # noqa: ANN401
        pf = table["vllm"]["prefill_first"]
        return [("ttft", 10 + 100 * (pf if r.group == "A" else 0.3 - pf), (), r.group) for r in mine]

    monkeypatch.setattr(calibrate, "errors", fake_errors)
    monkeypatch.setattr(calibrate, "engine_of", lambda toolchain: toolchain)
    share = (("prefill_first", calibrate.PREFILL_FIRST),)
    assert calibrate.fit(bundle, rows, None, fields=share) == {"vllm": {"prefill_first": 0.0}}
    table["vllm"]["prefill_first"] = 0.15
    assert calibrate.fit(bundle, rows, None, fields=share, balance="sources") == {"vllm": {"prefill_first": 0.3}}
