"""Every unary call of the asyncio server: read the request within a time limit, log and count it, admit it, and
run the CPU-bound answer on a bounded thread pool.

Why the calls are registered as client-streaming: gRPC's asyncio server awaits a unary call's request message
before the handler runs, with no limit, so a stream that sends its headers and never its message would hold a
slot of the server-wide cap for good. The wire is the same for a unary call (one message, then the end of the
stream); here the message is read with `wait_for`, and a call whose message has not come in
`request_timeout` seconds ends with DEADLINE_EXCEEDED.

The servicer's methods stay synchronous (`grpc.ServicerContext`-style): they run in a worker thread with a
`CallContext`, which answers what they ask (time left, whether the caller still waits, metadata, peer) from
values taken on the loop, and turns `abort` into an exception the loop side sends as the call's status.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent import futures
from typing import Any, NoReturn

import grpc
import structlog
from google.protobuf.message import DecodeError

from . import metrics
from .answering import PoolAnswers
from .interceptors import REQUEST_ID, RETRY_PUSHBACK, Admission, Limiter

log = structlog.get_logger("gpu_advisor.rpc")

NO_DEADLINE = 1e9  # seconds left reported for a call without a deadline, as grpc's sync server does


class Aborted(Exception):  # noqa: N818 - a control-flow signal, like grpc's own abort
    def __init__(self, code: grpc.StatusCode, details: str, trailing: tuple[tuple[str, str | bytes], ...] = ()):
        super().__init__(details)
        self.code, self.details, self.trailing = code, details, trailing


class Gone:
    """Set on the loop when the call ends or the caller leaves; read by the answer at its stages. A flag, not a
    `threading.Event`: nothing waits on it, and an Event's condition and lock cost about 4 µs a call."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


class CallContext:
    """The part of `grpc.ServicerContext` the servicer uses, for a call whose answer runs in a worker thread."""

    def __init__(self, metadata: tuple[tuple[str, Any], ...], peer: str, seconds_left: float | None):
        self._metadata = metadata
        self._peer = peer
        self._deadline = None if seconds_left is None else time.monotonic() + seconds_left
        self.gone = Gone()
        self._trailing: tuple[tuple[str, Any], ...] = ()
        # An answer on the loop (loop_answers.LoopAnswers): gives the loop a turn at the stage boundaries, where
        # the servicer asks is_active().
        self.hand_back: Callable[[], None] | None = None

    def time_remaining(self) -> float:
        return NO_DEADLINE if self._deadline is None else max(self._deadline - time.monotonic(), 0.0)

    def is_active(self) -> bool:
        if self.hand_back is not None:
            self.hand_back()
        return not self.gone.is_set()

    def invocation_metadata(self) -> tuple[tuple[str, Any], ...]:
        return self._metadata

    def peer(self) -> str:
        return self._peer

    def abort(self, code: grpc.StatusCode, details: str) -> NoReturn:
        raise Aborted(code, details)

    def abort_with_status(self, status: Any) -> NoReturn:
        raise Aborted(status.code, status.details, tuple(status.trailing_metadata or ()))

    def set_trailing_metadata(self, metadata: tuple[tuple[str, Any], ...]) -> None:
        self._trailing = tuple(metadata)

    def trailing_metadata(self) -> tuple[tuple[str, Any], ...]:
        return self._trailing


class Undecodable:
    """Stands in for a request whose bytes are not a valid message of its type."""

    def __init__(self, type_name: str):
        self.type_name = type_name


def tolerant(cls: Any) -> Callable[[bytes], Any]:
    """A deserializer that returns `Undecodable` instead of raising (grpc would answer INTERNAL)."""

    def parse(data: bytes) -> Any:
        try:
            return cls.FromString(data)
        except DecodeError:
            return Undecodable(cls.DESCRIPTOR.full_name)

    return parse


