"""The shorter-outputs suggestion (decide/targets._output_tokens) on latency curves of the shape serving has:
end-to-end = TTFT + output x ITL, with ITL growing as outputs shorten (more prompts batched into each step), so the
latency falls with the length down to a fastest length and rises below it (a valley); past a length, nothing fits.
On such curves the length named is the one the plain walk names (down by tenths from the per-token estimate, then
a bisection to within 2%), from far fewer sizings: the lengths a line through those known points to, and what they
leave unsettled."""

from __future__ import annotations

import math
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from service.decide.sizing.common import Sizing
from service.decide.targets import _output_tokens

Latency = Callable[[int], tuple[bool, float]]


def _valley(ttft: float, itl: float, batched: float, cap: int) -> Latency:
    """ttft + n x itl + batched x (1 + 40 / n) at n output tokens: fastest near sqrt(40 batched / itl); no length
    past `cap` fits."""
    def latency(n: int) -> tuple[bool, float]:
        return n <= cap, ttft + n * itl + batched + batched * 40 / n
    return latency


def _walked(target: float, guess: int, outputs: int, latency: Latency) -> tuple[int, int]:
    """The plain walk (every length it asks sized): (the length it names, the lengths it sized)."""
    asked: set[int] = set()

    def meets(n: int) -> bool:
        asked.add(n)
        fits, ms = latency(n)
        return fits and 0 < ms <= target * (1 + 1e-9)

    if meets(guess):
        low, high = guess, outputs
    else:
        high, low = guess, max(1, int(guess * 0.9))
        while not meets(low):
            if low == 1:
                return 0, len(asked)
            high, low = low, max(1, int(low * 0.9))
    while high - low > max(1, low // 50):
        mid = (low + high) // 2
        low, high = (mid, high) if meets(mid) else (low, mid)
    return low, len(asked)


@settings(max_examples=400, deadline=None)
@given(ttft=st.floats(1, 500), itl=st.floats(0.5, 50), batched=st.floats(0, 400), outputs=st.integers(2, 5000),
       target=st.floats(50, 20_000), cap=st.integers(1, 6000))
def test_the_length_named_is_the_walks_from_fewer_sizings(ttft: float, itl: float, batched: float, outputs: int,
                                                           target: float, cap: int) -> None:
    latency = _valley(ttft, itl, batched, cap)
    fits, at_outputs = latency(outputs)
    if not fits or at_outputs <= target:
        return
    s = Sizing(gpu=None)  # type: ignore[arg-type]  # the search reads the speed fields only
    s.est_latency_ms, s.est_ttft_ms = at_outputs, ttft
    s.step_ms = (at_outputs - ttft) / outputs
    asked: list[int] = []

    def resize(_s: Sizing, n: int) -> tuple[bool, float]:
        asked.append(n)
        return latency(n)

    got = _output_tokens(target, s, resize, outputs)
    guess = min(outputs - 1, max(1, int((target - ttft) / s.step_ms)))
    walked, walk_sized = _walked(target, guess, outputs, latency)
    assert got == walked
    assert len(asked) == len(set(asked))  # no length sized twice
    assert len(asked) <= max(walk_sized, 2 * math.ceil(math.log2(outputs)) + 6)


def _searched(ttft: float, itl: float, batched: float, target: float, outputs: int) -> tuple[int, int, int, int]:
    """(length named, lengths sized; the walk's length, the walk's sizings) on a valley with no memory cap."""
    latency = _valley(ttft, itl, batched, 1_000_000)
    s = Sizing(gpu=None)  # type: ignore[arg-type]
    s.est_latency_ms, s.est_ttft_ms = latency(outputs)[1], ttft
    s.step_ms = (s.est_latency_ms - ttft) / outputs
    asked: list[int] = []
    got = _output_tokens(target, s, lambda _s, n: asked.append(n) or latency(n), outputs)
    walked, walk_sized = _walked(target, min(outputs - 1, int((target - ttft) / s.step_ms)), outputs, latency)
    return got, len(asked), walked, walk_sized


def test_a_length_that_meets_is_named_from_a_handful_of_sizings() -> None:
    # A 2 s p95 missed at 500 tokens: the walk sizes 10 lengths to name 213, the search 6.
    assert _searched(40.0, 2.5, 1200.0, 2000.0, 500) == (213, 6, 213, 10)


def test_no_length_meets_is_found_without_walking_down_to_one_token() -> None:
    # The valley's floor misses the target: the walk sizes every tenth of the way down to 1 (40 lengths).
    assert _searched(40.0, 2.0, 1500.0, 2000.0, 500) == (0, 14, 0, 40)
