"""Model-API offer files (`rules/api_offers/*.csv`): read by header name into `ApiOffer` rows, every problem with
path:line; linted (a registry id the rules do not know, a duplicate, a stale price); written by the importer."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence
from datetime import date
from pathlib import Path
from typing import TextIO

from ..domain.api_offers import API_COLUMNS, API_OPTIONAL_COLUMNS, ApiOffer
from ..engine.load import Problem
from ..engine.parse import did_you_mean
from ..rulebook.atomic import write_atomically
from .offer_files import csv_rows

_NUMBERS = ("usd_per_million_input", "usd_per_million_output", "usd_per_million_cached_input")
_REQUIRED = ("provider", "model", "registry_model", "usd_per_million_input", "usd_per_million_output", "as_of",
             "source")


def _value_errors(cells: dict[str, str]) -> list[tuple[str, str]]:
    """(column, message) for every mistake of one row, in column order."""
    errors = [(c, f"{c} is empty") for c in _REQUIRED if not cells[c]]
    for c in _NUMBERS:
        text = cells[c]
        if not text:
            continue
        try:
            x = float(text)
        except ValueError:
            errors.append((c, f'{c}: "{text}" is not a number'))
            continue
        if not math.isfinite(x) or x < 0:
            errors.append((c, f'{c}: "{text}" is not a price (a finite number, 0 or more)'))
    if cells["context_tokens"] and not cells["context_tokens"].isdigit():
        errors.append(("context_tokens", f'context_tokens: "{cells["context_tokens"]}" is not a whole number'))
    if cells["as_of"]:
        try:
            if len(cells["as_of"]) != 10:
                raise ValueError
            date.fromisoformat(cells["as_of"])
        except ValueError:
            errors.append(("as_of", f'as_of: "{cells["as_of"]}" is not an ISO date (YYYY-MM-DD)'))
    order = {c: i for i, c in enumerate(API_COLUMNS)}
    return sorted(errors, key=lambda e: order[e[0]])


def read_api_offers(path_label: str, text: str) -> tuple[list[ApiOffer], list[Problem]]:
    """The API offers of one CSV file's text and the problems that kept rows (or the whole file) out."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        return [], [Problem(path_label, 1, 1, "", "is empty: a header row naming the columns is required")]
    except csv.Error as exc:
        return [], [Problem(path_label, 1, 1, "", f"is not valid CSV: {exc}")]
    problems: list[Problem] = []
    index: dict[str, int] = {}
    for i, name in enumerate(header):
        if name not in API_COLUMNS:
            problems.append(Problem(path_label, 1, i + 1, "", f'unknown column "{name}"'
                                    + did_you_mean(name, API_COLUMNS) + "; the columns are " + ", ".join(API_COLUMNS)))
        elif name in index:
            problems.append(Problem(path_label, 1, i + 1, "", f'column "{name}" appears twice'))
        else:
            index[name] = i
    problems += [Problem(path_label, 1, 1, "", f'the header has no column "{c}"')
                 for c in API_COLUMNS if c not in index and c not in API_OPTIONAL_COLUMNS]
    if problems:
        return [], problems
    rows: list[ApiOffer] = []
    for start, raw in csv_rows(reader, path_label, len(header), problems):
        if all(not c.strip() for c in raw):
            continue
        cells = {c: (raw[index[c]].strip() if c in index else "") for c in API_COLUMNS}
        errors = _value_errors(cells)
        if errors:
            problems += [Problem(path_label, start, index.get(c, 0) + 1, "", m) for c, m in errors]
            continue
        rows.append(ApiOffer(
            cells["provider"], cells["model"], cells["registry_model"], float(cells["usd_per_million_input"]),
            float(cells["usd_per_million_output"]), float(cells["usd_per_million_cached_input"] or 0),
            int(cells["context_tokens"] or 0), cells["region"], cells["country"].upper(),
            date.fromisoformat(cells["as_of"]), cells["source"], path_label, start,
        ))
    return rows, problems


def _problem(o: ApiOffer, rule: str, message: str, severity: str = "error") -> Problem:
    return Problem(o.path, o.line, 1, f"api_offers.{rule}", message, severity)


def check_api_offers(rows: Sequence[ApiOffer], known_models: Iterable[str], today: date,
                     max_age_days: int) -> list[Problem]:
    """A registry id the rules folder does not know is an error (no answer could use the row); a repeated
    (provider, model, region) is an error; a price older than `max_age_days` warns, as GPU offers do."""
    known = {m.lower() for m in known_models}
    problems: list[Problem] = []
    seen: dict[tuple[str, str, str], ApiOffer] = {}
    for o in rows:
        if o.registry_model.lower() not in known:
            problems.append(_problem(o, "unknown-model", f'registry_model "{o.registry_model}" is not a registry id '
                                     "(rules/models)" + did_you_mean(o.registry_model, sorted(known))))
        key = (o.provider, o.model, o.region)
        first = seen.setdefault(key, o)
        if first is not o:
            where = f"line {first.line}" if first.path == o.path else f"{first.path}:{first.line}"
            problems.append(_problem(o, "duplicate", f"repeats {where} (same provider, model and region)"))
        age = (today - o.as_of).days
        if age > max_age_days:
            problems.append(_problem(o, "stale", f"as_of {o.as_of} is {age} days old (more than {max_age_days}); "
                                     "refresh the API prices (gpu-advisor api-offers import)", "warning"))
    return problems


def _num(x: float) -> str:
    # per-token prices in the source are like 3e-08: per million they are cents with a few decimals
    return format(round(x, 6), "f").rstrip("0").rstrip(".") or "0"


def api_offer_cells(o: ApiOffer) -> list[str]:
    return [o.provider, o.model, o.registry_model, _num(o.usd_per_million_input), _num(o.usd_per_million_output),
            _num(o.usd_per_million_cached_input) if o.usd_per_million_cached_input else "",
            str(o.context_tokens) if o.context_tokens else "", o.region, o.country, o.as_of.isoformat(), o.source]


def write_api_offers_csv(rows: Iterable[ApiOffer], out: TextIO | Path | str) -> int:
    """The `rules/api_offers` format, header first; a path is written atomically (a watching server never reads
    half a table). Returns the row count."""
    if isinstance(out, (str, Path)):
        buf = io.StringIO()
        n = write_api_offers_csv(rows, buf)
        write_atomically(out, buf.getvalue())
        return n
    w = csv.writer(out, lineterminator="\n")
    w.writerow(API_COLUMNS)
    n = 0
    for o in rows:
        w.writerow(api_offer_cells(o))
        n += 1
    return n
