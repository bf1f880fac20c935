"""A plain-text table: a header, a rule under it, columns padded to their widest cell (numbers right-aligned)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO


def print_table(rows: Sequence[Sequence[str]], right: set[int], out: TextIO) -> None:
    """`rows[0]` is the header; columns in `right` are right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        print("  ".join(cells).rstrip(), file=out)
        if n == 0:
            print("  ".join("-" * w for w in widths), file=out)
