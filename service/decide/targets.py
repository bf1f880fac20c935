"""The brief's targets that no candidate meets (`RecommendResponse.unmet_targets`), each with the candidate that
comes closest and the target it would meet: the answer's headline, so a missed target is never below the fold.

The candidates asked are the ones the rules kept; when the rules kept none (a budget or a deadline excluded every
GPU), the GPUs that were sized for the work, so the answer can still say how far the nearest one is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

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


def unmet_targets(
    brief: Brief, survivors: Sequence[Sizing], sizings: Sequence[Sizing], resize: Resize | None = None,
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
            output_tokens=_output_tokens(target, best, resize, outputs) if path == "latency.p95_ms" else 0,
        ))
    return tuple(out)


def _would_meet(path: str, value: float) -> float:
    """The target the closest candidate meets, rounded the way a person would set it (up, never below)."""
    if path == "economics.budget_usd_per_hour":
        return math.ceil(value * 100) / 100
    if path == "training.target_days":
        return float(math.ceil(value))
    return float(math.ceil(value / 100) * 100)  # latency: to the next 100 ms


def _output_tokens(target: float, s: Sizing, resize: Resize | None, outputs: int) -> int:
    """For a p95 target: an average output length with which the closest GPU type meets it, sized again at each
    length tried (shorter outputs change the batch and so the time per token); 0 when none does. The length
    returned is checked to meet the target and is within 2% of the longest that does: the search starts at the
    per-token estimate and stops there, a few sizings rather than a bisection down to one token."""
    if resize is None or outputs <= 1 or s.est_ttft_ms >= target or s.step_ms <= 0:
        return 0

    def meets(n: int) -> bool:
        fits, latency_ms = resize(s, n)
        return fits and 0 < latency_ms <= target * (1 + _SLACK)

    guess = min(outputs - 1, max(1, int((target - s.est_ttft_ms) / s.step_ms)))
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
