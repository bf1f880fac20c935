"""`rules-check`: each check gets a broken copy of the shipped rules that it must catch, at the right file:line."""

from __future__ import annotations

import json
import shutil
from datetime import date
from pathlib import Path

import pytest

from service.frontends.rules_cli import main as rules_cli
from service.rulebook.expectations import check
from service.rulebook.folder import load_rulebook

RULES = Path(__file__).parents[1] / "rules"
TODAY = date(2026, 12, 1)


@pytest.fixture
def rules(tmp_path: Path) -> Path:
    dst = tmp_path / "rules"
    shutil.copytree(RULES, dst)
    return dst


def line_of(path: Path, needle: str, occurrence: int = 1) -> int:
    seen = 0
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if needle in line:
            seen += 1
            if seen == occurrence:
                return i
    raise AssertionError(f"{needle!r} not in {path}")


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path.name}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def problems(root: Path) -> list[str]:
    _, found = load_rulebook(root, today=TODAY)
    return [str(p) for p in found]


def assert_reported(found: list[str], where: str, *words: str) -> None:
    hits = [p for p in found if p.startswith(where) and all(w in p for w in words)]
    assert hits, f"expected a problem at {where} mentioning {words}; got:\n" + "\n".join(found)


def test_shipped_rules_are_clean():
    book, found = load_rulebook(RULES, today=TODAY)
    assert [p for p in found if p.severity == "error"] == []
    assert book is not None and len(book.catalog) == 18


def test_broken_yaml(rules: Path):
    f = rules / "eligibility.yaml"
    edit(f, "    when: {sized: true, fits: false}", "    when: {sized: true, fits: false")
    found = problems(rules)
    assert any(p.startswith("rules/eligibility.yaml:") and "broken YAML" in p for p in found), found


def test_unknown_fact_with_did_you_mean(rules: Path):
    f = rules / "eligibility.yaml"
    edit(f, "when: {within_budget: false}", "when: {within_budjet: false}")
    line = line_of(f, "within_budjet")
    assert_reported(
        problems(rules),
        f"rules/eligibility.yaml:{line}:",
        "[eligibility.over-budget]",
        "unknown candidate fact 'within_budjet'",
        "did you mean 'within_budget'",
    )


def test_unknown_key_in_rule(rules: Path):
    f = rules / "mistakes.yaml"
    edit(
        f,
        "    fact: brief\n    when: {success_unit: UNSPECIFIED}",
        "    fact: brief\n    wen: {success_unit: UNSPECIFIED}",
    )
    line = line_of(f, "wen:")
    assert_reported(
        problems(rules), f"rules/mistakes.yaml:{line}:", "unknown key 'wen'", "did you mean 'when'"
    )


def test_wrong_type(rules: Path):
    f = rules / "eligibility.yaml"
    edit(f, "headroom: {lt: 0.15}", "headroom: {lt: low}")
    line = line_of(f, "headroom: {lt: low}")
    assert_reported(problems(rules), f"rules/eligibility.yaml:{line}:", "[eligibility.thin-headroom]")


def test_unknown_enum_value(rules: Path):
    f = rules / "routing.yaml"
    edit(f, "demand: VOLATILE", "demand: VOLATLE")
    line = line_of(f, "VOLATLE")
    assert_reported(problems(rules), f"rules/routing.yaml:{line}:", "'VOLATLE'", "did you mean 'VOLATILE'")


def test_duplicate_rule_id(rules: Path):
    f = rules / "eligibility.yaml"
    edit(f, "- id: eligibility.unpriced", "- id: eligibility.no-fit")
    line = line_of(f, "- id: eligibility.no-fit", 2)
    assert_reported(
        problems(rules), f"rules/eligibility.yaml:{line}:", "[eligibility.no-fit]", "duplicate rule id"
    )


def test_message_key_not_defined(rules: Path):
    f = rules / "eligibility.yaml"
    edit(f, "exclude: {message: eligibility.unpriced}", "exclude: {message: eligibility.unpriced_typo}")
    line = line_of(f, "- id: eligibility.unpriced")
    assert_reported(
        problems(rules),
        f"rules/eligibility.yaml:{line}:",
        "'eligibility.unpriced_typo'",
        "not defined for en",
    )


