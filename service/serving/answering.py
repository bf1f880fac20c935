"""Where a Recommend answer runs, once admitted: three ways, chosen by `GPU_ADVISOR_ANSWER_ON` (default
`thread`); `make bench BENCH_ARGS=--answer-modes` measures them against each other (docs/benchmarks.md).

- `thread`: a bounded pool whose most recently idle thread works next (`workers.Workers`, its `run_soon`;
  another executor through `run_in_executor`). The answer and the event loop then take turns at the GIL: the
  loop wakes for every completion-queue event while the answer runs and each turn is a forced switch.
- `queue`: one long-lived answer thread fed by a queue; the result comes back to the loop by one
  `call_soon_threadsafe` per call (no concurrent.futures.Future, no wrap_future). The GIL is still shared.
- `loop`: on the event loop itself, in stages, no thread (`loop_answers.py`, needs greenlet).

Each keeps what the asyncio server bought: waiting calls wait on the loop, an open stream holds no thread, a
call that went away before its turn is never started, and the drain counts the call until its answer is done.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from concurrent import futures
from typing import Any

ANSWER_ON_ENV = "GPU_ADVISOR_ANSWER_ON"
MODES = ("loop", "queue", "thread")
# Measured against each other (docs/benchmarks.md, Where the answer runs): none cut the server's CPU per
# Recommend measurably on this shared machine, and the loop either let health wait behind stages under a flood
# or cost more CPU and latency once it gave the loop enough turns. The pool stays.
DEFAULT_MODE = "thread"

Behavior = Callable[[Any, Any], Any]


def mode_from_env() -> str:
    mode = os.environ.get(ANSWER_ON_ENV, "").strip().lower() or DEFAULT_MODE
    if mode not in MODES:
        raise ValueError(f"{ANSWER_ON_ENV} must be one of {', '.join(MODES)} (got {mode!r})")
    return mode


class PoolAnswers:
    """`thread`: the answers on an executor's threads."""

    def __init__(self, executor: futures.Executor):
        self.executor = executor

    async def run(self, behavior: Behavior, request: Any, call: Any, done: Callable[[], None]) -> Any:
        loop = asyncio.get_running_loop()
        run_soon = getattr(self.executor, "run_soon", None)
        if run_soon is None:  # another executor: through concurrent.futures
            try:
                work = loop.run_in_executor(self.executor, contextvars.copy_context().run, behavior, request, call)
            except BaseException:
                done()  # not started (the pool is shut down)
                raise
            return await _settled(work, call, done)
        # `Workers`: one loop future, settled by one call_soon_threadsafe from the answer's thread, where
        # run_in_executor makes a concurrent Future, wraps it in a loop future, and the wait shields it in a third.
        result: asyncio.Future[Any] = loop.create_future()
        context = contextvars.copy_context()

        def deliver(outcome: tuple[bool, Any]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile (server stopped): nobody waits
                loop.call_soon_threadsafe(_finish, result, outcome, done)

        try:
            run_soon(lambda: context.run(behavior, request, call), deliver)
        except BaseException:
            done()  # not started (the pool is shut down)
            raise
        try:
            return await result
        except asyncio.CancelledError:
            # The caller left: the answer stops at its next stage; `done` frees the slot only when it has.
            call.gone.set()
            raise

    def close(self) -> None:
        return None


class QueueAnswers:
    """`queue`: one answer thread, started on first use, fed by a queue; one call_soon_threadsafe per answer."""

    def __init__(self) -> None:
        self._inbox: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    async def run(self, behavior: Behavior, request: Any, call: Any, done: Callable[[], None]) -> Any:
        loop = asyncio.get_running_loop()
        result: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="answer", daemon=True)
                self._thread.start()
        self._inbox.put((loop, result, contextvars.copy_context(), behavior, request, call))
        return await _settled(result, call, done)

    def _work(self) -> None:
        while (job := self._inbox.get()) is not None:
            loop, result, context, behavior, request, call = job
            try:
                outcome = (True, context.run(behavior, request, call))
            except BaseException as exc:  # noqa: BLE001 - it belongs to the call that awaits it
                outcome = (False, exc)
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile (server stopped): nobody waits
                loop.call_soon_threadsafe(_settle, result, outcome)

    def close(self) -> None:
        self._inbox.put(None)


def _finish(result: asyncio.Future[Any], outcome: tuple[bool, Any], done: Callable[[], None]) -> None:
    done()
    _settle(result, outcome)


def _settle(result: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if result.cancelled():
        return
    ok, value = outcome
    if ok:
        result.set_result(value)
    else:
        result.set_exception(value)


async def _settled(work: asyncio.Future[Any], call: Any, done: Callable[[], None]) -> Any:
    # The slot is free when the answer is done, not when the caller leaves: it stops at its next stage, and
    # until then it still holds the GIL and its thread.
    work.add_done_callback(lambda _f: done())
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        call.gone.set()
        raise


def answers(mode: str, executor: futures.Executor) -> Any:  # noqa: ANN401 - one of the three
    if mode == "loop":
        try:
            from .loop_answers import LoopAnswers  # needs greenlet (the dev extras), only in this mode
        except ImportError as missing:
            raise ValueError(f"{ANSWER_ON_ENV}=loop needs greenlet (pip install greenlet): {missing}") from None
        return LoopAnswers()
    if mode == "queue":
        return QueueAnswers()
    return PoolAnswers(executor)
