"""The probe process behind `--health-addr`: it answers what the server last told it, and NOT_SERVING once the
server has gone quiet, as a real process on an ephemeral port (the server-level tests are in test_serving.py)."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from service.serving.probe import ProbeProcess, _Mirror, _read
from service.wire.api import SERVICE_NAME

REPO = Path(__file__).parents[1]
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def status(port: int, service: str = "") -> int:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        return health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=5).status


def wait_for(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def _probe(stale_seconds: float) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "service.serving.probe", "--addr", "127.0.0.1:0",
                             "--stale-seconds", str(stale_seconds), "--service", SERVICE_NAME], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _port(proc: subprocess.Popen[str]) -> int:
    assert proc.stdout is not None
    word, port = proc.stdout.readline().split()
    assert word == "port"
    return int(port)


def _tell(proc: subprocess.Popen[str], statuses: dict[str, object]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(statuses) + "\n")
    proc.stdin.flush()


def _end(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_the_probe_process_mirrors_what_it_hears_and_exits_when_the_pipe_closes():
    proc = _probe(stale_seconds=600)  # never stale here: what it answers depends only on what it was told
    try:
        port_n = _port(proc)
        # Nothing heard yet: NOT_SERVING, for the named service too (not NOT_FOUND).
        assert status(port_n) == NOT_SERVING and status(port_n, SERVICE_NAME) == NOT_SERVING
        _tell(proc, {"": SERVING, SERVICE_NAME: SERVING})
        wait_for(lambda: status(port_n) == SERVING and status(port_n, SERVICE_NAME) == SERVING)
        _tell(proc, {"not json": "x"})  # a line it cannot use changes nothing, and the next one is still read
        _tell(proc, {"": SERVING, SERVICE_NAME: NOT_SERVING})
        wait_for(lambda: status(port_n, SERVICE_NAME) == NOT_SERVING)
        assert status(port_n) == SERVING
        # The server closing the pipe (stopping or dying) ends the probe process.
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    finally:
        _end(proc)


def test_the_probe_process_goes_not_serving_when_the_server_is_silent():
    # Ordered by the probe's own log lines, not by sleeping: silent (nothing heard), heard again, silent again.
    proc = _probe(stale_seconds=0.5)
    events: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            with contextlib.suppress(ValueError):
                events.append(json.loads(line).get("event", ""))

    reader = threading.Thread(target=read, daemon=True)
    try:
        port_n = _port(proc)
        reader.start()
        wait_for(lambda: "probe_server_silent" in events, timeout=60)
        _tell(proc, {"": SERVING, SERVICE_NAME: SERVING})
        wait_for(lambda: events.count("probe_server_silent") == 2, timeout=60)
        assert events[:3] == ["probe_server_silent", "probe_server_heard_again", "probe_server_silent"], events
        # Silent stays NOT_SERVING for every service until lines come again.
        assert status(port_n) == NOT_SERVING and status(port_n, SERVICE_NAME) == NOT_SERVING
    finally:
        _end(proc)


def test_the_mirror_goes_not_serving_only_once_past_the_stale_time():
    now = [100.0]
    servicer = health.HealthServicer()
    mirror = _Mirror(servicer, 5.0, (SERVICE_NAME,), clock=lambda: now[0])

    def statuses() -> tuple[int, int]:
        return tuple(servicer.Check(health_pb2.HealthCheckRequest(service=s), None).status  # type: ignore[return-value]
                     for s in ("", SERVICE_NAME))

    assert statuses() == (NOT_SERVING, NOT_SERVING)
    _read(io.StringIO(json.dumps({"": SERVING, SERVICE_NAME: SERVING}) + '\nnot json\n{"x": "y"}\n'), mirror)
    assert statuses() == (SERVING, SERVING)  # the lines it cannot use change nothing
    now[0] += 5.0
    mirror.check_stale()
    assert statuses() == (SERVING, SERVING) and not mirror.stale  # at the stale time, not past it
    now[0] += 0.001
    mirror.check_stale()
    assert statuses() == (NOT_SERVING, NOT_SERVING) and mirror.stale
    now[0] += 1000
    mirror.update({"": SERVING, SERVICE_NAME: NOT_SERVING})  # heard again: what it says, not the silence
    assert statuses() == (SERVING, NOT_SERVING) and not mirror.stale
    now[0] += 4.9
    mirror.check_stale()
    assert statuses() == (SERVING, NOT_SERVING)


def test_the_server_side_keeps_it_fresh_and_forwards_changes():
    servicer = health.HealthServicer()
    servicer.set(SERVICE_NAME, SERVING)
    beats: list[int] = []

    def beat_check() -> bool:  # the server answered a call of its own: a beat is sent
        beats.append(1)
        return True

    probe = ProbeProcess("127.0.0.1:0", servicer, ("", SERVICE_NAME), stale_seconds=600, beat_seconds=0.05,
                         beat_check=beat_check)
    try:
        wait_for(lambda: status(probe.port, SERVICE_NAME) == SERVING)
        wait_for(lambda: len(beats) >= 3, timeout=60)  # the beats go on by themselves (the mirror's stale time
        # against them is the test above)
        assert status(probe.port) == SERVING and status(probe.port, SERVICE_NAME) == SERVING
        servicer.enter_graceful_shutdown()
        probe.send()
        wait_for(lambda: status(probe.port) == NOT_SERVING and status(probe.port, SERVICE_NAME) == NOT_SERVING)
    finally:
        probe.stop()
    assert probe.proc.returncode == 0
