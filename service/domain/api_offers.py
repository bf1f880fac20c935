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

from .offers import EU_MEMBERS

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

    def matching(self, q: ApiOfferQuery) -> list[ApiOffer]:
        """ListApiOffers' rows: by model, cheapest (input + output price per 1M) first. A country filter keeps only
        offers whose provider names that country ("EU" also takes an EU data zone and the member states)."""
        rows = self.for_model(q.model) if q.model else self.rows
        if q.provider:
            rows = tuple(o for o in rows if o.provider.lower() == q.provider.lower())
        if q.country:
            c = q.country.upper()
            rows = tuple(o for o in rows if o.country and (
                o.country == c or (c == "EU" and (o.country == "EU" or o.country in EU_MEMBERS))))
        return sorted(rows, key=lambda o: (o.registry_model, o.usd_per_million_input + o.usd_per_million_output,
                                           o.provider, o.model, o.region))


@dataclass(frozen=True)
class ApiOfferQuery:
    """A ListApiOffers query from the wire: filters ("" = any; `model` a registry id), the day and the page."""

    model: str = ""
    provider: str = ""
    country: str = ""
    day: date = date.min
    page_size: int = 100
    page_token: str = ""

    def key(self) -> str:
        """What a page token is bound to: the filters and the day, not the page."""
        return f"api|{self.model}|{self.provider.lower()}|{self.country.upper()}|{self.day.isoformat()}"


EMPTY_API_OFFERS = ApiOfferTable(())


@dataclass(frozen=True)
class ApiLeg:
    """The model-API leg of an answer: the cheapest API offer in the brief's scope priced on the brief's token mix
    against the first candidate (`decide/api_leg.py`)."""

    offer: ApiOffer
    usd_per_unit: float  # per accepted unit, the candidates' unit
    usd_per_month: float  # for `units_per_month`
    saving_pct: float  # against the first candidate per accepted unit; negative = the API costs more
    break_even_units_per_month: float  # self-hosting costs less above this load; -1 = never
    unit: str  # the success unit kind (TOKEN = a million output tokens, RESPONSE, ...)
    self_usd_per_month: float  # the first candidate for the same load
    units_per_month: float  # accepted units a month: the load compared
    providers: int  # distinct providers with an offer in scope
    max_usd_per_unit: float  # the dearest offer in scope (the spread)
    cached_input_share: float  # priced: the brief's, or the rules' default
    in_scope: bool = True  # False: the cheapest offer anywhere, shown to say what the brief's scope rules out
    tokens_per_unit: float = 0.0  # input + output tokens billed per accepted unit (the break-even in tokens)
