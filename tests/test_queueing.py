"""physics/queueing: Erlang C against published values and the p95 latency a media brief is checked with."""

from __future__ import annotations

import math

import pytest

from service.physics.queueing import erlang_c, latency_quantile_s


@pytest.mark.parametrize(("servers", "offered", "expected"), [
    (1, 0.5, 0.5),  # M/M/1: P(wait) = load
    (2, 1.0, 1 / 3),  # Erlang B(2, 1) = 0.2, so C = 0.2 / (1 - 0.5 x 0.8) = 1/3
    (10, 8.0, 0.4092),  # the classic call-centre table (10 agents, 8 Erlangs): 40.9%
])
def test_erlang_c_matches_known_values(servers: int, offered: float, expected: float):
    assert erlang_c(servers, offered) == pytest.approx(expected, abs=5e-4)


def test_erlang_c_edges():
    assert erlang_c(3, 0.0) == 0.0
    assert erlang_c(3, 3.0) == 1.0 and erlang_c(3, 5.0) == 1.0  # cannot keep up: every request waits
    assert erlang_c(1000, 900.0) < erlang_c(1000, 990.0) < 1.0  # no factorial overflow at many servers


def test_latency_quantile_is_the_service_time_when_nobody_waits():
    assert latency_quantile_s(7.0, 0.0, 1) == 7.0
    assert latency_quantile_s(7.0, 0.001, 4) == 7.0  # P(wait) far below 5%
    assert latency_quantile_s(0.0, 1.0, 1) == 0.0


def test_latency_quantile_by_hand_and_as_load_grows():
    # 1 server, 1 s each, 0.5 arrivals/s: P(wait) = 0.5; a wait given one has mean 1 / (1 - 0.5) x 1/2 = 1 s
    # (fixed service halves M/M/1's), so the p95 wait is 1 x ln(0.5 / 0.05) = 2.303 s.
    assert latency_quantile_s(1.0, 0.5, 1) == pytest.approx(1 + math.log(10), rel=1e-9)
    # exponential service (cs^2 = 1): M/M/1's sojourn p95 is ln(20) / (mu - lambda) = 5.99 s; this form gives
    # 1 + 2 x ln(10) = 5.61 s (it adds the service time to the wait's quantile rather than convolving them).
    assert latency_quantile_s(1.0, 0.5, 1, service_cv2=1.0) == pytest.approx(1 + 2 * math.log(10), rel=1e-9)
    p95s = [latency_quantile_s(7.0, 0.5, c) for c in (4, 5, 6, 8)]
    assert p95s == sorted(p95s, reverse=True) and p95s[-1] >= 7.0
    assert latency_quantile_s(7.0, 0.5, 3) == math.inf  # 3.5 Erlangs on 3 copies

