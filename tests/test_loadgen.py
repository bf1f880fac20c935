"""The bench's load generator offers paced load evenly: client start offsets for latency below saturation."""

from __future__ import annotations

import pytest

from service.bench.loadgen import stagger


def test_paced_clients_start_one_gap_of_the_whole_rate_apart() -> None:
    # 8 clients sharing 100 rps each send every 80 ms; started 10 ms apart, the server sees one call per 10 ms.
    offsets = stagger(8, 100.0)
    assert offsets == pytest.approx([i * 0.010 for i in range(8)])
    per_client_gap = 8 / 100.0
    arrivals = sorted(o + n * per_client_gap for o in offsets for n in range(5))
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
    assert min(gaps) == pytest.approx(max(gaps)) == pytest.approx(0.010)


def test_unpaced_clients_all_start_at_once() -> None:
    assert stagger(4, 0) == [0.0] * 4