def test_missing_translation(rules: Path):
    f = rules / "messages" / "zh-CN.yaml"
    text = f.read_text(encoding="utf-8").splitlines()
    kept = [ln for ln in text if not ln.strip().startswith("route.low_hours:")]
    assert len(kept) == len(text) - 1
    f.write_text("\n".join(kept) + "\n", encoding="utf-8")
    en_line = line_of(rules / "messages" / "en.yaml", "route.low_hours:")
    # Reported in the file the fix goes into, at the key it belongs after, naming the en text's place.
    before = line_of(f, "route.unsized:")
    found = problems(rules)
    assert_reported(found, f"rules/messages/zh-CN.yaml:{before}:", "[route.low_hours]", "missing zh-CN",
                    f"rules/messages/en.yaml:{en_line}", "after 'route.unsized'")
    # Once, not also at every rule that uses the key.
    assert [p for p in found if "route.low_hours" in p] != [] and not any(
        p.startswith("rules/routing.yaml") and "route.low_hours" in p for p in found)


def test_missing_first_translation_points_before_the_first_key(rules: Path):
    f = rules / "messages" / "zh-CN.yaml"
    text = f.read_text(encoding="utf-8").splitlines()
    f.write_text("\n".join(ln for ln in text if not ln.strip().startswith("eligibility.no_fit:")) + "\n",
                 encoding="utf-8")
    line = line_of(f, "eligibility.unpriced:")
    assert_reported(problems(rules), f"rules/messages/zh-CN.yaml:{line}:", "[eligibility.no_fit]",
                    "missing zh-CN translation", "before 'eligibility.unpriced'")


def test_placeholder_the_fact_does_not_have(rules: Path):
    f = rules / "messages" / "en.yaml"
    edit(
        f,
        'route.default: "Rent on demand until usage is known."',
        'route.default: "Rent on demand until usage is known ({gpu})."',
    )
    found = problems(rules)
    line = line_of(rules / "routing.yaml", "- id: routing.default")
    assert_reported(found, f"rules/routing.yaml:{line}:", "uses {gpu}", "plan fact")
    # One mistake, one report: the zh-CN text, which only lacks the en typo, is not reported again.
    assert not any("placeholders differ" in p for p in found)


def test_an_en_placeholder_typo_is_reported_once_with_a_did_you_mean(rules: Path):
    f = rules / "messages" / "en.yaml"
    edit(f, "costs ${usd_per_hour:.2f}/h, over the budget", "costs ${usd_per_hou:.2f}/h, over the budget")
    found = [p for p in problems(rules) if "usd_per_hou" in p or "placeholders differ" in p]
    assert len(found) == 1, found
    assert "uses {usd_per_hou}" in found[0] and "did you mean" in found[0] and "usd_per_hour" in found[0]


def test_a_zh_placeholder_typo_is_reported_at_zh_naming_both(rules: Path):
    f = rules / "messages" / "zh-CN.yaml"
    text = f.read_text(encoding="utf-8")
    key_line = next(line for line in text.splitlines() if line.startswith("  eligibility.over_budget:"))
    edit(f, key_line, key_line.replace("{usd_per_hour:.2f}", "{usd_per_hou:.2f}"))
    found = [p for p in problems(rules) if "placeholders differ" in p]
    assert len(found) == 1 and found[0].startswith("rules/messages/zh-CN.yaml:")
    assert "zh-CN has {usd_per_hou}" in found[0] and "en has {usd_per_hour}" in found[0]


def test_rule_that_can_never_fire(rules: Path):
    f = rules / "eligibility.yaml"
    edit(f, "when: {fits: true, headroom: {lt: 0.15}}", "when: {fits: true, headroom: {lt: 0.15, gt: 0.5}}")
    line = line_of(f, "- id: eligibility.thin-headroom")
    assert_reported(problems(rules), f"rules/eligibility.yaml:{line}:", "can never fire")


