"""ReloadRules under `--processes N`: the worker that answers has the others reload too, and says how they did.

A call reaches one worker (the kernel picks one per connection), while the rules are loaded by each worker on
its own. The supervisor's SIGHUP already reaches every worker but tells nobody how each reload went, so the
workers and the supervisor talk over socket pairs made at spawn: the worker's end is passed as the descriptor
named by the hidden `--supervisor-fd`, and no other process holds either end. Lines of JSON:

    worker -> supervisor   {"op": "reload_all", "id": ...}              sent only after ReloadRules' token check
    supervisor -> worker   {"op": "asked", "id": ..., "pids": [...]}    the other workers it asked
    supervisor -> others   {"op": "reload", "id": ..., "reply_to": pid}
    other -> supervisor    {"op": "reloaded", "id": ..., "reply_to": pid, "ok": ..., ...}
    supervisor -> worker   the same line, with "pid" set by the supervisor from the pair it came on

The answering worker reloads itself meanwhile, then waits a bounded time for the others' lines. A process
started without the flag (one process serving) has no channel: it asks nobody and signals nothing. A worker
accepts the channel only when the process at its other end is its parent.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:  # the supervisor (and the probe process) import this module without the rules machinery
    from ..rulebook.store import RuleStore

log = structlog.get_logger("gpu_advisor.fanout")

FLAG = "--supervisor-fd"
MAX_LINE = 1 << 20  # a line carries at most the capped problems of one reload (a few KB)


@dataclass(frozen=True)
class WorkerReload:
    """What one other worker reported, or `answered=False` when it did not report in time."""

    pid: int
    answered: bool = False
    ok: bool = False
    reloaded: bool = False
    revision: str = ""
    error: str = ""


class SupervisorUnreachable(RuntimeError):
    pass


class _Line:
    """One end of a pair: whole JSON lines out (from any thread), lines in (from one reader thread)."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._send = threading.Lock()
        self._in = sock.makefile("rb")

    def send(self, msg: dict[str, Any]) -> bool:
        data = json.dumps(msg, separators=(",", ":")).encode() + b"\n"
        try:
            with self._send:
                self.sock.sendall(data)
            return True
        except OSError:
            return False

    def lines(self) -> Iterator[dict[str, Any]]:
        """Each well-formed message until the other end closes; anything else is skipped."""
        while True:
            try:
                raw = self._in.readline(MAX_LINE)
            except (OSError, ValueError):  # closed under us
                return
            if not raw:
                return
            with contextlib.suppress(ValueError):
                msg = json.loads(raw)
                if isinstance(msg, dict) and isinstance(msg.get("op"), str):
                    yield msg

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self._in.close()
        self.sock.close()


# -- the supervisor's side ------------------------------------------------------------------------------------


