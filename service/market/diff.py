"""What a refresh changed in one provider's table: rows added, rows removed, prices moved by more than a share."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..domain.offers import Offer

MOVED_SHARE = 0.10  # a price that moved by more than this share is listed


@dataclass
class Diff:
    provider: str
    added: list[Offer] = field(default_factory=list)
    removed: list[Offer] = field(default_factory=list)
    moved: list[tuple[Offer, Offer]] = field(default_factory=list)  # (old, new)
    kept: int = 0

    def summary(self) -> str:
        return (f"{self.provider}: {len(self.added)} added, {len(self.removed)} removed, {len(self.moved)} prices "
                f"moved more than {MOVED_SHARE:.0%}, {self.kept} unchanged or within {MOVED_SHARE:.0%}")

    def lines(self, limit: int = 20) -> list[str]:
        out = [self.summary()]
        shown = 0
        for old, new in self.moved:  # moved prices first: they change answers most
            if shown < limit:
                change = (new.usd_per_hour - old.usd_per_hour) / old.usd_per_hour
                out.append(f"  ~ {_name(new)} ${old.usd_per_hour:,.4g}/h -> ${new.usd_per_hour:,.4g}/h ({change:+.0%})")
            shown += 1
        for sign, rows in (("+", self.added), ("-", self.removed)):
            for o in rows:
                if shown < limit:
                    out.append(f"  {sign} {_name(o)} ${o.usd_per_hour:,.4g}/h")
                shown += 1
        if shown > limit:
            out.append(f"  ... and {shown - limit} more")
        return out


def _name(o: Offer) -> str:
    return f"{o.instance_type} {o.region} {o.tier.replace('_', '-')} ({o.gpu} x{o.gpus_per_instance})"


def _key(o: Offer) -> tuple[str, str, str, str]:
    return (o.provider, o.instance_type, o.region, o.tier)


def diff(provider: str, old: Iterable[Offer], new: Iterable[Offer]) -> Diff:
    before = {_key(o): o for o in old}
    after = {_key(o): o for o in new}
    d = Diff(provider)
    for k, o in after.items():
        was = before.get(k)
        if was is None:
            d.added.append(o)
        elif was.usd_per_hour > 0 and abs(o.usd_per_hour - was.usd_per_hour) > MOVED_SHARE * was.usd_per_hour:
            d.moved.append((was, o))
        else:
            d.kept += 1
    d.removed = [o for k, o in before.items() if k not in after]
    return d
