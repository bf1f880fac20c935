"""Stopping without dropping work: health goes NOT_SERVING, calls already accepted finish, then the server stops.

Why a plain `server.stop(grace)` loses calls: gRPC Core cancels every call that has arrived but that the Python
server has not yet picked up (CANCELLED), and under load the Python loop that picks calls up waits for the GIL
behind the workers, so dozens of arrived calls can be in that state. So the drain first waits, within the
grace period, until the worker pool has been idle for a moment (every arrived call picked up and finished);
only then does it stop the server, whose own grace covers calls that still race in.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
import structlog
from grpc_health.v1 import health

from .interceptors import AdmissionInterceptor
from .probe import ProbeProcess

log = structlog.get_logger("gpu_advisor.server")

# Idle time that counts as "nothing more arrived": picking up an arrived call takes milliseconds once the
# workers are idle, so this is ample, and short next to any grace period.
QUIET_SECONDS = 0.25


class TrackingExecutor(futures.ThreadPoolExecutor):
    """A thread pool that knows how many calls gRPC handed it (waiting or running) and when the last ended."""

    def __init__(self, max_workers: int, thread_name_prefix: str = "rpc"):
        super().__init__(max_workers=max_workers, thread_name_prefix=thread_name_prefix)
        self._cond = threading.Condition()
        self.pending = 0
        self._handed = 0  # every hand-over ever, so a call that came and went still restarts the quiet wait

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> futures.Future[Any]:
        with self._cond:
            self.pending += 1
            self._handed += 1
            self._cond.notify_all()
        try:
            future = super().submit(fn, *args, **kwargs)
        except BaseException:
            self._finished(None)
            raise
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _future: object) -> None:
        with self._cond:
            self.pending -= 1
            self._cond.notify_all()

    def wait_quiet(self, quiet: float, until: float) -> bool:
        """True once nothing was pending and nothing was handed over for `quiet` seconds; False if the monotonic
        time `until` came first."""
        with self._cond:
            seen, since = self._handed, time.monotonic()
            while True:
                now = time.monotonic()
                if self.pending or self._handed != seen:
                    seen, since = self._handed, now
                elif now - since >= quiet:
                    return True
                if now >= until:
                    return False
                self._cond.wait(min(until - now, max(quiet - (now - since), 0.001)))


class AdvisorServer:
    """The started grpc.Server (every grpc.Server method works on it) plus `drain`, and its admission."""

    def __init__(self, server: grpc.Server, executor: TrackingExecutor, health_servicer: health.HealthServicer,
                 admission: AdmissionInterceptor, probe: ProbeProcess | None = None):
        self._server = server
        self.executor = executor
        self.health = health_servicer
        self.admission = admission
        self.probe = probe  # the health-only process on --health-addr, if any

    @property
    def probe_port(self) -> int:
        return self.probe.port if self.probe is not None else 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)

    def stop(self, grace: float | None) -> threading.Event:
        """Like grpc.Server.stop; the probe process (if any) stops once the main server has."""
        done = self._server.stop(grace)
        if self.probe is None:
            return done
        probe = self.probe
        both = threading.Event()

        def after_main() -> None:
            done.wait()
            probe.stop()
            both.set()

        threading.Thread(target=after_main, name="probe-stop", daemon=True).start()
        return both

    def drain(self, grace: float) -> bool:
        """NOT_SERVING, let accepted calls finish (at most `grace` seconds in all), stop. True if none was cut."""
        started = time.monotonic()
        until = started + grace
        log.info("draining", pending=self.executor.pending, grace_seconds=grace)
        # Probes and load balancers see NOT_SERVING at once; a reload cannot flip it back.
        self.health.enter_graceful_shutdown()
        if self.probe is not None:
            self.probe.send()
        # Keep half the grace for calls that are still running when the quiet wait gives up.
        quiet = self.executor.wait_quiet(QUIET_SECONDS, started + grace / 2)
        # The probe port keeps answering NOT_SERVING until the main server has stopped.
        self.stop(grace=max(until - time.monotonic(), 0)).wait()
        cut = self.executor.pending
        log.info("drained", quiet=quiet, cut=cut, seconds=round(time.monotonic() - started, 3))
        self.executor.shutdown(wait=False)
        return quiet and cut == 0
