"""Importers: SkyPilot vms.csv (v7 layouts per provider) and gpuhunt CSV → rules/offers rows, with a report."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from service.domain.offers import Offer
from service.market.importers.__main__ import catalog_memory, main
from service.market.importers.common import offers_csv_text
from service.market.importers.gpuhunt import import_gpuhunt
from service.market.importers.regions import country_of
from service.market.importers.skypilot import import_skypilot
from service.rulebook.accelerators import AcceleratorMap, read_accelerator_map
from service.rulebook.offer_checks import check_offers
from service.rulebook.offer_files import read_offers

RULES = Path(__file__).parents[1] / "rules"
FIX = Path(__file__).parent / "fixtures" / "offers"
SKY = FIX / "skypilot" / "v7"
AS_OF = date(2026, 12, 1)
REFERENCE = (Path(__file__).parents[2] / "shared" / "data" / "offers-reference").resolve()  # ../shared beside the repo


def ids() -> set[str]:
    return {g["id"] for g in YAML(typ="safe").load((RULES / "catalog" / "gpus.yaml").read_text())["gpus"]}


@pytest.fixture(scope="module")
def amap() -> AcceleratorMap:
    m, problems = read_accelerator_map("accelerators.csv", (RULES / "offers" / "accelerators.csv").read_text(), ids())
    assert problems == []
    m.catalog_gb = catalog_memory(RULES)
    return m


def by(rows: list[Offer]) -> dict[tuple[str, str, str], Offer]:
    return {(o.instance_type, o.region, o.tier): o for o in rows}


def test_aws_zones_collapse_and_p5e_keeps_spot_only(amap: AcceleratorMap) -> None:
    rows, report = import_skypilot(SKY / "aws" / "vms.csv", amap, AS_OF)
    got = by(rows)
    assert got[("p5.48xlarge", "us-east-1", "on_demand")].usd_per_hour == 55.04
    assert got[("p5.48xlarge", "us-east-1", "spot")].usd_per_hour == 19.75  # the cheapest zone
    assert got[("p5.48xlarge", "us-east-1", "spot")].line == 4  # the first zone row of the region
    assert ("p5e.48xlarge", "us-east-2", "on_demand") not in got
    assert got[("p5e.48xlarge", "us-east-2", "spot")].usd_per_hour == 22.1
    assert got[("p4de.24xlarge", "eu-central-1", "on_demand")].country == "DE"
    assert ("p4de.24xlarge", "eu-central-1", "spot") not in got  # SpotPrice "nan"
    # 8 rows: 3 regions written (p5 us-east-1 from 2 zones, p5e us-east-2 spot only, p4de), 3 zone rows
    # superseded, the V100 and the CPU-only rows dropped: the counts add up
    c = report.providers["aws"]
    assert len(rows) == 4 and (c.read, c.written, c.superseded, c.dropped) == (8, 3, 3, 2) and c.balanced()
    assert c.tiers == {"on_demand": 2, "spot": 2}
    assert any("p5e.48xlarge us-east-2: no on-demand price" in n for n in report.notes)
    assert report.dropped["accelerator V100 has no catalog id"] == 1
    assert report.dropped["no accelerator (CPU-only instance)"] == 1
    o = got[("p5.48xlarge", "us-east-1", "on_demand")]
    assert (o.gpu, o.gpus_per_instance, o.source, o.as_of) == (
        "h100-sxm", 8, "SkyPilot catalog v7, aws/vms.csv, read 2026-12-01", AS_OF)


def test_gcp_gpu_rows_get_their_host_vm_price(amap: AcceleratorMap) -> None:
    rows, report = import_skypilot(SKY / "gcp" / "vms.csv", amap, AS_OF)
    got = by(rows)
    a100 = got[("a2-highgpu-1g", "us-central1", "on_demand")]
    assert a100.usd_per_hour == pytest.approx(2.934 + 0.73948)
    assert (a100.gpu, a100.vcpus, a100.memory_gib, a100.country) == ("a100-40gb", 12.0, 85.0, "US")
    assert got[("a2-highgpu-1g", "us-central1", "spot")].usd_per_hour == pytest.approx(0.9 + 0.29576)
    assert got[("a3-highgpu-1g", "us-central1", "on_demand")].usd_per_hour == pytest.approx(4.20076 + 1.18251)
    assert not [o for o in rows if o.region == "europe-west4"]
    assert report.dropped["gcp: GPU priced alone and no host VM row for its machine type and region"] == 1
    assert report.providers["gcp"].balanced()
    assert "v7/gcp/vms.csv:8 a3-highgpu-1g (GPU component only) europe-west4" in report.render()


def test_lambda_runpod_vast_layouts(amap: AcceleratorMap) -> None:
    rows, report = import_skypilot(SKY, amap, AS_OF, providers={"lambda", "runpod", "vast"})
    got = {(o.provider, o.instance_type, o.tier): o for o in rows}
    assert got[("lambda", "gpu_1x_h100_sxm5", "on_demand")].country == "DE"
    assert got[("lambda", "gpu_1x_h100_pcie", "on_demand")].gpu == "h100-pcie"
    assert got[("lambda", "gpu_8x_a100_80gb_sxm4", "on_demand")].usd_per_gpu_hour == pytest.approx(1.79)
    assert ("runpod", "1x_L40S_SECURE", "on_demand") not in got  # spot $0.99 above on-demand $0.86: swapped?
    assert report.dropped["spot price above on-demand: the two look swapped, neither is used"] == 1
    assert got[("runpod", "1x_MI300X_SECURE", "on_demand")].gpu == "mi300x"
    vast = got[("vast", "1x-H100_SXM-32-65536", "marketplace")]
    assert (vast.country, vast.region) == ("CZ", "Czechia, CZ, EU")
    assert ("vast", "1x-H100_SXM-32-65536", "spot") not in got
    assert got[("vast", "1x-RTX_5090-32-65536", "spot")].country == "US"
    assert "vast: spot price 0.00 is a placeholder on 1 offers: no spot offer written" in report.notes
    assert all(c.balanced() for c in report.providers.values())
    assert sum(n for r, n in report.dropped.items() if r.startswith("accelerator H100")) == 2  # vast, runpod NVL
    assert not any(o.provider == "aws" for o in rows)
    assert check_offers(rows, ids(), AS_OF, 30) == []


def test_gpuhunt_catalog_and_query_dump(amap: AcceleratorMap) -> None:
    rows, report = import_gpuhunt(FIX / "gpuhunt" / "aws.csv", amap, AS_OF)
    got = by(rows)
    assert got[("p4d.24xlarge", "us-east-1", "on_demand")].gpu == "a100-40gb"
    assert got[("p4d.24xlarge", "us-east-1", "spot")].usd_per_hour == 14.0513
    assert got[("p4de.24xlarge", "us-east-1", "on_demand")].gpu == "a100-80gb"  # told apart by gpu_memory
    assert report.dropped["accelerator A10G has no catalog id"] == 1
    assert report.dropped["no whole GPU (CPU-only or fractional GPU instance)"] == 1
    rows, report = import_gpuhunt(FIX / "gpuhunt" / "query.csv", amap, AS_OF)
    got = {(o.provider, o.region, o.tier): o for o in rows}
    assert got[("gcp", "us-central1", "spot")].usd_per_hour == 27.5
    assert got[("gcp", "us-central1", "on_demand")].gpu == "h100-sxm"
    assert got[("lambda", "us-east-1", "on_demand")].source == "dstack gpuhunt catalog, lambda.csv, read 2026-12-01"
    assert report.dropped["price empty, NaN or 0"] == 1
    assert len(rows) == 3


def test_written_csv_reads_back_without_problems(amap: AcceleratorMap) -> None:
    rows, _ = import_skypilot(SKY, amap, AS_OF)
    back, problems = read_offers("out.csv", offers_csv_text(rows))
    assert problems == []
    assert [(o.provider, o.instance_type, o.region, o.tier, o.usd_per_hour) for o in back] == [
        (o.provider, o.instance_type, o.region, o.tier, round(o.usd_per_hour, 6)) for o in rows]


def test_cli_writes_file_and_prints_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "offers.csv"
    code = main(["offers", "import", "--from", "skypilot", str(SKY), "--out", str(out), "--as-of", "2026-12-01",
                 "--provider", "aws"])
    assert code == 0
    rows, problems = read_offers("offers.csv", out.read_text())
    assert problems == [] and {o.provider for o in rows} == {"aws"} and len(rows) == 4
    printed = capsys.readouterr().out
    assert "8 rows read = 3 written + 3 superseded + 2 dropped; 4 offers" in printed
    assert "accelerator V100 has no catalog id" in printed


def test_regions_to_countries() -> None:
    assert country_of("aws", "eu-north-1") == "SE"
    assert country_of("gcp", "europe-west4") == "NL"
    assert country_of("shadeform", "helsinki-finland-3") == "FI"
    assert country_of("simplepod", "North America-CA") == "CA"
    assert country_of("cudo", "no-kristiansand-1") == "NO"
    assert country_of("hyperbolic", "default") == ""


@pytest.mark.skipif(not REFERENCE.is_dir(), reason="the shared offers reference is not beside the repo")
def test_import_over_the_shared_reference(amap: AcceleratorMap) -> None:
    rows, report = import_skypilot(REFERENCE, amap, AS_OF)
    assert report.rows_read == 1842
    assert all(c.balanced() for c in report.providers.values())
    assert report.rows_written + report.rows_superseded + report.rows_dropped == 1842
    assert sum(report.offers.values()) == len(rows) > 1000
    assert report.providers["gcp"].dropped == 82  # GPU-only prices, no host rows in the reference: one per row
    seeweb = [o for o in rows if o.provider == "seeweb" and o.gpu == "h100-sxm"]
    assert seeweb and all(o.region == "unlisted" and o.country == "" for o in seeweb)  # kept, region said
    assert {o.tier for o in rows if o.provider == "mithril"} == {"spot"}  # an auction, not on-demand
    assert all(o.memory_gib is None for o in rows if o.provider == "vast")  # SkyPilot's placeholder
    assert {o.memory_gib for o in rows if o.provider == "cudo"} >= {4.0, 48.0}  # each configuration a shape
    assert not [o for o in rows if o.provider == "vast" and o.gpu == "rtx-4090" and "Hong Kong" in o.region
                and o.gpus_per_instance == 2]  # 48 GB cards are not the catalog's 24 GB rtx-4090
    # issue 37: a derived folder is not "SkyPilot catalog v7, <provider>/vms.csv": each row names the file it was
    # read from, inside the folder given (never where this machine keeps it), and the report asks for --source.
    assert not any("shared" in o.source or "../" in o.source or "SkyPilot" in o.source for o in rows)
    assert {o.source for o in rows if o.provider == "runpod"} == {"offers-reference/runpod.csv, read 2026-12-01"}
    assert report.unsure_source and any("pass --source" in n for n in report.notes)
    assert not [o for o in rows if o.provider == "gcp"]  # GPU-only prices, no host rows in the reference
    assert {o.provider for o in rows} >= {"aws", "lambda", "runpod", "vast", "nebius", "cudo", "shadeform"}
    assert [p for p in check_offers(rows, ids(), AS_OF, 30) if p.severity == "error"] == []


def test_import_out_replaces_the_table_by_rename_never_in_place(tmp_path: Path) -> None:
    """A server watching the folder sees the old table or the new one: the new bytes go to a temporary file in the
    same folder, then take the name in one rename (a new inode), and nothing is left beside it."""
    out = tmp_path / "aws.csv"
    out.write_text("old\n")
    before = out.stat().st_ino
    with open(out) as reader:  # a reader holding the old file keeps reading the old bytes
        assert main(["--from", "skypilot", str(SKY / "aws" / "vms.csv"), "--out", str(out),
                     "--as-of", "2026-12-01"]) == 0
        assert reader.read() == "old\n"
    assert out.stat().st_ino != before and out.read_text().startswith("provider,")
    assert [p.name for p in tmp_path.iterdir()] == ["aws.csv"]


def test_import_stamps_what_was_read_and_asks_for_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 37 item 7: without --source, a folder that does not say it is SkyPilot's catalog (no vN/<provider>/
    vms.csv) is stamped with the file read and the import asks for --source; a versioned catalog path keeps the
    catalog's stamp; --source is used as given."""
    folder = tmp_path / "my-prices"
    folder.mkdir()
    (folder / "lambda.csv").write_text((SKY / "lambda" / "vms.csv").read_text(encoding="utf-8"), encoding="utf-8")
    out = tmp_path / "lambda.csv"
    given = ["offers", "import", "--from", "skypilot", str(folder), "--out", str(out), "--as-of", "2026-12-01"]
    assert main(given) == 0
    rows = read_offers(out.name, out.read_text(encoding="utf-8"))[0]
    assert rows and {o.source for o in rows} == {"my-prices/lambda.csv, read 2026-12-01"}
    err = capsys.readouterr().err
    assert "--source" in err and "cannot tell which catalog" in err
    assert main(["offers", "import", "--from", "skypilot", str(SKY / "lambda"), "--out", str(out), "--as-of",
                 "2026-12-01"]) == 0
    assert {o.source for o in read_offers(out.name, out.read_text(encoding="utf-8"))[0]} == {
        "SkyPilot catalog v7, lambda/vms.csv, read 2026-12-01"}
    assert "--source" not in capsys.readouterr().err
    assert main(["offers", "import", "--from", "skypilot", str(folder), "--out", str(out), "--as-of", "2026-12-01",
                 "--source", "Lambda price page, {provider}, read {read}"]) == 0
    assert {o.source for o in read_offers(out.name, out.read_text(encoding="utf-8"))[0]} == {
        "Lambda price page, lambda, read 2026-12-01"}
    assert "--source" not in capsys.readouterr().err
