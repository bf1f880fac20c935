"""Moved to `rulebook/offer_files.py` (issue 34 item 10: the rules loader reads offer tables, and `market/` sits
above it and imports down). Kept as a name so code written against the old place still imports."""

from ..rulebook.offer_files import read_offers

__all__ = ["read_offers"]
