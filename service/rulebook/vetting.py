"""Check a rules version in a separate, killable process with memory and time limits before the server loads it.

The rules folder is untrusted input and loading it is a lot of pure-Python parsing: a construct nobody has
thought of yet can take minutes or gigabytes (a 1 MB YAML list of zeros, inside every size limit, takes ~40 s and
~720 MB to parse). A thread cannot be stopped and its memory is the server's. So each version is first read,
checked, compiled and rule-tested in a child process under RLIMIT_AS (what the load may allocate) and RLIMIT_CPU,
and SIGKILLed after the wall-clock timeout. Only a version that passed there is loaded in the server, and only
from the same bytes (load_rulebook's `expect_hash`): loading is deterministic, so it finishes there too. The
child says when the version has loaded and compiled, and the server loads it then, while the child still runs
the rules' tests (which the server does not run again): the check adds little to a reload.

The server never forks itself (gRPC's threads would be copied in an unknown state). At start it spawns one helper,
`python -m service.rulebook.vetting`: a fresh interpreter (fork+exec is safe from a threaded process; multiprocessing's
spawn would re-run the server's `__main__`) that imports the loader and waits, single-threaded. Each check is an
os.fork() of that helper, so it starts in milliseconds with every module loaded. The helper keeps the YAML parse
cache warm with the files of versions that passed (the child sends its parse results back), so a one-file edit
re-parses one file there, as in the server. A child that overruns is SIGKILLed by the helper; a helper that stops
answering is killed by the server and started again on the next check. One helper per server process.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import pickle
import re
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from ..children import die_with_parent, wait_or_kill

if TYPE_CHECKING:
    from ..decide.book import Rulebook

log = structlog.get_logger("gpu_advisor.vetting")

MEMORY_ENV = "GPU_ADVISOR_RULES_LOAD_MEMORY_MB"
DEFAULT_MEMORY_MB = 256  # a cold check of the shipped rules passes with 16; the alias bomb of issue 7 took 2150
START_TIMEOUT = 60.0  # seconds for the helper's imports (about one on an idle machine)
REPLY_MARGIN = 5.0  # seconds beyond a check's own limit for the helper to answer
MAX_MESSAGE = 32 << 20  # a verdict is small (capped problems); a warm-up entry is one file's pickled parse
MAX_REMEMBERED = 64  # content hashes that passed
_READY = b"ready"
# How the loader reports a MemoryError it caught (a YAML parse, the engine, a rule test): the limit was hit.
_MEMORY_ERROR = re.compile(r"(broken YAML|rejected the rules|error): MemoryError\b")
_RULES_FILE = re.compile(r"\S+\.ya?ml")


@dataclass(frozen=True)
class Verdict:
    ok: bool
    revision: str = ""
    content_hash: str = ""
    problems: tuple[str, ...] = ()  # as GetRuleset shows them: capped, file:line, relative paths
    stopped: str = ""  # why the check did not finish on its own: time, memory, crash, helper
    seconds: float = 0.0

    def to_bytes(self) -> bytes:
        return json.dumps(self.__dict__ | {"problems": list(self.problems)}).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> Verdict:
        return cls.from_dict(json.loads(raw))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        return cls(bool(d["ok"]), str(d["revision"]), str(d["content_hash"]), tuple(map(str, d["problems"])),
                   str(d["stopped"]), float(d["seconds"]))


def took_too_long(timeout: float) -> str:
    return f"rules load took longer than {timeout:g} s and was stopped"


def too_much_memory(memory_mb: int, where: str = "") -> str:
    return f"rules load exceeded the {memory_mb} MB memory limit and was stopped" + (
        f" (while reading {where})" if where else ""
    )


# -- the server's side ---------------------------------------------------------------------------------------


class Vetter:
    """The helper process, seen from the server. Thread-safe; one check at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._ready = False
        # Content that passed today, with or without rule tests: the same bytes pass again (a check depends on
        # the day only through price validity), so a reload of it, or another store of it, needs no check.
        self._passed: dict[tuple[str, str, bool], None] = {}

    def passed(self, content_hash: str, rule_tests: bool) -> bool:
        return (content_hash, date.today().isoformat(), rule_tests) in self._passed

    def _remember(self, verdict: Verdict, rule_tests: bool) -> None:
        if verdict.ok:
            self._passed[(verdict.content_hash, date.today().isoformat(), rule_tests)] = None
            while len(self._passed) > MAX_REMEMBERED:
                del self._passed[next(iter(self._passed))]

    def start(self) -> None:
        """Spawn the helper now (before the server starts its threads is best) without waiting for it."""
        with self._lock:
            self._spawn()

    def vet(
        self, rules_dir: str | Path, timeout: float, memory_mb: int, rule_tests: bool = True,
        on_loaded: Callable[[str], None] | None = None,
    ) -> Verdict:
        """Load and check the folder in a child process: at most `timeout` seconds and `memory_mb` MB more than
        the helper holds (0: no memory limit). `on_loaded` is called with the content hash as soon as the
        version has loaded and compiled there, while its rule tests still run. Never raises."""
        request = {"cwd": os.getcwd(), "dir": str(rules_dir), "timeout": timeout, "memory_mb": memory_mb,
                   "rule_tests": rule_tests}
        with self._lock:
            try:
                conn = self._spawn()
                if not self._ready:
                    if not conn.poll(START_TIMEOUT) or conn.recv_bytes(64) != _READY:
                        raise _HelperError("did not start")
                    self._ready = True
                conn.send_bytes(json.dumps(request).encode())
                # The helper may still be warming its cache with the last version that passed (as long as
                # that check took at most), then this check gets its full time.
                deadline = time.monotonic() + 2 * timeout + REPLY_MARGIN
                while True:
                    if not conn.poll(max(0.0, deadline - time.monotonic())):
                        raise _HelperError("did not answer in time")
                    message = json.loads(conn.recv_bytes(MAX_MESSAGE))
                    if "loaded" not in message:
                        verdict = Verdict.from_dict(message)
                        self._remember(verdict, rule_tests)
                        return verdict
                    if on_loaded is not None:
                        on_loaded(str(message["loaded"]))
            except (_HelperError, EOFError, OSError, ValueError, KeyError, TypeError) as exc:
                log.error("rules_vetting_failed", reason=str(exc) or type(exc).__name__)
                self._discard()
                return Verdict(False, problems=("the process that checks the rules failed; it is started again "
                                                "for the next reload (see the server log)",), stopped="helper")

    def close(self) -> None:
        """Stop the helper. Does not wait for a check in progress (at exit that could take a while): kills."""
        if self._lock.acquire(timeout=1):
            try:
                self._discard()
            finally:
                self._lock.release()
        elif self._proc is not None:
            self._proc.kill()

    def _spawn(self) -> Connection:
        if self._proc is not None and self._proc.poll() is None and self._conn is not None:
            return self._conn
        self._discard()
        ours, theirs = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "service.rulebook.vetting", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
            )
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        self._conn = Connection(ours.detach())
        self._ready = False
        return self._conn

    def _discard(self) -> None:
        """Close the pipe (a healthy helper exits on it) and make sure the helper is gone."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._proc is not None:
            wait_or_kill(self._proc, 2)  # busy or stuck, it is killed: its child dies with it (PDEATHSIG)
            self._proc = None
        self._ready = False

    @property
    def helper_pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None


class _HelperError(Exception):
    pass


_shared: Vetter | None = None
_shared_lock = threading.Lock()


def shared() -> Vetter:
    """This process's helper, started on first use: every RuleStore in a process (tests start many servers)
    shares it and its warm parse cache."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Vetter()
            _shared.start()
            atexit.register(_shared.close)
        return _shared


