"""`gpu-advisor explain` against a real server: the answer first, each candidate's score in parts, filters."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from service.frontends import cli
from tests.conftest import Running

REPO = Path(__file__).parents[1]
REALTIME = str(REPO / "examples" / "realtime-70b-fp8.yaml")
LORA = str(REPO / "examples" / "lora-7b.yaml")


def explain(server: Running, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert cli.main(["explain", *args, "--addr", server.addr]) == 0
    return capsys.readouterr().out


def trace_lines(out: str) -> list[str]:
    """The rule lines of the Fired / Not fired sections."""
    lines, inside = [], False
    for line in out.splitlines():
        if line.startswith(("Fired (", "Not fired (")):
            inside = True
        elif inside and line.startswith("  "):
            lines.append(line.strip())
        elif inside and line and not line.startswith(" "):
            inside = False
    return lines


def test_the_answer_comes_first_then_scores_then_the_trace(server: Running, capsys):
    out = explain(server, capsys, REALTIME)
    lines = out.splitlines()
    assert lines[0] == "Answer" and lines[1].startswith("  top pick: ")
    assert lines[2].startswith("  route: ")
    order = [out.index(h) for h in ("top pick:", "route:", "\nScores:", "\nFired (", "\nNot fired (")]
    assert order == sorted(order), out[:2000]
    # the route's rationale names the row that chose it and where it is
    assert re.search(r"\[routing\.[a-z.-]+\] rules/routing\.yaml:\d+", out)


def test_score_breakdown_adds_up_and_names_each_rule(server: Running, capsys):
    capsys.readouterr()
    assert cli.main(["recommend", LORA, "--addr", server.addr, "--json", "--trace", "--max", "50"]) == 0
    body = json.loads(capsys.readouterr().out)
    fired_on: dict[str, set[str]] = {}
    for t in body["trace"]:
        if t.get("fired"):
            fired_on.setdefault(t["fact"], set()).add(t["rule_id"])
    costs = []
    for c in body["candidates"]:
        b = c["score_breakdown"]
        assert b["basis"] in ("usd_per_unit", "usd_per_million_output_tokens", "usd_per_effective_tflop_hour")
        points = sum(p["points"] for p in b.get("rules", []))
        assert math.isclose(c["score"], b["cost_points"] + points, abs_tol=0.02), c["gpu"]
        assert math.isclose(b["cost_points"], 100 * b["best_cost"] / b["cost"], rel_tol=1e-3), c["gpu"]
        assert {p["rule_id"] for p in b.get("rules", [])} <= fired_on[f"candidate:{c['gpu']}"]
        costs.append(b["cost"])
    assert math.isclose(min(costs), body["candidates"][0]["score_breakdown"]["best_cost"], rel_tol=1e-6)
    # matrix.adapter.rtx-small gives a small LoRA job +10 on an RTX 5090 (rules/matrix.yaml)
    rtx = next(c for c in body["candidates"] if c["gpu"] == "rtx-5090")
    assert {"rule_id": "matrix.adapter.rtx-small", "points": 10.0} in rtx["score_breakdown"]["rules"]

    out = explain(server, capsys, LORA)
    # its points: +10 from the matrix, -10 where no offer prices it (eligibility.no-offer-in-scope)
    assert re.search(r"#\d+ rtx-5090: [\d.]+ = [\d.]+ \(100 x [\d.e-]+ / [\d.e-]+\) [+-]\d+ points", out), out
    assert re.search(r"\n +\+10 +matrix\.adapter\.rtx-small\n", out)


def test_filter_by_gpu(server: Running, capsys):
    out = explain(server, capsys, REALTIME, "--gpu", "h100-pcie")
    lines = trace_lines(out)
    assert lines and all(line.endswith("on candidate:h100-pcie") or "on candidate:h100-pcie " in line
                         for line in lines)
    assert "matrix.unrated" in out
    # its score or its exclusion, and nobody else's
    others = re.findall(r"^  (?:#\d+ )?([a-z0-9-]+): ", out.split("\nFired (")[0], flags=re.M)
    assert set(others) <= {"h100-pcie", "top pick", "route"}, others


def test_filter_by_rule_glob_and_fired(server: Running, capsys):
    out = explain(server, capsys, LORA, "--rule", "matrix.*", "--fired")
    lines = trace_lines(out)
    assert lines and all(line.startswith("matrix.") for line in lines)
    assert "\nFired (" in out and "\nNot fired (" not in out
    out = explain(server, capsys, LORA, "--rule", "eligibility.over-budget", "--rule", "ask.*", "--not-fired")
    lines = trace_lines(out)
    assert lines and all(line.startswith(("eligibility.over-budget ", "ask.")) for line in lines)
    assert all("first failing:" in line for line in lines)
    assert "\nFired (" not in out and "\nNot fired (" in out


def test_fired_and_not_fired_exclude_each_other(server: Running, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["explain", LORA, "--fired", "--not-fired", "--addr", server.addr])
    assert exc.value.code == 2
