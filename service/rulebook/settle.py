"""Is a changed offer table finished? The watcher's second look before it loads a change (issue 38 item 7).

The settle time (the folder holding still for 1 s) does not see a writer that pauses longer mid-file: a careless
writer pausing 1.2 s between halves of lambda's table had the truncated half served in 5 of 10 trials, and a table
cut at a row boundary is a valid one. So once the folder holds still, each offer table (`offers/*.csv`) is compared
with the one last accepted: a table whose last line is unfinished (no newline at the end, or fewer values than
its header names) or that lost more than `refresh_max_rows_lost_share` of its rows (assumptions; the share the
refresh gates use, market/gates.py) looks half-written, and the change must then hold still for the longer
suspect time (`GPU_ADVISOR_RULES_SUSPECT_SECONDS`, default 10 s) before it is loaded. A writer that is still
writing changes the file within it and so starts the wait again; a table that really shrank is loaded after it
(and vetted as any version is).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

DEFAULT_SUSPECT_SECONDS = 10.0
SUSPECT_ENV = "GPU_ADVISOR_RULES_SUSPECT_SECONDS"
DEFAULT_MAX_LOST_SHARE = 0.5  # rules/assumptions.yaml refresh_max_rows_lost_share, when the rules do not say
MAX_READ = 64 * 2**20  # an offer table is at most a few MB; a bigger file is left to the loader's own limits


@dataclass(frozen=True)
class Table:
    rows: int  # data rows (non-blank lines after the header)
    finished: bool  # ends with a newline, and its last line has as many values as the header names


def read_table(path: Path) -> Table | None:
    """What the watcher checks of one offer table; None when it cannot be read (the loader will say why)."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_READ + 1)
    except OSError:
        return None
    if len(data) > MAX_READ:
        return None
    text = data.decode("utf-8", errors="replace")
    lines = [line for line in text.split("\n") if line.strip()]
    if not lines:
        return Table(0, text.endswith("\n") or not text)
    finished = text.endswith("\n")
    if finished and len(lines) > 1:
        try:
            width = len(next(csv.reader([lines[0]])))
            last = next(csv.reader([lines[-1]], strict=True))
            finished = len(last) == width
        except (csv.Error, StopIteration):
            finished = False
    return Table(len(lines) - 1, finished)


def offer_tables(root: Path) -> dict[str, Table]:
    """Each `offers/*.csv` of the folder (by name) as the watcher sees it."""
    out: dict[str, Table] = {}
    folder = root / "offers"
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.csv")):
        t = read_table(path)
        if t is not None:
            out[path.name] = t
    return out


def unfinished(before: dict[str, Table], after: dict[str, Table], max_lost_share: float) -> list[str]:
    """Why the tables in `after` look half-written against those last accepted (`before`); empty: they do not."""
    reasons = []
    for name, t in sorted(after.items()):
        if not t.finished:
            reasons.append(f"offers/{name}: its last line is unfinished")
        was = before.get(name)
        if was is not None and was.rows > 0 and (was.rows - t.rows) / was.rows > max_lost_share:
            reasons.append(f"offers/{name}: {t.rows:,} rows where the last accepted table had {was.rows:,}")
    return reasons
