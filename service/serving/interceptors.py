"""Cross-cutting work for every call: a request id, one structured log line, no stack trace to clients, and
bounded admission for the expensive methods."""

from __future__ import annotations

import enum
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import grpc
import structlog

from . import metrics

log = structlog.get_logger("gpu_advisor.rpc")

REQUEST_ID = "x-request-id"


class RequestContextInterceptor(grpc.ServerInterceptor):
    """Binds a request id (the caller's `x-request-id`, else a new one) to every log line of the call, sends
    it back as initial and trailing metadata, logs method, status and duration, and turns unexpected
    exceptions into INTERNAL with a generic message: the traceback goes to the log only."""

    def intercept_service(self, continuation: Callable[[Any], Any], details: grpc.HandlerCallDetails) -> Any:
        handler = continuation(details)
        # Every GpuAdvisor method is unary; streaming handlers (health Watch, reflection) pass through as is.
        if handler is None or handler.unary_unary is None:
            return handler
        method = details.method
        inner = handler.unary_unary
        incoming = dict(details.invocation_metadata or ())

        def wrapped(request: Any, context: grpc.ServicerContext) -> Any:
            rid = str(incoming.get(REQUEST_ID) or uuid.uuid4())[:128]
            structlog.contextvars.bind_contextvars(request_id=rid, method=method)
            started = time.perf_counter()
            code = grpc.StatusCode.OK
            try:
                context.send_initial_metadata(((REQUEST_ID, rid),))
                response = inner(request, context)
                code = context.code() or grpc.StatusCode.OK
                return response
            except Exception as exc:
                if isinstance(exc, grpc.RpcError) or context.code() not in (None, grpc.StatusCode.OK):
                    # gRPC raises a bare RpcError when the caller has already left (deadline or hang-up).
                    code = context.code() or (grpc.StatusCode.UNKNOWN if context.is_active()
                                              else grpc.StatusCode.CANCELLED)
                    raise
                code = grpc.StatusCode.INTERNAL
                log.exception("rpc_failed")
                context.abort(grpc.StatusCode.INTERNAL, f"internal error (request id {rid})")
            finally:
                # Trailing metadata too, so a client that only sees the final status still gets the id; keep
                # what the handler put there (abort_with_status carries the error details in it).
                context.set_trailing_metadata(tuple(context.trailing_metadata() or ()) + ((REQUEST_ID, rid),))
                elapsed = time.perf_counter() - started
                name = getattr(code, "name", str(code))
                log.info("rpc", code=name, ms=round(elapsed * 1000, 2), peer=context.peer())
                metrics.observe_rpc(method, name, elapsed)
                structlog.contextvars.clear_contextvars()

        return grpc.unary_unary_rpc_method_handler(
            wrapped,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


class Admission(enum.Enum):
    ADMITTED = "admitted"
    FULL = "full"
    EXPIRED = "expired"
    GONE = "gone"


class _Waiter:
    __slots__ = ("event", "granted")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.granted = False


class Limiter:
    """At most `concurrent` calls run at once and up to `queue` more wait their turn, first come first served;
    the rest are refused at once. Waiting ends early when the caller's deadline passes or it goes away.

    Each waiter sleeps on its own event and a finishing call hands its slot to the first waiter directly: no
    polling and no herd of woken threads, since every wake-up competes for the GIL with the running calls and
    with gRPC's own loop that picks up new calls (health checks included)."""

    def __init__(self, concurrent: int, queue: int):
        if concurrent < 1 or queue < 0:
            raise ValueError("a limiter needs concurrent >= 1 and queue >= 0")
        self.concurrent, self.queue = concurrent, queue
        self.running = 0
        self._waiters: deque[_Waiter] = deque()
        self._lock = threading.Lock()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def enter(self, seconds_left: float, wake_when_gone: Callable[[Callable[[], None]], bool]) -> Admission:
        """`wake_when_gone(fn)` must arrange for fn() to run when the caller leaves (False: it already left)."""
        with self._lock:
            if self.running < self.concurrent and not self._waiters:
                self.running += 1
                return Admission.ADMITTED
            if len(self._waiters) >= self.queue:
                return Admission.FULL
            waiter = _Waiter()
            self._waiters.append(waiter)
        end = time.monotonic() + seconds_left
        try:
            if wake_when_gone(waiter.event.set):
                # A call without a deadline reports ~forever, more than a wait accepts.
                waiter.event.wait(seconds_left if seconds_left < threading.TIMEOUT_MAX else None)
        finally:
            with self._lock:
                if not waiter.granted:
                    self._waiters.remove(waiter)
        if waiter.granted:
            # A slot was handed over; if the caller has gone meanwhile, the handler's own deadline check stops
            # it at once and the slot passes on.
            return Admission.ADMITTED
        return Admission.EXPIRED if time.monotonic() >= end else Admission.GONE

    def leave(self) -> None:
        with self._lock:
            if self._waiters:
                waiter = self._waiters.popleft()
                waiter.granted = True  # the slot passes on: `running` stays the same
                waiter.event.set()
            else:
                self.running -= 1


class AdmissionInterceptor(grpc.ServerInterceptor):
    """A bounded admission per method for the given (expensive) methods: RESOURCE_EXHAUSTED at once when its
    queue is full, instead of letting calls pile up in the thread pool where health checks would wait
    behind them. Methods not listed (health, reflection) pass through unlimited."""

    def __init__(self, methods: Iterable[str], concurrent: int, queue: int):
        self.limiters = {m: Limiter(concurrent, queue) for m in methods}

    def intercept_service(self, continuation: Callable[[Any], Any], details: grpc.HandlerCallDetails) -> Any:
        handler = continuation(details)
        limiter = self.limiters.get(details.method)
        if handler is None or handler.unary_unary is None or limiter is None:
            return handler
        method = details.method
        inner = handler.unary_unary

        def admitted(request: Any, context: grpc.ServicerContext) -> Any:
            outcome = limiter.enter(context.time_remaining(), context.add_callback)
            if outcome is Admission.FULL:
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                              f"busy: {limiter.concurrent} calls running and {limiter.queue} waiting; "
                              "retry with backoff")
            if outcome is not Admission.ADMITTED:
                metrics.abandoned(method, "queue")
                if outcome is Admission.EXPIRED:
                    context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "the deadline passed while waiting to start")
                context.abort(grpc.StatusCode.CANCELLED, "the caller left while waiting to start")
            try:
                return inner(request, context)
            finally:
                limiter.leave()

        return grpc.unary_unary_rpc_method_handler(
            admitted,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
