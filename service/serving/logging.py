"""structlog set-up: JSON lines for machines, a readable console on a terminal.

The level comes from `--log-level` or GPU_ADVISOR_LOG_LEVEL (default INFO).

Lines are written by one background thread, not by the thread that logs. A write is a system call that releases
the GIL, and while the rule engine keeps the other threads busy, getting the GIL back costs a whole switch
interval (5 ms): under load, one flushed line per call cost more than the answer itself. The request thread now
only queues the rendered line; the writer drains whatever has piled up in one write. After a line wakes it, the
writer waits `LINGER_S` for the lines behind it: a queued line then costs its caller an append, not a wake-up of
the writer, which wanted the GIL back from the running answer for each line (a served process under the bench's
load: the writer's context switches per Recommend 4.7 -> 1.0-1.6, per health check 3.1-4.9 -> 0.4). A line goes
out at most that late, and every queued line is written at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import sys
import threading
import time
from typing import Any, TextIO

import structlog

LINGER_S = 0.02  # the longest a line waits for others before it is written


class _Writer:
    """One daemon thread writing queued lines to `file` (re-pointed by each `configure`)."""

    def __init__(self) -> None:
        self.file: TextIO = sys.stderr
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def put(self, line: str) -> None:
        if self._thread is None:
            self._start()
        self._queue.put(line)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="log-writer", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            lines = [self._queue.get()]
            if lines[0] is not None:
                # Let a busy server's next lines pile up before the write (they cost the caller an append, not a
                # wake-up of this thread, which then wants the GIL back from the running answer).
                time.sleep(LINGER_S)
            with contextlib.suppress(queue.Empty):
                while len(lines) < 1000:
                    lines.append(self._queue.get_nowait())
            done = None in lines
            self._write([x for x in lines if x is not None])
            if done:
                return

    def _write(self, lines: list[str]) -> None:
        if not lines:
            return
        try:
            self.file.write("\n".join(lines) + "\n")
            self.file.flush()
        except (OSError, ValueError):  # a closed or broken stream (a test's capture, a gone pipe): drop, go on
            pass

    def close(self) -> None:
        """Write everything queued so far and stop the thread (at exit)."""
        thread = self._thread
        if thread is None:
            return
        self._queue.put(None)
        thread.join(timeout=5)
        self._thread = None

    def after_fork(self) -> None:
        # A forked child has the queue but not the thread: start afresh there (lines queued before the fork
        # belong to the parent, which writes them).
        self._queue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread = None


_WRITER = _Writer()
atexit.register(_WRITER.close)
os.register_at_fork(after_in_child=_WRITER.after_fork)


class _QueuedLogger:
    """structlog's PrintLogger interface, queuing instead of printing."""

    def msg(self, message: str) -> None:
        _WRITER.put(message)

    log = debug = info = warn = warning = msg
    fatal = failure = err = error = critical = exception = msg


def _logger_factory(*_args: Any) -> _QueuedLogger:
    return _QueuedLogger()


def flush() -> None:
    """Write every line logged so far (tests and shutdown; the writer thread starts again on the next line)."""
    _WRITER.close()


def _add_pid(_logger: object, _method: str, event: dict[str, object]) -> dict[str, object]:
    event["pid"] = os.getpid()
    return event


def configure(level: str | None = None, pid: bool = False) -> None:
    """`pid`: add the process id to every line (the `--processes N` workers share one log stream)."""
    name = (level or os.environ.get("GPU_ADVISOR_LOG_LEVEL", "INFO")).upper()
    numeric = getattr(logging, name, logging.INFO)
    # A person at a terminal reads colours and columns; a collector (kubectl logs, journald) parses JSON.
    renderer = (structlog.dev.ConsoleRenderer() if sys.stderr.isatty()
                else structlog.processors.JSONRenderer(ensure_ascii=False))
    _WRITER.file = sys.stderr
    structlog.configure(
        processors=[
            *([_add_pid] if pid else []),
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=_logger_factory,
        # Loggers are module-level and configured once per process: resolve the chain once, not per line.
        cache_logger_on_first_use=True,
    )
