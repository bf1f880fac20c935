"""Bounded admission for the expensive methods, waiting on the event loop (no thread per waiting call).

At most `concurrent` calls of a method run at once and up to `queue` more wait their turn, first come first
served; the rest hear RESOURCE_EXHAUSTED at once, instead of piling up where health checks would wait behind
them. A waiting call is a future on the loop: it costs no worker thread, and it stops waiting when its deadline
passes or its caller leaves (the server cancels the call's task).
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from collections.abc import Iterable

REQUEST_ID = "x-request-id"


class Admission(enum.Enum):
    ADMITTED = "admitted"
    FULL = "full"
    EXPIRED = "expired"
    GONE = "gone"


class Limiter:
    """Used from the event loop's thread only; `running` and `waiting` may be read from anywhere."""

    def __init__(self, concurrent: int, queue: int):
        if concurrent < 1 or queue < 0:
            raise ValueError("a limiter needs concurrent >= 1 and queue >= 0")
        self.concurrent, self.queue = concurrent, queue
        self.running = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def full(self) -> bool:
        """A call arriving now would be refused: no slot free to take at once, and the queue full."""
        busy = self.running >= self.concurrent or bool(self._waiters)
        return busy and len(self._waiters) >= self.queue

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def enter(self, seconds_left: float) -> Admission:
        """ADMITTED (the caller must `leave()` once its work is over), FULL, or EXPIRED when `seconds_left`
        passed first. A caller that leaves while waiting is cancelled here (CancelledError), its slot passed on."""
        if self.running < self.concurrent and not self._waiters:
            self.running += 1
            return Admission.ADMITTED
        if self.full:
            return Admission.FULL
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(granted)
        try:
            # A call without a deadline reports ~forever as its time left, more than a wait accepts.
            await asyncio.wait_for(asyncio.shield(granted), None if seconds_left > 1e8 else max(seconds_left, 0))
            return Admission.ADMITTED
        except TimeoutError:
            if granted.done() and not granted.cancelled():
                return Admission.ADMITTED  # handed over as the wait ended: the handler's deadline check stops it
            return Admission.EXPIRED
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self.leave()  # the slot was ours: pass it on
            raise
        finally:
            if not granted.done():
                granted.cancel()
                self._waiters.remove(granted)

    def leave(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes on: `running` stays the same
                return
        self.running -= 1


class AdmissionControl:
    """One limiter per listed (expensive) method; methods not listed (health, reflection) are not limited."""

    def __init__(self, methods: Iterable[str], concurrent: int, queue: int):
        self.limiters = {m: Limiter(concurrent, queue) for m in methods}