# -- the helper ----------------------------------------------------------------------------------------------


def _preload() -> None:
    """What a check imports, imported once here so that every forked child has it."""
    from google.protobuf import json_format  # noqa: F401 - ruletests imports it late

    from ..decide import advisor  # noqa: F401
    from ..wire import api, validate  # noqa: F401
    from . import ruletests, version  # noqa: F401


def _serve(conn: Connection) -> None:
    # Ctrl-C or a hang-up reaches the whole process group; the server decides, and the helper ends with it.
    for sig in (signal.SIGINT, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            signal.signal(sig, signal.SIG_IGN)
    _preload()
    conn.send_bytes(_READY)
    while True:
        try:
            request = json.loads(conn.recv_bytes(1 << 16))
        except (EOFError, OSError):
            return  # the server closed the pipe or is gone
        try:
            verdict, fresh = _check_in_child(request, conn.send_bytes)
            conn.send_bytes(verdict.to_bytes())
        except OSError:
            return
        _warm(fresh)


def _warm(fresh: list[tuple[str, bytes]]) -> None:
    """Keep what a child parsed for a version that passed, so the next child need not parse it again."""
    from ..engine import load as yaml_load

    for shown, entry in fresh:
        yaml_load._CACHE[shown] = pickle.loads(entry)  # noqa: S301 - from our own forked child, see _check


def _check_in_child(
    request: dict[str, Any], forward: Callable[[bytes], None]
) -> tuple[Verdict, list[tuple[str, bytes]]]:
    """Fork, watch and reap one check. `forward` passes the child's progress on to the server."""
    timeout, memory_mb = float(request["timeout"]), int(request["memory_mb"])
    read, write = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read)
        _child(request, Connection(write, readable=False))
    os.close(write)
    reader = Connection(read, writable=False)
    verdict: Verdict | None = None
    fresh: list[tuple[str, bytes]] = []
    name: str | None = None
    killed = False
    try:
        while True:
            left = started + timeout - time.monotonic()
            if left <= 0 or not wait([reader], left):
                os.kill(pid, signal.SIGKILL)
                killed = True
                break
            try:
                message = reader.recv_bytes(MAX_MESSAGE)
            except EOFError:
                break  # the child is done (or died)
            except OSError:  # a message over MAX_MESSAGE (never sent: see _check): stop reading, and the child
                os.kill(pid, signal.SIGKILL)
                break
            if verdict is None and message.startswith(b'{"loaded"'):
                forward(message)
            elif verdict is None:
                verdict = Verdict.from_bytes(message)
            elif name is None:
                name = message.decode()
            else:
                fresh.append((name, message))
                name = None
    finally:
        reader.close()
        _, status = os.waitpid(pid, 0)
    seconds = round(time.monotonic() - started, 3)
    if verdict is not None:  # killed while sending warm-up files: the verdict stands, the rest is only a cache
        return replace(verdict, seconds=seconds), fresh
    if killed or (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU):
        return Verdict(False, problems=(took_too_long(timeout),), stopped="time", seconds=seconds), []
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:  # not ours: the kernel's OOM killer
        return Verdict(False, problems=("rules load was killed by the system, most likely for lack of memory",),
                       stopped="memory", seconds=seconds), []
    how = (f"signal {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status)
           else f"exit code {os.waitstatus_to_exitcode(status)}")
    limit = f"; it may have hit the {memory_mb} MB memory limit" if memory_mb else ""
    return Verdict(False, problems=(f"rules load stopped unexpectedly ({how}{limit})",), stopped="crash",
                   seconds=seconds), []


