"""Offer files (`rules/offers/*.csv`): parsed by header name into `Offer` rows, every problem with path:line."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterator
from datetime import date
from typing import Any

from ..domain.offers import COLUMNS, EXTRA_COLUMNS, OPTIONAL_COLUMNS, TIERS, Offer
from ..engine.load import Problem
from ..engine.parse import did_you_mean


class _RowError(Exception):
    def __init__(self, column: str, message: str):
        super().__init__(message)
        self.column = column


def _date_parser() -> Callable[[str, str], date]:
    cache: dict[str, date] = {}

    def parse(column: str, text: str) -> date:
        # 50,000 rows carry a handful of distinct dates: parsing each once is most of the load time saved
        d = cache.get(text)
        if d is None:
            try:
                d = date.fromisoformat(text)
            except ValueError:
                raise _RowError(column, f'{column}: "{text}" is not an ISO date (YYYY-MM-DD)') from None
            if len(text) != 10:  # fromisoformat also takes 20261201 and week dates; authors write YYYY-MM-DD
                raise _RowError(column, f'{column}: "{text}" is not an ISO date (YYYY-MM-DD)')
            cache[text] = d
        return d

    return parse


def _number(column: str, text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise _RowError(column, f'{column}: "{text}" is not a number') from None
    if not math.isfinite(x):  # float() takes "nan" and "inf"; neither is a price or a size
        raise _RowError(column, f'{column}: "{text}" is not a finite number')
    return x


def _integer(column: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise _RowError(column, f'{column}: "{text}" is not a whole number') from None


def _row_errors(
    c: list[str], at: dict[str, int], required: list[tuple[str, int]], parse_date: Callable[[str, str], date],
    known_gpus: set[str] | None = None,
) -> list[_RowError]:
    """Every mistake of one refused row, in column order (an unknown GPU id too, when the catalog is given: the
    row's later lint would not run on a refused row)."""
    errors: list[_RowError] = []
    empty = {name for name, i in required if not c[i]}
    errors += [_RowError(name, f"{name} is empty") for name, _ in required if name in empty]
    checks: list[tuple[str, Callable[[str, str], object]]] = [
        ("gpus_per_instance", _integer), ("vcpus", _number), ("memory_gib", _number), ("usd_per_hour", _number),
        ("as_of", parse_date), ("valid_from", parse_date), ("valid_until", parse_date), ("term_months", _integer),
    ]
    for name, check in checks:
        text = c[at[name]]
        if not text or name in empty:
            continue
        try:
            check(name, text)
        except _RowError as exc:
            errors.append(exc)
    gpu = c[at["gpu"]]
    if gpu and known_gpus is not None and gpu not in known_gpus:
        errors.append(_RowError("gpu", f'gpu "{gpu}" is not a catalog id' + did_you_mean(gpu, sorted(known_gpus))))
    tier = c[at["tier"]]
    if tier and tier not in TIERS:
        errors.append(_RowError("tier", f'tier: "{tier}" is not one of {", ".join(TIERS)}'
                                + did_you_mean(tier, TIERS)))
    order = {name: i for i, name in enumerate(COLUMNS)}
    return sorted(errors, key=lambda e: order.get(e.column, len(order)))  # optional columns come last


def csv_rows(reader: Any, path_label: str, width: int,  # noqa: ANN401 - a csv.reader (its line_num)
             problems: list[Problem]) -> Iterator[tuple[int, list[str]]]:
    """The rows after the header with the header's `width`, each with the line it starts on (a quoted value may
    span lines). A blank line is not a row; a row of another width is a problem and is skipped; CSV that cannot be
    read ends the table there, a problem too (the rows before it stand)."""
    line = 1  # the header's last line
    while True:
        try:
            raw = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            problems.append(Problem(path_label, reader.line_num, 1, "", f"is not valid CSV here: {exc}"))
            return
        start, line = line + 1, reader.line_num
        if len(raw) != width:
            if raw and any(c.strip() for c in raw):
                problems.append(Problem(path_label, start, 1, "", f"has {len(raw)} values; the header names "
                                        f"{width} columns"))
            continue
        yield start, raw


def read_offers(
    path_label: str, text: str, known_gpus: set[str] | None = None
) -> tuple[list[Offer], list[Problem]]:
    """The offers of one CSV file's text and the problems that kept rows out (or refuse the whole file).

    `path_label` is the path shown in messages (relative to the rules folder's parent). A header problem (missing,
    unknown or repeated column) refuses the file; a bad value refuses its row only, with its line and column.
    """
    problems: list[Problem] = []
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        return [], [Problem(path_label, 1, 1, "", "is empty: a header row naming the columns is required")]
    except csv.Error as exc:
        return [], [Problem(path_label, 1, 1, "", f"is not valid CSV: {exc}")]
    header = [h.strip() for h in header]
    index: dict[str, int] = {}
    for i, name in enumerate(header):
        if name not in COLUMNS and name not in EXTRA_COLUMNS:
            problems.append(Problem(path_label, 1, i + 1, "", f'unknown column "{name}"; the columns are '
                                    + ", ".join(COLUMNS)))
        elif name in index:
            problems.append(Problem(path_label, 1, i + 1, "", f'column "{name}" appears twice'))
        else:
            index[name] = i
    for name in COLUMNS:
        if name not in index and name not in OPTIONAL_COLUMNS:
            problems.append(Problem(path_label, 1, 1, "", f'the header has no column "{name}"'))
    if problems:
        return [], problems

    parse_date = _date_parser()
    width = len(header)
    # A column the file leaves out reads the "" appended to every row (index `width`): no per-cell branch.
    at = {name: index.get(name, width) for name in COLUMNS + EXTRA_COLUMNS}
    required = [(name, at[name]) for name in ("provider", "instance_type", "gpu", "gpus_per_instance", "tier",
                                              "usd_per_hour", "as_of", "source", "valid_from")]
    i_prov, i_inst, i_gpu, i_n, i_cpu, i_mem, i_reg, i_cc, i_tier, i_usd, i_asof, i_src, i_from, i_until = (
        at[c] for c in COLUMNS)
    i_term = at["term_months"]  # optional: a file without it has no reserved terms (0)
    tiers = set(TIERS)
    rows: list[Offer] = []
    for start, raw in csv_rows(reader, path_label, width, problems):
        c = [x.strip() for x in raw]
        c.append("")
        try:
            tier = c[i_tier]
            for name, i in required:
                if not c[i]:
                    raise _RowError(name, f"{name} is empty")
            if tier not in tiers:
                raise _RowError("tier", f'tier: "{tier}" is not one of {", ".join(TIERS)}')
            rows.append(Offer(
                c[i_prov], c[i_inst], c[i_gpu], _integer("gpus_per_instance", c[i_n]),
                _number("vcpus", c[i_cpu]) if c[i_cpu] else None,
                _number("memory_gib", c[i_mem]) if c[i_mem] else None,
                c[i_reg], c[i_cc], tier, _number("usd_per_hour", c[i_usd]), parse_date("as_of", c[i_asof]),
                c[i_src], parse_date("valid_from", c[i_from]),
                parse_date("valid_until", c[i_until]) if c[i_until] else None,
                path_label, start, _integer("term_months", c[i_term]) if c[i_term] else 0,
            ))
        except _RowError:
            # The fast path above stops at a row's first mistake; an author fixing the file wants every one of
            # them at once, so the refused row is read again cell by cell.
            problems += [Problem(path_label, start, index.get(e.column, 0) + 1, "", str(e))
                         for e in _row_errors(c, at, required, parse_date, known_gpus)]
    return rows, problems
