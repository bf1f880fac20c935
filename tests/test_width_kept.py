"""A width's figures that no output length changes (width._width: the step's floor and communication, the
rates, its prompts' prefill times) are kept in the brief's prefill table, which the missed-target search shares
across the lengths it tries: a GPU sized at one length after others, on that table, has the figures of a sizing
from nothing."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from service.decide.sizing import width
from service.decide.sizing.common import Sizing, compute_tflops, tp_group_sizes
from service.decide.sizing.shape import shape_of
from service.domain.brief import Brief, Latency, Model, Traffic
from tests.test_width_pruning import SETTINGS, book, briefs  # noqa: F401  (book: the module's rules fixture)

_ERRORS = (ValueError, ZeroDivisionError, OverflowError)


def _sized(book, brief: Brief, arch, prefills: dict) -> list[tuple[str, str]]:  # noqa: ANN001, F811
    """Every catalog GPU sized at every width (serving_speed) and its floors, on a memo sharing `prefills`."""
    a = book.assumptions
    shape = shape_of(brief, a, arch)
    assert shape is not None
    out = []
    memo: dict = {("prefill",): prefills}
    for gpu in book.catalog:
        s = Sizing(gpu=gpu)
        s.tflops = compute_tflops(gpu, shape.precision)
        for n in tp_group_sizes(gpu, a):
            try:
                width.serving_speed(s, brief, shape, a, n, memo)
                g = width._serving_gpu(s, brief, shape, a, memo, None)
                got = repr(([getattr(s, f) for f in width.SPEED_FIELDS], width.serving_floor(g, n)))
            except _ERRORS as e:
                got = repr(e)
            out.append((f"{gpu.id}@{n}", got))
    return out


def _at(brief: Brief, output_tokens: int) -> Brief:
    return replace(brief, traffic=replace(brief.traffic, avg_output_tokens=output_tokens))


# No input length given: the default prompt is what the context leaves after the output (shape_of), so it moves
# with the output length, and with it every prefill and floor a width keeps.
UNSAID_INPUT = Brief(
    workload="REALTIME_INFERENCE", model=Model(params_billion=8, precision="BF16", context_tokens=4096),
    traffic=Traffic(concurrent_sessions=8, avg_output_tokens=3000, p95_input_tokens=2000), latency=Latency(p95_ms=5000),
)


@SETTINGS
@given(brief=briefs, lengths=st.lists(st.integers(1, 4000), min_size=1, max_size=4))
@example(brief=UNSAID_INPUT, lengths=[2500, 500])
def test_a_width_sized_on_kept_figures_is_sized_from_nothing(book, brief: Brief, lengths: list[int]) -> None:  # noqa: ANN001, F811
    shape = shape_of(brief, book.assumptions)
    assert shape is not None
    shared: dict = {}
    _sized(book, brief, shape.arch, shared)
    for n in lengths:
        at = _at(brief, n)
        assert _sized(book, at, shape.arch, shared) == _sized(book, at, shape.arch, {}), n
    assert any(k[0] == "width" for k in shared)  # the figures were kept, and found again


def test_a_gpu_with_no_compute_is_refused_by_the_step_as_before(book) -> None:  # noqa: ANN001, F811
    # The kept figures divide by nothing: serving_floor's TTFT is worked out when a floor is asked, so a width
    # with no compute still gets the step's own error, naming the rate.
    brief = UNSAID_INPUT
    a = book.assumptions
    shape = shape_of(brief, a)
    assert shape is not None
    s = Sizing(gpu=book.catalog[0])
    s.tflops = 0.0
    with pytest.raises(ValueError, match="tflops"):
        width.serving_speed(s, brief, shape, a, 1, {})
