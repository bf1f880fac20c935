"""The first-time sizing's hot formulas pick the larger or smaller of two numbers with comparisons rather than calls
to max and min (the builtin keeps its first argument unless the second is strictly greater): the same float, bit
for bit, as the builtins give, NaN, infinities and signed zeros included. Each is held here against its former
text, written with the builtins."""

from __future__ import annotations

import math
import struct

from hypothesis import example, given, settings
from hypothesis import strategies as st

from service.decide.sizing import inference, width
from service.decide.sizing.common import MAX_GPUS, Sizing, compute_tflops
from service.decide.sizing.shape import shape_of
from service.domain.brief import Brief, Latency, Model, Traffic
from service.physics import serving
from tests.test_width_pruning import book  # noqa: F401  (the module's rules fixture)

anything = st.floats(allow_nan=True, allow_infinity=True)
amount = st.one_of(anything, st.sampled_from((0.0, -0.0, 1e-12, 1.0, 70.0, 1e15)), st.integers(-5, 5))
count = st.one_of(st.integers(-3, 100_000), st.sampled_from((0, 1, 2)))
BITS = settings(max_examples=1500, deadline=None)


def _bits(x: object) -> object:
    return struct.pack("<d", x) if isinstance(x, float) else (type(x), x)


@BITS
@given(sessions=st.one_of(count, anything), prompt=st.one_of(count, anything), budget=st.one_of(count, anything))
def test_the_wave_fits_as_with_the_builtins(sessions, prompt, budget) -> None:  # noqa: ANN001
    assert serving.wave_fits_one_step(sessions, prompt, budget) == (
        max(1, sessions) * max(1, prompt) <= max(1, budget))


def _lone_reference(prefill_s: float, step_s: float, others: int, output_tokens: int, request_s: float = 0.0,
                    iterations: int = 30) -> float:
    base = request_s + (0.5 * step_s if others > 0 else 0.0) + max(prefill_s, step_s)
    if others <= 0 or prefill_s <= 0:
        return base
    ttft = base
    decode = max(0, output_tokens) * step_s
    busy = others * prefill_s
    for _ in range(iterations):
        cycle = ttft + decode
        rho = min(0.95, busy / cycle) if cycle > 0 else 0.0
        nxt = base + rho * prefill_s / 2
        if abs(nxt - ttft) <= 1e-9 * max(ttft, 1e-12):
            return nxt
        ttft = nxt
    return ttft


@BITS
@given(prefill=amount, step=amount, others=count, output=st.one_of(count, anything), request=amount)
def test_a_lone_prompt_waits_as_with_the_builtins(prefill, step, others, output, request) -> None:  # noqa: ANN001
    got = serving.lone_first_token(prefill, step, others, output, request)
    assert _bits(got) == _bits(_lone_reference(prefill, step, others, output, request))


@BITS
@given(alone=amount, wave=amount, synchrony=st.floats(0.0, 1.0))
def test_arrivals_blend_as_with_the_builtins(alone, wave, synchrony) -> None:  # noqa: ANN001
    got = serving.blend_arrivals(alone, wave, synchrony)
    assert _bits(got) == _bits(alone + synchrony * max(0.0, wave - alone))


