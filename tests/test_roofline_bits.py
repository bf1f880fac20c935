"""physics.serving's roofline picks the longer and the shorter of a kernel's read and math with comparisons rather
than calls to max and min: the same float, bit for bit, as the builtins give (NaN, infinities and signed zeros
included). The all-reduce's link is compared before its named check: the same errors."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.physics import serving


def _reference(read_gb: float, flops: float, bandwidth_tbs: float, mbu: float, tflops: float, mfu: float,
               attn_flops: float, attn_tflops: float, overlap: float) -> float:
    read = max(0.0, read_gb) * 1e9 / (bandwidth_tbs * 1e12 * mbu)
    compute = max(0.0, flops) / (tflops * 1e12 * mfu)
    if attn_flops > 0:
        compute += attn_flops / ((attn_tflops or tflops) * 1e12 * mfu)
    return max(read, compute) + (1.0 - overlap) * min(read, compute)


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


anything = st.floats(allow_nan=True, allow_infinity=True)
amount = st.one_of(anything, st.sampled_from((0.0, -0.0, 1.0, 70.0, 1e15)), st.integers(-5, 5))
rate = st.one_of(st.floats(1e-3, 1e4), st.sampled_from((1.0, 3.35, 989.0)))


@settings(max_examples=2000, deadline=None)
@given(read_gb=amount, flops=amount, bandwidth=rate, mbu=st.floats(0.01, 1.0), tflops=rate,
       mfu=st.floats(0.01, 1.0), attn_flops=amount, attn_tflops=st.one_of(st.just(0.0), rate),
       overlap=st.floats(0.0, 1.0))
def test_the_roofline_is_the_builtins_bit_for_bit(read_gb, flops, bandwidth, mbu, tflops, mfu, attn_flops,  # noqa: ANN001
                                                  attn_tflops, overlap) -> None:
    args = (read_gb, flops, bandwidth, mbu, tflops, mfu, attn_flops, attn_tflops, overlap)
    assert _bits(serving._roofline(*args)) == _bits(_reference(*args))


def test_equal_read_and_math_keep_the_read() -> None:
    # Equal read and math times: the builtins keep the first (the read); the overlap adds the other's share.
    args = (1.0, 1e12 * 0.5, 1.0, 1.0, 0.5, 1.0, 0.0, 0.0, 0.25)
    assert _bits(serving._roofline(*args)) == _bits(_reference(*args))


def test_a_bad_link_is_refused_as_before() -> None:
    # The link's rate compared directly before the named check: every bad value still gets the check's error.
    for bad in (0.0, -1.0, math.nan, None):
        with pytest.raises(ValueError, match="link_gbs"):
            serving.allreduce_transfer_seconds(1e6, 4, bad)  # type: ignore[arg-type]
    assert serving.allreduce_transfer_seconds(1e6, 4, 900.0) == 2.0 * 3 / 4 * 1e6 / (900.0 / 2 * 1e9)
    assert serving.allreduce_transfer_seconds(1e6, 1, 0.0) == 0.0  # one GPU sends nothing, whatever the link


def test_a_ring_across_two_sockets_goes_at_the_sockets_link() -> None:
    # issue 36: NCCL rates the path between GPUs on two Xeon sockets 10 GB/s one way; a ring goes at its slowest hop
    assert serving.ring_link_gbs(64.0, 8, 4, 10.0) == 20.0
    assert serving.ring_link_gbs(64.0, 4, 4, 10.0) == 64.0  # under one CPU: the x16 link
    assert serving.ring_link_gbs(64.0, 8, 4, 40.0) == 64.0  # a sockets' link faster than the x16 link: the x16 one
    assert serving.ring_link_gbs(64.0, 8, 0, 10.0) == 64.0  # no socket boundary known
    assert serving.ring_link_gbs(64.0, 8, 4, 0.0) == 64.0
    assert serving.ring_link_gbs(0.0, 8, 4, 10.0) == 0.0  # no link: nothing to bound