class Relay:
    """The supervisor's ends of the workers' pairs: passes reload requests and results between workers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workers: dict[int, _Line] = {}

    @staticmethod
    def pair() -> tuple[socket.socket, socket.socket]:
        """(the supervisor's end, the end to pass to a new worker)."""
        return socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

    def add(self, pid: int, own_end: socket.socket) -> None:
        line = _Line(own_end)
        with self._lock:
            self._workers[pid] = line
        threading.Thread(target=self._serve, args=(pid, line), name=f"relay-{pid}", daemon=True).start()

    def _serve(self, pid: int, line: _Line) -> None:
        for msg in line.lines():
            if msg["op"] == "reload_all":
                self._fan_out(pid, line, str(msg.get("id", "")))
            elif msg["op"] == "reloaded":
                self._pass_back(pid, msg)

    def _fan_out(self, pid: int, line: _Line, rid: str) -> None:
        with self._lock:
            others = [(p, w) for p, w in self._workers.items() if p != pid]
        log.info("reload_fanout", asked_by=pid, asked=[p for p, _ in others])
        line.send({"op": "asked", "id": rid, "pids": [p for p, _ in others]})
        for _, other in others:
            other.send({"op": "reload", "id": rid, "reply_to": pid})

    def _pass_back(self, pid: int, msg: dict[str, Any]) -> None:
        reply_to = msg.get("reply_to")
        with self._lock:
            target = self._workers.get(reply_to) if isinstance(reply_to, int) else None
        if target is not None:
            target.send({**msg, "pid": pid})  # who reported is known from the pair, not from what it says

    def close(self) -> None:
        with self._lock:
            workers, self._workers = list(self._workers.values()), {}
        for w in workers:
            w.close()


# -- a worker's side ------------------------------------------------------------------------------------------


def _peer_pid(sock: socket.socket) -> int | None:
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:  # not Linux: the process at the other end cannot be checked
        return None
    pid, _uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    return pid


class _Asked:
    """One fan-out in progress: which workers the supervisor asked and what they reported so far."""

    def __init__(self) -> None:
        self.done = threading.Condition()
        self.pids: list[int] | None = None
        self.reports: dict[int, dict[str, Any]] = {}
        self.closed = False

    def complete(self) -> bool:
        return self.closed or (self.pids is not None and all(p in self.reports for p in self.pids))


class Pending:
    """A fan-out that was sent; `collect` waits for the answers."""

    def __init__(self, peers: Peers, rid: str, asked: _Asked):
        self._peers, self._rid, self._asked = peers, rid, asked

    def collect(self, wait: float) -> list[WorkerReload]:
        """Every worker asked, with what it reported within `wait` seconds (the rest `answered=False`).
        Raises SupervisorUnreachable when the supervisor did not even say whom it asked."""
        deadline = time.monotonic() + max(wait, 0.0)
        a = self._asked
        with a.done:
            while not a.complete():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                a.done.wait(left)
            pids, reports = a.pids, dict(a.reports)
        self._peers._forget(self._rid)
        if pids is None:
            raise SupervisorUnreachable("the supervisor did not answer")
        out = []
        for pid in pids:
            r = reports.get(pid)
            out.append(WorkerReload(pid) if r is None else WorkerReload(
                pid, True, bool(r.get("ok")), bool(r.get("reloaded")), str(r.get("revision", "")),
                str(r.get("error", ""))))
        return out


class Peers:
    """A worker's end of its pair: asks the others to reload (for ReloadRules) and reloads when asked."""

    def __init__(self, sock: socket.socket):
        self._line = _Line(sock)
        self._lock = threading.Lock()
        self._asked: dict[str, _Asked] = {}
        self._store: RuleStore | None = None

    @classmethod
    def from_fd(cls, fd: int) -> Peers | None:
        """The channel on `fd`, or None (logged) unless it is a Unix socket whose other end is our parent."""
        try:
            sock = socket.socket(fileno=fd)
        except OSError as exc:
            log.warning("supervisor_channel_refused", fd=fd, reason=exc.strerror or "not a socket")
            return None
        try:
            peer = _peer_pid(sock) if sock.family == socket.AF_UNIX else -1
        except OSError:
            peer = -1
        if peer is not None and peer != os.getppid():
            log.warning("supervisor_channel_refused", fd=fd, reason="the other end is not this process's parent")
            sock.detach()  # not ours to close
            return None
        return cls(sock)

    def start(self, store: RuleStore) -> None:
        self._store = store
        threading.Thread(target=self._serve, name="supervisor-channel", daemon=True).start()

    def ask_others(self) -> Pending:
        rid = uuid.uuid4().hex
        asked = _Asked()
        with self._lock:
            self._asked[rid] = asked
        if not self._line.send({"op": "reload_all", "id": rid}):
            self._close_asked(asked)
        return Pending(self, rid, asked)

    def _forget(self, rid: str) -> None:
        with self._lock:
            self._asked.pop(rid, None)

    def _serve(self) -> None:
        for msg in self._line.lines():
            op, rid = msg["op"], str(msg.get("id", ""))
            if op == "reload":
                # Its own thread: this one must stay free to pass on answers to our own ReloadRules meanwhile.
                threading.Thread(target=self._reload_for, args=(msg,), name="peer-reload", daemon=True).start()
                continue
            with self._lock:
                asked = self._asked.get(rid)
            if asked is None:
                continue  # an answer that came after its ReloadRules stopped waiting
            with asked.done:
                if op == "asked" and isinstance(msg.get("pids"), list):
                    asked.pids = [p for p in msg["pids"] if isinstance(p, int)]
                elif op == "reloaded" and isinstance(msg.get("pid"), int):
                    asked.reports[msg["pid"]] = msg
                asked.done.notify_all()
        with self._lock:  # the supervisor is gone: nobody waits for what will not come
            for asked in self._asked.values():
                self._close_asked(asked)

    @staticmethod
    def _close_asked(asked: _Asked) -> None:
        with asked.done:
            asked.closed = True
            asked.done.notify_all()

    def _reload_for(self, msg: dict[str, Any]) -> None:
        store = self._store
        assert store is not None
        result = store.reload()
        revision = store.status().revision
        log.info("peer_reload", asked_by=msg.get("reply_to"), ok=result.ok, changed=result.changed,
                 revision=revision)
        self._line.send({"op": "reloaded", "id": msg.get("id"), "reply_to": msg.get("reply_to"), "ok": result.ok,
                         "reloaded": result.changed, "revision": revision, "error": "\n".join(result.problems)})

    def close(self) -> None:
        self._line.close()

