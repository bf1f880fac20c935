"""grpc.health.v1 for the asyncio server: Check and Watch answered on the event loop, no thread per stream.

grpcio-health-checking's asyncio servicer must be driven from its own loop (its `set` is a coroutine), while
statuses here change from other threads (a rules reload, the drain, the probe's beat reads them). This one keeps
the statuses under a lock, readable and settable from any thread; a Watch stream waits on the loop for a change.
`Check(request, None)` also answers synchronously, as the probe process's mirror asks it (probe.py).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import grpc
from grpc_health.v1 import health_pb2

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN


class Health:
    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._lock = threading.Lock()
        self._statuses: dict[str, int] = {}
        self._changed: dict[str, asyncio.Event] = {}  # touched on the loop only
        self._shutting_down = False

    def status(self, service: str) -> int | None:
        with self._lock:
            return self._statuses.get(service)

    def set(self, service: str, status: int) -> None:
        """Set a service's status from any thread; after `enter_graceful_shutdown` only NOT_SERVING sticks."""
        with self._lock:
            if self._shutting_down:
                return
            self._statuses[service] = status
        self._notify(service)

    def enter_graceful_shutdown(self) -> None:
        """Every service NOT_SERVING for good: a reload during the drain cannot flip it back."""
        with self._lock:
            self._shutting_down = True
            for service in self._statuses:
                self._statuses[service] = NOT_SERVING
            services = list(self._statuses)
        for service in services:
            self._notify(service)

    def _notify(self, service: str) -> None:
        def wake() -> None:
            event = self._changed.pop(service, None)
            if event is not None:
                event.set()

        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(wake)

    def Check(self, request: health_pb2.HealthCheckRequest,  # noqa: N802
              context: grpc.ServicerContext | None) -> health_pb2.HealthCheckResponse:
        """The synchronous answer (NOT_FOUND raised through `context` when there is one)."""
        status = self.status(request.service)
        if status is None:
            if context is not None:
                context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
            return health_pb2.HealthCheckResponse(status=SERVICE_UNKNOWN)
        return health_pb2.HealthCheckResponse(status=status)

    async def check(self, request: health_pb2.HealthCheckRequest,
                    context: grpc.aio.ServicerContext) -> health_pb2.HealthCheckResponse:
        status = self.status(request.service)
        if status is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
        return health_pb2.HealthCheckResponse(status=status)

    async def watch(self, request: health_pb2.HealthCheckRequest,
                    context: grpc.aio.ServicerContext) -> AsyncIterator[health_pb2.HealthCheckResponse]:
        """The current status, then each change, until the caller leaves (SERVICE_UNKNOWN for an unknown name,
        as the protocol asks: it may become known later)."""
        last = None
        while True:
            event = self._changed.setdefault(request.service, asyncio.Event())
            status = self.status(request.service)
            current = SERVICE_UNKNOWN if status is None else status
            if current != last:
                last = current
                yield health_pb2.HealthCheckResponse(status=current)
            await event.wait()
