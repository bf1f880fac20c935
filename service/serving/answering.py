"""Where a Recommend answer runs, once admitted: three ways, chosen by `GPU_ADVISOR_ANSWER_ON` (`make bench
BENCH_ARGS=--answer-modes` measures them against each other; docs/benchmarks.md).

- `thread`: a bounded pool whose most recently idle thread works next (`workers.Workers`), through
  `run_in_executor`. The answer and the event loop then take turns at the GIL: the loop wakes for every
  completion-queue event while the answer runs and each turn is a forced switch.
- `queue`: one long-lived answer thread fed by a queue; the result comes back to the loop by one
  `call_soon_threadsafe` per call (no concurrent.futures.Future, no wrap_future). The GIL is still shared.
- `loop`: on the event loop itself, in stages. The answer runs in a greenlet; the servicer's `is_active()`
  checks, which `advise` asks between its stages (sizing, candidates, plan, render), hand the loop back for one
  turn once the answer has run `STAGE_BUDGET_S` since it last did, so a health check waits for at most one stage and
  no thread hand-off happens. A caller that leaves is seen at the next stage, as in a thread.

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
import time
from collections.abc import Callable
from concurrent import futures
from typing import Any

import greenlet

ANSWER_ON_ENV = "GPU_ADVISOR_ANSWER_ON"
MODES = ("loop", "queue", "thread")
DEFAULT_MODE = "loop"
# An answer on the loop hands it back after running this long: about one stage of a typical answer, so the
# loop (health checks, arrivals, refusals) never waits much longer than that, and a 2 ms answer yields once or
# not at all (each turn of the loop costs the answer tens of microseconds).
STAGE_BUDGET_S = 0.001

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
        try:
            work = loop.run_in_executor(self.executor, contextvars.copy_context().run, behavior, request, call)
        except BaseException:
            done()  # not started (the pool is shut down)
            raise
        return await _settled(work, call, done)

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


class _Yield:
    """What the answer's greenlet sends the loop when it gives it a turn."""


_YIELD = _Yield()


class LoopAnswers:
    """`loop`: the answer on the event loop, in stages (a greenlet that gives the loop a turn between them)."""

    def __init__(self) -> None:
        self._stopping: set[asyncio.Task[None]] = set()  # answers whose caller left, running to their next stage

    async def run(self, behavior: Behavior, request: Any, call: Any, done: Callable[[], None]) -> Any:
        answer = _Answer(behavior, parent=greenlet.getcurrent())
        answer.gr_context = contextvars.copy_context()  # the call's log fields (request id) in its log lines
        call.hand_back = _hand_back(answer)
        try:
            sent = answer.switch(request, call)
            while not answer.dead:  # it gave the loop a turn (_YIELD)
                await asyncio.sleep(0)  # one turn: health checks, arrivals, refusals
                sent = answer.switch()
        except asyncio.CancelledError:
            # The caller left between stages: the answer sees it at its next stage and stops, in a task of its
            # own so this call ends now; its slot is free once it has stopped, as a thread's would be.
            call.gone.set()
            task = asyncio.get_running_loop().create_task(_finish(answer, done))
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)
            raise
        except BaseException:
            done()
            raise
        done()
        return sent

    def close(self) -> None:
        return None


class _Answer(greenlet.greenlet):  # type: ignore[misc]
    """A greenlet running one answer on the loop (so `give_turn` knows it is one)."""


async def _finish(answer: Any, done: Callable[[], None]) -> None:
    try:
        while not answer.dead:
            with contextlib.suppress(BaseException):  # its abort (nobody waits for it) or its failure
                answer.switch()
            if not answer.dead:
                await asyncio.sleep(0)
    finally:
        done()


def give_turn() -> None:
    """Inside an answer running on the loop: give the loop one turn now (for work that waits, e.g. tests that
    hold an answer); anywhere else nothing."""
    me = greenlet.getcurrent()
    if isinstance(me, _Answer):
        me.parent.switch(_YIELD)


def _hand_back(answer: Any) -> Callable[[], None]:
    """Called at every stage boundary (CallContext.is_active): give the loop a turn once the answer ran
    `STAGE_BUDGET_S` since it last had one."""
    resumed = [time.perf_counter()]

    def maybe() -> None:
        now = time.perf_counter()
        if now - resumed[0] >= STAGE_BUDGET_S and greenlet.getcurrent() is answer:
            answer.parent.switch(_YIELD)
            resumed[0] = time.perf_counter()

    return maybe


def answers(mode: str, executor: futures.Executor) -> PoolAnswers | QueueAnswers | LoopAnswers:
    if mode == "loop":
        return LoopAnswers()
    if mode == "queue":
        return QueueAnswers()
    return PoolAnswers(executor)
