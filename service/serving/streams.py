"""Long-lived streams (server reflection, health Watch): capped per connection and in total, and a reflection
stream that stays silent is closed.

Reflection needs no credentials and a client keeps its bidirectional stream open between questions; on the
asyncio server an open stream costs no worker thread, but each one still holds one of the connection's HTTP/2
streams and a slot of the server-wide cap (`--max-calls`). Beyond the caps a new stream hears RESOURCE_EXHAUSTED
at once. A connection is told apart by its peer address (host and source port).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from grpc_reflection.v1alpha import reflection_pb2
from grpc_reflection.v1alpha._async import ReflectionServicer

REFLECTION_V1ALPHA = "grpc.reflection.v1alpha.ServerReflection"
REFLECTION_V1 = "grpc.reflection.v1.ServerReflection"


class StreamCap:
    """At most `per_connection` open streams of one kind on a connection and `total` in all (loop thread only)."""

    def __init__(self, kind: str, per_connection: int, total: int):
        self.kind, self.per_connection, self.total = kind, per_connection, total
        self.open: Counter[str] = Counter()

    @property
    def count(self) -> int:
        return sum(self.open.values())

    def refusal(self, peer: str) -> str:
        """Why a new stream from `peer` is refused, or "" when it may open."""
        if self.count >= self.total:
            return f"too many {self.kind} streams open on this server ({self.total}); close one or retry later"
        if self.open[peer] >= self.per_connection:
            return f"too many {self.kind} streams open on this connection ({self.per_connection})"
        return ""

    def enter(self, peer: str) -> None:
        self.open[peer] += 1

    def leave(self, peer: str) -> None:
        self.open[peer] -= 1
        if self.open[peer] <= 0:
            del self.open[peer]


class _Idle(Exception):  # noqa: N818
    pass


def capped_stream(cap: StreamCap, behavior: Callable[[Any, Any], AsyncIterator[Any]],
                  idle_seconds: float = 0.0) -> Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]:
    """`behavior` (an async-generator handler) under `cap`; with `idle_seconds` > 0 (client-streaming kinds), the
    stream ends with DEADLINE_EXCEEDED when the client sends nothing for that long."""

    async def handle(requests: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        peer = context.peer()
        refused = cap.refusal(peer)
        if refused:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refused)
        cap.enter(peer)
        try:
            source = _timed(requests, idle_seconds) if idle_seconds > 0 else requests
            async for response in behavior(source, context):
                yield response
        except _Idle:
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                                f"no {cap.kind} request for {idle_seconds:g} s: the stream is closed")
        finally:
            cap.leave(peer)

    return handle


async def _timed(requests: Any, idle_seconds: float) -> AsyncIterator[Any]:
    iterator = requests.__aiter__()
    while True:
        try:
            item = await asyncio.wait_for(iterator.__anext__(), idle_seconds)
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise _Idle() from None
        yield item


def reflection_handlers(service_names: tuple[str, ...], cap: StreamCap,
                        idle_seconds: float) -> list[grpc.GenericRpcHandler]:
    """Server reflection under both v1alpha and v1.

    grpcio-reflection registers only v1alpha, while current clients (grpcurl, buf curl, Postman) ask v1 first.
    v1 is v1alpha renamed: the messages are the same on the wire, so one servicer answers both method paths.
    v1 is answered but not listed: its descriptor is not in the pool, and tools that describe every listed
    service would stop on it.
    """
    servicer = ReflectionServicer(service_names)
    info = grpc.stream_stream_rpc_method_handler(
        capped_stream(cap, servicer.ServerReflectionInfo, idle_seconds),
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    return [grpc.method_handlers_generic_handler(name, {"ServerReflectionInfo": info})
            for name in (REFLECTION_V1ALPHA, REFLECTION_V1)]
