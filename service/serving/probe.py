"""`--health-addr`: grpc.health.v1 answered by a small process of its own, which mirrors the server's health.

Why another process: the server's answers are pure Python and hold the GIL, and gRPC's Python server needs the
GIL several times for every call it picks up, each time waiting up to a switch interval (5 ms) behind the
running answer and behind every other thread that wants it. A probe answered inside the server therefore waits
tens of milliseconds under a flood, more the more connections the flood comes over; a second gRPC server in the
same process only takes the probe out of the main server's queue, not out of the GIL. This process has its own
GIL and nothing else to do.

What it answers must still be the server's truth. The server sends its health statuses (one JSON line) every
`BEAT_SECONDS`, each time only after a health Check through its own gRPC server answered (heartbeat.py), and
at once whenever they change (drain's NOT_SERVING, the first rules load); the probe process
answers with the last statuses it got. If no line came for `stale_seconds`, it answers NOT_SERVING for every
service until lines come again: a server whose threads no longer run fails its liveness probe as it would if
it answered the probe itself. When the server closes the pipe (it stopped, or died), this process exits.

Always plaintext: Kubernetes' gRPC probes cannot speak TLS, and health is all this port answers.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent import futures
from typing import IO

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ..children import wait_or_kill
from .processes import BindError

log = structlog.get_logger("gpu_advisor.probe")

BEAT_SECONDS = 0.5
STALE_SECONDS = 5.0  # ten beats missed: well past any GIL wait, well within a liveness probe's patience
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


# -- in the server ------------------------------------------------------------------------------------------


class ProbeProcess:
    """Starts the probe process on `addr` and keeps it told of `servicer`'s statuses for `services`."""

    def __init__(self, addr: str, servicer: health.HealthServicer, services: tuple[str, ...],
                 shared_port: bool = False, stale_seconds: float = STALE_SECONDS,
                 beat_seconds: float = BEAT_SECONDS, beat_check: Callable[[], bool] | None = None):
        self.servicer, self.services, self.beat_seconds = servicer, services, beat_seconds
        # A beat is sent only when this says the server answered a call of its own (heartbeat.py).
        self.beat_check = beat_check
        cmd = [sys.executable, "-m", "service.serving.probe", "--addr", addr, "--stale-seconds", str(stale_seconds)]
        for service in services:
            cmd += ["--service", service]
        if shared_port:
            cmd.append("--shared-port")
        # stderr is the server's: the probe's log lines go where the server's go.
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._pipe: IO[str] = self.proc.stdin
        first = self.proc.stdout.readline().split()
        if len(first) != 2 or first[0] != "port":
            self.proc.wait(timeout=10)
            # The probe process logs nothing about it: the server's bind_failed line names the address.
            raise BindError(f"cannot bind {addr}")
        self.port = int(first[1])
        self._lock = threading.Lock()
        self._sent = ""
        self._stopped = threading.Event()
        self.send()
        self._beat = threading.Thread(target=self._beat_loop, name="probe-beat", daemon=True)
        self._beat.start()

    def statuses(self) -> dict[str, int]:
        return {s: self.servicer.Check(health_pb2.HealthCheckRequest(service=s), None).status
                for s in self.services}

    def send(self) -> None:
        """Tell the probe process the current statuses (call it after a change; the beat repeats them)."""
        line = json.dumps(self.statuses())
        with self._lock:
            if self._stopped.is_set():
                return
            try:
                self._pipe.write(line + "\n")
                self._pipe.flush()
            except (BrokenPipeError, ValueError):  # it exited: the server logs nothing more about it
                self._stopped.set()

    def _beat_loop(self) -> None:
        while not self._stopped.wait(self.beat_seconds):
            if self.beat_check is None or self.beat_check():
                self.send()

    def stop(self) -> None:
        """Close the pipe (the probe process exits on it) and wait for the process."""
        with self._lock:
            self._stopped.set()
            with contextlib.suppress(OSError, ValueError):
                self._pipe.close()
        wait_or_kill(self.proc, 10)


# -- the probe process --------------------------------------------------------------------------------------


class _Mirror:
    """The statuses last heard from the server, and NOT_SERVING for all of them once it has gone quiet."""

    def __init__(self, servicer: health.HealthServicer, stale_seconds: float, services: tuple[str, ...] = ("",),
                 clock: Callable[[], float] = time.monotonic):
        self.servicer, self.stale_seconds, self.clock = servicer, stale_seconds, clock  # clock: for tests
        # Known from the start, so a probe before the first line gets NOT_SERVING rather than NOT_FOUND.
        self.heard: dict[str, int] = dict.fromkeys(("", *services), NOT_SERVING)
        self.last = clock()
        self.stale = False
        self._lock = threading.Lock()
        for service in self.heard:
            servicer.set(service, NOT_SERVING)  # nothing heard yet

    def update(self, statuses: dict[str, int]) -> None:
        with self._lock:
            self.heard, self.last = {**self.heard, **statuses}, self.clock()
            if self.stale:
                log.warning("probe_server_heard_again")
                self.stale = False
            for service, status in statuses.items():
                self.servicer.set(service, status)

    def check_stale(self) -> None:
        with self._lock:
            if not self.stale and self.clock() - self.last > self.stale_seconds:
                self.stale = True
                log.warning("probe_server_silent", seconds=self.stale_seconds)
                for service in self.heard:
                    self.servicer.set(service, NOT_SERVING)


def _read(pipe: IO[str], mirror: _Mirror) -> None:
    for line in pipe:
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            statuses = json.loads(line)
            mirror.update({str(k): int(v) for k, v in statuses.items()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m service.serving.probe", description=__doc__.split("\n")[0])
    parser.add_argument("--addr", required=True)
    parser.add_argument("--stale-seconds", type=float, default=STALE_SECONDS)
    parser.add_argument("--shared-port", action="store_true")
    parser.add_argument("--service", action="append", default=[], help="a service name the server reports")
    args = parser.parse_args(argv)
    from .logging import configure

    configure(pid=args.shared_port)
    servicer = health.HealthServicer()
    mirror = _Mirror(servicer, args.stale_seconds, tuple(args.service))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="probe"),
                         options=[("grpc.so_reuseport", int(args.shared_port))])
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    try:
        port = server.add_insecure_port(args.addr)
    except RuntimeError:
        port = 0
    if port == 0:
        print("bind_failed", flush=True)
        return 1
    server.start()
    print(f"port {port}", flush=True)
    reader = threading.Thread(target=_read, args=(sys.stdin, mirror), name="probe-pipe", daemon=True)
    reader.start()
    while reader.is_alive():  # until the server closes the pipe
        reader.join(0.2)
        mirror.check_stale()
    server.stop(None).wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
