"""The MCP server driven by the SDK's own client against a real gRPC server on an ephemeral port: in-process over
memory streams, over streamable HTTP, and as `gpu-advisor mcp` over stdio."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import uvicorn
from google.protobuf.json_format import MessageToDict
from mcp import Client, StdioServerParameters
from ruamel.yaml import YAML

from service.frontends import mcp_server
from service.frontends.cli import load_request
from service.wire.api import pb

ROOT = Path(__file__).parents[1]
BRIEF = ROOT / "examples" / "realtime-70b-fp8.yaml"


def run(server: Any, scenario: Callable[[Client], Awaitable[Any]], **kw: Any) -> Any:
    async def go() -> Any:
        async with Client(server, **kw) as client:
            return await scenario(client)

    return asyncio.run(go())


def brief_args() -> dict[str, Any]:
    # The file as an assistant would send it: plain JSON numbers (MessageToDict would turn int64 into strings).
    return dict(YAML(typ="safe").load(BRIEF.read_text(encoding="utf-8")))


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


@pytest.fixture(scope="module")
def mcp(server: Any) -> Any:
    return mcp_server.build_server(server.addr, timeout=30)


def test_lists_four_tools_with_generated_schemas(mcp: Any) -> None:
    tools = run(mcp, lambda c: c.list_tools(), mode="legacy").tools
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {"recommend_gpus", "list_gpus", "list_models", "list_offers", "explain_recommendation",
                            "list_api_offers"}
    schema = by_name["recommend_gpus"].input_schema
    brief = schema["properties"]["brief"]["properties"]
    # Structure, enum choices, units, bounds and comments all come from the proto (and validate.py's limits).
    assert "WORKLOAD_TYPE_REALTIME_INFERENCE" in brief["workload"]["enum"]
    assert "WORKLOAD_TYPE_UNSPECIFIED" not in brief["workload"]["enum"]
    assert "LoRA" in brief["workload"]["description"]
    params = brief["model"]["properties"]["params_billion"]
    assert params["type"] == "number" and params["x-unit"] == "billion parameters"
    assert params["description"].startswith("total parameters")
    util = brief["economics"]["properties"]["utilization"]
    assert (util["minimum"], util["maximum"]) == (0, 1)
    assert brief["model"]["properties"]["context_tokens"]["type"] == "integer"
    assert brief["economics"]["properties"]["needs_hardware_control"]["type"] == "boolean"
    assert schema["properties"]["locale"]["enum"] == ["en", "zh-CN"]
    assert "include_trace" not in schema["properties"]  # the tools decide that themselves
    assert by_name["explain_recommendation"].input_schema["properties"]["fired_only"]["type"] == "boolean"
    assert by_name["recommend_gpus"].output_schema["properties"]["candidates"]["type"] == "array"


def _walk(desc: Any, schema: dict[str, Any], path: str) -> Iterator[str]:
    for fd in desc.fields:
        assert fd.name in schema["properties"], f"{path}{fd.name} missing from the schema"
        sub = schema["properties"][fd.name]
        if fd.message_type is not None and not fd.message_type.GetOptions().map_entry:
            inner = sub["items"] if fd.is_repeated else sub
            yield from _walk(fd.message_type, inner, f"{path}{fd.name}.")
        else:
            yield path + fd.name


def test_schema_covers_every_field_of_the_contract() -> None:
    # A field added to the proto shows up in the tool's schema with no edit here: nothing is hand-written.
    fields = list(_walk(pb.WorkloadBrief.DESCRIPTOR, mcp_server.request_schema()["properties"]["brief"], ""))
    assert "economics.acceptance_rate" in fields and "model.hidden_size" in fields
    list(_walk(pb.RecommendResponse.DESCRIPTOR, mcp_server.response_schema(), ""))


def test_recommend_returns_a_ranked_answer_with_markdown_and_structure(mcp: Any, stub: Any) -> None:
    args = brief_args()
    result = run(mcp, lambda c: c.call_tool("recommend_gpus", args), mode="legacy")
    assert not result.is_error, text_of(result)
    answer = result.structured_content
    # The client has checked it against the tool's output schema; check it here too, independently.
    jsonschema.Draft202012Validator(mcp_server.response_schema()).validate(answer)
    direct = MessageToDict(stub.Recommend(load_request(BRIEF), timeout=30), preserving_proto_field_name=True)
    assert [(c["gpu"], c["count"]) for c in answer["candidates"]] == [
        (c["gpu"], c["count"]) for c in direct["candidates"]]
    scores = [c["score"] for c in answer["candidates"]]
    assert len(scores) >= 2 and scores == sorted(scores, reverse=True)
    assert answer["route"]["kind"].startswith("ROUTE_KIND_")
    markdown = text_of(result)
    # The service's summary up to its questions, which the text then lists in full (issue 25).
    head = direct["summary"].split("\n- " + direct["questions"][0]["text"])[0] if direct.get("questions") else \
        direct["summary"]
    assert markdown.startswith(head)
    assert answer["candidates"][0]["name"] in markdown


def test_recommend_in_chinese(mcp: Any) -> None:
    args = {**brief_args(), "locale": "zh-CN"}
    result = run(mcp, lambda c: c.call_tool("recommend_gpus", args))  # the SDK's direct in-process mode
    assert not result.is_error
    assert any("\u4e00" <= ch <= "\u9fff" for ch in text_of(result))


def test_thin_brief_carries_questions_an_assistant_can_ask(mcp: Any) -> None:
    args = {"brief": {"workload": "WORKLOAD_TYPE_REALTIME_INFERENCE", "model": {"params_billion": 70}}}
    result = run(mcp, lambda c: c.call_tool("recommend_gpus", args), mode="legacy")
    questions = result.structured_content["questions"]
    first = questions[0]
    assert first["field"] == "model.precision" and first["type"] == "enum"
    assert "PRECISION_FP8" in first["allowed_values"] and first["assumed"] == "PRECISION_BF16"


@pytest.mark.parametrize("locale", ["en", "zh-CN"])
def test_the_markdown_says_each_question_once_in_words(mcp: Any, locale: str) -> None:
    # Issue 16, item 3: the summary's questions, an "Open questions" list and a "Still assumed" list said the same
    # things up to three times, with enum names, [80] priorities and rules/assumptions.yaml.
    args = {"brief": {"workload": "WORKLOAD_TYPE_REALTIME_INFERENCE", "model": {"params_billion": 70}},
            "locale": locale}
    result = run(mcp, lambda c: c.call_tool("recommend_gpus", args), mode="legacy")
    markdown = text_of(result)
    questions = result.structured_content["questions"]
    # Issue 25: every question is in the text (with its field path and choices, for hosts that pass only text),
    # still each said once.
    for q in questions:
        assert markdown.count(q["text"]) == 1, q["text"]
    for raw in ("rules/assumptions.yaml", "[80]", "[90]", ".txt", "Still assumed", "…and"):
        assert raw not in markdown, raw
    if locale == "zh-CN":
        body = markdown.rsplit("(rules", 1)[0]
        # English prose left untranslated; a provider and its region id ("lambda asia-northeast-1") are data
        assert not re.search(r"[A-Za-z]{4,} [a-z]{4,}(?![-\w])", body.replace("NVIDIA", "").replace("AMD", "")), body


def test_list_gpus_matches_the_service(mcp: Any, stub: Any) -> None:
    result = run(mcp, lambda c: c.call_tool("list_gpus", {}), mode="legacy")
    assert not result.is_error
    ids = [g["id"] for g in result.structured_content["gpus"]]
    assert ids == [g.id for g in stub.ListGpus(pb.ListGpusRequest(), timeout=30).gpus]
    table = text_of(result)
    assert all(f"`{i}`" in table for i in ids)


def test_explain_shows_the_rules_behind_the_answer(mcp: Any) -> None:
    async def both(c: Client) -> tuple[Any, Any]:
        fired = await c.call_tool("explain_recommendation", brief_args())
        everything = await c.call_tool("explain_recommendation", {**brief_args(), "fired_only": False})
        return fired, everything

    fired, everything = run(mcp, both, mode="legacy")
    trace = fired.structured_content["trace"]
    assert trace and all(t.get("fired") for t in trace)
    assert all(f"`{t['rule_id']}`" in text_of(fired) for t in trace)
    assert any(t["rule_id"].startswith("routing.") for t in trace)
    idle = [t for t in everything.structured_content["trace"] if not t.get("fired")]
    assert idle and all(t["detail"] for t in idle)
    assert "Rules that did not fire" in text_of(everything)


def test_bad_arguments_become_tool_errors_naming_the_field(mcp: Any) -> None:
    async def calls(c: Client) -> list[Any]:
        return [
            # caught by the generated schema before any call
            await c.call_tool("recommend_gpus", {"brief": {"economics": {"utilization": 2}}}),
            await c.call_tool("recommend_gpus", {"brief": {"modle": {}}}),
            # well-formed JSON the service itself rejects (INVALID_ARGUMENT with a BadRequest)
            await c.call_tool("recommend_gpus", {"brief": {"workload": "WORKLOAD_TYPE_NOTEBOOK"},
                                                 "as_of": "2026-13-45",
                                                 "quotes": [{"gpu": "h100-sxm", "as_of": "yesterday"}]}),
        ]

    out = run(mcp, calls, mode="legacy")
    assert all(r.is_error for r in out)
    assert "brief.economics.utilization" in text_of(out[0])
    assert "modle" in text_of(out[1])
    # every field the service's BadRequest names, one per line
    assert "\nas_of: must be a date" in text_of(out[2]) and "\nquotes[0].as_of: must be a date" in text_of(out[2])


def test_unreachable_service_is_a_tool_error_not_a_crash() -> None:
    dead = mcp_server.build_server("127.0.0.1:1", timeout=5)
    result = run(dead, lambda c: c.call_tool("list_gpus", {}), mode="legacy")
    assert result.is_error and "no GPU Advisor service at 127.0.0.1:1" in text_of(result)


def test_prompt_walks_through_the_brief(mcp: Any) -> None:
    async def go(c: Client) -> tuple[Any, Any]:
        return await c.list_prompts(), await c.get_prompt("gpu_brief", {"need": "serve a 70B model for my team",
                                                                          "locale": "zh-CN"})

    listed, got = run(mcp, go, mode="legacy")
    assert [p.name for p in listed.prompts] == ["gpu_brief"]
    text = got.messages[0].content.text
    assert "serve a 70B model for my team" in text and "recommend_gpus" in text and '"zh-CN"' in text
    assert "priority" in text and "economics" in text


def test_streamable_http(server: Any) -> None:
    sock = mcp_server.bind("127.0.0.1:0")
    port = sock.getsockname()[1]
    web = uvicorn.Server(uvicorn.Config(mcp_server.http_app(server.addr, 30, "127.0.0.1"), log_level="warning"))
    thread = threading.Thread(target=lambda: asyncio.run(web.serve(sockets=[sock])), daemon=True)
    thread.start()
    try:
        async def go(c: Client) -> tuple[Any, Any]:
            return await c.list_tools(), await c.call_tool("recommend_gpus", brief_args())

        listed, result = run(f"http://127.0.0.1:{port}/mcp", go)
        assert len(listed.tools) == 6  # issue 35 added list_api_offers
        assert not result.is_error and result.structured_content["candidates"]
    finally:
        web.should_exit = True
        thread.join(timeout=10)
        sock.close()
    assert not thread.is_alive()


def test_cli_serves_stdio(server: Any) -> None:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "service.frontends.cli", "mcp", "--addr", server.addr],
                                   cwd=str(ROOT))
    result = run(params, lambda c: c.call_tool("recommend_gpus", brief_args()))
    assert not result.is_error and result.structured_content["candidates"]


def test_cli_serves_streamable_http(server: Any) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "service.frontends.cli", "mcp", "--transport", "http", "--listen", "127.0.0.1:0",
         "--addr", server.addr], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # "... streamable HTTP on http://127.0.0.1:PORT/mcp, service at ..."
        url = re.search(r"http://\S+/mcp", line)
        assert url, line
        result = run(url.group(0), lambda c: c.call_tool("list_gpus", {}))
        assert not result.is_error and result.structured_content["gpus"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_list_models_filters_like_the_service(mcp: Any, stub: Any) -> None:
    result = run(mcp, lambda c: c.call_tool("list_models", {"kind": "MODEL_KIND_EMBEDDING"}), mode="legacy")
    assert not result.is_error
    ids = [m["id"] for m in result.structured_content["models"]]
    served = stub.ListModels(pb.ListModelsRequest(kind=pb.MODEL_KIND_EMBEDDING), timeout=30).models
    assert ids == [m.id for m in served] and "bge-m3" in ids and "llama-3.3-70b-instruct" not in ids
    assert all(f"`{i}`" in text_of(result) for i in ids)


def test_list_api_offers_lists_what_the_service_lists(mcp: Any, stub: Any) -> None:
    args = {"model": "llama-3.1-8b-instruct", "country": "US"}
    result = run(mcp, lambda c: c.call_tool("list_api_offers", args), mode="legacy")
    assert not result.is_error
    got = [(o["provider"], o["model"]) for o in result.structured_content["offers"]]
    served = stub.ListApiOffers(pb.ListApiOffersRequest(**args), timeout=30).offers
    assert got == [(o.provider, o.model) for o in served] and got
    assert all(o.country == "US" for o in served)
    assert "$/1M in" in text_of(result) and all(provider in text_of(result) for provider, _ in got)


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}}


def _post(url: str, headers: dict[str, str] | None = None) -> int:
    """An initialize request's HTTP status (the response body is not read past the status)."""
    hdrs = {"accept": "application/json, text/event-stream", "content-type": "application/json", **(headers or {})}
    req = urllib.request.Request(url, data=json.dumps(INITIALIZE).encode(), headers=hdrs, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code


def _http_in_thread(app: Any) -> tuple[str, Callable[[], None]]:
    sock = mcp_server.bind("127.0.0.1:0")
    port = sock.getsockname()[1]
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=lambda: asyncio.run(web.serve(sockets=[sock])), daemon=True)
    thread.start()

    def stop() -> None:
        web.should_exit = True
        thread.join(timeout=10)
        sock.close()

    return f"http://127.0.0.1:{port}/mcp", stop


