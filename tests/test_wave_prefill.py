"""serving.wave_fits_one_step says which prefill time_to_first_token reads (the wave in one step, or its chunks),
so sizing skips working out the other: with the predicate false the whole wave's time changes nothing, with it
true the chunk's time changes nothing, whatever the counts (zero and negative ones included)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from service.physics import serving

counts = st.integers(-3, 100_000)
seconds = st.floats(0.0, 100.0)


@given(sessions=counts, prompt=counts, budget=counts, chunk=seconds, whole=seconds, other=seconds, step=seconds,
       request=seconds)
def test_the_prefill_not_read_changes_nothing(sessions, prompt, budget, chunk, whole, other, step,  # noqa: ANN001
                                              request) -> None:
    got = serving.time_to_first_token(chunk, whole, sessions, prompt, budget, step, request)
    if serving.wave_fits_one_step(sessions, prompt, budget):
        again = serving.time_to_first_token(other, whole, sessions, prompt, budget, step, request)
    else:
        again = serving.time_to_first_token(chunk, other, sessions, prompt, budget, step, request)
        # not read at all: even a NaN in its place changes nothing
        assert serving.time_to_first_token(chunk, math.nan, sessions, prompt, budget, step, request) == got
    assert again == got


def test_a_wave_within_the_budget_is_one_step() -> None:
    assert serving.wave_fits_one_step(4, 1024, 8192)
    assert not serving.wave_fits_one_step(32, 2000, 8192)
    assert serving.wave_fits_one_step(0, 0, 0)  # counts below one are read as one, as time_to_first_token does
