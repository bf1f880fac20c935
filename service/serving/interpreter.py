"""What the server process asks of the Python interpreter: how often a thread waiting for the GIL gets it, and
a garbage collector that does not walk the loaded rules.

- Garbage collection. A loaded rules version is tens of thousands of long-lived objects (the compiled rules,
  catalog, offers, templates) and the server's imports as many again. A full collection walks them all: 12-40
  ms with the GIL held, on this 2-core machine, which lands on whichever call is running or waiting (the p99 at
  half load). None of them becomes garbage while its version serves, so after a version is activated they are
  moved out of the collector's sight (`gc.freeze`); a collection then walks only what calls made since.
  A frozen object whose references cycle is never collected, so every activation first unfreezes (the version
  it replaced can now be collected), collects once, and freezes what is still alive. It runs on a thread of its
  own a moment after the swap, so the version replaced (still held by the swapping frame and by calls in
  flight) is gone by then; reloads within that moment share one pass.
- The switch interval (`sys.setswitchinterval`): a thread that wants the GIL while another runs Python waits up
  to this long before asking it back. The event loop that reads and writes every call's frames waits that long
  behind a running answer, several times per call. Set by `--switch-interval-ms`.
"""

from __future__ import annotations

import gc
import sys
import threading
import time

import structlog

log = structlog.get_logger("gpu_advisor.interpreter")

PYTHON_SWITCH_INTERVAL_MS = 5.0  # CPython's own default
MAX_SWITCH_INTERVAL_MS = 100.0
# The default is CPython's own until a measurement shows a gain (docs/benchmarks.md, Interpreter settings).
DEFAULT_SWITCH_INTERVAL_MS = PYTHON_SWITCH_INTERVAL_MS
# After an activation, wait this long for calls that took the replaced version to finish before collecting.
SETTLE_SECONDS = 1.0


def set_switch_interval(ms: float) -> None:
    if not 0 < ms <= MAX_SWITCH_INTERVAL_MS:
        raise ValueError(f"switch interval must be above 0 and at most {MAX_SWITCH_INTERVAL_MS:g} ms")
    sys.setswitchinterval(ms / 1000)


def refreeze() -> float:
    """Unfreeze, collect everything, freeze what is alive. → milliseconds it took (the GIL held throughout)."""
    started = time.perf_counter()
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return (time.perf_counter() - started) * 1000


class Refreezer:
    """`schedule()` on every activation (a RuleStore.on_activate hook); `refreeze` runs on a daemon thread
    `settle_seconds` after the last call, once for a burst of activations."""

    def __init__(self, settle_seconds: float = SETTLE_SECONDS):
        self.settle_seconds = settle_seconds
        self.passes = 0
        self._wanted = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def schedule(self, _bundle: object = None) -> None:
        self._wanted.set()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="gc-refreeze", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            # Quiet for settle_seconds: a reload during the wait starts the wait again.
            while True:
                self._wanted.clear()
                time.sleep(self.settle_seconds)
                if not self._wanted.is_set():
                    break
            took = refreeze()
            self.passes += 1
            log.info("gc_frozen", objects=frozen(), ms=round(took, 1))


def frozen() -> int:
    return gc.get_freeze_count()
