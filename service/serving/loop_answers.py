"""`GPU_ADVISOR_ANSWER_ON=loop` (service/serving/answering.py): a Recommend answer on the event loop itself, in
stages. The answer runs in a greenlet; the servicer's `is_active()` checks, which `advise` asks between its
stages (sizing, candidates, plan, render), hand the loop back for `TURN_STEPS` steps once the answer has run
`STAGE_BUDGET_S` since it last did, so no thread hand-off happens and a health check waits behind one stage.
A stage that blocks holds the whole server (health included), which a thread would not. greenlet is in the
dev extras: the bench and the tests use this mode, the server ships with the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Callable
from typing import Any

import greenlet

Behavior = Callable[[Any, Any], Any]

# An answer on the loop hands it back after running this long, about one stage of a typical answer.
STAGE_BUDGET_S = 0.001
# Steps of the loop per turn. A health check needs several (its arrival, metadata, the read, the reply), each
# a completion event; with one step per turn it waited behind several stages under a 25-connection flood
# (health p99 321 ms against 87 ms with answers in a thread); with 8, 86 ms against 120 ms in one sitting, but
# Recommend cost more CPU (make bench BENCH_ARGS=--overload and --answer-modes, docs/benchmarks.md).
TURN_STEPS = 8


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
                for _ in range(TURN_STEPS):  # health checks, arrivals, refusals: a call needs several steps
                    await asyncio.sleep(0)
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
