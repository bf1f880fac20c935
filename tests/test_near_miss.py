"""A target missed by no more than the measured error is at risk, as one met by less than it is (issue 37 item 5)."""

from __future__ import annotations

from service.domain.accuracy import Margin


def test_margins_treat_near_misses_alike_both_ways():
    """domain.accuracy.Margin (issue 37 item 5): within the measured error on either side is at risk, not out."""
    over, under, far = (Margin("latency.ttft_ms", f, 1000.0, 14.8) for f in (1082.0, 937.0, 1200.0))
    assert over.near_miss and not over.at_risk
    assert under.at_risk and not under.near_miss
    assert not far.near_miss and not far.at_risk
