"""What every importer shares: the report of what was read, written and dropped, and the CSV writer."""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ...domain.offers import COLUMNS, Offer

EXAMPLES_PER_REASON = 3


@dataclass
class ImportReport:
    source: str
    rows_read: int = 0
    rows_written: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def drop(self, reason: str, example: str, count: int = 1) -> None:
        self.dropped[reason] += count
        ex = self.examples.setdefault(reason, [])
        if len(ex) < EXAMPLES_PER_REASON:
            ex.append(example)

    def merge(self, other: ImportReport) -> None:
        self.rows_read += other.rows_read
        self.rows_written += other.rows_written
        for reason, n in other.dropped.items():
            self.dropped[reason] += n
            ex = self.examples.setdefault(reason, [])
            ex.extend(other.examples.get(reason, [])[: EXAMPLES_PER_REASON - len(ex)])
        self.notes.extend(other.notes)

    def render(self) -> str:
        lines = [f"{self.source}: {self.rows_read} rows read, {self.rows_written} offers written, "
                 f"{sum(self.dropped.values())} dropped"]
        for reason, n in sorted(self.dropped.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"  dropped {n:>5}  {reason}")
            lines.extend(f"                e.g. {ex}" for ex in self.examples.get(reason, []))
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)


def _num(x: float | None) -> str:
    if x is None:
        return ""
    # 6 decimals keep every catalog price exact (they have at most 5) and drop float noise from sums
    return format(round(x, 6), "f").rstrip("0").rstrip(".")


def offer_cells(o: Offer) -> list[str]:
    return [
        o.provider, o.instance_type, o.gpu, str(o.gpus_per_instance), _num(o.vcpus), _num(o.memory_gib), o.region,
        o.country, o.tier, _num(o.usd_per_hour), o.as_of.isoformat(), o.source, o.valid_from.isoformat(),
        o.valid_until.isoformat() if o.valid_until else "",
    ]


def write_offers_csv(rows: Iterable[Offer], out: TextIO | Path | str) -> int:
    """Write rows in the `rules/offers` format (header first, canonical column order); returns the row count."""
    if isinstance(out, (str, Path)):
        with open(out, "w", newline="", encoding="utf-8") as f:
            return write_offers_csv(rows, f)
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    n = 0
    for o in rows:
        w.writerow(offer_cells(o))
        n += 1
    return n


def offers_csv_text(rows: Iterable[Offer]) -> str:
    buf = io.StringIO()
    write_offers_csv(rows, buf)
    return buf.getvalue()


def parse_price(text: str) -> float | None:
    """A catalog price, or None when it is empty, NaN or not a number (the caller drops the row and says why)."""
    t = text.strip()
    if not t:
        return None
    try:
        x = float(t)
    except ValueError:
        return None
    return x if x == x and x not in (float("inf"), float("-inf")) else None
