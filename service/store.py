"""The active rules version and how a new one replaces it.

A reload compiles the folder into a new Bundle (its own engine rulesets), runs the folder's own rule tests
against it in isolation, and only then swaps one reference. Requests that already hold the old bundle finish on
it; the old engine is closed when the last of them leaves. A bad edit never replaces a good version: the error is
kept for GetRuleset and logged, and the last good version keeps serving.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import structlog

from .advice import Advice
from .brief import AdviceRequest
from .catalog import Gpu
from .decide.advisor import advise
from .decide.cancel import StillWanted
from .engine.durable import DurableEngine
from .engine.load import Problem, RulesError
from .rulebook import Rulebook, load_rulebook, now

log = structlog.get_logger("gpu_advisor.store")

SelfTest = Callable[["Bundle"], list[str]]  # returns failures (empty = pass)


class Bundle:
    """One immutable rules version with its engine. Thread-safe."""

    def __init__(self, book: Rulebook, loaded_at: datetime):
        self.book = book
        self.revision = book.revision
        self.content_hash = book.content_hash
        self.catalog: tuple[Gpu, ...] = book.catalog
        self.loaded_at = loaded_at
        self.engine = DurableEngine(book.program.rules)
        self._lock = threading.Lock()
        self._inflight = 0
        self._retired = False
        self._closed = False
        self._successor: Bundle | None = None

    def known_gpu_ids(self) -> frozenset[str]:
        return frozenset(g.id for g in self.catalog)

    def advise(self, request: AdviceRequest, still_wanted: StillWanted | None = None) -> Advice:
        with self._lock:
            if self._closed:
                target = self._successor
            else:
                self._inflight += 1
                target = None
        if target is not None:  # we were swapped out and freed before this request began: use the newer one
            return target.advise(request, still_wanted)
        try:
            return advise(self.book, self.engine, request, still_wanted=still_wanted)
        finally:
            self._leave()

    def _leave(self) -> None:
        with self._lock:
            self._inflight -= 1
            close = self._retired and self._inflight == 0 and not self._closed
            if close:
                self._closed = True
        if close:
            self.engine.close()

    def retire(self, successor: Bundle | None) -> None:
        with self._lock:
            self._retired = True
            self._successor = successor
            close = self._inflight == 0 and not self._closed
            if close:
                self._closed = True
        if close:
            self.engine.close()

    @property
    def closed(self) -> bool:
        return self._closed


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


@dataclass(frozen=True)
class ReloadResult:
    ok: bool
    changed: bool
    revision: str
    problems: tuple[str, ...] = ()


class RuleStore:
    def __init__(self, rules_dir: str | Path, self_test: SelfTest | None = None, poll_seconds: float = 0.5):
        self.rules_dir = Path(rules_dir)
        self.self_test = self_test
        self.poll_seconds = poll_seconds
        self._active: Bundle | None = None
        self._status = RulesetStatus(source_dir=str(self.rules_dir))
        self._reload_lock = threading.Lock()
        self._watcher: threading.Thread | None = None
        self._stop = threading.Event()
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
            raise RulesError([Problem(str(self.rules_dir), 1, 1, "", p) for p in result.problems])

    def reload(self) -> ReloadResult:
        """Never raises: a failed reload leaves the active version serving and records why."""
        with self._reload_lock:
            attempted_at = now()
            try:
                book, problems = load_rulebook(self.rules_dir)
            except Exception as exc:  # a loader bug must not take the server down with it
                log.exception("rules_load_crashed")
                book, problems = None, [Problem(str(self.rules_dir), 1, 1, "", f"loader failed: {exc!r}")]
            errors = [str(p) for p in problems if p.severity == "error"]
            revision = book.revision if book else ""
            self._status.last_attempted_at = attempted_at
            self._status.last_attempted_revision = revision
            if book is None or errors:
                return self._fail(revision, errors or ["rules did not load"])
            current = self._active
            if current is not None and current.content_hash == book.content_hash:
                self._status.last_error = ""
                return ReloadResult(True, False, book.revision)
            try:
                bundle = Bundle(book, attempted_at)
            except Exception as exc:
                return self._fail(revision, [f"engine rejected the rules: {exc}"])
            failures = self.self_test(bundle) if self.self_test else []
            if failures:
                bundle.retire(None)
                return self._fail(revision, [f"rule test failed: {f}" for f in failures])
            self._active = bundle  # the swap: one reference assignment
            self.reloads += 1
            self._status.revision = book.revision
            self._status.content_hash = book.content_hash
            self._status.loaded_at = attempted_at
            self._status.counts = book.counts()
            self._status.last_error = ""
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

    def _fail(self, revision: str, problems: list[str]) -> ReloadResult:
        self._status.last_error = "\n".join(problems)
        log.warning(
            "rules_rejected",
            attempted_revision=revision or None,
            problems=problems[:20],
            serving=self._active.revision if self._active else None,
        )
        for hook in self.on_reject:
            hook(self._status.last_error)
        return ReloadResult(False, False, revision, tuple(problems))

    # -- watching --------------------------------------------------------------------------------------------
    def fingerprint(self) -> tuple:
        """Cheap change detector. Follows symlinks, so a ConfigMap's `..data` swap shows up as a change."""
        root = self.rules_dir
        try:
            entries = [os.path.realpath(root)]
            for dirpath, _dirs, files in os.walk(root, followlinks=True):
                for name in files:
                    p = os.path.join(dirpath, name)
                    try:
                        st = os.stat(p)
                    except OSError:
                        continue
                    entries.append((p, os.path.realpath(p), st.st_mtime_ns, st.st_size))
            return tuple(sorted(map(str, entries)))
        except OSError:
            return ()

    def start_watching(self) -> None:
        if self._watcher is not None:
            return
        self._stop.clear()
        self._watcher = threading.Thread(target=self._watch, name="rules-watcher", daemon=True)
        self._watcher.start()

    def stop_watching(self) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
            self._watcher = None

    def _watch(self) -> None:
        seen = self.fingerprint()
        while not self._stop.wait(self.poll_seconds):
            current = self.fingerprint()
            if current == seen:
                continue
            # An editor or `kubectl` writes several files; wait until the folder holds still for one interval.
            while not self._stop.wait(self.poll_seconds / 2):
                again = self.fingerprint()
                if again == current:
                    break
                current = again
            seen = current
            result = self.reload()
            log.info("rules_change_seen", ok=result.ok, changed=result.changed, revision=result.revision)

    def close(self) -> None:
        self.stop_watching()
        if self._active is not None:
            self._active.retire(None)
            self._active = None
