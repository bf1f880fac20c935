"""The model-API price import on the real table: LiteLLM's model_prices_and_context_window_backup.json as shipped in
the litellm 1.110.2 wheel (sha256 of the JSON 8943af58...d3dcc2), kept whole but gzipped in tests/fixtures/api_offers
(177 KB; the JSON itself is 3.4 MB). Every entry read is written or dropped with a reason; the committed table
rules/api_offers/litellm.csv is what this import writes."""

from __future__ import annotations

import csv
import io
import re
from datetime import date
from pathlib import Path

import pytest

from service.domain.api_offers import API_COLUMNS
from service.market.api_import import imported, refresh
from service.market.importers.litellm import read_table
from service.rulebook.api_offer_files import check_api_offers, read_api_offers, write_api_offers_csv

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "tests" / "fixtures" / "api_offers" / "litellm-1.110.2-model_prices_and_context_window_backup.json.gz"
DAY = date(2026, 12, 7)


@pytest.fixture(scope="module")
def table() -> dict:
    return read_table(REAL)


@pytest.fixture(scope="module")
def result(table: dict):  # noqa: ANN201
    return imported(table, ROOT / "rules", DAY, "LiteLLM test")


def test_counts_add_up_on_the_real_table(table: dict, result) -> None:  # noqa: ANN001
    rows, report = result
    assert report.rows_read == len(table) == 4878
    assert report.rows_read == report.rows_written + report.rows_dropped
    assert report.rows_superseded == 0
    assert all(c.balanced() for c in report.providers.values())
    assert sum(report.dropped.values()) == report.rows_dropped
    # every drop has a reason and names the entries it dropped
    assert all(reason and len(report.examples[reason]) == n for reason, n in report.dropped.items())
    assert len(rows) >= report.rows_written > 100


def test_each_row_maps_to_a_registry_model_with_its_prices(table: dict, result) -> None:  # noqa: ANN001
    rows, _ = result
    for o in rows:
        key = re.search(r"\[(.+?)\]", o.source).group(1)
        entry = table[key]
        assert o.usd_per_million_input == pytest.approx(entry["input_cost_per_token"] * 1e6)
        assert o.usd_per_million_output == pytest.approx(entry.get("output_cost_per_token", 0) * 1e6)
        assert o.as_of == DAY
    by = {(o.provider, o.model): o for o in rows}
    deepinfra = by[("deepinfra", "meta-llama/Meta-Llama-3.1-8B-Instruct")]
    assert deepinfra.registry_model == "llama-3.1-8b-instruct"
    assert deepinfra.context_tokens == table["deepinfra/meta-llama/Meta-Llama-3.1-8B-Instruct"]["max_input_tokens"]


def test_regions_come_only_from_what_the_table_says(result) -> None:  # noqa: ANN001
    rows, _ = result
    zoned = [o for o in rows if o.region]
    assert zoned, "Bedrock's data-zone keys (us., eu.) name a region"
    for o in rows:
        if not o.region:
            assert o.country == ""  # no region named: the country is unknown, never guessed
    assert all(o.country in ("US", "EU", "JP", "AU", "") or len(o.country) == 2 for o in zoned)


def test_unmapped_and_unpriced_entries_say_why(table: dict, result) -> None:  # noqa: ANN001
    _, report = result
    reasons = " | ".join(report.dropped)
    assert "not in the registry" in reasons
    assert "not priced per text token" in reasons
    assert report.examples["the table's sample_spec (its schema, not a model)"] == ["sample_spec"]
    aliases = report.examples["an alias of another entry (alias_of), read there"]
    assert aliases and all("alias_of" in table[k] for k in aliases)


def test_the_committed_table_is_this_import(result) -> None:  # noqa: ANN001
    rows, _ = result
    committed, problems = read_api_offers("litellm.csv", (ROOT / "rules" / "api_offers" / "litellm.csv").read_text())
    assert not problems
    strip = lambda o: (o.provider, o.model, o.registry_model, o.usd_per_million_input,  # noqa: E731
                       o.usd_per_million_output, o.usd_per_million_cached_input, o.region, o.country)
    assert sorted(map(strip, committed)) == sorted(map(strip, rows))


def test_written_table_reads_back_and_lints(result) -> None:  # noqa: ANN001
    rows, _ = result
    buf = io.StringIO()
    write_api_offers_csv(rows, buf)
    assert next(csv.reader(io.StringIO(buf.getvalue()))) == list(API_COLUMNS)
    back, problems = read_api_offers("t.csv", buf.getvalue())
    assert not problems and len(back) == len(rows)
    known = {o.registry_model for o in back}
    assert not check_api_offers(back, known, DAY, 45)
    stale = check_api_offers(back[:1], known, date(2027, 6, 1), 45)
    assert [p.rule_id for p in stale] == ["api_offers.stale"] and stale[0].severity == "warning"
    unknown = check_api_offers(back[:1], {"other"}, DAY, 45)
    assert unknown[0].rule_id == "api_offers.unknown-model" and unknown[0].severity == "error"


def test_bad_rows_are_refused_with_line_and_column() -> None:
    text = ",".join(API_COLUMNS) + "\n" + "p,m,llama-3.1-8b-instruct,abc,0.1,,,,,2026-13-01,src\n"
    rows, problems = read_api_offers("bad.csv", text)
    assert not rows
    assert [(p.line, p.message.split(":")[0]) for p in problems] == [(2, "usd_per_million_input"), (2, "as_of")]


def test_refresh_vets_then_swaps_in(tmp_path: Path) -> None:
    import shutil

    rules = tmp_path / "rules"
    shutil.copytree(ROOT / "rules", rules)
    out = io.StringIO()
    body = REAL.read_bytes()
    import gzip

    assert refresh(rules, "https://example.invalid/t.json", DAY, "test", out,
                   get=lambda url: gzip.decompress(body)) == 0
    assert "0 added, 0 removed, 0 repriced" in out.getvalue()
    out = io.StringIO()
    before = (rules / "api_offers" / "litellm.csv").read_bytes()
    assert refresh(rules, "https://example.invalid/t.json", DAY, "test", out, get=lambda url: b"[1, 2]") == 1
    assert "NOT updated" in out.getvalue()
    assert (rules / "api_offers" / "litellm.csv").read_bytes() == before


def test_the_cli_imports_the_table_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from service.frontends.cli import main

    out = tmp_path / "api.csv"
    assert main(["api-offers", "import", str(REAL), "--rules", str(ROOT / "rules"), "--out", str(out),
                 "--as-of", "2026-12-07", "--source", "test"]) == 0
    printed = capsys.readouterr().out
    assert "4,878 rows read = " in printed and f"to {out}" in printed
    rows, problems = read_api_offers("api.csv", out.read_text())
    assert not problems and rows and {o.source.split(" [")[0] for o in rows} == {"test"}
    assert main(["api-offers", "import", str(tmp_path / "missing.json")]) == 2