def test_overlapping_routes_at_the_same_priority(rules: Path):
    (rules / "extra_routes.yaml").write_text(
        "kind: rules\nfact: plan\nrules:\n"
        "  - id: extra.buy-everything\n"
        "    when: {hours_per_month: {ge: 0.0}}\n"
        "    then: {route: {kind: BUY, message: route.buy}}\n",
        encoding="utf-8",
    )
    assert_reported(
        problems(rules),
        "rules/extra_routes.yaml:4:",
        "[extra.buy-everything]",
        "overlaps with",
        "different route",
    )


def test_price_without_as_of(rules: Path):
    f = rules / "catalog" / "gpus.yaml"
    edit(f, "usd_per_hour: 4.7, as_of: 2025-12-01,", "usd_per_hour: 4.7,")
    line = line_of(f, "usd_per_hour: 4.7,")
    assert_reported(problems(rules), f"rules/catalog/gpus.yaml:{line}:", "as_of")


def test_stale_price_is_reported(rules: Path):
    _, found = load_rulebook(rules, today=date(2031, 1, 1), max_price_age_days=365)
    stale = [str(p) for p in found if "days old" in p.message or "older than" in p.message]
    assert any(p.startswith("rules/catalog/gpus.yaml:") for p in stale)
    assert any(p.startswith("rules/offers/") for p in stale)  # offers have a staleness limit of their own
    assert any(p.startswith("rules/api_offers/") for p in stale)  # so do model-API prices (issue 35)
    assert all(p.startswith(("rules/catalog/gpus.yaml:", "rules/offers/", "rules/api_offers/")) for p in stale)


def test_every_problem_at_once(rules: Path):
    edit(rules / "routing.yaml", "demand: VOLATILE", "demand: VOLATLE")
    edit(rules / "eligibility.yaml", "when: {within_budget: false}", "when: {within_budjet: false}")
    found = problems(rules)
    assert any("VOLATLE" in p for p in found) and any("within_budjet" in p for p in found)