def _child(request: dict[str, Any], out: Connection) -> None:
    """In the forked child: the limits, the check, then the verdict and (if it passed) its files down `out`."""
    code = 0
    try:
        # SIGKILL if the helper dies (the helper is single-threaded, so its thread is it); prctl was looked up
        # once, when the helper imported processes, not in each child.
        die_with_parent(signal.SIGKILL)
        # Under a container's memory limit the kernel may have to kill something before RLIMIT_AS is reached:
        # let it be this child, not the server (raising one's own score needs no privilege).
        with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w", encoding="ascii") as f:
            f.write("1000")
        timeout, memory_mb = float(request["timeout"]), int(request["memory_mb"])
        fallback = Verdict(False, problems=(too_much_memory(memory_mb),), stopped="memory").to_bytes()
        # CPU time backs up the helper's wall clock (SIGXCPU, then SIGKILL a second later).
        cpu = math.ceil(timeout) + 1
        _lower(resource.RLIMIT_CPU, cpu, cpu + 1)
        if memory_mb > 0:
            _lower(resource.RLIMIT_AS, _address_space() + (memory_mb << 20))
        os.chdir(request["cwd"])  # so the folder's name, and every path shown, is what the server sees
        def loaded(book: Rulebook) -> None:
            out.send_bytes(json.dumps({"loaded": book.content_hash}).encode())

        try:
            verdict, fresh = _check(Path(request["dir"]), bool(request["rule_tests"]), memory_mb, loaded)
        except MemoryError:
            verdict, fresh = None, []
        out.send_bytes(verdict.to_bytes() if verdict is not None else fallback)
        for shown, raw in fresh:
            out.send_bytes(shown.encode())
            out.send_bytes(raw)
    except BaseException:  # noqa: BLE001 - no verdict sent: the helper reports how the child ended
        code = 1
    finally:
        os._exit(code)


def _check(
    root: Path, rule_tests: bool, memory_mb: int, on_compiled: Callable[[Rulebook], None]
) -> tuple[Verdict, list[tuple[str, bytes]]]:
    """The store's own steps (read, check, compile, rule tests) → the verdict and the files parsed afresh."""
    from ..engine import load as yaml_load
    from .folder import now
    from .ruletests import self_test
    from .version import cap_problems, prepare

    before = dict(yaml_load._CACHE)  # what the helper had parsed; this child adds what it parses
    prepared = prepare(root, self_test(root) if rule_tests else None, now(), on_compiled=on_compiled)
    book = prepared.book
    revision, digest = (book.revision, book.content_hash) if book is not None else ("", "")
    if prepared.bundle is not None:
        prepared.bundle.retire(None)
    if prepared.errors:
        memory = [e for e in prepared.errors if _MEMORY_ERROR.search(e)]
        if memory:
            where = _RULES_FILE.search(memory[0])
            problem = too_much_memory(memory_mb, where.group(0) if where else "")
            return Verdict(False, revision, digest, (problem,), stopped="memory"), []
        return Verdict(False, revision, digest, tuple(cap_problems(prepared.errors))), []
    # Pickled for the helper: its own child's parse results (a round trip costs ~1/20 of parsing again). They
    # never reach the server, which parses for itself.
    fresh = [(shown, pickle.dumps(entry, protocol=5)) for shown, entry in yaml_load._CACHE.items()
             if before.get(shown) is not entry]
    return Verdict(True, revision, digest), [(shown, entry) for shown, entry in fresh if len(entry) < MAX_MESSAGE]


def _lower(which: int, soft: int, hard: int | None = None) -> None:
    """Lower a resource limit (never above the limit already in force)."""
    _, old_hard = resource.getrlimit(which)
    cap = (lambda v: v) if old_hard == resource.RLIM_INFINITY else (lambda v: min(v, old_hard))
    resource.setrlimit(which, (cap(soft), cap(hard) if hard is not None else old_hard))


def _address_space() -> int:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def main(argv: list[str]) -> int:
    _serve(Connection(int(argv[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
