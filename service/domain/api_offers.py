"""Model-API offers (`rules/api_offers/*.csv`): one provider's price for one registry model, per million tokens.

A hosted model API bills input, output and cached input tokens separately; a row holds those three prices, the
context the provider serves, and the region or country the provider names for it ("" when it names none: an
unknown place is never taken to satisfy a residency requirement). Built once per rules version.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date
from types import MappingProxyType

API_COLUMNS = (
    "provider", "model", "registry_model", "usd_per_million_input", "usd_per_million_output",
    "usd_per_million_cached_input", "context_tokens", "region", "country", "as_of", "source",
)
# Columns a file may leave out (read as empty / 0).
API_OPTIONAL_COLUMNS = ("usd_per_million_cached_input", "context_tokens", "region", "country")


@dataclass(frozen=True)
class ApiOffer:
    provider: str  # as the price table names it (deepinfra, together_ai, bedrock...)
    model: str  # the provider's model id, as the provider spells it
    registry_model: str  # our registry id (rules/models)
    usd_per_million_input: float
    usd_per_million_output: float
    usd_per_million_cached_input: float  # 0 = the provider lists no cached-input price (input price applies)
    context_tokens: int  # 0 = not listed
    region: str  # "" = not named by the provider
    country: str  # ISO 3166-1 alpha-2, "EU" for an EU-wide data zone, "" = not known
    as_of: date
    source: str
    path: str = ""
    line: int = 0

    @property
    def cached_input_price(self) -> float:
        """What a cached input token costs: the listed cached price, else the input price (no discount)."""
        return self.usd_per_million_cached_input if self.usd_per_million_cached_input > 0 \
            else self.usd_per_million_input


class ApiOfferTable:
    """Every API offer of a rules version, indexed by registry model id (lower case)."""

    def __init__(self, rows: Iterable[ApiOffer]):
        self.rows: tuple[ApiOffer, ...] = tuple(rows)
        by: dict[str, list[ApiOffer]] = {}
        for o in self.rows:
            by.setdefault(o.registry_model.lower(), []).append(o)
        self._by_model = MappingProxyType({k: tuple(v) for k, v in by.items()})

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[ApiOffer]:
        return iter(self.rows)

    def for_model(self, registry_id: str) -> tuple[ApiOffer, ...]:
        return self._by_model.get(registry_id.lower(), ())


EMPTY_API_OFFERS = ApiOfferTable(())
