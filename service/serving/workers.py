"""The threads that compute answers: a bounded pool whose most recently idle thread takes the next job.

Why not `concurrent.futures.ThreadPoolExecutor`: its idle threads all wait on one queue and the one waiting
longest takes the next job, so one answer after another runs on each of its threads in turn. With one answer
running at a time (`--max-concurrent 1`), that moves the work to a cold thread on every call. Here the thread
that just finished is the next to work, and it is marked idle before its result is out, so the job its caller
submits in response finds it. Under h2load, per-thread CPU showed the answers spread over three pool threads
before and on one after; `make bench` measures what it is worth (docs/benchmarks.md).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent import futures
from typing import Any

Outcome = tuple[bool, Any]  # (True, the result) or (False, the exception raised)
# Who hears the outcome: a Future (`submit`), or a function called with it in the worker thread (`run_soon`).
_Job = tuple[futures.Future[Any] | Callable[[Outcome], None], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class Workers(futures.Executor):
    """At most `max_workers` threads, started as needed; jobs beyond them wait in order of submission."""

    def __init__(self, max_workers: int, thread_name_prefix: str = "worker"):
        if max_workers < 1:
            raise ValueError("Workers needs max_workers >= 1")
        self._max, self._prefix = max_workers, thread_name_prefix
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[_Job | None]] = []  # a stack: the last to finish works next
        self._backlog: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._shutdown = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> futures.Future[Any]:
        future: futures.Future[Any] = futures.Future()
        self._put((future, fn, args, kwargs))
        return future

    def run_soon(self, fn: Callable[[], Any], deliver: Callable[[Outcome], None]) -> None:
        """`fn()` in a worker thread, then `deliver(outcome)` from that thread, once it is marked idle: what
        `submit` does without a Future (its lock, its condition and the callbacks that carry its result on).
        `deliver` must not raise. A job still waiting when the pool shuts down with `cancel_futures` hears
        (False, CancelledError())."""
        self._put((deliver, fn, (), {}))

    def _put(self, job: _Job) -> None:
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if self._idle:
                self._idle.pop().put(job)
            elif len(self._threads) < self._max:
                inbox: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
                inbox.put(job)
                thread = threading.Thread(target=self._work, args=(inbox,), daemon=True,
                                          name=f"{self._prefix}_{len(self._threads)}")
                self._threads.append(thread)
                thread.start()
            else:
                self._backlog.put(job)

    def _work(self, inbox: queue.SimpleQueue[_Job | None]) -> None:
        while (job := inbox.get()) is not None:
            target, fn, args, kwargs = job
            outcome: Outcome | None = None
            if not isinstance(target, futures.Future) or target.set_running_or_notify_cancel():
                try:
                    outcome = (True, fn(*args, **kwargs))
                except BaseException as exc:  # noqa: BLE001 - it belongs to whoever awaits the future
                    outcome = (False, exc)
            with self._lock:
                try:
                    inbox.put(self._backlog.get_nowait())
                except queue.Empty:
                    if self._shutdown:
                        inbox.put(None)
                    else:
                        self._idle.append(inbox)
            if outcome is None:
                continue
            if not isinstance(target, futures.Future):
                target(outcome)
            elif outcome[0]:
                target.set_result(outcome[1])
            else:
                target.set_exception(outcome[1])

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            if cancel_futures:
                while True:
                    try:
                        target = self._backlog.get_nowait()[0]
                    except queue.Empty:
                        break
                    if isinstance(target, futures.Future):
                        target.cancel()
                    else:
                        target((False, futures.CancelledError()))
            for inbox in self._idle:
                inbox.put(None)
            self._idle.clear()
            threads = list(self._threads)
        if wait:
            for thread in threads:
                thread.join()
