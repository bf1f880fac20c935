"""The active rules version and how a new one replaces it.

A reload compiles the folder into a new Bundle (its own engine rulesets), runs the folder's own rule tests
against it in isolation, and only then swaps one reference. Requests that already hold the old bundle finish on
it; the old engine is closed when the last of them leaves. A bad edit never replaces a good version: the error is
kept for GetRuleset and logged, and the last good version keeps serving.

With a Vetter (the server has one), the folder is first loaded and its rule tests run in a separate, killable
process under a memory and time limit (service/rulebook/vetting.py); only a version that passed there is loaded here,
from the very bytes that were checked, and its rule tests are not run twice.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import structlog

from ..engine.load import Problem, RulesError
from .files import read_folder, walk
from .folder import content_hash, now
from .settle import DEFAULT_MAX_LOST_SHARE, DEFAULT_SUSPECT_SECONDS, SUSPECT_ENV, Table, offer_tables, unfinished
from .version import Bundle, Prepared, SelfTest, cap_problems, prepare
from .vetting import DEFAULT_MEMORY_MB, MEMORY_ENV, Vetter

log = structlog.get_logger("gpu_advisor.store")

@dataclass
class RulesetStatus:
    revision: str = ""
    content_hash: str = ""
    loaded_at: datetime | None = None
    counts: dict[str, int] = field(default_factory=dict)
    last_error: str = ""
    last_attempted_revision: str = ""
    last_attempted_at: datetime | None = None
    source_dir: str = ""
    # Not empty while the rules folder's version is refused and the server serves another one instead: which.
    fallback: str = ""


@dataclass(frozen=True)
class ReloadResult:
    ok: bool
    changed: bool
    revision: str
    problems: tuple[str, ...] = ()


DEFAULT_LOAD_TIMEOUT = 20.0  # seconds; the shipped rules load, compile and self-test in about one
TIMEOUT_ENV = "GPU_ADVISOR_RULES_LOAD_TIMEOUT"
# Seconds the watched folder must hold still (the same files, sizes and modification times) before a change is
# loaded. A writer that pauses longer than this mid-file is still read half-written: publish atomically
# (docs/operations.md, Publishing a rules version). 0.25 s served a paused `offers import` truncated.
DEFAULT_SETTLE_SECONDS = 1.0
SETTLE_ENV = "GPU_ADVISOR_RULES_SETTLE_SECONDS"


class _Load:
    """One load on its own thread. The caller waits up to a timeout; a load it stopped waiting for is abandoned
    and, should it ever finish, frees what it built instead of being swapped in."""

    def __init__(self, work: Callable[[], Prepared]):
        self._work = work
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._abandoned = False
        self._quiet = False
        self.result: Prepared | None = None
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._run, name="rules-load", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            result = self._work()
        except Exception:  # a loader bug must not take the server down with it; the log keeps the traceback
            log.exception("rules_load_crashed")
            result = Prepared(errors=["the rules loader failed unexpectedly (see the server log)"])
        with self._lock:
            if self._abandoned:
                if result.bundle is not None:
                    result.bundle.retire(None)
                if not self._quiet:
                    log.warning("rules_load_finished_late", seconds=round(time.monotonic() - self.started, 1))
                return
            self.result = result
            self._done.set()

    def discard(self) -> None:
        """Not wanted after all (its version failed its rule tests elsewhere): free what it builds."""
        with self._lock:
            self._abandoned, self._quiet = True, True
            result = self.result
        if result is not None and result.bundle is not None:
            result.bundle.retire(None)

    def wait(self, timeout: float) -> Prepared | None:
        """The result, or None (and the load abandoned) when it takes longer than `timeout`."""
        self._done.wait(timeout)
        with self._lock:
            if self.result is None:
                self._abandoned = True
            return self.result

    def running(self) -> bool:
        return self.thread.is_alive()


class RuleStore:
    def __init__(
        self,
        rules_dir: str | Path,
        self_test: SelfTest | None = None,
        poll_seconds: float = 0.5,
        load_timeout: float | None = None,
        vetter: Vetter | None = None,
        memory_mb: int | None = None,
        settle_seconds: float | None = None,
        suspect_seconds: float | None = None,
    ):
        """`vetter`: check each version in a separate process first (its rule tests run there when `self_test`
        is set; a custom `self_test` callable only runs in-process, without a vetter). `memory_mb`: what that
        process may allocate for one load."""
        self.rules_dir = Path(rules_dir)
        self.self_test = self_test
        self.poll_seconds = poll_seconds
        self.load_timeout = (
            load_timeout if load_timeout is not None else float(os.environ.get(TIMEOUT_ENV) or DEFAULT_LOAD_TIMEOUT)
        )
        self.settle_seconds = (settle_seconds if settle_seconds is not None
                               else float(os.environ.get(SETTLE_ENV) or DEFAULT_SETTLE_SECONDS))
        # A change whose offer tables look half-written must hold still this long instead (rulebook/settle.py).
        self.suspect_seconds = max(self.settle_seconds, suspect_seconds if suspect_seconds is not None
                                   else float(os.environ.get(SUSPECT_ENV) or DEFAULT_SUSPECT_SECONDS))
        self.suspects: list[list[str]] = []  # the reasons of each change held back, for logs and tests
        self.suspect_seen = threading.Event()
        self._tables: dict[str, Table] = {}  # the offer tables as last accepted by the watcher
        self.vetter = vetter
        self.memory_mb = memory_mb if memory_mb is not None else int(os.environ.get(MEMORY_ENV) or DEFAULT_MEMORY_MB)
        self._active: Bundle | None = None
        self._status = RulesetStatus(source_dir=str(self.rules_dir))
        self._reload_lock = threading.Lock()
        self._load: _Load | None = None
        self._watcher: threading.Thread | None = None
        self._stop = threading.Event()
        # The settle wait's clock and pause (True once stopped): a test drives both instead of sleeping.
        self.clock: Callable[[], float] = time.monotonic
        self.pause: Callable[[float], bool] = self._stop.wait
        self.reloads = 0
        self.on_activate: list[Callable[[Bundle], None]] = []
        self.on_reject: list[Callable[[str], None]] = []  # called with the error text

    # -- reading ---------------------------------------------------------------------------------------------
    def active(self) -> Bundle | None:
        return self._active

    def status(self) -> RulesetStatus:
        return RulesetStatus(**self._status.__dict__)

    # -- loading ---------------------------------------------------------------------------------------------
    def load(self) -> None:
        """First load: raises RulesError when the folder is not a valid rules version."""
        result = self.reload()
        if not result.ok:
            raise RulesError([Problem(self.rules_dir.name, 1, 1, "", p) for p in result.problems])

    def _current_hash(self) -> str | None:
        current = self._active
        return current.content_hash if current is not None else None

    def reload(self) -> ReloadResult:
        """Never raises, and returns within about `load_timeout` (with a vetter: the check, then the load here,
        each that long at most): a failed or hanging reload leaves the active version serving and records why."""
        if not self._reload_lock.acquire(timeout=3 * self.load_timeout + 10):
            return ReloadResult(False, False, "", ("another reload is in progress",))
        try:
            attempted_at = now()
            self._status.last_attempted_at = attempted_at
            self._status.last_attempted_revision = ""  # known only once the folder has been read
            if self._load is not None and self._load.running():
                # One stuck load at a time: never pile up threads behind something that does not finish.
                age = time.monotonic() - self._load.started
                return self._fail("", [f"a previous load has not finished after {age:.0f} s; not reloading"])
            if self.vetter is not None:
                vetted = self._vetted(attempted_at)
                if isinstance(vetted, ReloadResult):
                    return vetted
                self._load = vetted
            else:
                self._load = _Load(lambda: prepare(self.rules_dir, self.self_test, attempted_at, self._current_hash()))
            prepared = self._load.wait(self.load_timeout)
            if prepared is None:
                return self._fail("", [f"loading the rules took longer than {self.load_timeout:g} s: stopped"])
            return self._activate(prepared, attempted_at)
        finally:
            self._reload_lock.release()

    def _vetted(self, attempted_at: datetime) -> ReloadResult | _Load:
        """Check the folder in the vetting process; meanwhile, once it has loaded there, load the same bytes here
        (loading is deterministic) while its rule tests run there. → the load to wait for, or the outcome."""
        assert self.vetter is not None
        files, refused = read_folder(self.rules_dir, self.rules_dir.name)  # bounded, opens regular files only
        known = content_hash(files) if not refused else None
        if known is not None and self.vetter.passed(known, rule_tests=self.self_test is not None):
            log.info("rules_checked_before", revision=known[:12])
            if known == self._current_hash():
                return self._unchanged(known[:12])
            return _Load(lambda: prepare(self.rules_dir, None, attempted_at, None, known))
        loads: dict[str, _Load] = {}

        def load_here(book_hash: str) -> None:
            if book_hash != self._current_hash() and book_hash not in loads:
                loads[book_hash] = _Load(lambda: prepare(self.rules_dir, None, attempted_at, None, book_hash))

        verdict = self.vetter.vet(
            self.rules_dir, self.load_timeout, self.memory_mb, rule_tests=self.self_test is not None,
            on_loaded=load_here,
        )
        log.info("rules_vetted", ok=verdict.ok, revision=verdict.revision or None, seconds=verdict.seconds,
                 stopped=verdict.stopped or None)
        wanted = loads.pop(verdict.content_hash, None) if verdict.ok else None
        for unwanted in loads.values():
            unwanted.discard()
        if not verdict.ok:
            self._status.last_attempted_revision = verdict.revision
            return self._fail(verdict.revision, list(verdict.problems), capped=True)
        if verdict.content_hash == self._current_hash():  # nothing new: nothing to load here
            if wanted is not None:
                wanted.discard()
            return self._unchanged(verdict.revision)
        return wanted or _Load(lambda: prepare(self.rules_dir, None, attempted_at, None, verdict.content_hash))

    def _activate(self, prepared: Prepared, attempted_at: datetime) -> ReloadResult:
        book = prepared.book
        revision = book.revision if book else ""
        self._status.last_attempted_at = attempted_at
        self._status.last_attempted_revision = revision
        if book is None or prepared.errors:
            return self._fail(revision, prepared.errors or ["rules did not load"])
        bundle = prepared.bundle
        if bundle is None:  # same content as the active version
            return self._unchanged(book.revision)
        current = self._active
        self._active = bundle  # the swap: one reference assignment
        self.reloads += 1
        self._status.revision = book.revision
        self._status.content_hash = book.content_hash
        self._status.loaded_at = attempted_at
        self._status.counts = book.counts()
        self._status.last_error = ""
        self._status.fallback = ""
        if current is not None:
            current.retire(bundle)
        for hook in self.on_activate:
            hook(bundle)
        log.info(
            "rules_activated",
            revision=book.revision,
            rules=len(book.program.rules),
            previous=current.revision if current else None,
        )
        return ReloadResult(True, True, book.revision)

    def start_on_fallback(self, folder: Path, kind: str) -> bool:
        """With nothing active because the rules folder's version was refused: serve the version in `folder`
        (vetted before, or shipped with the code). The folder's error stays in the status, so answers are
        flagged, and its next good version replaces this one. → whether it is active."""
        with self._reload_lock:
            if self._active is not None:
                return False
            kept = (self._status.last_error, self._status.last_attempted_revision, self._status.last_attempted_at)
            attempted_at = now()
            prepared = _Load(lambda: prepare(folder, None, attempted_at, None)).wait(self.load_timeout)
            if prepared is None or prepared.bundle is None or prepared.errors:
                log.error("rules_fallback_failed", kind=kind, folder=str(folder),
                          problems=list(prepared.errors)[:5] if prepared else ["timed out"])
                if prepared is not None and prepared.bundle is not None:
                    prepared.bundle.retire(None)
                return False
            self._activate(prepared, attempted_at)
            self._status.last_error, self._status.last_attempted_revision, self._status.last_attempted_at = kept
            self._status.fallback = kind
            log.warning("rules_fallback_serving", kind=kind, folder=str(folder), revision=self._status.revision,
                        refused=kept[0].splitlines()[0] if kept[0] else None)
            return True

    def _unchanged(self, revision: str) -> ReloadResult:
        """The folder holds the active version: a good attempt that changes nothing."""
        self._status.last_attempted_revision = revision
        self._status.last_error = ""
        self._status.fallback = ""  # the folder holds what is served again
        return ReloadResult(True, False, revision)

    def _fail(self, revision: str, problems: list[str], capped: bool = False) -> ReloadResult:
        """`capped`: `problems` went through cap_problems already (in the vetting process)."""
        shown = problems if capped else cap_problems(problems)
        self._status.last_error = "\n".join(shown)
        log.warning(
            "rules_rejected",
            attempted_revision=revision or None,
            problems=shown,
            serving=self._active.revision if self._active else None,
        )
        for hook in self.on_reject:
            hook(self._status.last_error)
        return ReloadResult(False, False, revision, tuple(shown))

    # -- watching --------------------------------------------------------------------------------------------
    def fingerprint(self) -> tuple:
        """Cheap change detector over what a load would read. Records where links lead, so a ConfigMap's
        `..data` swap shows up as a change; reads no file and walks nothing outside the folder."""
        entries, refused = walk(self.rules_dir)
        return (
            os.path.realpath(self.rules_dir),
            tuple((e.rel, e.real, e.mtime_ns, e.size) for e in entries),
            tuple(refused),
        )

    def start_watching(self) -> None:
        if self._watcher is not None:
            return
        self._stop.clear()
        # The baseline is taken now, not when the thread first runs: an edit made right after this returns
        # (a busy machine may start the thread late) must count as a change.
        seen = self.fingerprint()
        self._tables = offer_tables(self.rules_dir)
        self._watcher = threading.Thread(target=self._watch, args=(seen,), name="rules-watcher", daemon=True)
        self._watcher.start()

    def stop_watching(self) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
            self._watcher = None

    def _watch(self, seen: tuple) -> None:
        while not self._stop.wait(self.poll_seconds):
            current = self.fingerprint()
            if current == seen:
                continue
            settled = self._settled(current)
            if settled is None:
                return  # stopped
            settled = self._finished(settled)
            if settled is None:
                return
            seen = settled
            result = self.reload()
            log.info("rules_change_seen", ok=result.ok, changed=result.changed, revision=result.revision)

    def _finished(self, settled: tuple) -> tuple | None:
        """A settled change whose offer tables look half-written (an unfinished last line, most rows gone) must
        hold still for `suspect_seconds` more before it is loaded; a writer still writing moves it meanwhile and
        the whole wait starts again. → the fingerprint to load, or None when stopped."""
        while True:
            tables = offer_tables(self.rules_dir)
            active = self._active
            share = DEFAULT_MAX_LOST_SHARE
            if active is not None:
                value = active.book.assumptions.values.get("refresh_max_rows_lost_share", share)
                share = float(value) if isinstance(value, int | float) and value > 0 else share
            reasons = unfinished(self._tables, tables, share)
            if not reasons:
                self._tables = tables
                return settled
            self.suspects.append(reasons)
            self.suspect_seen.set()
            log.warning("rules_change_held", reasons=reasons, hold_seconds=self.suspect_seconds,
                        hint="the folder must hold still this long before a table that looks half-written is "
                             "loaded; publish with one rename to skip the wait")
            again = self._moved(settled, self.suspect_seconds)
            if again is None:
                return None
            if again == settled:  # held still the whole time: a real change, loaded (and vetted) as any other
                self._tables = tables
                return settled
            settled = self._settled(again)  # the writer went on: settle again, then look again
            if settled is None:
                return None

    def _moved(self, current: tuple, hold: float) -> tuple | None:
        """Watch the folder for up to `hold` seconds. → the fingerprint it changed to, `current` when it held
        still throughout, None when stopped."""
        step = max(min(self.poll_seconds, self.settle_seconds / 4), 0.01)
        end = time.monotonic() + hold
        while time.monotonic() < end:
            if self._stop.wait(step):
                return None
            again = self.fingerprint()
            if again != current:
                return again
        return current

    def _settled(self, current: tuple) -> tuple | None:
        """Wait until the folder held still for `settle_seconds`: an editor, `kubectl` or an importer writes
        several files, or one file in several writes. → its fingerprint then, or None when stopped."""
        step = max(min(self.poll_seconds, self.settle_seconds / 4), 0.01)
        still_since = self.clock()
        while self.clock() - still_since < self.settle_seconds:
            if self.pause(step):
                return None
            again = self.fingerprint()
            if again != current:
                current, still_since = again, self.clock()
        return current

    def close(self) -> None:
        self.stop_watching()
        if self._active is not None:
            self._active.retire(None)
            self._active = None
