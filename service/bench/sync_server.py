"""Option 3 of issue 27, for measurement only: the same servicer behind grpc's synchronous server, whose handler
threads read, answer and write each call with no event loop and no hand-off (`make bench
BENCH_ARGS=--answer-modes` loads it beside the asyncio server's ways of answering).

It is not a way to serve: every open stream holds one of its threads (an idle reflection stream or a
header-only call would take them all, docs/benchmarks.md, Hostile clients), and it has none of the server's
admission, limits or drain. Beside the asyncio server it would need a port of its own for Recommend (one port's
connections cannot be split between two servers by method), which clients cannot be asked to know.
The call log line and health are kept so its CPU per call counts what the server's does.

`python -m service.bench.sync_server ADDR RULES`: logs `serving` (JSON, stderr) once the rules are loaded.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from concurrent import futures
from typing import Any

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ..rulebook.store import RuleStore
from ..serving.cache import ResponseCache
from ..serving.logging import configure
from ..serving.server import Servicer
from ..wire.api import pb_grpc

THREADS = 4  # as many as the asyncio server's answer pool: one running call per method and spares


class _Logged(pb_grpc.GpuAdvisorServicer):
    """Each call logged as the asyncio server's dispatcher logs it (one `rpc` line, the same fields)."""

    def __init__(self, inner: Servicer):
        self._inner = inner
        self._log = structlog.get_logger("gpu_advisor.rpc")

    def Recommend(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        started = time.perf_counter()
        code = "OK"
        try:
            return self._inner.Recommend(request, context)
        except Exception:
            code = "UNKNOWN"
            raise
        finally:
            self._log.info("rpc", code=code, ms=round((time.perf_counter() - started) * 1000, 2),
                           peer=context.peer())


class _LoggedHealth(health.HealthServicer):
    def Check(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        started = time.perf_counter()
        try:
            return super().Check(request, context)
        finally:
            structlog.get_logger("gpu_advisor.rpc").info(
                "rpc", code="OK", ms=round((time.perf_counter() - started) * 1000, 2), peer=context.peer())


def main(argv: list[str]) -> int:
    addr, rules = argv
    configure("INFO")
    store = RuleStore(rules)
    store.reload()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=THREADS))
    servicer = Servicer(store)
    if cached := int(os.environ.get("GPU_ADVISOR_RESPONSE_CACHE", "0") or 0):  # the bench's RPC floor
        servicer.Recommend = ResponseCache(cached).wrap(store, servicer.Recommend)  # type: ignore[method-assign]
    pb_grpc.add_GpuAdvisorServicer_to_server(_Logged(servicer), server)
    checks = _LoggedHealth()
    checks.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(checks, server)
    server.add_insecure_port(addr)
    server.start()
    structlog.get_logger("gpu_advisor.server").info("serving", addr=addr, answer_on="sync server")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    server.stop(1).wait()
    store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
