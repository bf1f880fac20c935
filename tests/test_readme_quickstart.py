"""The README's quick start works as written (issue 25): its first block's `make run` serves (here on an ephemeral
port of 127.0.0.1, set through GPU_ADVISOR_ADDR as the README says), and the commands under "Ask it" answer with
the summary when 127.0.0.1:50051 is replaced by that address, as the README tells a reader who moved it: the
`buf curl` line, the grpcurl block (where grpcurl is installed) and the CLI line."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
README_ADDR = "127.0.0.1:50051"


def _blocks(text: str) -> list[str]:
    return re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M)


def _ask_section() -> str:
    text = README.read_text(encoding="utf-8")
    return text.split("## Ask it", 1)[1].split("\n## ", 1)[0]


def _clean_env(**extra: str) -> dict[str, str]:
    # A `make` started from `make test` must not inherit its jobserver or level.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    return {**env, **extra}


@pytest.fixture(scope="module")
def quick_start_addr() -> Iterator[str]:
    """The README's first block: `make run`, with GPU_ADVISOR_ADDR=127.0.0.1:0 (the port it got is in its log)."""
    first = _blocks(README.read_text(encoding="utf-8"))[0]
    commands = [line.split("#")[0].strip() for line in first.splitlines()]
    assert "make run" in commands
    assert "GPU_ADVISOR_ADDR" in README.read_text(encoding="utf-8").split("## ", 1)[0]
    if subprocess.run(["make", "-q", "venv", "gen"], cwd=ROOT, env=_clean_env()).returncode != 0:
        pytest.fail("the environment is out of date: run `make venv gen` (make test does)", pytrace=False)
    proc = subprocess.Popen(["make", "run"], cwd=ROOT, env=_clean_env(GPU_ADVISOR_ADDR="127.0.0.1:0"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        port, deadline, seen = None, time.monotonic() + 120, []
        assert proc.stdout is not None
        while port is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if '"event": "serving"' in line:
                port = json.loads(line)["port"]
        assert port, "make run did not serve:\n" + "".join(seen[-20:])
        yield f"127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _run(command: str, addr: str) -> str:
    done = subprocess.run(["bash", "-o", "pipefail", "-c", command.replace(README_ADDR, addr)], cwd=ROOT,
                          env=_clean_env(GPU_ADVISOR_ADDR=addr), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{command}\n{done.stderr[-2000:]}"
    return done.stdout


def _is_summary(out: str) -> None:
    # The summary as text: markdown lines, not one escaped JSON string.
    assert out.strip() and not out.lstrip().startswith("{") and "\\n" not in out, out[:500]
    assert "Top pick" in out or "Route:" in out, out[:500]


@pytest.mark.skipif(shutil.which("jq") is None, reason="the README pipes through jq")
def test_buf_curl_line_prints_the_summary(quick_start_addr: str):
    lines = [ln for b in _blocks(_ask_section()) for ln in b.splitlines() if ln.startswith(".venv/bin/buf curl")]
    assert len(lines) == 1, lines
    assert "--protocol grpc" in lines[0] and "--http2-prior-knowledge" in lines[0]
    _is_summary(_run(lines[0], quick_start_addr))


@pytest.mark.skipif(shutil.which("grpcurl") is None or shutil.which("jq") is None, reason="grpcurl is not installed")
def test_grpcurl_block_prints_the_summary(quick_start_addr: str):
    block = next(b for b in _blocks(_ask_section()) if b.startswith("grpcurl"))
    _is_summary(_run(block, quick_start_addr))


def test_cli_line_prints_the_summary(quick_start_addr: str):
    # The line the README points to instead of JSON; the CLI takes the address from GPU_ADVISOR_ADDR.
    section = _ask_section()
    command = re.search(r"`(\.venv/bin/gpu-advisor recommend [^`]+)`", section)
    assert command, "the Ask it section points at the CLI"
    _is_summary(_run(command.group(1), quick_start_addr))


def test_first_screen_says_make_dev_before_buf_curl_and_the_offline_way():
    """Issue 37 item 9: the reader meets `make dev` (which puts buf in .venv) before the `buf curl` line, both on
    the first screen, and learns what to do where grpcurl's GitHub releases cannot be reached."""
    lines = README.read_text(encoding="utf-8").splitlines()
    first_screen = lines[:40]
    dev = next(i for i, ln in enumerate(first_screen) if ln.strip().split("#")[0].strip() == "make dev")
    buf = next(i for i, ln in enumerate(first_screen) if ln.startswith(".venv/bin/buf curl"))
    assert dev < buf
    ask = _ask_section()
    assert "offline" in ask and "grpcurl" in ask
    done = subprocess.run(["make", "-n", "dev"], cwd=ROOT, env=_clean_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr  # the target the README names exists
