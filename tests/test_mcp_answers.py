"""Issue 37, as a chat-bot builder drives it with the official MCP SDK (text only): a question a person answers
with "none" closes, and the text a host hands its model holds every warning the answer has."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from ruamel.yaml import YAML

from service.frontends import cli, mcp_server
from service.frontends.brief_file import load_request

EXAMPLE = Path(__file__).parents[1] / "examples" / "realtime-chat-8b.yaml"

# A full chat brief but for the budget: the one question left open is what it may cost.
OPEN_BUDGET: dict[str, Any] = {"brief": {
    "workload": "WORKLOAD_TYPE_REALTIME_INFERENCE",
    "model": {"params_billion": 8, "precision": "PRECISION_BF16", "context_tokens": 8192},
    "traffic": {"concurrent_sessions": 8, "avg_input_tokens": 1000, "avg_output_tokens": 300},
    "latency": {"p95_ms": 10000},
    "success_unit": "SUCCESS_UNIT_RESPONSE",
    "run_cycle": "RUN_CYCLE_ALWAYS_ON",
    "boundary": "BOUNDARY_PUBLIC_CLOUD",
    "economics": {"hours_per_month": 730, "horizon_months": 12, "utilization": 0.6, "demand": "DEMAND_STEADY",
                  "acceptance_rate": 0.9, "needs_hardware_control": False, "has_platform_team": True},
}}


def run(server: Any, scenario: Callable[[Client], Awaitable[Any]]) -> Any:
    async def go() -> Any:
        async with Client(server) as client:
            return await scenario(client)

    return asyncio.run(go())


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


@pytest.fixture(scope="module")
def mcp(server: Any) -> Any:
    return mcp_server.build_server(server.addr, timeout=30)


def test_no_cap_closes_the_budget_question_within_three_calls(mcp: Any) -> None:
    calls: list[Any] = []

    async def conversation(client: Client) -> None:
        tools = await client.list_tools()
        calls.append(tools)
        economics = next(t for t in tools.tools if t.name == "recommend_gpus").input_schema["properties"]["brief"][
            "properties"]["economics"]["properties"]
        assert economics["no_budget_cap"]["type"] == "boolean"  # the model can see how to say it
        first = await client.call_tool("recommend_gpus", OPEN_BUDGET)
        calls.append(first)
        assert not first.is_error, text_of(first)
        asked = [q["field"] for q in first.structured_content.get("questions", [])]
        assert asked == ["economics.budget_usd_per_hour"], asked
        # The question's text (all a text-only host passes on) says how to answer "no cap".
        budget_line = next(ln for ln in text_of(first).splitlines() if "`economics.budget_usd_per_hour`" in ln)
        assert "no_budget_cap" in budget_line, budget_line
        answered = copy.deepcopy(OPEN_BUDGET)
        answered["brief"]["economics"]["no_budget_cap"] = True
        second = await client.call_tool("recommend_gpus", answered)
        calls.append(second)
        assert not second.is_error, text_of(second)
        firm = second.structured_content
        assert firm.get("questions", []) == [] and firm.get("provisional", False) is False, firm.get("questions")
        assert firm["candidates"], "no cap excludes nothing for its price"

    run(mcp, conversation)
    assert len(calls) <= 3


def test_no_cap_with_a_budget_is_refused_naming_the_field(mcp: Any) -> None:
    both = copy.deepcopy(OPEN_BUDGET)
    both["brief"]["economics"].update(no_budget_cap=True, budget_usd_per_hour=5)
    result = run(mcp, lambda c: c.call_tool("recommend_gpus", both))
    assert result.is_error and "brief.economics.no_budget_cap" in text_of(result)


# A rule author's own warnings, beside the ones the shipped rules give the example: five more codes, so the answer
# has well over the three warnings the summary used to stop at.
TEAM_RULES = """kind: rules
fact: brief
rules:
""" + "".join(f"""  - id: team.check-{x}
    when: {{workload: REALTIME_INFERENCE}}
    then: {{warn: {{code: TEAM_CHECK_{x.upper()}, severity: WARNING, message: team.check_{x}}}}}
""" for x in "abcde")


def _with_team_warnings(rules_dir: Path) -> None:
    (rules_dir / "team.yaml").write_text(TEAM_RULES, encoding="utf-8")
    for locale, words in (("en", "Team check {x}: confirm it with the on-call lead."),
                          ("zh-CN", "团队检查 {x}：请与值班负责人确认。")):
        table = rules_dir / "messages" / f"{locale}.yaml"
        extra = "".join(f'  team.check_{x}: "{words.format(x=x)}"\n  warning.TEAM_CHECK_{x.upper()}: "Team {x}"\n'
                        for x in "abcde")
        table.write_text(table.read_text(encoding="utf-8").rstrip("\n") + "\n" + extra, encoding="utf-8")


@pytest.mark.parametrize("locale", ["en", "zh-CN"])
def test_every_warning_reaches_the_summary_the_cli_and_the_mcp_text(
    rules_copy: Path, start_server: Callable[..., Any], capsys: pytest.CaptureFixture[str], locale: str,
) -> None:
    _with_team_warnings(rules_copy)
    running = start_server(rules_copy, watch=False)
    active = running.store.active()
    assert active is not None and {f"team.check-{x}" for x in "abcde"} <= {r.id for r in active.book.program.rules}
    request = load_request(EXAMPLE)
    request.locale = locale
    answer = running.stub.Recommend(request, timeout=60)
    texts = [w.text for w in answer.warnings]
    assert len(texts) >= 6 and sum("TEAM_CHECK_" in w.code for w in answer.warnings) == 5, texts
    assert [t for t in texts if t not in answer.summary] == []
    capsys.readouterr()
    assert cli.main(["recommend", str(EXAMPLE), "--addr", running.addr, "--locale", locale]) == 0
    printed = capsys.readouterr().out
    assert [t for t in texts if t not in printed] == []
    args = {"brief": dict(YAML(typ="safe").load(EXAMPLE.read_text(encoding="utf-8"))), "locale": locale}
    result = run(mcp_server.build_server(running.addr, timeout=30), lambda c: c.call_tool("recommend_gpus", args))
    assert not result.is_error
    assert [t for t in texts if t not in text_of(result)] == []
