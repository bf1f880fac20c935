"""MCP over HTTP holds up against one greedy client (issue 26): a client's share of the sessions, a short life for
sessions that never called a tool, and Host/Origin checks off loopback by default. Against a real `gpu-advisor
mcp --transport http` process; outcomes are counted, never timed."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.test_mcp import INITIALIZE, ROOT

TOKEN = "s3cret-token"


@pytest.fixture
def mcp_process(server: Any) -> Iterator[Any]:
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> tuple[str, int]:
        env = {**os.environ, "GPU_ADVISOR_MCP_TOKEN": TOKEN}
        proc = subprocess.Popen([sys.executable, "-m", "service.frontends.cli", "mcp", "--transport", "http",
                                 "--addr", server.addr, *args], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"http://(\S+):(\d+)/mcp", line)
        assert found, line
        return found.group(1), int(found.group(2))

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


def _post(port: int, body: Any, source: str = "127.0.0.1", session: str = "",
          headers: dict[str, str] | None = None) -> tuple[int, str]:
    """→ (status, the session id the answer named)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(source, 0))
    hdrs = {"accept": "application/json, text/event-stream", "content-type": "application/json",
            "authorization": f"Bearer {TOKEN}", **(headers or {})}
    if session:
        hdrs |= {"mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
    try:
        conn.request("POST", "/mcp", body=json.dumps(body), headers=hdrs)
        resp = conn.getresponse()
        resp.read()
        return resp.status, resp.getheader("mcp-session-id") or ""
    finally:
        conn.close()


def _open(port: int, source: str = "127.0.0.1") -> tuple[int, str]:
    status, sid = _post(port, INITIALIZE, source)
    if status == 200:
        assert _post(port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, source, sid)[0] == 202
    return status, sid


def test_one_client_cannot_take_every_session_and_its_unused_ones_expire(mcp_process):
    _host, port = mcp_process("--listen", "127.0.0.1:0", "--max-sessions", "20", "--sessions-per-client", "5",
                              "--unused-session-seconds", "2")
    greedy = [_open(port) for _ in range(8)]
    assert [s for s, _ in greedy] == [200] * 5 + [429] * 3, "a client's share is 5 sessions"
    # Another client still gets in (before: every later client heard 503 for 600 s).
    assert _open(port, source="127.0.0.2")[0] == 200

    # A session that called a tool outlives the unused ones.
    worker = greedy[0][1]
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_gpus", "arguments": {}}}
    assert _post(port, call, session=worker)[0] == 200
    time.sleep(3)  # beyond the unused sessions' 2 s
    again = [_open(port)[0] for _ in range(4)]
    assert again == [200] * 4, "the four unused sessions were closed, giving the client its share back"
    assert _open(port)[0] == 429, "the session that called a tool still counts"
    assert _post(port, call, session=worker)[0] == 200, "and still answers"
    assert _post(port, call, session=greedy[1][1])[0] == 404, "an unused one is gone"


def test_off_loopback_host_and_origin_are_checked_by_default(mcp_process):
    _host, port = mcp_process("--listen", "0.0.0.0:0")
    assert _open(port)[0] == 200  # Host 127.0.0.1:PORT names this machine
    assert _post(port, INITIALIZE, headers={"host": "evil.example:8765"})[0] == 421
    assert _post(port, INITIALIZE, headers={"origin": "http://evil.example"})[0] == 403
    assert _post(port, INITIALIZE, headers={"origin": f"http://127.0.0.1:{port}"})[0] == 200
