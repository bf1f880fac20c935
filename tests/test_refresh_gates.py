"""`offers refresh`'s sanity gates (issue 38 item 1): a provider's new table that lost most of its rows, or whose
prices jumped, keeps the last good table and exits non-zero saying why, unless the operator accepts the move; a
malformed catalog row is dropped with its reason, never merged into the row after it. The catalogs come from an
in-memory `get` (no network)."""

from __future__ import annotations

import argparse
import io
from datetime import date
from pathlib import Path

import pytest

from service.market.gates import DEFAULTS, PRICE_FACTOR, ROWS_LOST, Limits, Priced, check, read_limits
from service.market.importers.common import MALFORMED, offers_csv_text
from service.market.importers.gpuhunt import import_gpuhunt_csv
from service.market.importers.skypilot import import_vms_csv
from service.market.refresh import EXIT_OK, FetchError, Options, add_arguments, refresh

from .conftest import RULES

DAY = date(2026, 12, 1)
BASE = "http://127.0.0.1:9/catalogs"  # never dialled: `get` answers from memory
HEADER = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice"
INFO = ("\"{'Gpus': [{'Name': 'H100', 'Manufacturer': 'NVIDIA', 'Count': 1, 'MemoryInfo': {'SizeInMiB': 81920}}], "
        "'TotalGpuMemoryInMiB': 81920}\"")


def catalog(rows: int = 12, scale: float = 1.0) -> str:
    """A nebius vms.csv of `rows` 1-GPU H100 shapes, each priced on-demand and spot."""
    lines = [HEADER]
    for i in range(rows):
        lines.append(f"gpu-h100-sxm_1gpu-16vcpu-200gb-v{i},H100,1,16,200,{(2.0 + i / 10) * scale:.4f},eu-north1,"
                     f"{INFO},{(1.0 + i / 20) * scale:.4f}")
    return "\n".join(lines) + "\n"


def seed(rules: Path, text: str) -> bytes:
    """Write `text`'s import as nebius's last good table, as an earlier refresh would have."""
    from service.market.importers.__main__ import catalog_memory
    from service.rulebook.accelerators import read_accelerator_map

    memory = catalog_memory(rules)
    amap = rules / "offers" / "accelerators.csv"
    accel, _ = read_accelerator_map(amap.as_posix(), amap.read_text(encoding="utf-8"), set(memory))
    accel.catalog_gb = memory
    rows, _ = import_vms_csv("v7/nebius/vms.csv", text, accel, DAY, "nebius")
    assert len(rows) == 24
    path = rules / "offers" / "nebius.csv"
    path.write_text(offers_csv_text(rows), encoding="utf-8")
    return path.read_bytes()


def run(rules: Path, text: str, accept: tuple[str, ...] = ()) -> tuple[int, str]:
    def get(url: str) -> bytes:
        if url == f"{BASE}/v7/nebius/vms.csv":
            return text.encode()
        raise FetchError(f"{url}: HTTP 404 Not Found")

    out = io.StringIO()
    opts = Options(skypilot_url=BASE, versions=("v7",), skypilot=("nebius",), gpuhunt=(), as_of=DAY, accept=accept)
    return refresh(rules, opts, out, get), out.getvalue()