class InFlight:
    """Calls handed to the dispatcher (arrived, waiting or running), for the drain's quiet wait."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.pending = 0
        self._arrived = 0  # every arrival ever, so a call that came and went still restarts the quiet wait

    def arrive(self) -> None:
        with self._cond:
            self.pending += 1
            self._arrived += 1
            self._cond.notify_all()

    def leave(self) -> None:
        with self._cond:
            self.pending -= 1
            self._cond.notify_all()

    def wait_quiet(self, quiet: float, until: float) -> bool:
        """True once nothing was pending and nothing arrived for `quiet` seconds; False if the monotonic time
        `until` came first."""
        with self._cond:
            seen, since = self._arrived, time.monotonic()
            while True:
                now = time.monotonic()
                if self.pending or self._arrived != seen:
                    seen, since = self._arrived, now
                elif now - since >= quiet:
                    return True
                if now >= until:
                    return False
                self._cond.wait(min(until - now, max(quiet - (now - since), 0.001)))


Answers = Any  # answering.PoolAnswers, QueueAnswers or loop_answers.LoopAnswers
SyncBehavior = Callable[[Any, Any], Any]
AsyncBehavior = Callable[[Any, Any], Awaitable[Any]]


class Dispatcher:
    """Builds the method handlers. `executor` runs the synchronous answers; `request_timeout`: seconds a call may
    take to send its request message; `inflight` counts the calls that the drain waits for (`counted`)."""

    def __init__(self, executor: futures.Executor, request_timeout: float, answers: Answers | None = None):
        self.executor = executor
        self.request_timeout = request_timeout
        self.inflight = InFlight()
        self.pool = PoolAnswers(executor)
        self.answers = answers or self.pool  # Recommend's answers (answering.py); the other methods: the pool

    def unary(self, method: str, behavior: SyncBehavior | AsyncBehavior, deserialize: Callable[[bytes], Any],
              serialize: Callable[[Any], bytes], limiter: Limiter | None = None,
              counted: bool = True) -> grpc.RpcMethodHandler:
        """A unary method: `behavior(request, context)` is a coroutine function (run on the loop, e.g. health
        Check) or a plain function (run in a worker thread with a CallContext, after `limiter` admits it)."""
        on_loop = asyncio.iscoroutinefunction(behavior)
        if not on_loop:
            # The reply is encoded in the answer's thread, not on the loop (where grpc would call `serialize`):
            # the loop is what health checks wait for. A behavior may also return the bytes itself (Recommend
            # does, having measured its size on them), and they go out as they are.
            behavior = _encoding(behavior, serialize)
            serialize = _as_is

        async def handle(requests: Any, context: grpc.aio.ServicerContext) -> Any:
            metadata = tuple(context.invocation_metadata() or ())
            rid = str(dict(metadata).get(REQUEST_ID) or uuid.uuid4())[:128]
            structlog.contextvars.bind_contextvars(request_id=rid, method=method)
            peer = context.peer()  # once: each call asks Core for a fresh copy of the same string
            started = time.perf_counter()
            code = grpc.StatusCode.OK
            if counted:
                self.inflight.arrive()
            try:
                if limiter is not None and limiter.refuses(peer):
                    # Refused before anything is sent or read: under a flood most calls end here, and each
                    # round trip to Core they skip is loop time a health check gets (25-connection flood:
                    # health p99 about 100 -> 86 ms, make bench BENCH_ARGS=--overload).
                    raise _busy(limiter)
                await context.send_initial_metadata(((REQUEST_ID, rid),))
                request = await self._read(context)
                if on_loop:
                    response = await behavior(request, context)  # type: ignore[misc]
                else:
                    response = await self._in_thread(method, behavior, request, context, metadata, peer, limiter)
                context.set_trailing_metadata(((REQUEST_ID, rid),))
                return response
            except Aborted as stop:
                code = stop.code
                context.set_trailing_metadata((*stop.trailing, (REQUEST_ID, rid)))
                await context.abort(stop.code, stop.details)
            except asyncio.CancelledError:
                code = grpc.StatusCode.DEADLINE_EXCEEDED if _expired(context) else grpc.StatusCode.CANCELLED
                raise
            except grpc.aio.AbortError:
                code = context.code() or grpc.StatusCode.UNKNOWN  # the behavior aborted on the loop
                raise
            except Exception:
                code = grpc.StatusCode.INTERNAL
                log.exception("rpc_failed")
                context.set_trailing_metadata(((REQUEST_ID, rid),))
                await context.abort(grpc.StatusCode.INTERNAL, f"internal error (request id {rid})")
            finally:
                if counted:
                    self.inflight.leave()
                elapsed = time.perf_counter() - started
                name = getattr(code, "name", str(code))
                if not peer.startswith("unix:"):  # the probe's heartbeat (heartbeat.py), twice a second
                    log.info("rpc", code=name, ms=round(elapsed * 1000, 2), peer=peer)
                    metrics.observe_rpc(method, name, elapsed)
                structlog.contextvars.clear_contextvars()

        return grpc.stream_unary_rpc_method_handler(handle, request_deserializer=deserialize,
                                                    response_serializer=serialize)

    async def _read(self, context: grpc.aio.ServicerContext) -> Any:
        try:
            async with asyncio.timeout(self.request_timeout):  # unlike wait_for, no task per call
                request = await context.read()
        except TimeoutError:
            raise Aborted(grpc.StatusCode.DEADLINE_EXCEEDED,
                          f"the request message did not arrive within {self.request_timeout:g} s") from None
        if request is grpc.aio.EOF:
            raise Aborted(grpc.StatusCode.INVALID_ARGUMENT, "request: the call sent no request message")
        return request

    async def _in_thread(self, method: str, behavior: SyncBehavior, request: Any, context: grpc.aio.ServicerContext,
                         metadata: tuple[tuple[str, Any], ...], peer: str, limiter: Limiter | None) -> Any:
        call = CallContext(metadata, peer, context.time_remaining())
        context.add_done_callback(lambda _ctx: call.gone.set())
        if limiter is not None:
            try:
                outcome = await limiter.enter(call.time_remaining(), peer)
            except asyncio.CancelledError:
                metrics.abandoned(method, "queue")
                raise
            if outcome is Admission.FULL:
                raise _busy(limiter)
            if outcome is Admission.EXPIRED:
                metrics.abandoned(method, "queue")
                raise Aborted(grpc.StatusCode.DEADLINE_EXCEEDED, "the deadline passed while waiting to start")
        admitted = time.perf_counter()

        def done() -> None:
            if limiter is not None:
                limiter.leave(peer, time.perf_counter() - admitted)

        answers = self.answers if method.endswith("/Recommend") else self.pool
        return await answers.run(behavior, request, call, done)


def _encoding(behavior: SyncBehavior, serialize: Callable[[Any], bytes]) -> SyncBehavior:
    def encoded(request: Any, context: Any) -> bytes:
        response = behavior(request, context)
        return response if isinstance(response, bytes) else serialize(response)

    return encoded


def _as_is(raw: bytes) -> bytes:
    return raw


def _busy(limiter: Limiter) -> Aborted:
    """RESOURCE_EXHAUSTED with gRPC's retry pushback: a client whose retry policy lists the code (the project's
    client does) tries again after that long, and the message says so for the others."""
    wait_ms = limiter.pushback_ms()
    return Aborted(grpc.StatusCode.RESOURCE_EXHAUSTED,
                   f"busy: {limiter.concurrent} calls running and {limiter.queue} waiting; retry after about "
                   f"{wait_ms} ms", ((RETRY_PUSHBACK, str(wait_ms)),))


def _expired(context: grpc.aio.ServicerContext) -> bool:
    left = context.time_remaining()
    return left is not None and left <= 0


def guard(behavior: SyncBehavior) -> SyncBehavior:
    """INVALID_ARGUMENT for bytes that did not decode (see `tolerant`), before the servicer sees them."""
    from .errors import abort_invalid

    def call(request: Any, context: Any) -> Any:
        if isinstance(request, Undecodable):
            abort_invalid(context, [("request", f"is not a valid {request.type_name} (protobuf decoding failed)")])
        return behavior(request, context)

    return call
