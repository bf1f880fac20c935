"""Refresh sanity gates: a provider's new price table against its last good one, before it is written.

A feed that shrank (a download cut mid-file, a catalog half-published) or whose prices jumped (a unit slip: cents
for dollars, per instance for per GPU, a x10 typo) still imports and vets cleanly: every row is well formed. The
way package mirrors and price feeds guard themselves, one refresh may not move a provider's table too far at once:

- rows lost: more than `refresh_max_rows_lost_share` of the last good table's rows gone (net) refuses the table;
- median price: the median of new / old price over the rows both tables hold (same key) moving by more than the
  factor `refresh_max_median_price_factor` either way refuses it. With fewer than MIN_MATCHED rows in both (a
  provider renamed its instances) the medians of the two whole tables are compared instead. Rows matched by key
  make the gate blind to a table that only gained or lost cheap or dear shapes, which moves the whole table's
  median without any price moving.

Both thresholds are assumptions in rules/ (assumptions.yaml); a folder without them uses DEFAULTS. An operator who
knows the market really moved passes the refresh's accept flag for that provider. The gates know prices and keys
only (no offer columns), so any importer can use them: offers compare per GPU-hour, API prices per token.
"""

from __future__ import annotations

import statistics
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ruamel.yaml import YAML

ROWS_LOST = "refresh_max_rows_lost_share"
PRICE_FACTOR = "refresh_max_median_price_factor"
DEFAULTS = {ROWS_LOST: 0.5, PRICE_FACTOR: 2.0}  # the values rules/assumptions.yaml ships with
MIN_MATCHED = 3  # fewer rows in both tables than this: too few to take a median of their price changes


@dataclass(frozen=True)
class Limits:
    max_rows_lost_share: float = DEFAULTS[ROWS_LOST]
    max_median_price_factor: float = DEFAULTS[PRICE_FACTOR]
    where: str = "the defaults"  # where they were read, said when a gate refuses


@dataclass(frozen=True)
class Priced:
    """One row as the gates see it: what identifies it across refreshes and its price per unit."""

    key: Hashable
    price: float


def read_limits(rules: Path) -> Limits:
    """The gates' thresholds from `rules/assumptions.yaml` (each missing or unreadable one: its default)."""
    path = rules / "assumptions.yaml"
    values: dict[str, object] = {}
    try:
        doc = YAML(typ="safe").load(path.read_text(encoding="utf-8")) or {}
        values = doc.get("values") or {} if isinstance(doc, dict) else {}
    except (OSError, ValueError, AttributeError):
        pass
    if not isinstance(values, dict):
        values = {}
    got: dict[str, float] = {}
    for name, default in DEFAULTS.items():
        entry = values.get(name)
        value = entry.get("value") if isinstance(entry, dict) else None
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
        got[name] = float(value) if ok else default  # type: ignore[arg-type]
    return Limits(got[ROWS_LOST], got[PRICE_FACTOR], f"{path.as_posix()}")


@dataclass(frozen=True)
class Verdict:
    name: str
    reasons: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.reasons


def _median(prices: Iterable[float]) -> float | None:
    xs = [p for p in prices if p > 0]
    return statistics.median(xs) if xs else None


def _factor(ratio: float) -> str:
    return f"x{ratio:.3g}"


def check(name: str, old: list[Priced], new: list[Priced], limits: Limits, unit: str = "") -> Verdict:
    """Whether `new` may replace `old` for `name`, and if not every reason why. No old table: nothing to compare,
    passed (a new provider's first table)."""
    if not old:
        return Verdict(name)
    reasons = []
    lost = len(old) - len(new)
    if lost > 0 and lost / len(old) > limits.max_rows_lost_share:
        reasons.append(f"it lost {lost:,} of its {len(old):,} rows ({lost / len(old):.0%}, {len(new):,} left), "
                       f"more than the {limits.max_rows_lost_share:.0%} one refresh may drop ({ROWS_LOST} in "
                       f"{limits.where})")
    before = {r.key: r.price for r in old}
    ratios = [r.price / before[r.key] for r in new if before.get(r.key, 0) > 0 and r.price > 0]
    if len(ratios) >= MIN_MATCHED:
        ratio = statistics.median(ratios)
        how = f"the median change over the {len(ratios):,} rows both tables hold"
    else:
        was, now = _median(r.price for r in old), _median(r.price for r in new)
        if was is None or now is None:
            return Verdict(name, tuple(reasons))
        ratio = now / was
        how = (f"the whole tables' medians, {was:,.4g} to {now:,.4g}{unit} (only {len(ratios)} rows are in both "
               "tables)")
    factor = limits.max_median_price_factor
    if ratio > factor or ratio < 1 / factor:
        reasons.append(f"its median price moved {_factor(ratio)} ({how}), beyond the factor {factor:g} one "
                       f"refresh may move it either way ({PRICE_FACTOR} in {limits.where})")
    return Verdict(name, tuple(reasons))
