"""The brief's targets that no candidate meets (`RecommendResponse.unmet_targets`), each with the candidate that
comes closest and the target it would meet: the answer's headline, so a missed target is never below the fold.

The candidates asked are the ones the rules kept; when the rules kept none (a budget or a deadline excluded every
GPU), the GPUs that were sized for the work, so the answer can still say how far the nearest one is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol

from ..domain.advice import UnmetTarget
from ..domain.brief import TRAINING_WORKLOADS, Brief
from .sizing.common import MAX_GPUS, Sizing

# The contract's order: what the user waits for, then when the run ends, then what it costs.
TARGETS = ("latency.p95_ms", "latency.ttft_ms", "training.target_days", "economics.budget_usd_per_hour")
_SLACK = 1e-9  # a figure equal to its target meets it, whatever the float rounding


def _figures(brief: Brief) -> list[tuple[str, float, Callable[[Sizing], float]]]:
    """(path, target, the candidate's figure for it; 0 = it has none) for each target the brief sets."""
    lat, e = brief.latency, brief.economics
    out: list[tuple[str, float, Callable[[Sizing], float]]] = []
    if lat.p95_ms > 0:
        out.append(("latency.p95_ms", lat.p95_ms, lambda s: s.est_latency_ms if s.latency_target else 0.0))
    if lat.ttft_ms > 0:
        out.append(("latency.ttft_ms", lat.ttft_ms, lambda s: s.est_ttft_ms if s.latency_target else 0.0))
    if brief.workload in TRAINING_WORKLOADS and brief.training.target_days > 0 and brief.training.tokens_billion > 0:
        out.append(("training.target_days", brief.training.target_days, lambda s: s.train_hours / 24))
    if e.budget_usd_per_hour > 0:
        out.append(("economics.budget_usd_per_hour", e.budget_usd_per_hour, lambda s: s.usd_per_hour))
    return out


def _sized(s: Sizing) -> bool:
    """Sized for the work, even if a deadline count past any real cluster marked it as not fitting."""
    return s.fits or (s.train_hours > 0 and s.memory_count < MAX_GPUS)


# Sizes one GPU again for the same brief with another average output length: (the GPU's sizing, output tokens) ->
# (whether it fits, its est_latency_ms) at that length.
Resize = Callable[[Sizing, int], tuple[bool, float]]


class KeptResize(Protocol):
    """A Resize that also keeps each search's answer (advisor._Resizer): `searched(s, figures, search)` is
    `search()`, kept by the GPU and `figures`, everything else the search reads (the brief is the keeper's own)."""

    def __call__(self, s: Sizing, output_tokens: int) -> tuple[bool, float]: ...

    def searched(self, s: Sizing, figures: tuple[float, ...], search: Callable[[], int]) -> int: ...


def unmet_targets(
    brief: Brief, survivors: Sequence[Sizing], sizings: Sequence[Sizing], resize: Resize | KeptResize | None = None,
    outputs: int = 0, near: float = 0.0,
) -> tuple[UnmetTarget, ...]:
    """`outputs`: the average output length the candidates were sized at (for the shorter-outputs suggestion);
    `near`: figures within this fraction of the closest count as as close, and of those the one cheapest per
    hour is named (8x B200 at 3,210 ms, not a 72-GPU rack at 3,162 ms: the configuration a team would rent)."""
    pool = list(survivors) or [s for s in sizings if _sized(s)]
    out: list[UnmetTarget] = []
    for path, target, figure in _figures(brief):
        have = [(v, s) for s in pool if (v := figure(s)) > 0]
        if not have or any(v <= target * (1 + _SLACK) for v, _ in have):
            continue
        # Closest = the smallest figure; ties go to the earlier (better ranked) candidate. Within `near` of it, the
        # cheapest configuration per hour (then the fewest GPUs); a budget's figure is the price itself.
        value, best = min(have, key=lambda pair: pair[0])
        if near > 0 and path != "economics.budget_usd_per_hour":
            close = [(v, c) for v, c in have if v <= value * (1 + near)]
            value, best = min(close, key=lambda pair: (pair[1].usd_per_hour or math.inf, pair[1].count, pair[0]))
        out.append(UnmetTarget(
            field=path, target=target, closest=value, gpu=best.gpu.id, name=best.gpu.name, count=best.count,
            would_meet=_would_meet(path, value),
            output_tokens=_suggested(target, best, resize, outputs) if path == "latency.p95_ms" else 0,
        ))
    return tuple(out)


def _suggested(target: float, s: Sizing, resize: Resize | KeptResize | None, outputs: int) -> int:
    """`_output_tokens`, kept by the resizer when it keeps searches: a repeated brief's answer then walks no
    lengths again (it reads the closest sizing's GPU and its TTFT, ITL and latency, the target and the length)."""
    searched = getattr(resize, "searched", None)
    if searched is None:
        return _output_tokens(target, s, resize, outputs)
    figures = (target, float(outputs), s.est_ttft_ms, s.step_ms, s.est_latency_ms)
    return searched(s, figures, lambda: _output_tokens(target, s, resize, outputs))  # type: ignore[no-any-return]


def _would_meet(path: str, value: float) -> float:
    """The target the closest candidate meets, rounded the way a person would set it (up, never below)."""
    if path == "economics.budget_usd_per_hour":
        return math.ceil(value * 100) / 100
    if path == "training.target_days":
        return float(math.ceil(value))
    return float(math.ceil(value / 100) * 100)  # latency: to the next 100 ms


def _output_tokens(target: float, s: Sizing, resize: Resize | KeptResize | None, outputs: int) -> int:
    """For a p95 target: an average output length with which the closest GPU type meets it, sized again at each
    length tried (shorter outputs change the batch and so the time per token); 0 when none does. The length
    returned is checked to meet the target and is within 2% of the longest that does: the search starts at the
    per-token estimate and walks down by tenths until a length meets, then bisects (`_walk`).

    The walk's answers come from a few sizings: end-to-end is TTFT + output tokens x ITL, near a line in the
    length where it crosses the target and, below the fastest length, rising again as more prompts are batched
    into each step (a valley). `_solve` finds the crossing (or the valley's floor) along lines through the lengths
    known; the walk then sizes only what the lengths known do not settle on a valley (`_settled`)."""
    if resize is None or outputs <= 1 or s.est_ttft_ms >= target or s.step_ms <= 0:
        return 0
    known: dict[int, float] = {outputs: s.est_latency_ms}  # a length's latency; inf when it does not fit
    met: set[int] = set()

    def lat(n: int) -> float:
        got = known.get(n)
        if got is None:
            fits, latency_ms = resize(s, n)
            got = known[n] = latency_ms if fits and latency_ms > 0 else math.inf
            if got <= target * (1 + _SLACK):
                met.add(n)
        return got

    def meets(n: int) -> bool:
        settled = _settled(n, known, met)
        if settled is None:
            lat(n)
            return n in met
        return settled

    guess = min(outputs - 1, max(1, int((target - s.est_ttft_ms) / s.step_ms)))
    _solve(guess, outputs, known, lat, met, target)
    return _walk(guess, outputs, meets)


def _walk(guess: int, outputs: int, meets: Callable[[int], bool]) -> int:
    """From the per-token estimate, down by tenths until a length meets, then a bisection to within 2%."""
    if meets(guess):
        low, high = guess, outputs  # meets at `low`, misses at `high` (the brief's own length)
    else:
        high, low = guess, max(1, int(guess * 0.9))
        while not meets(low):  # shorter outputs batch more prefills per step: walk down until one meets
            if low == 1:
                return 0
            high, low = low, max(1, int(low * 0.9))
    while high - low > max(1, low // 50):
        mid = (low + high) // 2
        low, high = (mid, high) if meets(mid) else (low, mid)
    return low


def _settled(n: int, known: dict[int, float], met: set[int]) -> bool | None:
    """Whether length n meets, as the lengths known settle it when the latency is a valley in the length (falls
    to a fastest length, rises past it; a length that does not fit is slowest): between two that meet, it meets;
    beyond a miss that is past one that meets, or past a rise between two lengths known, it misses. None when
    they do not settle it."""
    if n in known:
        return n in met
    if met and min(met) <= n <= max(met):
        return True
    for x, fx in known.items():
        if x in met:
            continue
        for y, fy in known.items():
            # y meets and x, between y and n, misses; or x misses and rises away from y toward n.
            if (y < x < n or n < x < y) and (y in met or fy < fx):
                return False
    return None


def _solve(n: int, outputs: int, known: dict[int, float], lat: Callable[[int], float], met: set[int],
           target: float) -> None:
    """Sizes (into `known` and `met`) the lengths that find the longest length that meets (it meets, one token
    more misses), if any, from `n` down along the line through the two shortest lengths that miss, while
    shorter is faster (never past half the length: the line overshoots where the prompts batched into each step
    take over); where shorter is no faster, the valley's floor is looked for instead. Only what it sized is
    kept, not that length: the walk's answer, within 2%, is the one users have been told."""
    before, longer = outputs, outputs
    lat(n)
    while n not in met:
        slope = (known[longer] - known[n]) / (longer - n)
        if not (slope > 0 and math.isfinite(slope)):  # shorter is no faster: the fastest lies between
            _from_fastest(n, longer, before, known, lat, met, target)
            return
        if n == 1:  # the fastest is below `longer`, maybe above 1
            _from_fastest(1, 0, longer, known, lat, met, target)
            return
        before, longer, n = longer, n, max(n // 2, min(n - 1, int(n - (known[n] - target) / slope)))
        lat(n)
    _longest(n, longer, lat, met, target)


def _longest(low: int, high: int, lat: Callable[[int], float], met: set[int], target: float) -> None:
    """Sizes the lengths that find the longest length that meets between `low` (meets) and `high` (misses):
    where the line through the two crosses the target and the length beside it, a bisection step when that did
    not halve the gap."""
    while high - low > 1:
        gap = high - low
        a, b = lat(low), lat(high)
        step = int((target - a) / (b - a) * gap) if math.isfinite(b) and b > a else gap // 2
        for mid in (low + step, low + step + 1):
            if low < mid < high:
                lat(mid)
                low, high = (mid, high) if mid in met else (low, mid)
        if high - low > max(1, gap // 2):
            mid = (low + high) // 2
            lat(mid)
            low, high = (mid, high) if mid in met else (low, mid)


def _from_fastest(lo: int, mid: int, hi: int, known: dict[int, float], lat: Callable[[int], float], met: set[int],
                  target: float) -> None:
    """Sizes the lengths that find the fastest length between `lo` and `hi` (a golden-section search on the
    bracket lo < mid < hi, mid no slower than either; mid 0 = none known yet), stopping at the first length that
    meets: from there, those that find the longest that meets below the shortest longer length known (which
    misses)."""
    def found(x: int) -> None:  # the shortest length known above x misses: x is the first that met
        _longest(x, min(k for k in known if k > x), lat, met, target)

    while hi - lo > 2:
        # No length known to be faster than both ends: the middle; else the middle of the wider side.
        x = (lo + hi) // 2 if mid <= 0 else (mid + hi) // 2 if hi - mid > mid - lo else (lo + mid) // 2
        if x in (lo, mid, hi):
            break
        lat(x)
        if x in met:
            found(x)
            return
        if mid <= 0:
            if lat(x) <= min(lat(lo), lat(hi)):
                mid = x
            elif lat(lo) < lat(hi):
                hi = x
            else:
                lo = x
        elif lat(x) < lat(mid):
            lo, mid, hi = (lo, x, mid) if x < mid else (mid, x, hi)
        elif x < mid:
            lo = x
        else:
            hi = x
    for x in range(lo, hi + 1):
        lat(x)
        if x in met:
            found(x)
            return

