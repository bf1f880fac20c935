"""Trace and explain at 50,000 offers (issue 26): the offer facts' trace is summarised (one entry per rule and
outcome over the scopes, not one per scope), so an answer with its trace stays under the size cap; `explain` and
the MCP explain_recommendation tool work. Before, such answers were 3.2 MB and came back INTERNAL. A real server
process on the bench's 50,000-row synthetic table."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from service.bench.offers_scale import SYNTHETIC_ROWS, _rules_with, _synthetic
from service.frontends import cli, mcp_server
from service.wire.api import pb_grpc
from service.wire.validate import MAX_ANSWER_BYTES
from tests.test_hostile_clients import stop
from tests.test_mcp import brief_args
from tests.test_server import good_request
from tests.test_serving import REPO, log_events


@pytest.fixture(scope="module")
def big_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    rules, what = _rules_with(_synthetic)
    assert f"{SYNTHETIC_ROWS:,}" in what
    # The rule tests pin answers to the shipped prices, which the synthetic rows undercut: not what is tested here.
    shutil.rmtree(rules / "tests")
    log = tmp_path_factory.mktemp("big") / "server.log"
    env = {**os.environ, "GPU_ADVISOR_ADDR": "127.0.0.1:0", "GPU_ADVISOR_LOG_LEVEL": "INFO", "PYTHONPATH": str(REPO),
           "GPU_ADVISOR_RULES_LOAD_TIMEOUT": "150"}  # vetting 50,000 rows takes long on a busy machine
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "service", "--no-watch", "--rules", str(rules)], cwd=REPO,
                                env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        addr = ""
        end = time.monotonic() + 400
        while not addr and time.monotonic() < end and proc.poll() is None:
            addr = next((f"127.0.0.1:{e['port']}" for e in log_events(log) if e.get("event") == "serving"), "")
            time.sleep(0.2)
        assert addr, log.read_text()[-3000:]
        started = [e for e in log_events(log) if e.get("event") == "rules_invalid_at_start"]
        assert not started, started
        yield addr
    finally:
        stop(proc)
        shutil.rmtree(rules.parent, ignore_errors=True)


def test_an_answer_with_its_trace_summarises_the_offer_scopes(big_server: str):
    request = good_request()
    request.include_trace = True
    with grpc.insecure_channel(big_server, options=[("grpc.max_receive_message_length", 64 << 20)]) as channel:
        answer = pb_grpc.GpuAdvisorStub(channel).Recommend(request, timeout=120)
    assert answer.candidates and answer.ByteSize() < MAX_ANSWER_BYTES
    offers = [t for t in answer.trace if t.fact.startswith("offer")]
    assert offers, "the offer rules' trace is there"
    assert all(" of " in t.fact and "(e.g. " in t.detail for t in offers), offers[:3]
    # Every scope is accounted for once per rule: the counts of one rule's entries add up to all the scopes.
    per_rule: dict[str, int] = {}
    for t in offers:
        counted, total = (int(x.replace(",", "")) for x in t.fact.split("(")[1].rstrip(")").split(" of "))
        per_rule[t.rule_id] = per_rule.get(t.rule_id, 0) + counted
    assert len(set(per_rule.values())) == 1 and next(iter(per_rule.values())) == total > 1000, per_rule


def test_explain_works_at_50000_offers(big_server: str, capsys: pytest.CaptureFixture[str]):
    assert cli.main(["explain", str(REPO / "examples" / "realtime-70b-fp8.yaml"), "--addr", big_server,
                     "--timeout", "120"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Answer") and "Not fired (" in out


def test_the_mcp_explain_tool_works_at_50000_offers(big_server: str):
    from mcp import Client

    async def go() -> Any:
        async with Client(mcp_server.build_server(big_server, timeout=120), mode="legacy") as client:
            return await client.call_tool("explain_recommendation", {**brief_args(), "fired_only": False})

    result = asyncio.run(go())
    assert not result.is_error, result.content
    assert any(t["fact"].startswith("offer") for t in result.structured_content["trace"])