def test_http_needs_the_bearer_token_checks_host_and_caps_sessions(server: Any) -> None:
    from service.frontends.mcp_http import HttpAccess

    access = HttpAccess(token="s3cret", allowed_hosts=("127.0.0.1:*",), max_sessions=2, session_idle_seconds=1.0)
    url, stop = _http_in_thread(mcp_server.http_app(server.addr, 30, "0.0.0.0", access))
    auth = {"authorization": "Bearer s3cret"}
    try:
        assert _post(url) == 401
        assert _post(url, {"authorization": "Bearer wrong"}) == 401
        assert _post(url, {**auth, "host": "evil.example:8765"}) == 421  # DNS rebinding: Host not allowed
        # Two sessions, then refused: by this client's share, which is the whole cap here (429; 503 at the cap).
        assert [_post(url, auth) for _ in range(3)] == [200, 200, 429]
        # An idle session is closed after its time: a new one opens again.
        end = time.monotonic() + 30
        while _post(url, auth) != 200:
            assert time.monotonic() < end, "idle sessions were never closed"
            time.sleep(0.5)
    finally:
        stop()


def test_off_loopback_without_a_token_the_cli_refuses_to_start(server: Any) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_ADVISOR_MCP_TOKEN")}
    out = subprocess.run(
        [sys.executable, "-m", "service.frontends.cli", "mcp", "--transport", "http", "--listen", "0.0.0.0:0",
         "--addr", server.addr], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "needs a bearer token" in out.stderr


def test_mcp_reaches_a_tls_only_service_with_the_tls_settings(start_server, tmp_path: Path) -> None:
    from service.serving.credentials import channel_credentials, server_credentials
    from tests.test_serving import Pki

    pki = Pki(tmp_path)
    running = start_server(ROOT / "rules", watch=False, tls=server_credentials(pki.server_cert, pki.server_key, None))
    creds = channel_credentials(pki.ca, None, None)
    result = run(mcp_server.build_server(running.addr, 30, creds), lambda c: c.call_tool("list_gpus", {}))
    assert not result.is_error and result.structured_content["gpus"]
    # The command, from GPU_ADVISOR_TLS_CA as the brief says, over stdio.
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "service.frontends.cli", "mcp", "--addr", running.addr],
                                   env={**os.environ, "GPU_ADVISOR_TLS_CA": pki.ca}, cwd=str(ROOT))
    result = run(params, lambda c: c.call_tool("list_gpus", {}))
    assert not result.is_error and result.structured_content["gpus"]


