"""The probe process behind `--health-addr`: it answers what the server last told it, and NOT_SERVING once the
server has gone quiet, as a real process on an ephemeral port (the server-level tests are in test_serving.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from service.serving.probe import ProbeProcess
from service.wire.api import SERVICE_NAME

REPO = Path(__file__).parents[1]
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def status(port: int, service: str = "") -> int:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        return health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=5).status


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def test_the_probe_process_mirrors_what_it_hears_and_goes_not_serving_when_the_server_is_silent():
    proc = subprocess.Popen([sys.executable, "-m", "service.serving.probe", "--addr", "127.0.0.1:0",
                             "--stale-seconds", "0.5", "--service", SERVICE_NAME], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        word, port = proc.stdout.readline().split()
        assert word == "port"
        port_n = int(port)
        # Nothing heard yet: NOT_SERVING, for the named service too (not NOT_FOUND).
        assert status(port_n) == NOT_SERVING and status(port_n, SERVICE_NAME) == NOT_SERVING

        def tell(statuses: dict[str, int]) -> None:
            proc.stdin.write(json.dumps(statuses) + "\n")  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]

        tell({"": SERVING, SERVICE_NAME: SERVING})
        wait_for(lambda: status(port_n) == SERVING and status(port_n, SERVICE_NAME) == SERVING)
        tell({"not json": "x"})  # a line it cannot use changes nothing
        # Silence: past --stale-seconds every service reads NOT_SERVING, as a hung server's own probe would.
        wait_for(lambda: status(port_n) == NOT_SERVING and status(port_n, SERVICE_NAME) == NOT_SERVING)
        tell({"": SERVING, SERVICE_NAME: NOT_SERVING})
        wait_for(lambda: status(port_n) == SERVING)
        assert status(port_n, SERVICE_NAME) == NOT_SERVING
        # The server closing the pipe (stopping or dying) ends the probe process.
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_server_side_keeps_it_fresh_and_forwards_changes():
    servicer = health.HealthServicer()
    servicer.set(SERVICE_NAME, SERVING)
    probe = ProbeProcess("127.0.0.1:0", servicer, ("", SERVICE_NAME), stale_seconds=1.0, beat_seconds=0.1)
    try:
        wait_for(lambda: status(probe.port, SERVICE_NAME) == SERVING)
        time.sleep(2.0)  # twice the stale time: only the beats keep it SERVING
        assert status(probe.port) == SERVING and status(probe.port, SERVICE_NAME) == SERVING
        servicer.enter_graceful_shutdown()
        probe.send()
        wait_for(lambda: status(probe.port) == NOT_SERVING and status(probe.port, SERVICE_NAME) == NOT_SERVING)
    finally:
        probe.stop()
    assert probe.proc.returncode == 0
