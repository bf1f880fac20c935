"""The serving width search passes over widths whose floor already loses (width.pick_width's `prune`): it must
pick the width the full search picks, with the same figures, and the floor must be below what sizing finds."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.decide.sizing import width
from service.decide.sizing.common import Sizing, compute_tflops, tp_group_sizes
from service.decide.sizing.shape import shape_of
from service.domain.brief import PRECISIONS, Brief, Latency, Model, Traffic
from service.physics import serving
from service.rulebook.folder import load_rulebook

RULES = Path(__file__).parents[1] / "rules"
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def book():  # noqa: ANN201
    book, problems = load_rulebook(RULES, today=date(2026, 11, 15))
    assert book is not None, problems
    return book


def _ms(hi: float) -> st.SearchStrategy[float]:
    return st.one_of(st.just(0.0), st.floats(1.0, hi))


briefs = st.builds(
    Brief,
    workload=st.sampled_from(("REALTIME_INFERENCE", "BATCH_INFERENCE", "EVALUATION", "NOTEBOOK")),
    model=st.builds(
        Model,
        params_billion=st.floats(0.5, 1000),
        precision=st.sampled_from(PRECISIONS),
        context_tokens=st.one_of(st.just(0), st.integers(512, 262144)),
        active_params_billion=st.one_of(st.just(0.0), st.floats(0.1, 100)),
        experts=st.one_of(st.just(0), st.integers(8, 256)),
        experts_per_token=st.one_of(st.just(0), st.integers(1, 8)),
        attention=st.sampled_from(("UNSPECIFIED", "GQA", "MLA")),
    ),
    traffic=st.builds(
        Traffic,
        concurrent_sessions=st.integers(0, 4096),
        batch_size=st.integers(0, 256),
        avg_input_tokens=st.integers(0, 32000),
        p95_input_tokens=st.integers(0, 64000),
        avg_output_tokens=st.integers(0, 4000),
    ),
    latency=st.builds(Latency, p95_ms=_ms(120_000), ttft_ms=_ms(20_000)),
    toolchain=st.sampled_from(((), ("vllm",), ("sglang",), ("tensorrt-llm",), ("llama.cpp",))),
)


def _search(book, brief: Brief, prune: bool, smallest_first: bool = True,  # noqa: ANN001
            ) -> list[tuple[str, int, str, dict[int, tuple[float, ...]]]]:
    """Every catalog GPU's width search from its smallest width: (gpu, width, the speed fields on the sizing, the
    widths sized)."""
    a = book.assumptions
    shape = shape_of(brief, a)
    assert shape is not None
    out = []
    for gpu in book.catalog:
        s = Sizing(gpu=gpu)
        s.tflops = compute_tflops(gpu, shape.precision)
        sizes = tp_group_sizes(gpu, a)
        tried: dict[int, tuple[float, ...]] = {}
        try:
            k = width.pick_width(s, brief, shape, a, sizes[0], sizes, gpu, {}, tried, prune=prune,
                                     smallest_first=smallest_first)
        except (ValueError, ZeroDivisionError, OverflowError) as e:
            out.append((gpu.id, -1, repr(e), {}))
            continue
        out.append((gpu.id, k, repr([getattr(s, f) for f in width.SPEED_FIELDS]), tried))
    return out


@SETTINGS
@given(brief=briefs, smallest_first=st.booleans())
def test_the_pruned_search_picks_what_the_full_search_picks(book, brief, smallest_first):  # noqa: ANN001
    # smallest_first=False: the missed-target search's sizings, which need not size memory's width.
    for (gpu, k, figures, tried), (_, k_all, figures_all, tried_all) in zip(
        _search(book, brief, True, smallest_first), _search(book, brief, False), strict=True
    ):
        assert (k, figures) == (k_all, figures_all), gpu
        assert all(tried_all[w] == v for w, v in tried.items()), gpu  # the widths it sized have the same figures


@SETTINGS
@given(brief=briefs)
def test_a_widths_floor_is_below_its_sized_latency(book, brief):  # noqa: ANN001
    a = book.assumptions
    shape = shape_of(brief, a)
    assert shape is not None
    for gpu in book.catalog:
        s = Sizing(gpu=gpu)
        s.tflops = compute_tflops(gpu, shape.precision)
        memo: dict = {}
        for n in tp_group_sizes(gpu, a):
            try:
                width.serving_speed(s, brief, shape, a, n, memo)
            except (ValueError, ZeroDivisionError, OverflowError):
                break
            g = width._serving_gpu(s, brief, shape, a, memo, None)
            ttft, step = width.serving_floor(g, n)
            assert step * 1000 <= s.step_ms * (1 + 1e-12), (gpu.id, n)
            assert ttft * 1000 <= s.est_ttft_ms * (1 + 1e-12), (gpu.id, n)


def test_the_search_prunes_some_widths(book):  # noqa: ANN001
    # A 70B model at a tight latency target: the widest width meets it, and the floors of the middle widths say
    # they cannot, so not every width is sized (else the pruning is dead code).
    brief = Brief(
        workload="REALTIME_INFERENCE",
        model=Model(params_billion=70, precision="FP8", context_tokens=8192),
        traffic=Traffic(concurrent_sessions=16, avg_input_tokens=1000, avg_output_tokens=200),
        latency=Latency(p95_ms=2500),
    )
    pruned = _search(book, brief, True)
    full = _search(book, brief, False)
    assert [(g, k, f) for g, k, f, _ in pruned] == [(g, k, f) for g, k, f, _ in full]
    assert sum(len(t) for *_, t in pruned) < sum(len(t) for *_, t in full)


def _reference_step(weights_gb: float, linear_flops: float, kv_gb: float, decode_attn_flops: float,
                    prefill_attn_flops: float, bandwidth_tbs: float, mbu: float, tflops: float, mfu: float,
                    attn_tflops: float, overhead_s: float, overlap: float) -> float:
    """step_seconds as three bound_seconds calls (before the attention kernels were written out)."""
    gemm = serving.bound_seconds(weights_gb, linear_flops, bandwidth_tbs, mbu, tflops, mfu, overlap=overlap)
    decode_attn = 0.0 if kv_gb <= 0 and decode_attn_flops <= 0 else serving.bound_seconds(
        kv_gb, 0.0, bandwidth_tbs, mbu, tflops, mfu, decode_attn_flops, attn_tflops, overlap)
    prefill_attn = 0.0 if prefill_attn_flops <= 0 else serving.bound_seconds(
        0.0, 0.0, bandwidth_tbs, mbu, tflops, mfu, prefill_attn_flops, attn_tflops)
    return overhead_s + gemm + decode_attn + prefill_attn


_amount = st.one_of(st.just(0.0), st.floats(-1.0, 1e18, allow_nan=False), st.floats(allow_nan=True))


@settings(max_examples=2000, deadline=None)
@given(args=st.tuples(_amount, _amount, _amount, _amount, _amount, st.floats(0.01, 20), st.floats(0.05, 1),
                      st.floats(1, 20000), st.floats(0.05, 1), st.one_of(st.just(0.0), st.floats(1, 20000)),
                      st.floats(0, 1), st.floats(0, 1)))
def test_step_seconds_is_its_kernels_bounds(args):  # noqa: ANN001
    assert repr(serving.step_seconds(*args)) == repr(_reference_step(*args))


def _reference_lone(prefill_s: float, step_s: float, others: int, output_tokens: int, request_s: float) -> float:
    """lone_first_token before its loop's invariants were hoisted."""
    base = request_s + (0.5 * step_s if others > 0 else 0.0) + max(prefill_s, step_s)
    if others <= 0 or prefill_s <= 0:
        return base
    ttft = base
    decode = max(0, output_tokens) * step_s
    for _ in range(30):
        cycle = ttft + decode
        rho = min(0.95, others * prefill_s / cycle) if cycle > 0 else 0.0
        nxt = base + rho * prefill_s / 2
        if abs(nxt - ttft) <= 1e-9 * max(ttft, 1e-12):
            return nxt
        ttft = nxt
    return ttft


@settings(max_examples=2000, deadline=None)
@given(args=st.tuples(_amount, _amount, st.integers(-2, 5000), st.integers(-2, 5000), _amount))
def test_lone_first_token_is_its_fixed_point(args):  # noqa: ANN001
    assert repr(serving.lone_first_token(*args)) == repr(_reference_lone(*args))
