"""Offers as data: the CSV format, the table, the lints, and the shipped rules/offers/*.csv."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from service.domain.offers import COLUMNS, Offer, OfferTable
from service.rulebook.accelerators import read_accelerator_map
from service.rulebook.offer_checks import check_offers
from service.rulebook.offer_files import read_offers

ROOT = Path(__file__).parents[1]
RULES = ROOT / "rules"
FIX = Path(__file__).parent / "fixtures" / "offers"
TODAY = date(2026, 12, 1)
HEADER = ",".join(COLUMNS)


def catalog_ids() -> set[str]:
    return {g["id"] for g in YAML(typ="safe").load((RULES / "catalog" / "gpus.yaml").read_text())["gpus"]}


def row(**kw: str) -> str:
    base = dict(provider="acme", instance_type="box", gpu="h100-sxm", gpus_per_instance="8", vcpus="", memory_gib="",
                region="r1", country="US", tier="on_demand", usd_per_hour="16", as_of="2026-11-01", source="test",
                valid_from="2026-11-01", valid_until="")
    base.update(kw)
    return ",".join(base[c] for c in COLUMNS)


def offer(**kw: object) -> Offer:
    base: dict[str, object] = dict(provider="acme", instance_type="box", gpu="h100-sxm", gpus_per_instance=1,
                                   vcpus=None, memory_gib=None, region="r1", country="US", tier="on_demand",
                                   usd_per_hour=2.0, as_of=date(2026, 11, 1), source="t",
                                   valid_from=date(2026, 11, 1), valid_until=None, path="p.csv", line=2)
    base.update(kw)
    return Offer(**base)  # type: ignore[arg-type]


def test_read_offers_maps_columns_by_header_and_computes_per_gpu_price() -> None:
    text = "region,gpu,provider,instance_type,gpus_per_instance,tier,usd_per_hour,as_of,source,valid_from\n" \
           "us-east-1,h100-sxm,aws,p5.48xlarge,8,on_demand,55.04,2026-12-01,s,2026-12-01\n"
    rows, problems = read_offers("rules/offers/x.csv", text)
    assert problems == []
    (o,) = rows
    assert (o.provider, o.region, o.gpus_per_instance, o.country, o.valid_until) == ("aws", "us-east-1", 8, "", None)
    assert o.usd_per_gpu_hour == pytest.approx(6.88)
    assert (o.path, o.line) == ("rules/offers/x.csv", 2)


def test_unknown_and_missing_columns_refuse_the_file_naming_them() -> None:
    _, problems = read_offers("o.csv", HEADER + ",discount\n")
    assert [str(p) for p in problems] == [f'o.csv:1:{len(COLUMNS) + 1} unknown column "discount"; the columns are '
                                          + ", ".join(COLUMNS)]
    _, problems = read_offers("o.csv", HEADER.replace("tier,", "") + "\n")
    assert [str(p) for p in problems] == ['o.csv:1:1 the header has no column "tier"']


def test_bad_values_name_line_and_column() -> None:
    text = "\n".join([HEADER, row(usd_per_hour="abc"), row(as_of="01/12/2026"), row(tier="preemptible"),
                      row(usd_per_hour="nan"), row(gpus_per_instance="1.5"), row(instance_type="ok"), ""])
    rows, problems = read_offers("o.csv", text)
    assert [o.instance_type for o in rows] == ["ok"]
    col = {c: i + 1 for i, c in enumerate(COLUMNS)}
    assert [(p.line, p.col) for p in problems] == [
        (2, col["usd_per_hour"]), (3, col["as_of"]), (4, col["tier"]), (5, col["usd_per_hour"]),
        (6, col["gpus_per_instance"]),
    ]
    assert 'usd_per_hour: "abc" is not a number' in problems[0].message
    assert "not one of on_demand, reserved, spot, marketplace" in problems[2].message


def test_lints_name_each_row_path_and_line() -> None:
    rows, problems = read_offers("tests/fixtures/offers/lint.csv", (FIX / "lint.csv").read_text())
    assert problems == []
    found = {(p.line, p.rule_id, p.severity) for p in check_offers(rows, catalog_ids(), TODAY, max_age_days=90)}
    assert found == {
        (3, "offers.spot-above-on-demand", "warning"),
        (4, "offers.unknown-gpu", "error"),
        (5, "offers.placeholder-price", "error"),
        (6, "offers.placeholder-price", "error"),
        (7, "offers.duplicate", "error"),
        (8, "offers.missing-region", "error"),
        (9, "offers.stale", "warning"),
        (10, "offers.valid-range", "error"),
        (11, "offers.gpus-per-instance", "error"),
        (12, "offers.country", "error"),
        (13, "offers.placeholder-price", "error"),
    }
    dup = next(p for p in check_offers(rows, catalog_ids(), TODAY, 90) if p.rule_id == "offers.duplicate")
    assert str(dup).startswith("tests/fixtures/offers/lint.csv:7:1 [offers.duplicate] repeats line 2")


def test_table_orders_filters_and_spreads() -> None:
    rows = [
        offer(provider="b", usd_per_hour=24.0, gpus_per_instance=8, region="eu-central-1", country="DE"),
        offer(provider="a", usd_per_hour=2.5, region="us-east-1", country="US"),
        offer(provider="c", usd_per_hour=4.0, region="x", country=""),
        offer(provider="a", usd_per_hour=1.0, tier="spot", region="us-east-1", country="US"),
        offer(provider="d", usd_per_hour=9.0, valid_until=date(2026, 11, 15)),
        offer(provider="e", gpu="l4", usd_per_hour=0.5),
    ]
    t = OfferTable(rows)
    assert [o.provider for o in t.for_gpu("h100-sxm")] == ["a", "a", "b", "c", "d"]  # $/GPU-h 1, 2.5, 3, 4, 9
    day = date(2026, 12, 1)
    assert [o.usd_per_gpu_hour for o in t.select("h100-sxm", day)] == [1.0, 2.5, 3.0, 4.0]
    assert [o.provider for o in t.select("h100-sxm", day, tiers=["on_demand"], countries=["EU"])] == ["b"]
    assert [o.provider for o in t.select("h100-sxm", day, providers=["A"], tiers=["spot"])] == ["a"]
    assert t.select("h100-sxm", day, regions=["x"])[0].provider == "c"
    assert len(t.select("h100-sxm", date(2026, 11, 10))) == 5  # d is still valid then
    assert t.spread("h100-sxm", "on_demand", day) == (2.5, 3.0, 4.0, 3)
    assert t.spread("h100-sxm", "reserved", day) is None
    assert len(t.valid_on(day)) == 5


def test_newest_valid_from_wins_for_one_offer() -> None:
    old = offer(usd_per_hour=3.0, valid_from=date(2026, 1, 1))
    new = offer(usd_per_hour=2.0, valid_from=date(2026, 6, 1), line=3)
    t = OfferTable([old, new])
    assert [o.usd_per_hour for o in t.select("h100-sxm", date(2026, 7, 1))] == [2.0]
    assert [o.usd_per_hour for o in t.select("h100-sxm", date(2026, 3, 1))] == [3.0]


def test_fifty_thousand_rows_parse_and_index() -> None:
    gpus = sorted(catalog_ids())
    lines = [HEADER]
    for i in range(50_000):
        lines.append(row(provider=f"p{i % 40}", instance_type=f"i{i}", gpu=gpus[i % len(gpus)],
                         usd_per_hour=f"{1 + i % 97 / 10:.2f}", region=f"r{i % 7}",
                         tier=("on_demand", "spot", "marketplace")[i // len(gpus) % 3]))  # every GPU, every tier
    rows, problems = read_offers("big.csv", "\n".join(lines) + "\n")
    assert problems == [] and len(rows) == 50_000
    t = OfferTable(rows)
    assert sum(len(t.for_gpu(g)) for g in gpus) == 50_000
    assert len(t.valid_on(TODAY)) == 50_000
    spread = t.spread(gpus[0], "spot", TODAY)
    assert spread is not None and spread[0] <= spread[1] <= spread[2]


def test_accelerator_map_first_match_wins() -> None:
    amap, problems = read_accelerator_map("rules/offers/accelerators.csv",
                                          (RULES / "offers" / "accelerators.csv").read_text(), catalog_ids())
    assert problems == []
    m = amap.map_accelerator
    assert m("aws", "H100", "p5.48xlarge") == "h100-sxm"
    assert m("lambda", "H100", "gpu_1x_h100_pcie") == "h100-pcie"
    assert m("runpod", "H100", "1x_H100_SECURE") == "h100-pcie"
    assert m("runpod", "H100-SXM", "1x_H100-SXM_SECURE") == "h100-sxm"
    assert m("vast", "H100", "2x-H100_NVL-32-65536") is None
    assert m("cudo", "H100", "epyc-genoa-h100-nvl-pcie_1x2v4gb") is None
    assert m("shadeform", "H200", "excesssupply_H200-sxm5x8-NVLINK") == "h200"
    assert m("gcp", "H100-MEGA", "a3-megagpu-8g") == "h100-sxm"
    assert m("aws", "A100", "p4d.24xlarge") == "a100-40gb"
    assert m("mithril", "A100", "a100-80gb.sxm.8x") == "a100-80gb"
    assert m("cudo", "A100", "epyc-genoa-a100-pcie_1x2v4gb") == "a100-80gb"
    assert m("aws", "A10G", "g5.xlarge") is None
    assert m("runpod", "MI300X", "1x_MI300X_SECURE") == "mi300x"
    assert m("vast", "RTX5090", "1x-RTX_5090-32-65536") == "rtx-5090"
    _, bad = read_accelerator_map("a.csv", "provider,accelerator,instance_pattern,gpu,note\n*,X,*,nope,\n",
                                  catalog_ids())
    assert [str(p) for p in bad] == ['a.csv:2:4 gpu "nope" is not a catalog id']


def test_shipped_offers_load_clean() -> None:
    known = catalog_ids()
    files = sorted((RULES / "offers").glob("*.csv"))
    rows: list[Offer] = []
    for f in files:
        if f.name == "accelerators.csv":
            continue
        got, problems = read_offers(f"rules/offers/{f.name}", f.read_text(encoding="utf-8"))
        assert problems == [], problems
        assert got, f"{f.name} has no rows"
        if f.name == "reserved.csv":  # published reserved terms, several providers in one file
            assert all(o.tier == "reserved" and o.term_months > 0 for o in got)
        else:
            assert all(o.provider == f.stem for o in got), f.name
        rows.extend(got)
    errors = [p for p in check_offers(rows, known, TODAY, max_age_days=365) if p.severity == "error"]
    assert errors == []
    providers = {o.provider for o in rows}
    assert {"aws", "gcp", "lambda", "runpod", "nebius", "vast", "cudo"} <= providers
    assert all(o.source for o in rows)
    t = OfferTable(rows)
    for gpu in ("h100-sxm", "h200", "b200", "a100-40gb", "a100-80gb", "l4", "l40s", "mi300x"):
        assert t.select(gpu, TODAY), gpu
    assert t.select("h100-sxm", TODAY, countries=["EU"])
