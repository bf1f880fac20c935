"""Cross-cutting work for every call: a request id, one structured log line, no stack trace to clients, and
bounded admission for the expensive methods."""

from __future__ import annotations

import enum
import threading
import time
import uuid
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
                    code = context.code() or grpc.StatusCode.UNKNOWN
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
                log.info("rpc", code=name, ms=round(elapsed * 1000, 2))
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


class Limiter:
    """At most `concurrent` calls run at once and up to `queue` more wait their turn; the rest are refused at
    once. Waiting ends early when the caller's deadline passes or it goes away."""

    # How often a waiter looks whether its caller went away (deadlines are waited for exactly).
    POLL_SECONDS = 0.05

    def __init__(self, concurrent: int, queue: int):
        if concurrent < 1 or queue < 0:
            raise ValueError("a limiter needs concurrent >= 1 and queue >= 0")
        self.concurrent, self.queue = concurrent, queue
        self.running = 0
        self.waiting = 0
        self._cond = threading.Condition()

    def enter(self, seconds_left: float, gone: Callable[[], bool]) -> Admission:
        with self._cond:
            # Newcomers do not overtake waiters: a free slot with waiters belongs to one of them.
            if self.running < self.concurrent and self.waiting == 0:
                self.running += 1
                return Admission.ADMITTED
            if self.waiting >= self.queue:
                return Admission.FULL
            self.waiting += 1
            end = time.monotonic() + seconds_left
            try:
                while self.running >= self.concurrent:
                    left = end - time.monotonic()
                    if left <= 0 or gone():
                        self._cond.notify()  # the slot this waiter may have been woken for goes to the next one
                        return Admission.EXPIRED if left <= 0 else Admission.GONE
                    self._cond.wait(min(left, self.POLL_SECONDS))
                self.running += 1
                return Admission.ADMITTED
            finally:
                self.waiting -= 1

    def leave(self) -> None:
        with self._cond:
            self.running -= 1
            self._cond.notify()


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
            outcome = limiter.enter(context.time_remaining(), lambda: not context.is_active())
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
