"""The asyncio server's event loop in a thread of its own, and stopping without dropping work: health goes
NOT_SERVING, calls already accepted finish, then the server stops.

Why the drain first waits for a quiet moment: gRPC Core cancels every call that has arrived but that the Python
server has not yet picked up (CANCELLED), and the loop picks calls up one at a time, so under a burst some can
be in that state. So the drain waits, within the grace period, until no GpuAdvisor call is pending and none
arrived for a moment; only then does it stop the server, whose own grace covers calls that still race in.
Health checks and reflection do not count: they answer on the loop in microseconds and a probe that keeps
asking must not hold the drain up (it took half the grace when any call kept arriving).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent import futures
from typing import Any, TypeVar

import grpc
import structlog

from .dispatch import InFlight
from .health import Health
from .interceptors import AdmissionControl
from .probe import ProbeProcess

log = structlog.get_logger("gpu_advisor.server")

# Idle time that counts as "nothing more arrived": picking up an arrived call takes milliseconds, so this is
# ample, and short next to any grace period.
QUIET_SECONDS = 0.25
T = TypeVar("T")


class LoopThread:
    """An asyncio loop running in a daemon thread; `run(coro)` waits for a coroutine on it from another thread."""

    def __init__(self, name: str = "grpc-aio"):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Awaitable[T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)  # type: ignore[arg-type]

    def submit(self, coro: Awaitable[Any]) -> futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


class AdvisorServer:
    """The started grpc.aio server seen from synchronous code: `stop` and `drain`, its admission and health."""

    def __init__(self, server: grpc.aio.Server, runner: LoopThread, executor: futures.Executor,
                 inflight: InFlight, health: Health, admission: AdmissionControl, probe: ProbeProcess | None = None,
                 on_stopped: Callable[[], None] | None = None):
        self._server = server
        self.runner = runner
        self.executor = executor
        self.inflight = inflight
        self.health = health
        self.admission = admission
        self.probe = probe  # the health-only process on --health-addr, if any
        self._on_stopped = on_stopped
        self._stopped: threading.Event | None = None
        self._lock = threading.Lock()

    @property
    def probe_port(self) -> int:
        return self.probe.port if self.probe is not None else 0

    def stop(self, grace: float | None) -> threading.Event:
        """Like grpc.Server.stop: returns an event set once the server (and the probe process, if any) stopped."""
        with self._lock:
            if self._stopped is not None:
                return self._stopped
            self._stopped = done = threading.Event()
        stopping = self.runner.submit(self._server.stop(grace))

        def after() -> None:
            try:
                stopping.result()
            except Exception:  # noqa: BLE001 - stopping goes on whatever the loop said
                log.exception("stop_failed")
            if self.probe is not None:
                self.probe.stop()
            if self._on_stopped is not None:
                self._on_stopped()
            self.executor.shutdown(wait=False)
            self.runner.close()
            done.set()

        threading.Thread(target=after, name="server-stop", daemon=True).start()
        return done

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        return self.runner.run(self._server.wait_for_termination(timeout))

    def drain(self, grace: float) -> bool:
        """NOT_SERVING, let accepted calls finish (at most `grace` seconds in all), stop. True if none was cut."""
        started = time.monotonic()
        until = started + grace
        log.info("draining", pending=self.inflight.pending, grace_seconds=grace)
        # Probes and load balancers see NOT_SERVING at once; a reload cannot flip it back.
        self.health.enter_graceful_shutdown()
        if self.probe is not None:
            self.probe.send()
        # Keep half the grace for calls that are still running when the quiet wait gives up.
        quiet = self.inflight.wait_quiet(QUIET_SECONDS, started + grace / 2)
        # The probe port keeps answering NOT_SERVING until the main server has stopped.
        self.stop(grace=max(until - time.monotonic(), 0)).wait()
        cut = self.inflight.pending
        log.info("drained", quiet=quiet, cut=cut, seconds=round(time.monotonic() - started, 3))
        return quiet and cut == 0
