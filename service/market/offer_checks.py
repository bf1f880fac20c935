"""Moved to `rulebook/offer_checks.py` (issue 34 item 10: the rules loader checks offer tables, and `market/`
sits above it and imports down). Kept as a name so code written against the old place still imports."""

from ..rulebook.offer_checks import PLACEHOLDER_PRICE, check_offers, supersede

__all__ = ["PLACEHOLDER_PRICE", "check_offers", "supersede"]
