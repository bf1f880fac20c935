"""Issue 24: `make accuracy`'s harness, its checked-in results (what answers cite) and the classes both use."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from service.accuracy.harness import Point, evaluate
from service.accuracy.results import ROWS, dump, dump_rows, summary
from service.accuracy.run import RESULTS, produce
from service.domain.accuracy import AccuracyTable, Band, classes_of, margins
from service.domain.brief import AdviceRequest, Brief, Latency, Model, Traffic
from service.rulebook.version import Bundle
from service.wire.api import advice_to_proto

from .conftest import TODAY

FOLDER = Path(__file__).parents[1] / "calibration"


def _moved(old: Any, new: Any, path: str = "") -> list[str]:  # noqa: ANN401
    """Every figure that differs between two parsed results files: where, from what to what, and by how much."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [m for k in sorted(set(old) | set(new), key=str)
                for m in _moved(old.get(k), new.get(k), f"{path}.{k}" if path else str(k))]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [m for i, (o, n) in enumerate(zip(old, new, strict=True)) for m in _moved(o, n, f"{path}[{i}]")]
    if old == new:
        return []
    if isinstance(old, (int, float)) and isinstance(new, (int, float)) and not isinstance(old, bool):
        by = f"{new - old:+.4g}" + (f", {100 * (new - old) / abs(old):+.1f}%" if old else "")
        return [f"{path}: {old} -> {new} ({by})"]
    return [f"{path}: {old!r} -> {new!r}"]


def test_the_checked_in_results_are_what_make_accuracy_produces(catalog_bundle: Any) -> None:
    # A change detector, not a guarantee: each memory, speed and cost formula has behaviour tests of its own
    # (test_memory_terms.py, test_formulas.py, ...). What answers cite must be what the code does.
    doc = produce(catalog_bundle, FOLDER, TODAY)
    produced = (dump(doc), dump_rows(doc))
    kept = tuple(path.read_text(encoding="utf-8")
                 for path in (Path(__file__).parents[1] / "rules" / "accuracy" / RESULTS, FOLDER / ROWS))
    if produced != kept:
        yaml = YAML(typ="safe", pure=True)

        def both(texts: tuple[str, ...]) -> dict[str, Any]:
            return {k: v for text in texts for k, v in (yaml.load(text) or {}).items()}
        moved = _moved(both(kept), both(produced)) or ["(the same figures, written differently)"]
        pytest.fail(
            f"{len(moved)} figures in rules/accuracy/results.yaml and calibration/rows.yaml moved with this change:\n  "
            + "\n  ".join(moved[:40]) + (f"\n  ... and {len(moved) - 40} more" if len(moved) > 40 else "")
            + "\nEach is an estimate's error against a measurement that answers cite. Find which change moved it "
            "and whether it should have: a figure moved by a change that was not meant to touch that estimate is "
            "a bug to fix, not a file to rewrite. Only a move the change intends (said in its commit message, "
            "with its behaviour test) is written with `make accuracy ACCURACY_ARGS=--write`.")


def test_every_row_is_compared_or_listed_with_why(catalog_bundle: Any) -> None:
    points, skipped = evaluate(catalog_bundle, FOLDER, TODAY)
    compared = {p.row for p in points}
    listed = {s.id: s.why for s in skipped}
    assert not compared & set(listed)
    # aiconfigurator's 35, published.csv's 23 and every row of published-serving.csv (it grows as sources are read)
    with (FOLDER / "published-serving.csv").open(newline="", encoding="utf-8") as f:
        serving = sum(1 for _ in csv.DictReader(f))
    assert serving >= 13 + 30  # issue 36: the 13 rows of round 5 and at least 30 read since
    # and the FP4 rows of AIConfigurator's measurement file its selection rule takes (calibration/README.md)
    with (FOLDER / "aiconfigurator-silicon_sample-fp4.csv").open(newline="", encoding="utf-8") as f:
        sample = sum(1 for _ in csv.DictReader(f))
    assert len(compared) + len(listed) == 35 + 23 + serving + sample
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
    # Issue 36: the hardware classes hold serving measurements (consumer GPUs now have some), so training, media
    # and embeddings on those GPUs do not borrow a serving band.
    assert classes_of("PRETRAINING", "BF16", False, 0, "nvidia", "consumer") == ("training",)
    assert classes_of("EMBEDDING", "BF16", False, 512, "nvidia", "consumer") == ()
    assert classes_of("REALTIME_INFERENCE", "BF16", False, 256, "nvidia", "consumer") == ("consumer", "dense")


def test_a_hardware_class_without_points_is_not_borrowed_from_another() -> None:
    table = AccuracyTable({"dense": Band("dense serving: d", 5, 10, 20, 30), "amd": Band("AMD GPUs: none", 0)})
    assert table.band_for(("amd", "dense")) == (None, "amd")
    assert table.band_for(("dense",))[1] == "dense"
    assert table.band_for(("moe",)) == (None, "")
    assert table.band_for(("fp4", "dense"))[1] == "dense"  # no FP4 points: the next class that has some


# --- the answer cites it ---------------------------------------------------------------------------------------

def _moe(p95_ms: float = 0, locale: str = "en") -> AdviceRequest:
    return AdviceRequest(
        brief=Brief(workload="REALTIME_INFERENCE", model=Model(name="qwen3-235b-a22b", precision="FP8",
                                                               context_tokens=4096),
                    traffic=Traffic(concurrent_sessions=16, avg_input_tokens=1000, avg_output_tokens=500),
                    latency=Latency(p95_ms=p95_ms)),
        max_candidates=50, locale=locale, as_of=TODAY)


