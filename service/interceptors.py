"""Cross-cutting work for every call: a request id, one structured log line, and no stack trace to clients."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
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
