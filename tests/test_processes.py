"""A busy port fails at start; `--processes N` is the explicit way to share one, with N workers behind it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from service.serving.processes import BindError, reserve
from service.serving.server import serve
from service.wire.api import pb

REPO = Path(__file__).parents[1]
RULES = REPO / "rules"


def _events(log: Path) -> list[dict]:
    return [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")]


def _wait_for(log: Path, proc: subprocess.Popen, until, timeout: float = 90) -> list[dict]:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = _events(log)
        if until(events) or proc.poll() is not None:
            return events
        time.sleep(0.2)
    return _events(log)


def _start(tmp_path: Path, *args: str, rules: Path = RULES, **env_vars: str) -> tuple[subprocess.Popen, Path]:
    env = {**os.environ, "GPU_ADVISOR_LOG_LEVEL": "INFO", "PYTHONPATH": str(REPO), **env_vars}
    env.pop("GPU_ADVISOR_PROCESSES", None)
    log = tmp_path / f"server-{time.monotonic_ns()}.log"
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "service", "--no-watch", "--rules", str(rules), *args],
                                cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=err)
    return proc, log


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen]]:
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_serve_refuses_a_busy_port(start_server):
    first = start_server(RULES, watch=False)
    with pytest.raises(BindError, match=f"127.0.0.1:{first.port}"):
        serve(f"127.0.0.1:{first.port}", str(RULES), watch=False)


@pytest.mark.parametrize("extra", [(), ("--processes", "2")], ids=["one-process", "two-processes"])
def test_a_second_server_on_a_busy_port_exits_with_a_clear_error(start_server, tmp_path: Path, procs, extra):
    first = start_server(RULES, watch=False)
    addr = f"127.0.0.1:{first.port}"
    proc, log = _start(tmp_path, "--addr", addr, *extra)
    procs.append(proc)
    assert proc.wait(timeout=90) != 0
    failed = [e for e in _events(log) if e.get("event") == "bind_failed"]
    assert failed and failed[0]["addr"] == addr, log.read_text()
    assert not any(e.get("event") == "serving" for e in _events(log))
    # The first server is untouched and still the only one answering.
    assert first.stub.GetRuleset(pb.GetRulesetRequest(), timeout=10).revision


def test_a_busy_probe_port_stops_a_multi_process_start(start_server, tmp_path: Path, procs):
    first = start_server(RULES, watch=False, health_addr="127.0.0.1:0")
    taken = f"127.0.0.1:{first.server.probe_port}"
    proc, log = _start(tmp_path, "--addr", "127.0.0.1:0", "--processes", "2", "--health-addr", taken)
    procs.append(proc)
    assert proc.wait(timeout=90) != 0
    failed = [e for e in _events(log) if e.get("event") == "bind_failed"]
    assert failed and failed[0]["addr"] == taken, log.read_text()
    assert not any(e.get("event") in ("workers", "serving") for e in _events(log))


def test_the_parent_reserves_the_port_it_shares():
    sock, addr = reserve("127.0.0.1:0")
    try:
        port = int(addr.rsplit(":", 1)[1])
        assert port > 0
        with pytest.raises(BindError):  # a server that does not share cannot take it meanwhile
            serve(addr, str(RULES), watch=False)
    finally:
        sock.close()


def test_two_processes_serve_one_port_and_stop_on_sigterm(tmp_path: Path, procs):
    proc, log = _start(tmp_path, "--addr", "127.0.0.1:0", "--processes", "2", "--health-addr", "127.0.0.1:0")
    procs.append(proc)
    events = _wait_for(log, proc, lambda ev: sum(e.get("event") == "serving" for e in ev) >= 2)
    workers = next(e for e in events if e.get("event") == "workers")
    pids, addr = set(workers["pids"]), workers["addr"]
    serving = [e for e in events if e.get("event") == "serving"]
    assert len(pids) == 2 and {e["pid"] for e in serving} == pids, log.read_text()
    assert {f"127.0.0.1:{e['port']}" for e in serving} == {addr}
    # The probe port is resolved once by the parent and shared too.
    probe_ports = {e["health_port"] for e in serving}
    assert len(probe_ports) == 1 and None not in probe_ports
    probe_addr = f"127.0.0.1:{probe_ports.pop()}"
    # Each new connection lands on one worker (the kernel hashes it): many connections reach both.
    # A probe process hears its worker's statuses through a pipe, a moment after the worker's rules load.
    for target in [addr] * 40 + [probe_addr] * 20:
        with grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
            end = time.monotonic() + 10
            while (status := health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(), timeout=10).status) != health_pb2.HealthCheckResponse.SERVING:
                assert time.monotonic() < end, f"{target} still says {status}"
                time.sleep(0.05)
    events = _wait_for(log, proc, lambda ev: {e.get("pid") for e in ev if e.get("event") == "rpc"} >= pids, 20)
    answered = {e["pid"] for e in events if e.get("event") == "rpc"}
    assert answered == pids, f"calls were answered by {answered}, workers are {pids}"

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    stopped = {e["pid"] for e in _events(log) if e.get("event") == "stopped"}
    assert pids | {proc.pid} <= stopped
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_second_multi_process_server_on_the_port_of_a_running_one_fails_to_start(tmp_path: Path, procs):
    # SO_REUSEPORT let the second one bind and take half the new connections: two versions answering in turn.
    first, first_log = _start(tmp_path, "--addr", "127.0.0.1:0", "--processes", "2")
    procs.append(first)
    events = _wait_for(first_log, first, lambda ev: sum(e.get("event") == "serving" for e in ev) >= 2)
    addr = next(e["addr"] for e in events if e.get("event") == "workers")
    second, second_log = _start(tmp_path, "--addr", addr, "--processes", "2")
    procs.append(second)
    assert second.wait(timeout=90) != 0
    failed = [e for e in _events(second_log) if e.get("event") == "bind_failed"]
    assert failed and "another gpu-advisor" in failed[0]["error"], second_log.read_text()
    assert not any(e.get("event") in ("workers", "serving") for e in _events(second_log))
    assert first.poll() is None


def test_a_multi_process_server_binds_right_after_one_on_its_port_stopped(tmp_path: Path, procs):
    # A server that stopped closed its clients' connections first: they sit in TIME-WAIT on its port for about a
    # minute, and the parent's port reservation, bound without SO_REUSEADDR, failed until they were gone.
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC's listeners do
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = listener.accept()
    accepted.close()  # the server's end closes first, so the TIME-WAIT is on its port
    time.sleep(0.1)
    client.close()
    listener.close()
    proc, log = _start(tmp_path, "--addr", f"127.0.0.1:{port}", "--processes", "2")
    procs.append(proc)
    events = _wait_for(log, proc, lambda ev: sum(e.get("event") == "serving" for e in ev) >= 2)
    assert not [e for e in events if e.get("event") == "bind_failed"], log.read_text()
    assert proc.poll() is None and sum(e.get("event") == "serving" for e in events) == 2