def test_every_candidate_with_a_measured_class_cites_it_and_the_others_are_said(bundle: Any) -> None:
    advice = bundle.advise(_moe())
    shipped = bundle.book.accuracy.bands["moe"]
    assert shipped.points > 0 and shipped.itl_error_pct > 0
    nvidia = [c for c in advice.candidates if c.gpu in ("h100-sxm", "h200", "b200", "a100-80gb")]
    amd = [c for c in advice.candidates if c.gpu.startswith("mi")]
    assert nvidia and amd
    for c in nvidia:
        assert c.performance.accuracy == shipped, c.gpu
    # AMD GPUs cite their own measurements (published-serving's MI300X rows), never an NVIDIA error borrowed
    own = bundle.book.accuracy.bands["amd"]
    assert own.points > 0 and own != shipped
    for c in amd:
        assert c.performance.accuracy == own, c.gpu
    assert not any(n.rule_id == "accuracy.unmeasured" for n in advice.notes)
    wire = advice_to_proto(advice)
    by_gpu = {c.gpu: c for c in wire.candidates}
    acc = by_gpu[nvidia[0].gpu].performance.accuracy
    assert (acc.basis, acc.points, acc.itl_error_pct) == (shipped.basis, shipped.points, shipped.itl_error_pct)
    assert by_gpu[amd[0].gpu].performance.accuracy.basis == own.basis
    # A class with no measured point (the AMD band withheld) carries no band, and the answer says which GPUs
    table = bundle.book.accuracy
    withheld = replace(table, bands={k: v for k, v in table.bands.items() if k != "amd"})
    unmeasured = Bundle(replace(bundle.book, accuracy=withheld), loaded_at=None)  # type: ignore[arg-type]
    try:
        advice = unmeasured.advise(_moe())
    finally:
        unmeasured.retire(None)
    amd = [c for c in advice.candidates if c.gpu.startswith("mi")]
    assert amd and all(c.performance.accuracy is None for c in amd)
    note = next(n.text for n in advice.notes if n.rule_id == "accuracy.unmeasured")
    assert "AMD GPUs" in note and all(c.gpu in note for c in amd)
    by_gpu = {c.gpu: c for c in advice_to_proto(advice).candidates}
    assert not by_gpu[amd[0].gpu].performance.HasField("accuracy")


@pytest.mark.parametrize("locale", ["en", "zh-CN"])
def test_a_latency_target_met_by_less_than_the_band_is_at_risk_and_not_unmet(bundle: Any, locale: str) -> None:
    # Self-calibrating: the target is set from the figure and band the product gives today, so the physics may
    # change under it. Within the band: at risk; beyond twice the band: not.
    h100 = next(c for c in bundle.advise(_moe()).candidates if c.gpu == "h100-sxm")
    perf, band = h100.performance, h100.performance.accuracy
    (m,) = margins(band, 1e9, 0, 0, perf.e2e_p95_ms, perf.ttft_ms, 0)
    close = bundle.advise(_moe(perf.e2e_p95_ms * (1 + m.band_pct / 200), locale))
    far = bundle.advise(_moe(perf.e2e_p95_ms * (1 + m.band_pct / 40), locale))
    for advice, risky in ((close, True), (far, False)):
        assert advice.unmet == ()
        c = next(c for c in advice.candidates if c.gpu == "h100-sxm")
        assert c.performance.e2e_p95_ms == perf.e2e_p95_ms  # met without resizing: the same figure
        assert any(r.rule_id == "accuracy.at_risk" for r in c.caveats) == risky
    top = close.candidates[0]
    if top.performance.accuracy is not None:
        words = ("measured error on similar", "At risk") if locale == "en" else ("实测误差", "有风险")
        assert all(w in close.summary for w in words), close.summary
    else:
        assert ("no measured error" if locale == "en" else "尚无实测误差") in close.summary


def test_the_p95_band_weighs_ttft_and_decode_by_their_share() -> None:
    band = Band("b", 10, itl_error_pct=10, ttft_error_pct=90, of="moe")
    (m,) = margins(band, 2000, 0, 0, e2e_ms=1000, ttft_ms=250, training_days=0)
    assert m.band_pct == pytest.approx(0.25 * 90 + 0.75 * 10)
    assert not m.at_risk  # 2,000 ms is met by 100%, more than 30%
    (m,) = margins(band, 1200, 0, 0, e2e_ms=1000, ttft_ms=250, training_days=0)
    assert m.at_risk
    assert margins(None, 1200, 500, 30, 1000, 250, 29) == ()


def test_work_no_class_measures_carries_no_band_and_says_so(bundle: Any) -> None:
    # Embeddings have no ITL or TTFT and no measured throughput yet: no serving band is borrowed for them.
    brief = Brief(workload="EMBEDDING", model=Model(0.335, precision="FP16", context_tokens=512),
                  traffic=Traffic(avg_input_tokens=512, requests_per_second=2000))
    advice = bundle.advise(AdviceRequest(brief=brief, max_candidates=50, as_of=TODAY))
    assert advice.candidates and all(c.performance.accuracy is None for c in advice.candidates)
    note = next(n.text for n in advice.notes if n.rule_id == "accuracy.unmeasured")
    assert "no measurement of this kind of work" in note