def test_recommend_with_charts_returns_the_break_even_as_a_png_image(mcp: Any, stub: Any) -> None:
    """Issue 43: asked for charts, the tool returns the break-even chart as an image block beside its text; it
    decodes to the PNG `--chart` draws from the same answer. Without include_charts there is no image."""
    import base64

    from service.frontends.chart_files import render

    async def both(c: Client) -> tuple[Any, Any]:
        return (await c.call_tool("recommend_gpus", {**brief_args(), "include_charts": True}),
                await c.call_tool("recommend_gpus", brief_args()))

    charted, plain = run(mcp, both, mode="legacy")
    assert not charted.is_error
    images = [c for c in charted.content if c.type == "image"]
    assert len(images) == 1 and images[0].mime_type == "image/png"
    png = base64.b64decode(images[0].data)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    request = load_request(BRIEF)
    request.include_charts = True
    resp = stub.Recommend(request, timeout=60)
    expected, _ = render([c for c in resp.charts if c.kind == pb.CHART_KIND_BREAK_EVEN], "png", list(resp.candidates))
    assert png == expected
    assert text_of(charted) == text_of(plain)  # the text is the same answer's
    assert charted.structured_content["charts"][0]["kind"] == "CHART_KIND_BREAK_EVEN"
    assert not [c for c in plain.content if c.type == "image"] and "charts" not in plain.structured_content
