"""Lints over loaded offers: each problem names the file and line of the row at fault."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date

from ..domain.offers import Offer
from ..engine.load import Problem
from ..engine.parse import did_you_mean

PLACEHOLDER_PRICE = 99_999_999  # catalogs write 99999999 (or 0) where a price is missing
_COUNTRY = re.compile(r"[A-Z]{2}")


def _problem(o: Offer, rule: str, message: str, severity: str = "error") -> Problem:
    return Problem(o.path, o.line, 1, f"offers.{rule}", message, severity)


def _overlap(a: Offer, b: Offer) -> bool:
    a_end, b_end = a.valid_until or date.max, b.valid_until or date.max
    return a.valid_from <= b_end and b.valid_from <= a_end


_SCHEMA = re.compile(r"\bv(\d+)\b")


def _newness(o: Offer) -> tuple[date, int, str]:
    """Which of two files' rows for one offer is newer: the later as_of, then the higher catalog schema version
    named in the source (SkyPilot v8 over v7), then the later file name."""
    m = _SCHEMA.search(o.source)
    return (o.as_of, int(m.group(1)) if m else 0, o.path)


def supersede(rows: Sequence[Offer]) -> tuple[list[Offer], list[Problem]]:
    """Rows of one offer (provider, instance type, region, tier, valid_from) in two files, such as the v7 and v8
    imports of one provider on one day: the newer file's row is kept and the other reported as a warning, so a
    refresh that adds a newer file never refuses the version. Repeats inside one file stay errors
    (`check_offers`)."""
    winner: dict[tuple[str, str, str, str, date], Offer] = {}
    files: dict[tuple[str, str, str, str, date], set[str]] = {}
    for o in rows:
        key = (o.provider, o.instance_type, o.region, o.tier, o.valid_from)
        files.setdefault(key, set()).add(o.path)
        w = winner.get(key)
        if w is None or (w.path != o.path and _newness(o) > _newness(w)):
            winner[key] = o
    kept: list[Offer] = []
    problems: list[Problem] = []
    for o in rows:
        key = (o.provider, o.instance_type, o.region, o.tier, o.valid_from)
        w = winner[key]
        if len(files[key]) > 1 and w.path != o.path:
            problems.append(_problem(o, "superseded", f"superseded by {w.path}:{w.line}, the newer row of the same "
                                     f"offer (as_of {w.as_of}, source {w.source!r})", "warning"))
            continue
        kept.append(o)
    return kept, problems


def check_offers(rows: Sequence[Offer], known_gpus: set[str], today: date, max_age_days: int) -> list[Problem]:
    problems: list[Problem] = []
    first: dict[tuple[str, str, str, str, date, int], Offer] = {}
    on_demand: dict[tuple[str, str, str], list[Offer]] = {}
    for o in rows:
        if o.tier == "on_demand":
            on_demand.setdefault((o.provider, o.instance_type, o.region), []).append(o)
    for o in rows:
        if o.gpu not in known_gpus:
            problems.append(_problem(o, "unknown-gpu", f'gpu "{o.gpu}" is not a catalog id'
                                     + did_you_mean(o.gpu, sorted(known_gpus))))
        if o.usd_per_hour <= 0 or o.usd_per_hour >= PLACEHOLDER_PRICE:
            problems.append(_problem(o, "placeholder-price",
                                     f"usd_per_hour {o.usd_per_hour:g} is a placeholder, not a price"))
        if o.gpus_per_instance < 1:
            problems.append(_problem(o, "gpus-per-instance", f"gpus_per_instance is {o.gpus_per_instance}; "
                                     "an offer has at least one GPU"))
        if not o.region:
            problems.append(_problem(o, "missing-region", "region is empty: placement cannot use this row"))
        if o.country and not _COUNTRY.fullmatch(o.country):
            problems.append(_problem(o, "country", f'country "{o.country}" is not an ISO 3166-1 alpha-2 code '
                                     "(two capital letters) or empty"))
        if o.tier == "reserved" and o.term_months <= 0:
            problems.append(_problem(o, "term", "a reserved offer needs its commitment in term_months (> 0)"))
        elif o.tier != "reserved" and o.term_months != 0:
            problems.append(_problem(o, "term", f"term_months is {o.term_months}; only a reserved offer has a "
                                     "term (leave it empty or 0)"))
        if o.valid_until is not None and o.valid_until < o.valid_from:
            problems.append(_problem(o, "valid-range", f"valid_until {o.valid_until} is before valid_from "
                                     f"{o.valid_from}"))
        key = (o.provider, o.instance_type, o.region, o.tier, o.valid_from, o.term_months)
        seen = first.get(key)
        if seen is None:
            first[key] = o
        else:
            where = f"line {seen.line}" if seen.path == o.path else f"{seen.path}:{seen.line}"
            problems.append(_problem(o, "duplicate", f"repeats {where} (same provider, instance_type, region, "
                                     "tier, term and valid_from)"))
        if o.tier == "spot" and 0 < o.usd_per_hour < PLACEHOLDER_PRICE:
            for d in on_demand.get((o.provider, o.instance_type, o.region), ()):
                if _overlap(o, d) and o.usd_per_hour > d.usd_per_hour > 0:
                    where = f"line {d.line}" if d.path == o.path else f"{d.path}:{d.line}"
                    problems.append(_problem(o, "spot-above-on-demand", f"spot ${o.usd_per_hour:g}/h is above the "
                                             f"on-demand ${d.usd_per_hour:g}/h of {where}", "warning"))
                    break
        still_valid = o.valid_until is None or o.valid_until >= today
        age = (today - o.as_of).days
        if still_valid and age > max_age_days:
            problems.append(_problem(o, "stale", f"as_of {o.as_of} is {age} days old (more than {max_age_days}); "
                                     "refresh the price or end the row with valid_until", "warning"))
    return problems
