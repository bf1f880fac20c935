"""Progress on long work (`offers import`, `offers refresh`, `make accuracy`), on stderr so stdout stays the report.

On a terminal, a tqdm bar (the `progress` extra) that redraws in place; otherwise (a pipe, a log, CI, or no tqdm)
a plain line every `every_s` seconds and one at the end, so a log shows the work moving without a line per row.
Counting is cheap: callers add rows in batches (importers: every BATCH rows), and the plain form reads the clock
only once per `update` call.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

BATCH = 2000  # rows an importer counts before it says so: ~25 updates for a 50k-row catalog
EVERY_S = 5.0  # seconds between plain lines


def _is_terminal(stream: Any) -> bool:  # noqa: ANN401 - a text stream
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class Progress:
    """`with Progress("offers import", "rows", total) as p: p.update(n); p.note("aws")`."""

    def __init__(self, label: str, unit: str, total: int | None = None, stream: TextIO | None = None,
                 every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic, bar: bool | None = None):
        self.label, self.unit, self.total = label, unit, total
        self.stream = stream if stream is not None else sys.stderr
        self.every_s, self.clock = every_s, clock
        self.count = 0
        self.extra = ""
        self._bar: Any = None
        if _is_terminal(self.stream) if bar is None else bar:
            try:
                from tqdm import tqdm
            except ImportError:  # the progress extra is not installed: plain lines
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=total, desc=label, unit=f" {unit}", file=self.stream, unit_scale=False,
                                 dynamic_ncols=True, mininterval=0.2, leave=True)
        self._last = clock()
        self._closed = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def update(self, n: int = 1) -> None:
        self.count += n
        if self._bar is not None:
            self._bar.update(n)
            return
        now = self.clock()
        if now - self._last >= self.every_s:
            self._last = now
            self._line()

    def set_total(self, total: int) -> None:
        """The amount of work, once it is known (after the datasets are read)."""
        self.total = total
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def note(self, text: str) -> None:
        """What is being worked on now (a provider's name, a dataset's), shown beside the count."""
        self.extra = text
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=False)

    def line(self) -> str:
        of = ""
        if self.total:
            of = f" of {self.total:,} ({min(1.0, self.count / self.total):.0%})"
        return f"{self.label}: {self.count:,}{of} {self.unit}" + (f", {self.extra}" if self.extra else "")

    def _line(self) -> None:
        print(self.line(), file=self.stream, flush=True)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
            self._bar = None
            return
        if self.count or self.total:
            self.extra = f"{self.extra}, done" if self.extra else "done"
            self._line()
