"""What every importer shares: the report of what was read, written and dropped, and the CSV writer."""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TextIO

from ...domain.offers import COLUMNS, Offer
from ...rulebook.atomic import write_atomically

EXAMPLES_PER_REASON = 3


@dataclass
class ProviderCounts:
    """One provider's rows: every row read is written (it made at least one offer), superseded (another row
    stands for it: a zone of the same region, a newer file of the same provider) or dropped (with its reason)."""

    read: int = 0
    written: int = 0
    superseded: int = 0
    dropped: int = 0
    tiers: Counter[str] = field(default_factory=Counter)  # offers written per tier

    def balanced(self) -> bool:
        return self.read == self.written + self.superseded + self.dropped


@dataclass
class ImportReport:
    source: str
    providers: dict[str, ProviderCounts] = field(default_factory=dict)
    dropped: Counter[str] = field(default_factory=Counter)  # rows per reason
    examples: dict[str, list[str]] = field(default_factory=dict)  # every dropped row per reason
    notes: list[str] = field(default_factory=list)
    unsure_source: str = ""  # a stamp the importer made without knowing the dataset (issue 37: --source is asked)

    def of(self, provider: str) -> ProviderCounts:
        return self.providers.setdefault(provider or "(no provider)", ProviderCounts())

    def read(self, provider: str, count: int = 1) -> None:
        self.of(provider).read += count

    def written(self, provider: str, count: int = 1) -> None:
        self.of(provider).written += count

    def offer(self, provider: str, tier: str) -> None:
        self.of(provider).tiers[tier] += 1

    def supersede(self, provider: str, count: int = 1) -> None:
        self.of(provider).superseded += count

    def drop(self, reason: str, example: str, count: int = 1, provider: str = "") -> None:
        """`count` rows dropped for `reason`; `example` names them (file:line, instance, region)."""
        self.dropped[reason] += count
        self.of(provider).dropped += count
        self.examples.setdefault(reason, []).append(example)

    @property
    def rows_read(self) -> int:
        return sum(c.read for c in self.providers.values())

    @property
    def rows_written(self) -> int:
        return sum(c.written for c in self.providers.values())

    @property
    def rows_superseded(self) -> int:
        return sum(c.superseded for c in self.providers.values())

    @property
    def rows_dropped(self) -> int:
        return sum(c.dropped for c in self.providers.values())

    @property
    def offers(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for c in self.providers.values():
            out.update(c.tiers)
        return out

    def merge(self, other: ImportReport) -> None:
        for prov, c in other.providers.items():
            mine = self.of(prov)
            mine.read += c.read
            mine.written += c.written
            mine.superseded += c.superseded
            mine.dropped += c.dropped
            mine.tiers.update(c.tiers)
        for reason, n in other.dropped.items():
            self.dropped[reason] += n
            self.examples.setdefault(reason, []).extend(other.examples.get(reason, []))
        self.notes.extend(other.notes)

    def render(self, every_row: bool = False) -> str:
        """Counts that add up (read = written + superseded + dropped, per provider), offers per tier, each drop
        reason with its rows (the first EXAMPLES_PER_REASON, or every row with `every_row`)."""
        offers = self.offers
        lines = [f"{self.source}: {self.rows_read:,} rows read = {self.rows_written:,} written + "
                 f"{self.rows_superseded:,} superseded + {self.rows_dropped:,} dropped; "
                 f"{sum(offers.values()):,} offers ({_tiers(offers)})"]
        for prov in sorted(self.providers):
            c = self.providers[prov]
            lines.append(f"  {prov:<12} {c.read:>5,} read = {c.written:>5,} written + {c.superseded:>4,} superseded"
                         f" + {c.dropped:>4,} dropped; offers: {_tiers(c.tiers) or 'none'}")
        for reason, n in sorted(self.dropped.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"  dropped {n:>5}  {reason}")
            rows = self.examples.get(reason, [])
            shown = rows if every_row else rows[:EXAMPLES_PER_REASON]
            lines.extend(f"                {'' if every_row else 'e.g. '}{ex}" for ex in shown)
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)


def _tiers(c: Counter[str]) -> str:
    return ", ".join(f"{n:,} {t.replace('_', '-')}" for t, n in sorted(c.items()) if n)


def _num(x: float | None) -> str:
    if x is None:
        return ""
    # 6 decimals keep every catalog price exact (they have at most 5) and drop float noise from sums
    return format(round(x, 6), "f").rstrip("0").rstrip(".")


# What the importers write: every column but the reserved term, which no imported catalog carries (a table
# without it reads as 0 months).
WRITTEN = tuple(c for c in COLUMNS if c != "term_months")


def _cell(o: Offer, name: str) -> str:
    v = getattr(o, name, None)
    if v is None:
        return ""
    if isinstance(v, float):
        return _num(v)
    if isinstance(v, date):
        return v.isoformat()
    return str(v)


def offer_cells(o: Offer) -> list[str]:
    return [_cell(o, name) for name in WRITTEN]


def write_offers_csv(rows: Iterable[Offer], out: TextIO | Path | str) -> int:
    """Write rows in the `rules/offers` format (header first, canonical column order); returns the row count. A
    path is written atomically (rulebook/atomic.py): a server watching its folder never reads half a table."""
    if isinstance(out, (str, Path)):
        buf = io.StringIO()
        n = write_offers_csv(rows, buf)
        write_atomically(out, buf.getvalue())
        return n
    w = csv.writer(out, lineterminator="\n")
    w.writerow(WRITTEN)
    n = 0
    for o in rows:
        w.writerow(offer_cells(o))
        n += 1
    return n


def offers_csv_text(rows: Iterable[Offer]) -> str:
    buf = io.StringIO()
    write_offers_csv(rows, buf)
    return buf.getvalue()


def parse_number(text: str) -> float | None:
    """A number as the catalogs write it, or None when the cell is empty or not a number."""
    try:
        return float(text) if text.strip() else None
    except ValueError:
        return None


def parse_price(text: str) -> float | None:
    """A catalog price, or None when it is empty, NaN or not a number (the caller drops the row and says why)."""
    x = parse_number(text)
    return x if x is not None and x == x and x not in (float("inf"), float("-inf")) else None


MALFORMED = "malformed CSV row (an unterminated or stray quote): dropped, the next line read as a row of its own"


@dataclass
class Line:
    """One physical line of a catalog CSV: its cells, or why it is not one row (`error`)."""

    number: int
    cells: list[str]
    error: str = ""


def csv_lines(text: str) -> Iterator[Line]:
    """Each non-blank physical line of a catalog CSV parsed as one row on its own, strictly.

    The catalogs never hold a value spanning lines, so a quote left open is a broken row, not the start of a long
    value: read as a whole file, one unterminated quote swallows the rows after it up to the next quote (a real
    row was once merged into a broken one and counted as superseded). Parsed line by line, the broken line alone
    is refused (`error` set, `cells` its best-effort split so the caller can still name it) and the next line is
    a row again."""
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.removesuffix("\r")
        if not line.strip():
            continue
        try:
            rows = list(csv.reader([line], strict=True))
        except csv.Error as exc:
            try:
                cells = next(csv.reader([line]))
            except csv.Error:
                cells = line.split(",")
            yield Line(number, cells, f"{exc}")
            continue
        yield Line(number, rows[0] if rows else [])
