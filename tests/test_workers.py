"""The answers' thread pool (service/serving/workers.py): bounded, in order, and the thread that just finished
takes the next job."""

from __future__ import annotations

import threading
import time

import pytest

from service.serving.workers import Workers


def test_results_and_exceptions_reach_the_future():
    with Workers(2) as pool:
        assert pool.submit(lambda a, b=0: a + b, 2, b=3).result(timeout=10) == 5
        with pytest.raises(ZeroDivisionError):
            pool.submit(lambda: 1 / 0).result(timeout=10)
        assert pool.submit(lambda: "still works").result(timeout=10) == "still works"


def test_one_job_after_another_runs_on_the_same_thread():
    # ThreadPoolExecutor hands consecutive jobs to its threads in turn once it has several idle ones.
    with Workers(4) as pool:
        release = threading.Event()
        blocked = [pool.submit(release.wait, 10) for _ in range(4)]  # all four threads started
        release.set()
        assert all(f.result(timeout=10) for f in blocked)
        seen = {pool.submit(threading.get_ident).result(timeout=10) for _ in range(50)}
    assert len(seen) == 1


def test_never_more_threads_than_the_bound_and_the_rest_wait():
    running, most = 0, 0
    lock, gate = threading.Lock(), threading.Event()

    def job(i: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        gate.wait(10)
        with lock:
            running -= 1
        return i

    with Workers(3) as pool:
        jobs = [pool.submit(job, i) for i in range(12)]
        end = time.monotonic() + 10
        while running < 3 and time.monotonic() < end:  # the bound is reached before anything finishes
            time.sleep(0.01)
        gate.set()
        assert [f.result(timeout=10) for f in jobs] == list(range(12))
        assert len(pool._threads) == 3  # noqa: SLF001
    assert most == 3


def test_a_cancelled_waiting_job_never_runs_and_shutdown_ends_the_threads():
    ran, gate = [], threading.Event()
    pool = Workers(1)
    first = pool.submit(gate.wait, 10)
    waiting = pool.submit(ran.append, "waiting")
    assert waiting.cancel()
    gate.set()
    assert first.result(timeout=10)
    pool.shutdown(wait=True)
    assert ran == [] and not any(t.is_alive() for t in pool._threads)  # noqa: SLF001
    with pytest.raises(RuntimeError):
        pool.submit(print)


def test_shutdown_can_cancel_what_waits():
    gate = threading.Event()
    pool = Workers(1)
    first = pool.submit(gate.wait, 10)
    rest = [pool.submit(lambda: None) for _ in range(3)]
    pool.shutdown(wait=False, cancel_futures=True)
    gate.set()
    assert first.result(timeout=10) and all(f.cancelled() for f in rest)
    for t in pool._threads:  # noqa: SLF001
        t.join(10)
        assert not t.is_alive()
