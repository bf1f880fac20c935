"""The README is read in five minutes and the rest is one link away (issue 16, item 7): it starts with the two
commands, stays about 100 lines, and every server and CLI flag and every GPU_ADVISOR_* variable the code reads
is documented in the README or docs/; every relative link resolves."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from service.frontends import cli, rules_cli
from service.serving import flags

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]


def _all_docs() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in DOCS)


def test_the_readme_starts_with_the_two_commands_and_stays_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 120, len(lines)
    block = lines[lines.index("```") + 1:]
    commands = [line.split("#")[0].strip() for line in block[: block.index("```")]]
    assert [c for c in commands if c] == ["make run", "make test"]
    assert "second terminal" in " ".join(lines[:8])  # make run stays in the foreground


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    out: set[str] = set()
    for action in parser._actions:  # noqa: SLF001 - argparse has no public walk
        out |= {o for o in action.option_strings if o.startswith("--") and o != "--help"}
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for sub in action.choices.values():
                out |= _flags(sub)
    return out


def _server_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    flags.add_serving_flags(parser)
    return parser


def test_every_flag_is_documented():
    text = _all_docs()
    flags = _flags(cli.build_parser()) | _flags(_server_parser())
    assert len(flags) > 15
    assert sorted(f for f in flags if f not in text) == []


def test_every_environment_variable_is_documented():
    text = _all_docs()
    used = set()
    for path in (ROOT / "service").rglob("*.py"):
        used |= set(re.findall(r"GPU_ADVISOR_[A-Z_]+", path.read_text(encoding="utf-8")))
    assert used and sorted(v for v in used if v not in text) == []


def test_rules_cli_check_documents_that_it_runs_the_tests():
    assert "rule tests" in (rules_cli.__doc__ or "")
    assert "then the rule tests" in README.read_text(encoding="utf-8")


def test_relative_links_resolve():
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#\s]+)\)", doc.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            assert (doc.parent / target).exists(), f"{doc.name} links to {target}"
