"""AIConfigurator's own estimates beside ours in `make accuracy` (service/accuracy/peer.py): the comparison on a small
hand-made peer file, a peer file that cannot be read, and the shipped file against the datasets it estimates.
No network and no aiconfigurator: the shipped file is what `make peer-estimates` wrote."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from service.accuracy.datasets import AICONFIGURATOR, AICONFIGURATOR_SAMPLE, PUBLISHED_SERVING, _deployment
from service.accuracy.peer import COLUMNS, PEER, PeerFileError, compare, read_peer, render, section, verdict
from tools import peer_aiconfigurator as generator

DATA = Path(__file__).parents[1] / "calibration"
FILES = {"aiconfigurator": AICONFIGURATOR, "aiconfigurator-sample": AICONFIGURATOR_SAMPLE}


def _row(rid: str, estimate: str, measured: float, estimated: float, classes: tuple[str, ...] = ("moe",),
         dataset: str = "aiconfigurator") -> dict[str, Any]:
    return {"row": rid, "dataset": dataset, "estimate": estimate, "classes": list(classes), "measured": measured,
            "estimated": estimated, "error_pct": round((estimated - measured) / measured * 100, 1)}


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c, "") for c in COLUMNS})
    return path


def _peer(rid: str, ttft: str = "", tpot: str = "", why: str = "", dataset: str = "aiconfigurator") -> dict[str, str]:
    return {"row": rid, "dataset": dataset, "aiconfigurator": "0.12.0", "backend": "vllm", "version_used": "0.24.0",
            "ttft_ms": ttft, "tpot_ms": tpot, "why": why}


# Measured TTFT 100 ms on a, b, c (c dense FP4); ours 110 / 150 / 90 (10%, 50%, 10% off); theirs 130 / 120 / 100
# (30%, 20%, 0%). Row d: ours only (the peer could not); row e: the peer only (ours skipped it).
DOC = {
    "rows": [
        _row("a", "ttft", 100, 110), _row("b", "ttft", 100, 150), _row("c", "ttft", 100, 90, ("dense", "fp4")),
        _row("a", "itl", 10, 10.5), _row("b", "itl", 10, 12), _row("c", "itl", 10, 9, ("dense", "fp4")),
        _row("d", "ttft", 100, 100), _row("d", "itl", 10, 10),
        _row("x", "ttft", 100, 500, dataset="published"),  # a dataset the peer file does not cover
    ],
    "not_expressed": [{"row": "e", "dataset": "aiconfigurator",
                       "why": "speculative decoding (multi-token prediction) as measured: each decode step"}],
}
PEER_ROWS = [_peer("a", "130", "11"), _peer("b", "120", "11"), _peer("c", "100", "10"),
             _peer("d", why="PerfDataNotAvailableError: MoE data missing"), _peer("e", "200", "20")]


def test_the_comparison_counts_medians_and_who_is_closer_per_class(tmp_path: Path) -> None:
    cmp = compare(DOC, read_peer(_write(tmp_path / PEER, PEER_ROWS)))
    ttft, itl = cmp["table"]["ttft"], cmp["table"]["itl"]
    # all: ours 10, 50, 10 -> 10%; theirs 30, 20, 0 -> 20%; ours closer on a, theirs on b and c: the median decides
    assert ttft["all"] == {"points": 3, "ours_median_abs_pct": 10.0, "ours_median_signed_pct": 10.0,
                           "peer_median_abs_pct": 20.0, "peer_median_signed_pct": 20.0, "ours_closer": 1,
                           "peer_closer": 2}
    assert verdict(ttft["all"]) == "ours"
    # moe is a and b: ours 10, 50 -> 30; theirs 30, 20 -> 25: AIConfigurator closer by median, one row each
    assert ttft["moe"] == {"points": 2, "ours_median_abs_pct": 30.0, "ours_median_signed_pct": 30.0,
                           "peer_median_abs_pct": 25.0, "peer_median_signed_pct": 25.0, "ours_closer": 1,
                           "peer_closer": 1}
    assert ttft["vllm"] == ttft["all"]  # the engine, by the peer file's backend
    assert verdict(ttft["moe"]) == "AIConfigurator"
    assert ttft["dense"]["points"] == ttft["fp4"]["points"] == 1 and verdict(ttft["fp4"]) == "AIConfigurator"
    assert "long_context" not in ttft  # no point in it: no line
    # ITL: ours 5, 20, 10 -> 10; theirs 10, 10, 0 -> 10; even medians, the peer closer on two rows of three
    assert itl["all"]["ours_median_abs_pct"] == itl["all"]["peer_median_abs_pct"] == 10.0
    assert (itl["all"]["ours_closer"], itl["all"]["peer_closer"]) == (1, 2) and verdict(itl["all"]) == "AIConfigurator"
    # signed: ours +5, +20, -10 -> +5 (its |err| median is 10); theirs +10, +10, 0 -> +10
    assert (itl["all"]["ours_median_signed_pct"], itl["all"]["peer_median_signed_pct"]) == (5.0, 10.0)
    assert cmp["datasets"] == ["aiconfigurator"]  # the published row is not in the comparison
    assert cmp["only_ours"] == 1 and cmp["only_ours_why"] == [("PerfDataNotAvailableError", 1)]
    assert cmp["only_peer"] == 1 and cmp["only_peer_why"] == [("speculative decoding", 1)]
    text = render(cmp)
    assert "closer (median |error|, all rows both express): TTFT ours; ITL/TPOT AIConfigurator" in text
    assert "rows only AIConfigurator expresses: 1" in text and "rows only ours expresses: 1" in text


def test_equal_medians_and_equal_rows_are_even() -> None:
    s = {"points": 2, "ours_median_abs_pct": 5.0, "peer_median_abs_pct": 5.0, "ours_closer": 1, "peer_closer": 1}
    assert verdict(s) == "even"


@pytest.mark.parametrize(("rows", "says"), [
    ([_peer("a", "1x0", "11")], "ttft_ms '1x0' is not a number"),
    ([_peer("a", "-3", "11")], "is not a positive time"),
    ([_peer("a", "130", "11", why="also a reason")], "not both"),
    ([_peer("a")], "not both"),
    ([_peer("a", "130")], "both ttft_ms and tpot_ms are needed"),
    ([_peer("a", "130", "11"), _peer("a", "120", "12")], "listed twice"),
])
def test_a_malformed_peer_file_is_named_with_its_line_not_a_crash(tmp_path: Path, rows: list[dict[str, str]],
                                                                   says: str) -> None:
    path = _write(tmp_path / PEER, rows)
    with pytest.raises(PeerFileError, match=says):
        read_peer(path)
    text, problem = section(DOC, tmp_path)
    assert text == "" and says.split()[0] in problem and "left out" in problem and f"{PEER}:" in problem


def test_wrong_columns_and_a_short_line_are_named(tmp_path: Path) -> None:
    (tmp_path / PEER).write_text("row,dataset,ttft\na,aiconfigurator,1\n", encoding="utf-8")
    with pytest.raises(PeerFileError, match="columns"):
        read_peer(tmp_path / PEER)
    (tmp_path / PEER).write_text(",".join(COLUMNS) + "\na,aiconfigurator,0.12.0\n", encoding="utf-8")
    with pytest.raises(PeerFileError, match=f":2: {len(COLUMNS)} fields expected"):
        read_peer(tmp_path / PEER)


def test_no_peer_file_is_no_section_and_no_problem(tmp_path: Path) -> None:
    assert section(DOC, tmp_path) == ("", "")


def _dataset_rows() -> dict[tuple[str, str], dict[str, str]]:
    out = {}
    for dataset, name in FILES.items():
        with (DATA / name).open(newline="", encoding="utf-8") as f:
            out.update({(dataset, r["id"]): r for r in csv.DictReader(f)})
    return out


def _published() -> dict[tuple[str, str], dict[str, str]]:
    with (DATA / PUBLISHED_SERVING).open(newline="", encoding="utf-8") as f:
        return {("published-serving", r["id"]): r for r in csv.DictReader(f)}


def test_the_shipped_peer_file_names_only_rows_of_the_datasets_it_asks() -> None:
    # aggregated rows of AIConfigurator's files, published serving rows with a measured TTFT or ITL. A row added to
    # a dataset since the file was written is not a failure: `make accuracy` counts it as "not in the peer file"
    # until `make peer-estimates` runs again (it needs the peer environment and about 15 minutes).
    peer = read_peer(DATA / PEER)
    rows, published = _dataset_rows(), _published()
    assert set(peer) <= set(rows) | set(published), sorted(set(peer) - set(rows) - set(published))[:5]
    assert all(rows[k]["mode"] == "agg" for k in peer if k in rows)
    assert all(published[k]["ttft_ms"] or published[k]["itl_ms"] for k in peer if k in published)
    assert len(peer) >= 361  # as written by AIConfigurator 0.12.0: every such row then
    assert all(p.version for p in peer.values())
    assert all(p.version_used for p in peer.values() if p.estimates)


def test_the_shipped_peer_file_asked_each_row_on_the_gpus_the_harness_compares_it_at() -> None:
    # the same deployment both sides: GPUs per copy (tp x attention dp x pp) as the harness reads the row
    rows, published = _dataset_rows(), _published()
    asked = 0
    with (DATA / PEER).open(newline="", encoding="utf-8") as f:
        for p in csv.DictReader(f):
            if not p["tp"]:  # not asked: a model, GPU or engine AIConfigurator has no name for
                assert p["dataset"] == "published-serving" and p["why"], p["row"]
                continue
            key = (p["dataset"], p["row"])
            gpus, pp = _deployment(rows[key])[::2] if key in rows else (int(published[key]["gpus"]), 1)
            assert int(p["tp"]) * int(p["attention_dp"]) * int(p["pp"]) == gpus, p["row"]
            assert int(p["pp"]) == pp
            asked += 1
    assert asked > 300


def test_the_generator_writes_the_columns_the_reader_reads_and_reads_tp_x_ep_as_the_harness_does() -> None:
    assert generator.COLUMNS == COLUMNS and generator.OUT == PEER
    assert set(generator.DATASETS.values()) == {*FILES.values(), PUBLISHED_SERVING}
    for r in _dataset_rows().values():
        if r["mode"] != "agg":
            continue
        w = generator.parallel(r)
        gpus, adp, pp = _deployment(r)
        assert (w["tp_size"] * w["attention_dp_size"] * w["pp_size"], w["attention_dp_size"], w["pp_size"]) == (
            gpus, adp, pp), r["id"]
        if r["silicon_data_source"].split(";")[0] in generator.TP_X_EP:  # read anew: experts over the same GPUs
            assert w["moe_tp_size"] * w["moe_ep_size"] == w["tp_size"] * w["attention_dp_size"], r["id"]


def test_the_generator_asks_gpt_oss_at_its_checkpoint_and_every_other_row_as_filed() -> None:
    for r in _dataset_rows().values():
        gemm, moe = generator.quant(r)
        if r["model_path"].startswith("openai/gpt-oss"):
            assert (gemm, moe) == ("", "")
        else:
            assert (gemm, moe) == (r["gemm_quant_mode"], r["moe_quant_mode"])


def test_a_published_row_is_put_in_aiconfigurators_schema_or_said_why_not() -> None:
    published = {r["id"]: r for r in _published().values()}
    asked, why = generator.as_aiconfigurator(published["lambda-minimax-m2.5-4xh100-sglang-c32"])
    assert not why and (asked["model_path"], asked["system"], asked["backend"], asked["batch_size"],
                        asked["isl"], asked["osl"], asked["gemm_quant_mode"], asked["tp_size"]) == (
        "MiniMaxAI/MiniMax-M2.5", "h100_sxm", "sglang", "32", "8192", "1024", "fp8", "4")
    assert generator.as_aiconfigurator(published["nim-llama-3.3-70b-fp8-2xh100-c50"])[1] == (
        "engine nim is not an AIConfigurator backend")
    assert "is not an AIConfigurator system" in generator.as_aiconfigurator(
        published["accelmark-llama3-8b-1x4090-serial"])[1]
