"""One command checks and tests a rules folder as the server vets it, and answers say when the server refused a
newer version (issue 16, item 5): a rules edit that breaks a rule test fails `rules-check` with the case's
file:line, and the running server keeps answering from the last good version with `newer_rules_rejected` set,
said in the summary the CLI and MCP print. The shipped rule tests hold when a GPU is added."""

from __future__ import annotations

import io
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from service.frontends.cli import print_advice
from service.frontends.mcp_server import recommendation_markdown
from service.frontends.rules_cli import main as rules_cli
from service.wire.api import pb

from .conftest import Running

RULES = Path(__file__).parents[1] / "rules"
REQUEST = pb.RecommendRequest(brief=pb.WorkloadBrief(
    workload=pb.WORKLOAD_TYPE_FULL_FINETUNE, model=pb.Model(params_billion=7, precision=pb.PRECISION_BF16)))
REJECTED = {"en": "A newer version of the rules was rejected", "zh-CN": "较新的规则版本被拒绝"}


def break_a_rule_test(rules: Path) -> None:
    """A plausible edit: the training-tokens question demoted below the others, which a rule test forbids."""
    path = rules / "questions.yaml"
    text = path.read_text(encoding="utf-8")
    edited = re.sub(r"(- id: ask\.training-tokens\n(?:    #.*\n)*    priority: )95", r"\g<1>10", text)
    assert edited != text
    path.write_text(edited, encoding="utf-8")


def test_a_rules_edit_that_breaks_a_rule_test_fails_rules_check(rules_copy: Path,
                                                                capsys: pytest.CaptureFixture[str]):
    assert rules_cli(["check", str(rules_copy)]) == 0
    capsys.readouterr()
    break_a_rule_test(rules_copy)
    assert rules_cli(["check", str(rules_copy)]) == 1
    out = capsys.readouterr()
    # Where the author looks: the failing case's file and line, and the check's own summary line says it.
    assert re.search(r"tests/training\.yaml:\d+ \[rule test\] a training brief without its token count", out.out)
    assert "first question is about" in out.out and "1 failed" in out.err
    # `--no-tests` checks only, as before.
    assert rules_cli(["check", str(rules_copy), "--no-tests"]) == 0


@pytest.mark.parametrize("locale", ["en", "zh-CN"])
def test_answers_flag_a_newer_version_the_server_rejected(
    rules_copy: Path, start_server: Callable[..., Running], locale: str
):
    running = start_server(rules_copy, watch=False)
    request = pb.RecommendRequest(brief=REQUEST.brief, locale=locale)
    before = running.stub.Recommend(request, timeout=30)
    assert not before.newer_rules_rejected and before.newer_rules_error == ""
    good = running.store.status().revision

    break_a_rule_test(rules_copy)
    assert not running.store.reload().ok
    flagged = running.stub.Recommend(request, timeout=30)
    assert flagged.newer_rules_rejected and "training.yaml" in flagged.newer_rules_error
    assert flagged.ruleset.revision == good  # still the last good version
    assert REJECTED[locale] in flagged.summary
    # The CLI prints it; so does the MCP markdown.
    out = io.StringIO()
    print_advice(flagged, out, request=request)
    assert REJECTED[locale] in out.getvalue()
    assert REJECTED[locale] in recommendation_markdown(flagged)

    shutil.copy(RULES / "questions.yaml", rules_copy / "questions.yaml")  # the edit undone
    assert running.store.reload().ok
    after = running.stub.Recommend(request, timeout=30)
    assert not after.newer_rules_rejected and REJECTED[locale] not in after.summary


def test_the_flag_is_not_cached(rules_copy: Path, start_server: Callable[..., Running]):
    running = start_server(rules_copy, watch=False, response_cache=8)
    assert not running.stub.Recommend(REQUEST, timeout=30).newer_rules_rejected
    break_a_rule_test(rules_copy)
    assert not running.store.reload().ok
    assert running.stub.Recommend(REQUEST, timeout=30).newer_rules_rejected


def add_a_gpu(rules: Path) -> None:
    """A 15th catalog GPU: a second listing of the H100 PCIe under its own id."""
    path = rules / "catalog" / "gpus.yaml"
    lines = path.read_text(encoding="utf-8").split("\n")
    start = lines.index("  - id: h100-pcie")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("  - id: "))
    renamed = '"NVIDIA H100 PCIe 80GB (second listing)"'
    copy = [line.replace("id: h100-pcie", "id: h100-pcie-second").replace('"NVIDIA H100 PCIe 80GB"', renamed)
            for line in lines[start:end]]
    path.write_text("\n".join([*lines, *copy]).rstrip("\n") + "\n", encoding="utf-8")


def test_adding_a_gpu_breaks_no_shipped_rule_test(rules_copy: Path, capsys: pytest.CaptureFixture[str]):
    add_a_gpu(rules_copy)
    assert rules_cli(["test", str(rules_copy)]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert re.search(r"rules: \d+ passed, 0 failed", out)
    # The catalog really grew: the check counts one GPU more than the shipped folder.
    assert rules_cli(["check", str(rules_copy), "--allow-warnings"]) == 0
    assert re.search(r"(\d+) GPUs", capsys.readouterr().err).group(1) == str(_gpus(RULES) + 1)


def _gpus(rules: Path) -> int:
    return sum(1 for line in (rules / "catalog" / "gpus.yaml").read_text().splitlines() if line.startswith("  - id: "))
