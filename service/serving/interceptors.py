"""Bounded, fair admission for the expensive methods, waiting on the event loop (no thread per waiting call).

At most `concurrent` calls of a method run at once and up to `queue` more wait their turn; the rest hear
RESOURCE_EXHAUSTED at once, instead of piling up where health checks would wait behind them. A waiting call is a
future on the loop: it costs no worker thread, and it stops waiting when its deadline passes or its caller leaves
(the server cancels the call's task).

Fair between peers (a peer is one client connection, as `context.peer()` names it): the waiting calls are kept
per peer and the next free slot goes to the peers in turn, so a peer with many calls waits behind its own calls,
not in front of everyone else's. When the queue is full, a newcomer whose peer holds fewer calls (running and
waiting) than the busiest peer, by two or more, takes the place of that peer's newest waiting call, which hears
RESOURCE_EXHAUSTED instead: under a flood from many streams, a client with one call at a time is not crowded out
(issue 26: 44% OK under 25 connections x 10 streams from h2load before, first come first served).
"""

from __future__ import annotations

import asyncio
import enum
import random
from collections import Counter, deque
from collections.abc import Iterable

REQUEST_ID = "x-request-id"
# gRPC's retry pushback (gRFC A6): a client whose retry policy lists the status waits this many milliseconds
# before its next attempt; a negative value tells it not to retry.
RETRY_PUSHBACK = "grpc-retry-pushback-ms"
PUSHBACK_MIN_MS, PUSHBACK_MAX_MS = 50, 5000


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
        self._running_by: Counter[str] = Counter()
        self._queues: dict[str, deque[asyncio.Future[bool]]] = {}  # per peer, oldest first
        self._turns: deque[str] = deque()  # peers with waiting calls, the next to be served first
        self._waiting = 0
        self.displaced = 0  # waiting calls that gave their place to a lighter peer's call
        self._seconds_per_call = 0.005  # a moving average of how long an admitted call holds its slot

    @property
    def waiting(self) -> int:
        return self._waiting

    def _load(self, peer: str) -> int:
        queue = self._queues.get(peer)
        return self._running_by[peer] + (len(queue) if queue else 0)

    def _busiest_waiting(self) -> tuple[str, int] | None:
        """The peer with the most calls (running and waiting) among those with a call waiting."""
        if not self._queues:
            return None
        peer = max(self._queues, key=self._load)
        return peer, self._load(peer)

    def _free_now(self) -> bool:
        return self.running < self.concurrent and not self._waiting

    def refuses(self, peer: str) -> bool:
        """A call from `peer` arriving now would be refused: no slot free, the queue full, and no busier peer
        whose newest waiting call it could displace."""
        if self._free_now() or self._waiting < self.queue:
            return False
        busiest = self._busiest_waiting()
        return busiest is None or busiest[1] < self._load(peer) + 2

    @property
    def full(self) -> bool:
        """No slot free and the queue full (a newcomer may still displace a busier peer's call)."""
        return not self._free_now() and self._waiting >= self.queue

    def pushback_ms(self) -> int:
        """How long a refused caller should wait before trying again: about the time the calls ahead of it take,
        jittered so that refused callers do not all come back at once."""
        ahead = (self.running + self._waiting) / self.concurrent
        wanted = ahead * self._seconds_per_call * 1000 * random.uniform(0.5, 1.5)  # noqa: S311 - jitter, not secrets
        return int(min(max(wanted, PUSHBACK_MIN_MS), PUSHBACK_MAX_MS))

    async def enter(self, seconds_left: float, peer: str = "") -> Admission:
        """ADMITTED (the caller must `leave(peer)` once its work is over), FULL, or EXPIRED when `seconds_left`
        passed first. A caller that leaves while waiting is cancelled here (CancelledError), its slot passed on."""
        if self._free_now():
            self.running += 1
            self._running_by[peer] += 1
            return Admission.ADMITTED
        if self._waiting >= self.queue and not self._displace_for(peer):
            return Admission.FULL
        granted: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._enqueue(peer, granted)
        try:
            # A call without a deadline reports ~forever as its time left, more than a wait accepts.
            admitted = await asyncio.wait_for(asyncio.shield(granted),
                                              None if seconds_left > 1e8 else max(seconds_left, 0))
            return Admission.ADMITTED if admitted else Admission.FULL
        except TimeoutError:
            if granted.done() and not granted.cancelled():
                # Handed over (or displaced) as the wait ended: the handler's deadline check stops it.
                return Admission.ADMITTED if granted.result() else Admission.FULL
            return Admission.EXPIRED
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled() and granted.result():
                self.leave(peer)  # the slot was ours: pass it on
            raise
        finally:
            if not granted.done():
                granted.cancel()
                self._dequeue(peer, granted)

    def _enqueue(self, peer: str, granted: asyncio.Future[bool]) -> None:
        queue = self._queues.get(peer)
        if queue is None:
            queue = self._queues[peer] = deque()
            self._turns.append(peer)
        queue.append(granted)
        self._waiting += 1

    def _dequeue(self, peer: str, granted: asyncio.Future[bool]) -> None:
        queue = self._queues.get(peer)
        if queue is None or granted not in queue:
            return
        queue.remove(granted)
        self._waiting -= 1
        if not queue:
            del self._queues[peer]
            self._turns.remove(peer)

    def _displace_for(self, peer: str) -> bool:
        """Make room for `peer`'s call by refusing the newest waiting call of the busiest peer, if that peer holds
        at least two calls more than `peer` would."""
        busiest = self._busiest_waiting()
        if busiest is None or busiest[1] < self._load(peer) + 2:
            return False
        victim = self._queues[busiest[0]][-1]
        self._dequeue(busiest[0], victim)
        victim.set_result(False)
        self.displaced += 1
        return True

    def leave(self, peer: str = "", held_seconds: float | None = None) -> None:
        if held_seconds is not None:
            self._seconds_per_call += 0.1 * (held_seconds - self._seconds_per_call)
        self._running_by[peer] -= 1
        if self._running_by[peer] <= 0:
            del self._running_by[peer]
        while self._turns:
            nxt = self._turns.popleft()
            queue = self._queues[nxt]
            waiter = queue.popleft()
            self._waiting -= 1
            if queue:
                self._turns.append(nxt)  # its next call waits for the other peers' turns
            else:
                del self._queues[nxt]
            if not waiter.done():
                self._running_by[nxt] += 1
                waiter.set_result(True)  # the slot passes on: `running` stays the same
                return
        self.running -= 1


class AdmissionControl:
    """One limiter per listed (expensive) method; methods not listed (health, reflection) are not limited."""

    def __init__(self, methods: Iterable[str], concurrent: int, queue: int):
        self.limiters = {m: Limiter(concurrent, queue) for m in methods}