def test_a_table_cut_mid_row_keeps_the_last_good_one(rules_copy: Path) -> None:
    good = seed(rules_copy, catalog())
    full = catalog()
    cut = full[: len(full) // 3]  # the first third, ending inside a row
    code, said = run(rules_copy, cut)
    assert code != EXIT_OK, said
    assert "nebius: NOT updated, the last good table keeps serving: refused by the sanity gates" in said
    assert "of its 24 rows" in said and ROWS_LOST in said and "--accept-market-move nebius" in said
    assert (rules_copy / "offers" / "nebius.csv").read_bytes() == good


@pytest.mark.parametrize("scale", [10.0, 0.01])
def test_every_price_times_a_factor_keeps_the_last_good_table(rules_copy: Path, scale: float) -> None:
    good = seed(rules_copy, catalog())
    code, said = run(rules_copy, catalog(scale=scale))
    assert code != EXIT_OK, said
    assert f"its median price moved x{scale:.3g}" in said and "over the 24 rows both tables hold" in said, said
    assert PRICE_FACTOR in said and "--accept-market-move nebius" in said
    assert (rules_copy / "offers" / "nebius.csv").read_bytes() == good


def test_the_accept_flag_lets_a_real_market_move_through(rules_copy: Path) -> None:
    good = seed(rules_copy, catalog())
    code, said = run(rules_copy, catalog(scale=3.0), accept=("nebius",))
    assert code == EXIT_OK, said
    assert "nebius: updated past the sanity gates (--accept-market-move): its median price moved x3" in said
    table = (rules_copy / "offers" / "nebius.csv").read_bytes()
    assert table != good and b",6,2026-12-01," in table  # $2.00 x3 on the first shape
    # the flag as the command line spells it
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    assert ap.parse_args(["--accept-market-move", "Nebius, aws"]).accept == ("nebius", "aws")
    assert Options(accept=("all",)).accepts("lambda") and not Options().accepts("lambda")


def test_a_small_move_passes_the_gates(rules_copy: Path) -> None:
    seed(rules_copy, catalog())
    text = catalog().replace(",2.0000,", ",2.4000,")  # one shape +20%; a row gone
    text = "\n".join(text.splitlines()[:-1]) + "\n"
    code, said = run(rules_copy, text)
    assert code == EXIT_OK, said
    assert "1 prices moved more than 10%" in said and "sanity gates" not in said


def test_gate_unit_rules() -> None:
    old = [Priced(("a", i), 1.0 + i) for i in range(10)]
    limits = Limits()
    assert check("p", old, old, limits).passed
    assert check("p", [], old[:1], limits).passed  # a first table: nothing to compare
    assert check("p", old, old[:5], limits).passed  # half lost: at the limit, not beyond
    [why] = check("p", old, old[:4], limits).reasons
    assert why.startswith("it lost 6 of its 10 rows (60%, 4 left)")
    # every instance renamed: the whole tables' medians compare, since no row is in both
    renamed = [Priced(("b", i), (1.0 + i) * 2.5) for i in range(10)]
    [why] = check("p", old, renamed, limits, " USD per GPU-hour").reasons
    assert "moved x2.5 (the whole tables' medians, 5.5 to 13.75 USD per GPU-hour" in why
    # cheap shapes added: the whole table's median falls, no price moved, the gate holds its peace
    cheaper = old + [Priced(("c", i), 0.1) for i in range(30)]
    assert check("p", old, cheaper, limits).passed


def test_thresholds_come_from_the_rules_folder(rules_copy: Path) -> None:
    shipped = read_limits(RULES)
    assert (shipped.max_rows_lost_share, shipped.max_median_price_factor) == (DEFAULTS[ROWS_LOST],
                                                                              DEFAULTS[PRICE_FACTOR])
    path = rules_copy / "assumptions.yaml"
    path.write_text(path.read_text().replace("refresh_max_median_price_factor: {value: 2.0",
                                             "refresh_max_median_price_factor: {value: 20"))
    assert read_limits(rules_copy).max_median_price_factor == 20
    seed(rules_copy, catalog())
    code, said = run(rules_copy, catalog(scale=10.0))
    assert code == EXIT_OK, said


def _accel() -> object:
    from service.market.importers.__main__ import catalog_memory
    from service.rulebook.accelerators import read_accelerator_map

    memory = catalog_memory(RULES)
    amap = RULES / "offers" / "accelerators.csv"
    accel, _ = read_accelerator_map(amap.as_posix(), amap.read_text(encoding="utf-8"), set(memory))
    accel.catalog_gb = memory
    return accel


def test_an_unterminated_quote_drops_its_row_and_keeps_the_next() -> None:
    lines = catalog(3).splitlines()
    broken = lines[1].replace(f",{INFO},", ",\"{'Gpus': [{'Name': 'H100',")  # the quote never closes
    text = "\n".join([lines[0], broken, lines[2], lines[3]]) + "\n"
    rows, report = import_vms_csv("v7/nebius/vms.csv", text, _accel(), DAY, "nebius")  # type: ignore[arg-type]
    assert {o.instance_type for o in rows} == {"gpu-h100-sxm_1gpu-16vcpu-200gb-v1", "gpu-h100-sxm_1gpu-16vcpu-200gb-v2"}
    counts = report.providers["nebius"]
    assert (counts.read, counts.written, counts.superseded, counts.dropped) == (3, 2, 0, 1)
    assert report.dropped[MALFORMED] == 1 and report.examples[MALFORMED][0].startswith("v7/nebius/vms.csv:2 (")


def test_gpuhunt_drops_a_malformed_row_alone() -> None:
    head = "instance_name,location,price,cpu,memory,gpu_count,gpu_name,gpu_memory,spot"
    good = ["NC24ads_A100_v4,eastus,3.67,24,220,1,A100,80,False", "NC48ads_A100_v4,eastus,7.35,48,440,2,A100,80,False"]
    text = "\n".join([head, 'NC96ads_A100_v4,"eastus,14.69,96,880,4,A100,80,False', *good]) + "\n"
    rows, report = import_gpuhunt_csv("azure.csv", text, _accel(), DAY, "azure")  # type: ignore[arg-type]
    assert sorted(o.instance_type for o in rows) == ["NC24ads_A100_v4", "NC48ads_A100_v4"]
    assert report.dropped[MALFORMED] == 1 and report.providers["azure"].read == 3
