"""How old the prices an answer ranks on are: offers and catalog rows older than `stale_price_days` (assumptions,
45 by default) make the answer warn (rules/freshness.yaml), since cloud list prices move several times a year."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from typing import Any

from ..engine.parse import FieldSpec
from .sizing.common import Sizing

FRESHNESS_FIELDS: dict[str, FieldSpec] = {
    "price_age_days": FieldSpec("int", "days since the first candidate's price was read (offer, quote or catalog "
                                       "row; 0 when unpriced)"),
    "oldest_price_days": FieldSpec("int", "days since the oldest price among the shown candidates was read"),
    "stale_prices": FieldSpec("int", "shown candidates priced on a price older than stale_price_days"),
    "stale_price_days": FieldSpec("int", "the staleness limit (assumptions stale_price_days)"),
}


def price_read_on(s: Sizing) -> date | None:
    """When the price that prices `s` was read: its offer's, else the caller's quote's, else the catalog row's."""
    if s.placement is not None:
        return s.placement.offer.as_of
    for text in (s.quote.as_of if s.quote is not None else "", s.price.as_of if s.price is not None else ""):
        if text:
            try:
                return date.fromisoformat(str(text))
            except ValueError:
                return None
    return None


def freshness(shown: Iterable[Sizing], day: date, limit_days: int) -> dict[str, Any]:
    ages = []
    for s in shown:
        read = price_read_on(s)
        ages.append(max(0, (day - read).days) if read is not None else None)
    known = [a for a in ages if a is not None]
    return {
        "price_age_days": ages[0] if ages and ages[0] is not None else 0,
        "oldest_price_days": max(known, default=0),
        "stale_prices": sum(1 for a in known if a > limit_days),
        "stale_price_days": limit_days,
    }