def _replicas_reference(s: Sizing, n: int, per_request: int, offered: float) -> tuple[object, ...]:
    rate = s.tokens_per_second / max(1, per_request)
    needed = offered / rate if offered > 0 and rate > 0 else 1.0
    most = max(1, MAX_GPUS // n)
    fits = s.fits
    if needed > most:
        replicas, fits = most, False
    else:
        replicas = max(1, math.ceil(needed))
    return replicas, fits, n * replicas


@BITS
@given(rate=st.one_of(anything, st.floats(1e-9, 1e6)), n=st.integers(1, MAX_GPUS * 2),
       output=st.integers(0, 4000), offered=st.one_of(amount, st.floats(0.0, 1e6)))
def test_replicas_for_the_load_as_with_the_builtins(book, rate, n, output, offered) -> None:  # noqa: ANN001, F811
    s = Sizing(gpu=book.catalog[0])
    s.tokens_per_second, s.fits = rate, True
    shape = shape_of(Brief(model=Model(params_billion=8), traffic=Traffic(avg_output_tokens=max(1, output))),
                     book.assumptions)
    assert shape is not None
    try:
        want: object = _replicas_reference(s, n, shape.output_tokens, offered)
    except (OverflowError, ValueError) as e:  # ceil of an infinite or NaN count: the same error either way
        want = repr(e)
    try:
        inference.replicate_for_load(s, n, "REALTIME_INFERENCE", shape, offered, inference.mem.MemoryBreakdown(()))
        got: object = (s.replicas, s.fits, s.count)
    except (OverflowError, ValueError) as e:
        got = repr(e)
    assert got == want


def _floor_reference(g: width._ServingGpu, n: int) -> tuple[float, float]:
    w = width._width(g, n)
    weights = max(0.0, g.weights * w.stages) * 1e9 / w.read_rate
    step = w.overhead + max(weights, max(0.0, g.decode_flops) / w.math_rate) + max(0.0, g.kv_read) * 1e9 / w.read_rate
    return max(w.floor_head, g.eff.request_s + step), step


def _cannot_win_reference(g: width._ServingGpu, n: int, best: tuple[bool, float, int], lat: Latency,
                          target: bool) -> bool:
    unmet, value, _ = best
    if not math.isfinite(value) or value <= 0:
        return False
    ttft_s, step_s = _floor_reference(g, n)
    s_out = g.s_out
    ttft_ms = ttft_s * 1000
    latency_ms = ttft_ms + s_out * (step_s * 1000)
    margin = 1.0 + 1e-9
    misses = target and (
        (lat.p95_ms > 0 and latency_ms > lat.p95_ms * margin) or (lat.ttft_ms > 0 and ttft_ms > lat.ttft_ms * margin)
    )
    if unmet:
        return misses and latency_ms > value * margin
    if misses:
        return True
    cycle = ttft_s + s_out * step_s
    if not cycle > 0:
        return False
    return n / max(g.c * s_out / cycle, 1e-12) > value * margin


@BITS
@example(weights=1.0, flops=1.0, kv=1.0, sessions=math.nan, n=1, unmet=False, value=1.0, p95=0.0, ttft=0.0)
@given(weights=amount, flops=amount, kv=amount, sessions=st.one_of(amount, st.integers(1, 4096)),
       n=st.sampled_from((1, 2, 4, 8)), unmet=st.booleans(), value=st.one_of(amount, st.floats(1e-15, 1e5)),
       p95=st.one_of(st.just(0.0), st.floats(1.0, 1e5)), ttft=st.one_of(st.just(0.0), st.floats(1.0, 1e4)))
def test_a_floor_and_its_verdict_as_with_the_builtins(book, weights, flops, kv, sessions, n, unmet, value, p95,  # noqa: ANN001, F811
                                                      ttft) -> None:
    brief = Brief(workload="REALTIME_INFERENCE", model=Model(params_billion=70, precision="FP8"),
                  traffic=Traffic(concurrent_sessions=32, avg_input_tokens=2000, avg_output_tokens=500),
                  latency=Latency(p95_ms=p95, ttft_ms=ttft))
    a = book.assumptions
    shape = shape_of(brief, a)
    assert shape is not None
    gpu = next(g for g in book.catalog if g.id == "h100-pcie")
    s = Sizing(gpu=gpu)
    s.tflops = compute_tflops(gpu, shape.precision)
    memo: dict = {}
    width.serving_speed(s, brief, shape, a, n, memo)  # a width sized first, as pick_width asks floors after one
    g = width._serving_gpu(s, brief, shape, a, memo, None)
    g.weights, g.decode_flops, g.kv_read, g.c = weights, flops, kv, sessions
    got, want = width.serving_floor(g, n), _floor_reference(g, n)
    assert (_bits(got[0]), _bits(got[1])) == (_bits(want[0]), _bits(want[1]))
    best = (unmet, value, 1)
    for target in (True, False):
        assert width._cannot_win(g, n, best, brief.latency, target) == _cannot_win_reference(
            g, n, best, brief.latency, target)


@BITS
@given(n=st.integers(1, 72), rate=amount)
def test_gpus_per_rate_as_with_the_builtins(n, rate) -> None:  # noqa: ANN001
    try:
        want: object = _bits(n / max(rate, 1e-12))
    except ZeroDivisionError as e:  # a rate of 0 as an int is kept, as max keeps it: the same error
        want = repr(e)
    try:
        got: object = _bits(width._per_rate(n, rate))
    except ZeroDivisionError as e:
        got = repr(e)
    assert got == want
