"""With no engine named (prefill_first 0) a prompt's TTFT counts none of the wave's extra wait (blend_arrivals adds
0 x max(0, wave - alone)), so sizing does not work out the wave's prefill steps (width._wave_unread): every GPU
at every width must size to the same figures, bit for bit, as when the wave is worked out, and the guard must
refuse the cases where the wave could be +inf against a finite TTFT alone (0 x inf is NaN)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import example, given

from service.decide.sizing import width
from service.decide.sizing.common import Sizing, compute_tflops, tp_group_sizes
from service.decide.sizing.shape import shape_of
from service.domain.brief import Brief, Latency, Model, Traffic
from service.physics import serving
from tests.test_width_pruning import SETTINGS, book, briefs  # noqa: F401  (book: the module's rules fixture)

_ERRORS = (ValueError, ZeroDivisionError, OverflowError)
# The bench's first-time family: 70B FP8, 40 sessions of 2,080-token prompts, no engine named.
BENCH = Brief(workload="REALTIME_INFERENCE", model=Model(params_billion=70, precision="FP8", context_tokens=8192),
              traffic=Traffic(concurrent_sessions=40, avg_input_tokens=2080, avg_output_tokens=500),
              latency=Latency(p95_ms=2000, ttft_ms=500))


def _sized(book, brief: Brief) -> list[tuple[str, str]]:  # noqa: ANN001, F811
    """Every catalog GPU at every width: serving_speed's figures, or the error it raises."""
    a = book.assumptions
    shape = shape_of(brief, a)
    assert shape is not None
    out = []
    for gpu in book.catalog:
        s = Sizing(gpu=gpu)
        s.tflops = compute_tflops(gpu, shape.precision)
        memo: dict = {}
        for n in tp_group_sizes(gpu, a):
            try:
                width.serving_speed(s, brief, shape, a, n, memo)
                got = repr([getattr(s, f) for f in width.SPEED_FIELDS])
            except _ERRORS as e:
                got = repr(e)
            out.append((f"{gpu.id}@{n}", got))
    return out


@SETTINGS
@given(brief=briefs)
@example(brief=BENCH)
def test_no_engine_sizes_as_with_the_wave_worked_out(book, brief: Brief, monkeypatch) -> None:  # noqa: ANN001, F811
    brief = dataclasses.replace(brief, toolchain=())  # no engine: the product's prefill_first
    assert book.assumptions.num("prefill_first") == 0.0
    if shape_of(brief, book.assumptions) is None:
        return
    skipped = _sized(book, brief)
    with monkeypatch.context() as m:
        m.setattr(width, "_wave_unread", lambda *args: False)
        worked_out = _sized(book, brief)
    assert skipped == worked_out


def _bench_width(book, toolchain: tuple[str, ...]):  # noqa: ANN001, ANN202, F811
    brief = dataclasses.replace(BENCH, toolchain=toolchain)
    a = book.assumptions
    shape = shape_of(brief, a)
    gpu = next(g for g in book.catalog if g.id == "h100-sxm")
    s = Sizing(gpu=gpu)
    s.tflops = compute_tflops(gpu, shape.precision)
    memo: dict = {}
    width.serving_speed(s, brief, shape, a, 2, memo)
    g = width._serving_gpu(s, brief, shape, a, memo, None)
    return g, width._width(g, 2), s


def test_the_bench_brief_works_out_no_wave_step_without_an_engine(book) -> None:  # noqa: ANN001, F811
    g, w, s = _bench_width(book, ())
    budget = g.eff.budget_tokens
    assert g.s_in < budget < g.c * g.s_in  # the wave would take a chunk of the budget's tokens
    assert w.chunk is None and (id(g.gpu), 2, budget, g.s_in) not in g.prefills
    assert (id(g.gpu), 2, g.s_in, g.s_in) in g.prefills  # the prompt alone was
    # vLLM runs 15% of the others' prefill first: the wave is read, and worked out
    g, w, vllm = _bench_width(book, ("vllm",))
    assert g.eff.prefill_first > 0
    assert w.chunk == g.prefills[(id(g.gpu), 2, budget, g.s_in)][1] > 0
    assert vllm.est_ttft_ms != s.est_ttft_ms


def test_the_guard_refuses_what_could_make_the_wave_infinite(book) -> None:  # noqa: ANN001, F811
    # The reason for it: a wave of +inf against a finite TTFT alone blends to NaN, not to the TTFT alone.
    assert math.isnan(serving.blend_arrivals(0.5, math.inf, 0.0))
    assert serving.blend_arrivals(0.5, 1e300, 0.0) == 0.5 == serving.blend_arrivals(0.5, 0.5, 0.0)
    g, w, _ = _bench_width(book, ())
    single, step = w.single, 0.02
    assert width._wave_unread(g, w, single, step)
    assert not width._wave_unread(g, w, 1e300 / g.c ** 2, step)  # the wave's steps could overflow
    assert not width._wave_unread(g, w, 0.0, step)  # no prompt step worked out: nothing to bound the wave by
    assert not width._wave_unread(g, w, single, math.inf)
    for name, value in (("host_s", -1e-3), ("layers", -1), ("s_in", 0)):
        kept = getattr(g, name)
        setattr(g, name, value)
        assert not width._wave_unread(g, w, single, step), name
        setattr(g, name, kept)
    w.overhead, kept = -1e-3, w.overhead
    assert not width._wave_unread(g, w, single, step)
    w.overhead = kept
    g.eff, kept_eff = dataclasses.replace(g.eff, request_s=-math.inf), g.eff
    assert not width._wave_unread(g, w, single, step)
    g.eff = kept_eff


@pytest.mark.parametrize("shared", [-1.0, 5.0])
def test_an_moe_with_negative_shared_parameters_is_worked_out(book, shared: float) -> None:  # noqa: ANN001, F811
    g, w, _ = _bench_width(book, ())
    g.shape = dataclasses.replace(g.shape, experts=64, experts_per_token=4, shared_params_billion=shared,
                                  active_params_billion=10.0)
    assert g.shape.routed
    assert width._wave_unread(g, w, w.single, 0.02) is (shared >= 0)
