"""One rules version made ready to serve: compiled into its engine (a Bundle), checked and self-tested by
`prepare`. The live store and the vetting child both prepare versions this one way, so a version is judged
alike in both."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import MappingProxyType

from ..decide.advisor import advise
from ..decide.book import Rulebook
from ..decide.cancel import StillWanted
from ..domain.advice import Advice
from ..domain.brief import AdviceRequest
from ..domain.catalog import Gpu
from ..domain.models import ModelEntry, name_index, split_shape
from ..engine.durable import DurableEngine
from .folder import load_rulebook

SelfTest = Callable[["Bundle"], list[str]]  # returns failures (empty = pass)


class Bundle:
    """One immutable rules version with its engine. Thread-safe."""

    def __init__(self, book: Rulebook, loaded_at: datetime):
        self.book = book
        self.revision = book.revision
        self.content_hash = book.content_hash
        self.catalog: tuple[Gpu, ...] = book.catalog
        self._model_names = frozenset(n for e in book.models.values() for n in e.names())
        self._windows = MappingProxyType({n.lower(): e.context_window_tokens for e in book.models.values()
                                          for n in e.names() if e.context_window_tokens > 0})
        self._ids = name_index(book.models)
        self._shapes = MappingProxyType({n.lower(): (e.id, *split_shape(e)) for e in book.models.values()
                                         for n in e.names() if any(split_shape(e))})
        # tensor parallelism stays within one scale-up domain: an NVLink domain, or one node's PCIe GPUs
        self._scale_up = MappingProxyType({g.id: max(g.nvlink_domain, g.gpus_per_node, 1) for g in self.catalog})
        self.loaded_at = loaded_at
        self.engine = DurableEngine(book.program.rules)
        self._lock = threading.Lock()
        self._inflight = 0
        self._retired = False
        self._closed = False
        self._successor: Bundle | None = None

    def known_gpu_ids(self) -> frozenset[str]:
        return frozenset(g.id for g in self.catalog)

    def known_model_names(self) -> frozenset[str]:
        """Every id and alias of the model registry (a brief's model.name must be one, in any case)."""
        return self._model_names

    def model_windows(self) -> Mapping[str, int]:
        """Each lower-cased id and alias's context window (tokens), for models whose window the registry knows."""
        return self._windows

    def model_ids(self) -> Mapping[str, str]:
        """Each lower-cased id and alias -> the registry id (what messages quote)."""
        return self._ids

    def model_shapes(self) -> Mapping[str, tuple[str, int, int, int]]:
        """Each lower-cased id and alias's (registry id, query heads, KV heads, layers) for a parallel split (0 =
        not known)."""
        return self._shapes

    def scale_up_domains(self) -> Mapping[str, int]:
        """GPU id -> the most GPUs one tensor-parallel group of it may span."""
        return self._scale_up

    def models(self) -> tuple[ModelEntry, ...]:
        return tuple(self.book.models.values())

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


MAX_PROBLEMS = 20  # shown in GetRuleset, ReloadRules and the log; rules-check lists them all
MAX_PROBLEM_CHARS = 300


def cap_problems(problems: list[str]) -> list[str]:
    """The first MAX_PROBLEMS, each clipped, and a line saying how many more: an error travels in a reply."""
    out = [p if len(p) <= MAX_PROBLEM_CHARS else p[: MAX_PROBLEM_CHARS - 1] + "…" for p in problems[:MAX_PROBLEMS]]
    if len(problems) > MAX_PROBLEMS:
        out.append(f"… and {len(problems) - MAX_PROBLEMS} more problems (run rules-check to see all)")
    return out


@dataclass
class Prepared:
    book: Rulebook | None = None
    errors: list[str] = field(default_factory=list)
    bundle: Bundle | None = None  # compiled and self-tested; None when unchanged or rejected


def prepare(
    rules_dir: Path, self_test: SelfTest | None, loaded_at: datetime, current_hash: str | None = None,
    expect_hash: str | None = None, on_compiled: Callable[[Rulebook], None] | None = None,
) -> Prepared:
    """Everything slow: read, check, compile, self-test. The same steps here and in the vetting process, so a
    version is judged alike in both. No bundle is built when the content is `current_hash` (nothing new).
    `on_compiled` hears of a version that loaded and compiled, before its rule tests run."""
    book, problems = load_rulebook(rules_dir, expect_hash=expect_hash)
    errors = [str(p) for p in problems if p.severity == "error"]
    if book is None or errors:
        return Prepared(book, errors or ["rules did not load"])
    if current_hash is not None and current_hash == book.content_hash:
        return Prepared(book)
    try:
        bundle = Bundle(book, loaded_at)
    except Exception as exc:
        return Prepared(book, [f"engine rejected the rules: {type(exc).__name__}: {exc}"])
    if on_compiled is not None:
        on_compiled(book)
    failures = self_test(bundle) if self_test else []
    if failures:
        bundle.retire(None)
        return Prepared(book, [f"rule test failed: {f}" for f in failures])
    return Prepared(book, bundle=bundle)
