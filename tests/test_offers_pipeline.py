"""The offer data pipeline end to end: a whole catalog imported into a copy of rules/, vetted as the server vets a
version (load, checks, rule tests), served, and answered from placed offers. Once for a small fixture set of
SkyPilot v7 and v8 files with the catalog's anomalies, once for the shared reference (1,842 rows) when present."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import ParseDict

from service.frontends.rules_cli import main as rules_cli
from service.market.dropped import dropped_rows
from service.market.importers.__main__ import main as import_main
from service.wire.api import pb

from .conftest import RULES, Running

FIX = Path(__file__).parent / "fixtures" / "offers" / "skypilot"  # v7/ and v8/ provider folders
REFERENCE = (Path(__file__).parents[2] / "shared" / "data" / "offers-reference").resolve()
# Vast is a marketplace: compared at marketplace prices, its offers price the GPUs it rents.
AT_VAST = {"placement": {"providers": ["vast"]}, "economics": {"price_tier": "PRICE_TIER_MARKETPLACE"}}
BATCH = {"workload": "WORKLOAD_TYPE_BATCH_INFERENCE",
         "model": {"params_billion": 8, "precision": "PRECISION_BF16", "context_tokens": 4096},
         "traffic": {"batch_size": 8}}


def rules_without_offers(tmp_path: Path) -> Path:
    """A copy of rules/ whose offer tables are gone (the accelerator map stays): the import fills them."""
    dst = tmp_path / "rules"
    shutil.copytree(RULES, dst)
    for f in (dst / "offers").glob("*.csv"):
        if f.name != "accelerators.csv":
            f.unlink()
    return dst


def recommend(running: Running, brief: dict[str, Any]) -> Any:
    req = ParseDict({"brief": brief, "max_candidates": 20}, pb.RecommendRequest())
    return running.stub.Recommend(req, timeout=60)


def placed(answer: Any) -> list[Any]:
    return [c for c in answer.candidates if c.placements and c.placements[0].offer.instance_type != "quote"]


def test_fixture_catalog_v7_and_v8_imports_vets_and_serves(
    tmp_path: Path, start_server: Callable[..., Running], capsys: pytest.CaptureFixture[str]
) -> None:
    rules = rules_without_offers(tmp_path)
    assert import_main(["--from", "skypilot", str(FIX), "--out", str(rules / "offers"), "--as-of", "2026-12-01",
                        "--dropped"]) == 0
    report = capsys.readouterr().out
    assert "43 rows read = 24 written + 9 superseded + 10 dropped" in report  # the counts add up
    assert "nebius: v8/nebius/vms.csv supersedes v7/nebius/vms.csv (2 rows" in report
    assert "accelerator RTX4090 with 48 GB per GPU is not the catalog's rtx-4090" in report
    assert "seeweb: 2 rows list no region; kept as region 'unlisted'" in report
    text = {f.name: f.read_text() for f in (rules / "offers").glob("*.csv")}
    assert "1x-A100_PCIE-32-65536,a100-80gb," in text["vast.csv"]  # by its 81,920 MiB, not the name
    assert ",on_demand," not in text["mithril.csv"]  # an auction: price = spot
    assert "ECS1GPU8,h100-sxm,1,16,256,unlisted,," in text["seeweb.csv"]
    assert "1x-H100_SXM-32-65536,h100-sxm,1,32,," in text["vast.csv"]  # placeholder host RAM written unknown
    assert not [t for t in text.values() if "shared" in t or "offers-reference" in t or "../" in t]
    # The same provider's v7 file imported on the same day beside the v8 one: the newer wins, nothing refused.
    assert import_main(["--from", "skypilot", str(FIX / "v7" / "nebius" / "vms.csv"), "--out",
                        str(rules / "offers" / "nebius-v7.csv"), "--as-of", "2026-12-01"]) == 0
    capsys.readouterr()
    assert rules_cli(["check", str(rules), "--allow-warnings"]) == 0  # load, checks and every rule test
    out = capsys.readouterr()
    assert "[offers.superseded]" in out.out and "0 errors" in out.err and ", 0 failed" in out.err

    running = start_server(rules, watch=False)
    assert running.store.active() is not None, running.store.status().last_error
    answer = recommend(running, {**BATCH, **AT_VAST})
    vast = {c.gpu: c for c in placed(answer)}
    # The Vast H100 at $1.80 on a placeholder 64 GiB host is placed, not dropped by the host-RAM rule.
    assert vast["h100-sxm"].placements[0].offer.instance_type == "1x-H100_SXM-32-65536"
    assert vast["a100-80gb"].placements[0].offer.provider == "vast"
    answer = recommend(running, BATCH)
    assert placed(answer) and answer.candidates[0].placements
    runpod = [p.offer for c in answer.candidates for p in c.placements if p.offer.provider == "runpod"]
    assert any(o.instance_type == "1x_A100-80GB-SXM_SECURE" for o in runpod)  # 80 GiB host: a rounding edge
    # An always-on brief never tops on mithril's auction price.
    always_on = recommend(running, {**BATCH, "run_cycle": "RUN_CYCLE_ALWAYS_ON"})
    assert all(p.offer.provider != "mithril" for c in always_on.candidates[:1] for p in c.placements[:1])

    dropped, served = dropped_rows(rules)
    assert served > 0 and {d.kind for d in dropped} == {"superseded", "placement"}
    # cudo lists each RAM configuration as a shape: those under the host-RAM rule are left out, each with why
    small = sorted((d.what.split()[1], d.reason) for d in dropped if d.kind == "placement")
    assert [name for name, _ in small] == ["sapphire-rapids-h100_1x24v48gb", "sapphire-rapids-h100_1x2v4gb"]
    assert "host RAM 4 GiB is below 79.6 GiB" in small[1][1]


@pytest.mark.skipif(not REFERENCE.is_dir(), reason="the shared offers reference is not beside the repo")
def test_the_whole_reference_imports_vets_and_serves_placed_answers(
    tmp_path: Path, start_server: Callable[..., Running], capsys: pytest.CaptureFixture[str]
) -> None:
    rules = rules_without_offers(tmp_path)
    assert import_main(["--from", "skypilot", str(REFERENCE), "--out", str(rules / "offers"),
                        "--as-of", "2026-12-01"]) == 0
    report = capsys.readouterr().out
    assert "1,842 rows read = 911 written + 5 superseded + 926 dropped" in report
    assert "gcp             82 read =     0 written +    0 superseded +   82 dropped" in report
    assert rules_cli(["check", str(rules)]) == 0  # no error, no warning, every rule test passes
    capsys.readouterr()

    running = start_server(rules, watch=False)
    assert running.store.active() is not None, running.store.status().last_error
    answer = recommend(running, BATCH)
    assert len(placed(answer)) >= 3 and answer.candidates[0].placements
    vast = recommend(running, {**BATCH, **AT_VAST})
    h100 = {c.gpu: c for c in placed(vast)}["h100-sxm"]
    assert h100.placements[0].offer.usd_per_gpu_hour == pytest.approx(1.80)
    always_on = recommend(running, {**BATCH, "run_cycle": "RUN_CYCLE_ALWAYS_ON"})
    assert always_on.candidates[0].placements[0].offer.provider != "mithril"


def test_the_rule_tests_hold_with_no_offer_table_at_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Rule tests test the rules, not today's prices: the cases about offer rules bring their own rows."""
    rules = rules_without_offers(tmp_path)
    assert rules_cli(["check", str(rules)]) == 0, capsys.readouterr().out
    assert ", 0 failed" in capsys.readouterr().err
    # A case's own rows are read like an offers/*.csv: a mistake is named, not served.
    placement = rules / "tests" / "placement.yaml"
    placement.write_text(placement.read_text().replace("gpu: mi300x,", "gpu: mi300, ", 1))
    assert rules_cli(["check", str(rules)]) == 1
    assert "offers: gpu \"mi300\" is not a catalog id (did you mean 'mi300x'?)" in capsys.readouterr().out
