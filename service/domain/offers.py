"""GPU offers as data: one CSV row per (provider, instance type, region, tier, valid_from), priced per instance.

The rules folder ships them as `rules/offers/*.csv` (CSV, not YAML: 50,000 rows load in well under a second and
every problem has a line number). Columns are mapped by header name, so authors may order them as they like.
This module parses one file's text (`read_offers`) and indexes the rows (`OfferTable`); the lints that need the
catalog or the date live in `service/rulebook/offer_checks.py`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date

COLUMNS: tuple[str, ...] = (
    "provider", "instance_type", "gpu", "gpus_per_instance", "vcpus", "memory_gib", "region", "country", "tier",
    "usd_per_hour", "as_of", "source", "valid_from", "valid_until",
)
# Columns a file may add after those: a reserved offer's commitment in months (absent = 0, no term).
EXTRA_COLUMNS: tuple[str, ...] = ("term_months",)
# A file may leave these columns out entirely (every value is then empty); the others must be in the header.
OPTIONAL_COLUMNS = frozenset({"vcpus", "memory_gib", "country", "valid_until", *EXTRA_COLUMNS})
TIERS = ("on_demand", "reserved", "spot", "marketplace")
# ISO 3166-1 alpha-2 codes of the EU member states: `countries=["EU"]` in a selection stands for all of them.
EU_MEMBERS = frozenset({
    "AT", "BE", "BG", "HR", "CY", "CZ", "DK", "EE", "FI", "FR", "DE", "GR", "HU", "IE",
    "IT", "LV", "LT", "LU", "MT", "NL", "PL", "PT", "RO", "SK", "SI", "ES", "SE",
})


@dataclass(frozen=True, slots=True)
class Offer:
    provider: str
    instance_type: str
    gpu: str  # a catalog id
    gpus_per_instance: int
    vcpus: float | None
    memory_gib: float | None
    region: str
    country: str  # ISO 3166-1 alpha-2, "" where unknown
    tier: str  # one of TIERS
    usd_per_hour: float  # one instance
    as_of: date
    source: str
    valid_from: date
    valid_until: date | None  # inclusive; None = still valid
    path: str = ""
    line: int = 0
    term_months: int = 0  # the commitment a reserved offer needs (0 for the other tiers)

    @property
    def usd_per_gpu_hour(self) -> float:
        # gpus_per_instance < 1 is a lint error; the guard only keeps a bad row from raising before it is reported
        return self.usd_per_hour / self.gpus_per_instance if self.gpus_per_instance > 0 else math.inf

    def valid_on(self, day: date) -> bool:
        return self.valid_from <= day and (self.valid_until is None or day <= self.valid_until)

    @property
    def key(self) -> tuple[str, str, str, str, int]:
        """What makes two rows the same offer (at different times when valid_from differs); a 1-year and a 3-year
        reservation of one instance are two offers."""
        return (self.provider, self.instance_type, self.region, self.tier, self.term_months)


def _order(o: Offer) -> tuple[float, str, str, str, str]:
    return (o.usd_per_gpu_hour, o.provider, o.instance_type, o.region, o.tier)


def expand_countries(codes: Iterable[str]) -> frozenset[str]:
    """ISO codes in upper case, with "EU" standing for the member states."""
    out: set[str] = set()
    for c in codes:
        c = c.upper()
        out |= EU_MEMBERS if c == "EU" else {c}
    return frozenset(out)


def offer_filter(
    tiers: Sequence[str] | None = None,
    providers: Sequence[str] | None = None,
    regions: Sequence[str] | None = None,
    countries: Sequence[str] | None = None,
) -> Callable[[Offer], bool]:
    """Whether an offer passes every given filter (None or empty = no filter). Providers compare in any case;
    "EU" stands for the member states; a country filter drops offers whose country is unknown (a placement rule
    cannot be met by a guess)."""
    tier_set = set(tiers) if tiers else None
    provider_set = {p.lower() for p in providers} if providers else None
    region_set = set(regions) if regions else None
    country_set = expand_countries(countries) if countries else None

    def ok(o: Offer) -> bool:
        return ((tier_set is None or o.tier in tier_set)
                and (provider_set is None or o.provider.lower() in provider_set)
                and (region_set is None or o.region in region_set)
                and (country_set is None or o.country in country_set))

    return ok


@dataclass(frozen=True)
class OfferQuery:
    """A ListOffers query, mapped from the wire: filters ("" = any), the day and the page."""

    gpu: str = ""
    provider: str = ""
    country: str = ""  # ISO alpha-2 or "EU"
    tier: str = ""  # one of TIERS
    day: date = date.min
    page_size: int = 100
    page_token: str = ""

    def key(self) -> str:
        """What a page token is bound to: the filters and the day, not the page."""
        return f"{self.gpu}|{self.provider.lower()}|{self.country.upper()}|{self.tier}|{self.day.isoformat()}"


class OfferTable:
    """Offers indexed by GPU, cheapest per GPU-hour first (ties by provider, instance type, region)."""

    def __init__(self, rows: Iterable[Offer]):
        self.rows: tuple[Offer, ...] = tuple(sorted(rows, key=_order))
        by_gpu: dict[str, list[Offer]] = {}
        for o in self.rows:
            by_gpu.setdefault(o.gpu, []).append(o)
        self._by_gpu: dict[str, tuple[Offer, ...]] = {g: tuple(v) for g, v in by_gpu.items()}
        seen: dict[tuple[str, str, str, str, int], int] = {}
        for o in self.rows:
            seen[o.key] = seen.get(o.key, 0) + 1
        # rows of an offer with several rows (a price history); only these need the newest-valid_from pass
        self._history = [o for o in self.rows if seen[o.key] > 1]
        # day → per-GPU rows valid that day; a server asks for few distinct days (today, a replayed as_of)
        self._days: dict[date, dict[str, tuple[Offer, ...]]] = {}
        self._shapes: dict[date, dict[tuple[str, str, int], tuple[Offer, ...]]] = {}
        self._markets: dict[tuple[str, str, date], tuple[float, float, float, int, int] | None] = {}

    def __len__(self) -> int:
        return len(self.rows)

    def gpus(self) -> list[str]:
        return sorted(self._by_gpu)

    def for_gpu(self, gpu: str) -> tuple[Offer, ...]:
        return self._by_gpu.get(gpu, ())

    def _day(self, day: date) -> dict[str, tuple[Offer, ...]]:
        got = self._days.get(day)
        if got is None:
            # Rows of one offer (same provider, instance type, region, tier) at different times: on a day when
            # several are valid the newest valid_from wins, as for catalog prices.
            newest: dict[tuple[str, str, str, str, int], Offer] = {}
            for o in self._history:
                if o.valid_on(day):
                    seen = newest.get(o.key)
                    if seen is None or o.valid_from > seen.valid_from:
                        newest[o.key] = o
            losers = {id(o) for o in self._history} - {id(o) for o in newest.values()}
            by_gpu: dict[str, list[Offer]] = {}
            for o in self.rows:  # self.rows is sorted, so each GPU's list stays sorted
                if o.valid_from <= day and (o.valid_until is None or day <= o.valid_until) and id(o) not in losers:
                    by_gpu.setdefault(o.gpu, []).append(o)
            got = {g: tuple(v) for g, v in by_gpu.items()}
            if len(self._days) >= 8:  # replays of many days must not grow this without bound
                self._days.clear()
            self._days[day] = got
        return got

    def valid_for(self, gpu: str, day: date) -> tuple[Offer, ...]:
        """One GPU's offers valid on `day`, cheapest per GPU-hour first."""
        return self._day(day).get(gpu, ())

    def valid_on(self, day: date) -> list[Offer]:
        """Every offer valid on `day` (the newest row of each offer), cheapest per GPU-hour first."""
        return sorted((o for rows in self._day(day).values() for o in rows), key=_order)

    def select(
        self,
        gpu: str,
        day: date,
        tiers: Sequence[str] | None = None,
        providers: Sequence[str] | None = None,
        regions: Sequence[str] | None = None,
        countries: Sequence[str] | None = None,
    ) -> list[Offer]:
        """The offers of one GPU valid on `day` that pass every given filter (`offer_filter`)."""
        ok = offer_filter(tiers, providers, regions, countries)
        return [o for o in self._day(day).get(gpu, ()) if ok(o)]

    def shapes(self, day: date) -> dict[tuple[str, str, int], tuple[Offer, ...]]:
        """(gpu, tier, gpus per instance) → that shape's offers valid on `day`, cheapest per instance first.

        Within one shape the cheapest instance is the cheapest configuration, so a placement looks at the head
        of a few such lists instead of every offer of the GPU: its cost does not grow with the table."""
        got = self._shapes.get(day)
        if got is None:
            groups: dict[tuple[str, str, int], list[Offer]] = {}
            for gpu, rows in self._day(day).items():
                for o in rows:  # sorted per GPU-hour, which within one shape is per instance
                    groups.setdefault((gpu, o.tier, o.gpus_per_instance), []).append(o)
            got = {k: tuple(v) for k, v in groups.items()}
            if len(self._shapes) >= 8:
                self._shapes.clear()
            self._shapes[day] = got
        return got

    def market(self, gpu: str, tier: str, day: date) -> tuple[float, float, float, int, int] | None:
        """(min, median, max $/GPU-hour, offers, providers) of one GPU in one tier on `day`; None when none.
        Kept per day: every answer asks it of every candidate."""
        key = (gpu, tier, day)
        got = self._markets.get(key, False)
        if got is False:
            rows = [o for o in self._day(day).get(gpu, ()) if o.tier == tier]
            got = None
            if rows:
                prices = [o.usd_per_gpu_hour for o in rows]
                got = (prices[0], statistics.median(prices), prices[-1], len(rows), len({o.provider for o in rows}))
            if len(self._markets) >= 4096:
                self._markets.clear()
            self._markets[key] = got
        return got

    def matching(self, gpu: str, provider: str, country: str, tier: str, day: date) -> list[Offer]:
        """Offers valid on `day` that pass the given filters ("" = any), cheapest per GPU-hour first."""
        gpus = [gpu] if gpu else sorted(self._day(day))
        rows: list[Offer] = []
        for g in gpus:
            rows += self.select(g, day, tiers=[tier] if tier else None, providers=[provider] if provider else None,
                                countries=[country] if country else None)
        return sorted(rows, key=_order) if not gpu else rows

    def spread(self, gpu: str, tier: str, day: date) -> tuple[float, float, float, int] | None:
        """(min, median, max, count) of $/GPU-hour over the GPU's offers in one tier on `day`; None when none."""
        got = self.market(gpu, tier, day)
        return got[:4] if got is not None else None
