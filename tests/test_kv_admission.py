"""Issue 36: a measured width whose memory cannot hold every session's KV cache admits the sessions it holds and
the other clients wait for a slot (docs/calibration.md "Round 5, fourth pass")."""

from __future__ import annotations

import dataclasses

import pytest

from service.accuracy.harness import _at_width, _held
from service.decide.models import resolve
from service.decide.sizing.common import usable_gb
from service.decide.sizing.inference import sessions_held
from service.decide.sizing.shape import shape_of
from service.domain.brief import Brief, Model, Traffic
from service.physics.queueing import closed_loop_wait_s

from .conftest import TODAY


def test_closed_loop_wait_by_little_s_law():
    assert closed_loop_wait_s(32, 32, 30.0) == 0.0
    assert closed_loop_wait_s(8, 16, 30.0) == 0.0
    # Half the clients hold a slot: each waits one whole request's time.
    assert closed_loop_wait_s(32, 16, 30.0) == pytest.approx(30.0)
    assert closed_loop_wait_s(32, 24, 30.0) == pytest.approx(10.0)
    assert closed_loop_wait_s(32, 0, 30.0) == pytest.approx(30.0 * 31)  # at least one slot


def _brief(sessions: int, engine: str) -> Brief:
    # Lambda's MiniMax-M2.5 page: 4 x H100, 8,192 in / 1,024 out at --max-concurrency 32 (published-serving.csv).
    return Brief(workload="REALTIME_INFERENCE",
                 model=Model(name="minimax-m2.5", precision="FP8", context_tokens=9216),
                 traffic=Traffic(concurrent_sessions=sessions, avg_input_tokens=8192, avg_output_tokens=1024),
                 toolchain=(engine,))


def test_sessions_held_is_the_most_that_fit(bundle):
    a = bundle.book.assumptions
    gpu = next(g for g in bundle.book.catalog if g.id == "h100-sxm")
    brief = resolve(_brief(32, "sglang"), bundle.book.models)
    shape = shape_of(brief, a)
    assert shape is not None
    usable = usable_gb(gpu, a)
    held = sessions_held(gpu, brief, shape, a, 4, usable)
    assert 0 < held <= 32
    if held < 32:
        more = dataclasses.replace(shape, sequences=held + 1)
        assert sessions_held(gpu, brief, more, a, 4, usable) == held
    # Not even one session on one GPU: 230 GB of weights.
    assert sessions_held(gpu, brief, shape, a, 1, usable) == 0
    # SGLang's static pool at TP4 (0.85 of each GPU for weights and KV) holds fewer than the product's line.
    assert _held(gpu, brief, shape, a, 4) < held


def test_the_waiting_clients_lengthen_the_first_token_not_the_tokens_after_it(bundle):
    gpu = next(g for g in bundle.book.catalog if g.id == "h100-sxm")
    full = _at_width(bundle, resolve(_brief(32, "sglang"), bundle.book.models), gpu, 4, TODAY)
    a = bundle.book.assumptions
    brief = resolve(_brief(32, "sglang"), bundle.book.models)
    shape = shape_of(brief, a)
    assert shape is not None
    held = _held(gpu, brief, shape, a, 4)
    assert 0 < held < 32
    alone = _at_width(bundle, resolve(_brief(held, "sglang"), bundle.book.models), gpu, 4, TODAY)
    # The admitted sessions run as `held` sessions would; the others' wait is Little's law's.
    assert full["itl"] == pytest.approx(alone["itl"])
    cycle = alone["ttft"] + 1024 * alone["itl"]
    assert full["ttft"] == pytest.approx(alone["ttft"] + cycle * (32 / held - 1))
    # Lambda measured TTFT 13,131 ms, ITL 27 ms: the queue is most of the first token's time.
    assert 9000 < full["ttft"] < 17000
    assert full["ttft"] > 3 * alone["ttft"]