def test_cli_exit_codes_and_json(rules: Path, capsys):
    assert rules_cli(["check", str(RULES), "--today", "2026-12-01"]) == 0
    edit(rules / "routing.yaml", "demand: VOLATILE", "demand: VOLATLE")
    capsys.readouterr()
    assert rules_cli(["check", str(rules), "--format", "json", "--today", "2026-12-01"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and any("VOLATLE" in p["message"] for p in data["problems"])


def test_rules_test_reports_a_broken_case_with_file_and_line(rules: Path, capsys):
    f = rules / "tests" / "routing.yaml"
    edit(f, "      route_in: [MODEL_API]\n      fired: [routing.api.uncertain,",
         "      route_inn: [MODEL_API]\n      fired: [routing.api.uncertain,")
    line = line_of(f, "route_inn")
    assert rules_cli(["test", str(rules), "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert any(p.startswith(f"rules/tests/routing.yaml:{line}:") and "route_inn" in p for p in report["problems"])
    assert report["coverage"]["rules"] > 0


def test_rules_test_fails_a_wrong_expectation_and_names_the_case(rules: Path, capsys):
    f = rules / "tests" / "routing.yaml"
    edit(f, "      route_in: [BUY]\n      fired: [routing.on-prem",
         "      route_in: [RESERVE]\n      fired: [routing.on-prem")
    assert rules_cli(["test", str(rules)]) == 1
    out = capsys.readouterr().out
    assert "FAIL rules/tests/routing.yaml:" in out and "on-prem boundary means buying" in out
    assert "route BUY not in ['RESERVE']" in out


def test_a_row_an_earlier_row_always_beats_is_reported(rules: Path):
    f = rules / "routing.yaml"
    edit(f, "  - id: routing.mid-hours\n",
         "  - id: routing.tiny-hours\n    hours_per_month: {lt: 50}\n"
         "    then: {route: {kind: RENT_MARKETPLACE, message: route.low_hours}}\n  - id: routing.mid-hours\n")
    line = line_of(f, "- id: routing.tiny-hours")
    assert_reported(problems(rules), f"rules/routing.yaml:{line}:", "[routing.tiny-hours]", "never takes effect",
                    "routing.low-hours")


@pytest.mark.parametrize(
    ("test", "words"),
    [
        # caught by the JSON Schema (lt takes numbers only): the branch meant, not "not valid under any of"
        ('{lt: "15%"}', ("'lt' needs a number, got '15%'", "write 0.15 for 15%")),
        # the schema lets eq take text; the compiler knows headroom is a number
        ('{eq: "15%"}', ("'eq' needs a number, got '15%'", "'headroom' is a number", "write 0.15 for 15%")),
        ("{lt: low}", ("'lt' needs a number, got 'low'",)),
    ],
)
def test_operator_type_message_names_the_operator_and_the_fix(rules: Path, test: str, words: tuple[str, ...]):
    f = rules / "eligibility.yaml"
    edit(f, "headroom: {lt: 0.15}", f"headroom: {test}")
    line = line_of(f, f"headroom: {test}")
    found = problems(rules)
    assert_reported(found, f"rules/eligibility.yaml:{line}:", "[eligibility.thin-headroom]", *words)
    assert not any("not valid under any of the given schemas" in p for p in found)


def test_unclosed_flow_is_reported_where_it_opened(rules: Path):
    f = rules / "eligibility.yaml"
    edit(f, "    when: {sized: true, fits: false}", "    when: {sized: true, fits: false")
    line = line_of(f, "    when: {sized: true, fits: false")
    col = f.read_text(encoding="utf-8").splitlines()[line - 1].index("{") + 1
    # The parser notices on a later line; the author needs the brace that was never closed.
    assert_reported(problems(rules), f"rules/eligibility.yaml:{line}:{col} ", "broken YAML",
                    "flow mapping opened here", f"at {line + 1}:")


def test_candidate_warn_is_linted_as_answer_wide(rules: Path):
    (rules / "extra_warn.yaml").write_text(
        "kind: rules\nfact: candidate\nrules:\n"
        "  - id: extra.warn-per-gpu\n"
        "    when: {fits: false}\n"
        "    then: {warn: {code: MISTAKE_MEMORY_FIT_MARGIN, message: eligibility.no_fit}}\n",
        encoding="utf-8",
    )
    book, found = load_rulebook(rules, today=TODAY)
    assert book is not None, "a lint is a warning: the rules still load"
    assert_reported([str(p) for p in found], "rules/extra_warn.yaml:4:", "[extra.warn-per-gpu]", "warning:",
                    "answer-wide")


def test_catalog_gpu_no_matrix_row_names_is_linted(rules: Path):
    edit(rules / "matrix.yaml", "    gpu: [h100-pcie, b300", "    gpu: [h100-sxm, b300")
    line = line_of(rules / "catalog" / "gpus.yaml", "- id: h100-pcie")
    found = problems(rules)
    assert_reported(found, f"rules/catalog/gpus.yaml:{line}:", "[h100-pcie]", "warning:", "no row of matrix")
    assert not any("[h100-sxm] warning: no row" in p for p in found)


def test_a_price_edit_moves_ranges_relative_to_the_catalog(rules: Path, capsys):
    """The buy case's break-even range is relative to the catalog: a new H100 price needs no edit of it, while
    the absolute range it replaced would have failed."""
    edit(rules / "catalog" / "gpus.yaml", "{kind: purchase, usd: 25000, as_of: 2025-12-01",
         "{kind: purchase, usd: 28000, as_of: 2025-12-01")
    assert rules_cli(["test", str(rules)]) == 0, capsys.readouterr().out
    capsys.readouterr()
    f = rules / "tests" / "routing.yaml"
    edit(f, "break_even_hours: {h100-sxm: {catalog_purchase_over_rent_x: [0.945, 1.108]}}",
         "break_even_hours: {h100-sxm: [7500, 8800]}")
    assert rules_cli(["test", str(rules)]) == 1
    assert "h100-sxm ownership.break_even_hours" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("spec", "ok"),
    [
        ({"catalog_rent_x": [4, 4]}, True),  # 4 GPUs at the catalog's $3/h
        ({"catalog_rent_x": [1, 3]}, False),
        ({"catalog_purchase_over_rent_x": [1.0, 1.1]}, True),  # 11,000 h against 30,000 / 3
        ({"catalog_purchase_over_rent_x": [0.5, 1.0]}, False),
        ({"catalog_typo_x": [0, 9]}, False),
    ],
)
def test_relative_range_semantics(spec: dict, ok: bool):
    body = {"candidates": [{"gpu": "x", "cost": {"usd_per_hour": 12.0}, "ownership": {"break_even_hours": 11000}}]}
    key = "cost_per_hour" if "catalog_rent_x" in spec or "typo" in str(spec) else "break_even_hours"
    catalog = {"x": {"rent": 3.0, "purchase": 30000.0}}
    assert (check({key: {"x": spec}}, "OK", body, catalog=catalog) == []) is ok
    assert check({key: {"x": spec}}, "OK", body) != [], "without the catalog a relative range cannot pass"


# -- YAML layout mistakes in the author's terms (issue 16, item 6) --


def test_a_tab_names_itself_and_the_block_it_is_in(rules: Path):
    f = rules / "eligibility.yaml"
    spaced = "    then:\n      exclude: {message: eligibility.no_fit}"
    edit(f, spaced, spaced.replace("\n      ", "\n\t"))
    tab = line_of(f, "\texclude: {message: eligibility.no_fit}")
    found = problems(rules)
    assert_reported(found, f"rules/eligibility.yaml:{tab}:1 ", "a tab", "spaces only",
                    f"began at line {tab - 1}", "`then:`")
    assert not any("cannot start any token" in p for p in found)


def test_a_line_indented_under_a_value_names_the_line_above(rules: Path):
    f = rules / "eligibility.yaml"
    said = "    description: The work does not fit in memory even at the largest configuration we size.\n"
    edit(f, said, said + "      when: {sized: true}\n")
    bad = line_of(f, "      when: {sized: true}")
    found = problems(rules)
    assert_reported(found, f"rules/eligibility.yaml:{bad}:", f"line {bad}", f"deeper than line {bad - 1}",
                    "`description: The work does not fit")
    assert not any("mapping values are not allowed here" in p for p in found)


def test_a_key_out_of_line_names_where_its_block_began(rules: Path):
    f = rules / "eligibility.yaml"
    edit(f, "    when: {sized: true, fits: false}\n", "    when: {sized: true, fits: false}\n     extra: 1\n")
    bad = line_of(f, "     extra: 1")
    began = line_of(f, "- id: eligibility.no-fit")
    found = problems(rules)
    assert_reported(found, f"rules/eligibility.yaml:{bad}:", f"began at line {began}", "column 6", "column 5",
                    "line it up")
    assert not any("expected <block end>" in p for p in found)


@pytest.mark.parametrize("bad", ["{gtt: 0.15}", "{lt: [1, 2]}", "{lt: low}"])
def test_one_run_reports_a_misspelt_field_and_a_bad_value_in_the_same_condition(rules: Path, bad: str):
    """Issue 37 item 8: a structural mistake (an unknown operator, a value its operator cannot take) no longer hides
    the misspelt field beside it until the next run; each mistake is said once."""
    f = rules / "eligibility.yaml"
    edit(f, "when: {fits: true, headroom: {lt: 0.15}}", f"when: {{fitts: true, headroom: {bad}}}")
    line = line_of(f, "fitts")
    found = [p for p in problems(rules) if p.startswith(f"rules/eligibility.yaml:{line}:")]
    assert any("unknown candidate fact 'fitts'" in p and "did you mean 'fits'" in p for p in found), found
    assert any("headroom" in p or "gtt" in p or "'lt'" in p for p in found if "fitts" not in p), found
    assert len(found) == 2, found
