"""MCP for hosts that hand the model only a tool result's text (issue 25), with the official SDK's client: the
README's config (what `make mcp-config` prints: an absolute command) started from another working directory, and
a recommend_gpus result whose text alone carries every open question with its field path, allowed values and the
assumption in words; zh-CN answers name their question units in Chinese."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).parents[1]
README_ADDR = "127.0.0.1:50051"
THIN = {"brief": {"workload": "WORKLOAD_TYPE_REALTIME_INFERENCE", "model": {"params_billion": 70}}}
CJK = re.compile(r"[\u4e00-\u9fff]")


def _readme_config() -> dict[str, Any]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Chat assistants (MCP)", 1)[1]
    block = re.search(r"```\n(.*?)```", section, re.S).group(1)
    assert "make mcp-config" in block
    return json.loads(next(line for line in block.splitlines() if line.startswith("{")))


def _printed_config(addr: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(["make", "-s", "mcp-config"], cwd=ROOT, env={**env, "GPU_ADVISOR_ADDR": addr},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _call(params: StdioServerParameters, name: str, args: dict[str, Any]) -> Any:
    async def go() -> Any:
        async with Client(params) as client:
            return await client.call_tool(name, args)

    return asyncio.run(go())


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


def test_readme_config_works_from_another_directory(server: Any, tmp_path: Path):
    readme = _readme_config()["mcpServers"]["gpu-advisor"]
    printed = _printed_config(server.addr)["mcpServers"]["gpu-advisor"]
    # The README shows the printed form: an absolute path to this checkout's command, the same arguments.
    assert Path(readme["command"]).is_absolute() and readme["command"].endswith("/.venv/bin/gpu-advisor")
    assert printed["command"] == str(ROOT / ".venv" / "bin" / "gpu-advisor")
    assert printed["args"] == [a.replace(README_ADDR, server.addr) for a in readme["args"]]
    elsewhere = tmp_path / "chat-app"
    elsewhere.mkdir()
    params = StdioServerParameters(command=printed["command"], args=printed["args"], cwd=str(elsewhere))
    result = _call(params, "recommend_gpus", THIN)
    assert not result.is_error, _text(result)
    _every_question_in_the_text(_text(result), result.structured_content["questions"])


def _every_question_in_the_text(text: str, questions: list[dict[str, Any]]) -> None:
    assert len(questions) > 5  # more than the summary's first few
    lines = {q["field"]: next((ln for ln in text.splitlines() if f"`{q['field']}`" in ln), "") for q in questions}
    for q in questions:
        line = lines[q["field"]]
        assert line, f"{q['field']} is not in the text"
        assert q["text"] in line
        for value in q.get("allowed_values", []):
            assert value in line, (value, line)
        if q.get("unit"):
            assert q["unit"] in line, line
        if q.get("assumed"):
            assert q["assumed"] in line or re.search(r"\(0\)|0（|taken as|按“", line), line
    # a zero is said in words ("no target (0)", "0（无目标）"), never as a bare '0'
    assert not re.search(r"(?i)(assumed[^.\n]*|假设)[:：]\s*'?0'?[.。]", text), text


@pytest.mark.parametrize("locale", ["en", "zh-CN"])
def test_text_alone_carries_every_question(server: Any, tmp_path: Path, locale: str):
    printed = _printed_config(server.addr)["mcpServers"]["gpu-advisor"]
    params = StdioServerParameters(command=printed["command"], args=printed["args"], cwd=str(tmp_path))
    result = _call(params, "recommend_gpus", {**THIN, "locale": locale})
    text, questions = _text(result), result.structured_content["questions"]
    _every_question_in_the_text(text, questions)
    assert "no target (0)" in text if locale == "en" else "0（无目标）" in text


def test_zh_cn_question_units_are_chinese(stub: Any):
    from google.protobuf.json_format import MessageToDict, ParseDict

    from service.wire.api import pb

    briefs = [THIN["brief"], {"workload": "WORKLOAD_TYPE_PRETRAINING", "model": {"params_billion": 7}}]
    units = []
    for brief in briefs:
        req = ParseDict({"brief": brief, "locale": "zh-CN"}, pb.RecommendRequest())
        answer = MessageToDict(stub.Recommend(req, timeout=30), preserving_proto_field_name=True)
        units += [q["unit"] for q in answer["questions"] if q.get("unit")]
    assert len(units) >= 5
    english = [u for u in units if re.search(r"[a-z]{3,}", u) and not CJK.search(u)]
    assert english == [] or set(english) <= {"token"}, english


def test_zh_cn_purchase_sources_are_chinese(stub: Any):
    """A catalog price row's `source_zh-CN` is what a zh-CN answer says (issue 25: no English prose there)."""
    from google.protobuf.json_format import MessageToDict

    from service.frontends.brief_file import load_request

    sources = []
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        req = load_request(path)
        req.locale, req.max_candidates = "zh-CN", 50
        answer = MessageToDict(stub.Recommend(req, timeout=30), preserving_proto_field_name=True)
        sources += [c["ownership"]["purchase_source"] for c in answer.get("candidates", [])
                    if c.get("ownership", {}).get("purchase_source")]
    assert len(sources) > 10
    assert all(CJK.search(s) for s in sources), [s for s in sources if not CJK.search(s)][:3]
