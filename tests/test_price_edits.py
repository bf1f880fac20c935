"""A price edit that sticks (issue 25): a rule author adds a new open-ended h100-sxm rent row at $2.49 beside the
$3.15 one. `gpu-advisor gpus` shows $2.49 in its rent column (as $/TFLOP-h already used), ListGpus marks only the
row in effect `current`, and rules-check warns about the two open-ended rows, saying which is in effect and how to
end the other."""

from __future__ import annotations

import re
import shutil
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from service.frontends import cli
from service.gen.gpuadvisor.v1 import advisor_pb2 as pb
from service.rulebook.folder import load_rulebook

DAY = "2026-12-02"
OLD = "      - {kind: rent, usd_per_hour: 3.15, as_of: 2025-12-01, valid_from: 2025-12-01, valid_until: null,\n"
NEW = ('      - {kind: rent, usd_per_hour: 2.49, as_of: 2026-12-01, valid_from: 2026-12-01, valid_until: null,\n'
       '         tier: on_demand, source: "team quote from a provider, 2026-12-01"}\n')


@pytest.fixture
def edited(rules_copy: Path) -> tuple[Path, int]:
    """The rules with the new row added before the old one (its line, 1-based)."""
    f = rules_copy / "catalog" / "gpus.yaml"
    text = f.read_text(encoding="utf-8")
    assert text.count(OLD) == 1, "the shipped h100-sxm rent row moved: update this test's anchor"
    line = text[: text.index(OLD)].count("\n") + 1
    f.write_text(text.replace(OLD, NEW + OLD, 1), encoding="utf-8")
    return rules_copy, line


def test_rules_check_warns_about_two_open_ended_rows(edited: tuple[Path, int]):
    rules, line = edited
    book, problems = load_rulebook(rules, today=date.fromisoformat(DAY))
    assert book is not None  # a warning, not an error: the folder still loads
    found = [p for p in problems if "two open-ended rent rows for h100-sxm" in str(p)]
    assert len(found) == 1, [str(p) for p in problems]
    text = str(found[0])
    assert text.startswith(f"{rules.name}/catalog/gpus.yaml:{line}:") or f"gpus.yaml:{line}:" in text, text
    assert found[0].severity == "warning" and "$2.49" in text and "valid_until" in text


def test_the_shipped_catalog_has_no_overlapping_rows():
    _, problems = load_rulebook(Path(__file__).parents[1] / "rules", today=date.fromisoformat(DAY))
    assert not [str(p) for p in problems if "open-ended" in str(p)]


def test_list_gpus_and_the_gpus_table_show_the_price_in_effect(edited: tuple[Path, int], start_server: Any,
                                                               capsys: pytest.CaptureFixture[str]):
    rules, _ = edited
    # The shipped rule tests are not this test's subject (one range there follows the catalog's rent while its
    # candidate is priced from an offer): without them the server serves the edited catalog at once.
    shutil.rmtree(rules / "tests")
    server = start_server(rules, watch=False)
    resp = server.stub.ListGpus(pb.ListGpusRequest(as_of=DAY), timeout=30)
    h100 = next(g for g in resp.gpus if g.id == "h100-sxm")
    rents = [(p.usd, p.current) for p in h100.prices if p.kind == "rent" and p.tier == pb.PRICE_TIER_ON_DEMAND]
    assert sorted(rents) == [(2.49, True), (3.15, False), (4.0, False)]
    assert h100.usd_per_tflop_hour == pytest.approx(2.49 / h100.tflops_bf16)
    assert cli.main(["gpus", "--addr", server.addr, "--as-of", DAY]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("h100-sxm "))
    assert re.search(r"\$2\.49\s+on-demand", row) and "$3.15" not in row, row


def test_the_readme_catalog_template_loads(rules_copy: Path):
    """rules/README.md's catalog-entry template, pasted under `gpus:` as the README says, is a GPU the rules load."""
    readme = (Path(__file__).parents[1] / "rules" / "README.md").read_text(encoding="utf-8")
    after = readme.split("**A catalog entry template**", 1)[1]
    template = re.search(r"```yaml\n(.*?)```", after, re.S).group(1)
    f = rules_copy / "catalog" / "gpus.yaml"
    f.write_text(f.read_text(encoding="utf-8").rstrip("\n") + "\n" + template, encoding="utf-8")
    book, problems = load_rulebook(rules_copy, today=date.fromisoformat(DAY))
    errors = [str(p) for p in problems if p.severity == "error"]
    assert book is not None and not errors, errors
    assert "my-gpu" in {g.id for g in book.catalog}
