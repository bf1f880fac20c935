"""Log lines leave the request thread through one writer thread: all of them, in order, and at exit."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import structlog

from service.serving import logging as service_logging


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch):
    buffer = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buffer)
    service_logging.configure("INFO", pid=True)
    yield buffer
    service_logging.flush()
    monkeypatch.undo()
    service_logging.configure()  # as conftest has it, for the tests after this one


def test_every_line_from_many_threads_arrives_whole_and_in_each_threads_order(captured: io.StringIO):
    log = structlog.get_logger("test")

    def burst(t: int) -> None:
        for i in range(500):
            log.info("line", thread=t, i=i)

    threads = [threading.Thread(target=burst, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    service_logging.flush()
    # Every line must be whole JSON. Only this test's lines are counted: a server another test in this process
    # left finishing a call may log its "rpc" line into the same stderr meanwhile (seen once under xdist).
    rows = [r for r in (json.loads(x) for x in captured.getvalue().splitlines()) if r.get("event") == "line"]
    assert len(rows) == 2000
    for t in range(4):
        assert [r["i"] for r in rows if r["thread"] == t] == list(range(500))
    assert all(r["pid"] > 0 for r in rows)


def test_lines_logged_just_before_exit_are_written():
    code = (
        "import structlog\n"
        "from service.serving.logging import configure\n"
        "configure('INFO')\n"
        "log = structlog.get_logger('t')\n"
        "for i in range(200):\n"
        "    log.info('bye', i=i)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[1], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert [json.loads(x)["i"] for x in out.stderr.splitlines()] == list(range(200))
