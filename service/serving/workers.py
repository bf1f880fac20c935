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

_Job = tuple[futures.Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


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
        job: _Job = (future, fn, args, kwargs)
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
        return future

    def _work(self, inbox: queue.SimpleQueue[_Job | None]) -> None:
        while (job := inbox.get()) is not None:
            future, fn, args, kwargs = job
            outcome: tuple[bool, Any] | None = None
            if future.set_running_or_notify_cancel():
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
            if outcome is not None:
                ok, value = outcome
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            if cancel_futures:
                while True:
                    try:
                        self._backlog.get_nowait()[0].cancel()
                    except queue.Empty:
                        break
            for inbox in self._idle:
                inbox.put(None)
            self._idle.clear()
            threads = list(self._threads)
        if wait:
            for thread in threads:
                thread.join()
