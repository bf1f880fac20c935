"""`--processes N`: N copies of the server sharing one port, the kernel spreading connections (SO_REUSEPORT).

durable_rules never releases the GIL, so one process serves from one core; more cores need more processes.
Sharing a port is asked for explicitly: a single server binds without SO_REUSEPORT, so a busy port fails at start
instead of two servers (perhaps with different rules) answering alternately.

The parent binds the address itself first, with SO_REUSEPORT and without listening: that resolves port 0 to one
port for every worker, fails at once when a server that does not share already holds it, and keeps the port ours
while the workers start (a socket that does not listen receives no connections). The workers are this same
command with `--processes 1 --shared-port` and the resolved address, so each one is an ordinary server (health,
reload watching, signals, drain), plus a socket pair to the parent that carries ReloadRules to the other workers
(service/serving/fanout.py). The parent forwards SIGTERM/SIGINT and SIGHUP, waits for the workers to stop,
and if one dies on its own it stops the others and exits non-zero, so the supervisor (Kubernetes) restarts all.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence

import structlog

from ..children import die_with_parent, wait_or_kill
from . import fanout
from .signals import stop_on_signals

log = structlog.get_logger("gpu_advisor.processes")

ENV = "GPU_ADVISOR_PROCESSES"
STOP_TIMEOUT_S = 120.0  # a worker drains its in-flight calls first; past this it is killed


class BindError(RuntimeError):
    pass


def default_processes() -> int:
    raw = os.environ.get(ENV, "1").strip() or "1"
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit(f"{ENV} must be a whole number of processes, not {raw!r}") from None
    return value


def split_addr(addr: str) -> tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise BindError(f"cannot bind {addr}: expected host:port")
    return host.strip("[]") or "0.0.0.0", int(port)


def reserve(addr: str) -> tuple[socket.socket, str]:
    """Bind `addr` with SO_REUSEPORT (no listen) and return the socket and the address with its real port."""
    host, port = split_addr(addr)
    try:
        family, kind, proto, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except OSError as exc:
        raise BindError(f"cannot bind {addr}: {exc.strerror or exc}") from None
    sock = socket.socket(family, kind, proto)
    try:
        # SO_REUSEADDR too: connections the server that stopped here closed first sit in TIME-WAIT on this port
        # for a minute, and without it the bind fails until they are gone (gRPC's own listeners set it as well).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(sockaddr)
        # ... and only for the bind: kept on, it would let a server that does not share (gRPC sets SO_REUSEADDR
        # on its listeners) bind beside this socket, which does not listen.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 0)
    except OSError as exc:
        sock.close()
        raise BindError(f"cannot bind {addr}: {exc.strerror or exc}") from None
    return sock, _shown(sock)


def lock_port(addr: str) -> socket.socket:
    """Hold the `host:port` a supervisor shares for as long as the returned socket stays open.

    SO_REUSEPORT lets any process of the same user bind the port too, so a second `--processes N` server on the
    port of a running one would start and take half the new connections (two versions answering in turn). An
    abstract Unix socket named after the address (it lives in the network namespace, like the port, and goes
    away with the process) tells a second supervisor that the port is taken."""
    host, port = split_addr(addr)
    lock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        lock.bind(f"\0gpu-advisor-port:{host}:{port}")
    except OSError:
        lock.close()
        raise BindError(f"cannot bind {addr}: another gpu-advisor --processes server already serves it") from None
    return lock


def _shown(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def worker_command(argv: Sequence[str], addr: str, metrics_addr: str, index: int, channel_fd: int,
                   health_addr: str = "") -> list[str]:
    cmd = [sys.executable, "-m", "service", *argv, "--processes", "1", "--shared-port", "--addr", addr,
           fanout.FLAG, str(channel_fd)]
    if health_addr:  # the probe port is shared like the main one
        cmd += ["--health-addr", health_addr]
    if metrics_addr:  # one metrics port per worker: host:port, host:port+1, ... (port 0 stays ephemeral)
        host, port = split_addr(metrics_addr)
        cmd += ["--metrics-addr", f"{host}:{port + index if port else 0}"]
    return cmd


def supervise(processes: int, addr: str, argv: Sequence[str], metrics_addr: str = "", health_addr: str = "") -> int:
    """Run `processes` workers on `addr` until SIGTERM/SIGINT; the exit code is 0 when all stopped cleanly."""
    held: list[socket.socket] = []
    try:
        for wanted in (addr, health_addr) if health_addr else (addr,):
            sock, resolved_addr = reserve(wanted)
            held.append(sock)
            held.append(lock_port(resolved_addr))
    except BindError as exc:
        log.error("bind_failed", addr=wanted, error=str(exc))
        for sock in held:
            sock.close()
        return 1
    resolved = _shown(held[0])
    health_resolved = _shown(held[2]) if health_addr else ""
    workers: list[subprocess.Popen[bytes]] = []
    relay = fanout.Relay()

    def forward_hup() -> None:
        log.info("sighup_forwarded")
        for w in workers:
            with contextlib.suppress(ProcessLookupError):
                w.send_signal(signal.SIGHUP)

    stop = stop_on_signals(forward_hup, log)
    try:
        own_ends = []
        for i in range(processes):
            own_end, worker_end = relay.pair()  # ReloadRules reaching one worker reaches the others through it
            own_ends.append(own_end)
            with worker_end:
                fd = worker_end.fileno()
                command = worker_command(argv, resolved, metrics_addr, i, fd, health_resolved)
                workers.append(subprocess.Popen(command, pass_fds=(fd,),
                                                preexec_fn=die_with_parent))  # noqa: PLW1509 (no threads yet)
        for w, own_end in zip(workers, own_ends, strict=True):  # the relay's threads start after the last fork
            relay.add(w.pid, own_end)
        log.info("workers", addr=resolved, processes=processes, pids=[w.pid for w in workers])
        failed = None
        while not stop.wait(0.2):
            failed = next((w for w in workers if w.poll() is not None), None)
            if failed is not None:
                log.error("worker_exited", pid=failed.pid, code=failed.returncode)
                break
        return _stop_all(workers) if failed is None else max(1, _stop_all(workers))
    finally:
        relay.close()
        for sock in held:
            sock.close()


def _stop_all(workers: list[subprocess.Popen[bytes]]) -> int:
    for w in workers:
        if w.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                w.send_signal(signal.SIGTERM)
    code = 0
    for w in workers:
        rc, killed = wait_or_kill(w, STOP_TIMEOUT_S)
        if killed:
            log.error("worker_killed", pid=w.pid)
        code = code or (rc if rc > 0 else 1 if rc else 0)
    log.info("stopped", processes=len(workers), code=code)
    return code
