"""The ranking's behaviour, from first principles and as properties that hold for any correct ranking (issue 42):
the cost compared per basis, who is priced, what an unpriced candidate may change (nothing), cheaper never
worse, and ties. Candidates are built directly (decide/run.Scored over a Sizing), so each test reads only
decide/rank.py; the answers' own orderings are held by the golden cases."""

from __future__ import annotations

import math
from datetime import date

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.decide.rank import TIE_POINTS, placed_first, rank, rentable
from service.decide.run import Scored
from service.decide.sizing.common import Placed, Sizing
from service.domain.brief import Quote
from service.domain.catalog import Gpu
from service.domain.offers import Offer


def _gpu(gid: str) -> Gpu:
    return Gpu(gid, gid, "nvidia", "datacenter", 80, "HBM3", 3.35, 989, 1979, 0, 700, "nvlink", 900, 8, 8, 7, 0.7,
               "cuda", "", "", "")


def _c(gid: str, usd: float, *, tps: float = 0.0, unit: float = 0.0, count: int = 1, replicas: int = 1,
       eff: float = 500.0, points: float = 0.0) -> Scored:
    s = Sizing(gpu=_gpu(gid), count=count, replicas=replicas, usd_per_hour=usd, tokens_per_second=tps,
               usd_per_unit=unit, effective_tflops=eff)
    return Scored(s, {}, points=points)


def _by_id(items: list[Scored]) -> dict[str, Scored]:
    return {c.sizing.gpu.id: c for c in items}


# -- each basis, worked by hand ----------------------------------------------------------------------------


def test_per_million_tokens_counts_every_replica():
    # $10/h for 2 replicas x 500 tokens/s = 3.6M tokens an hour: $2.78 per million. One replica would be $5.56.
    items = [_c("two", 10.0, tps=500, replicas=2), _c("one", 4.0, tps=500)]
    rank(items)
    got = _by_id(items)
    assert got["two"].basis_kind == "usd_per_million_output_tokens"
    assert got["two"].basis == pytest.approx(10.0 / (500 * 2 * 3600) * 1e6)  # 2.777...
    assert got["one"].basis == pytest.approx(4.0 / (500 * 3600) * 1e6)  # 2.222...
    assert got["one"].best == got["two"].best == pytest.approx(got["one"].basis)
    assert [c.sizing.gpu.id for c in items] == ["one", "two"]
    assert got["two"].cost_points == round(100 * 2.2222222 / 2.7777778, 2) == 80.0


def test_per_tflop_hour_counts_every_gpu_of_the_configuration():
    # $8/h for 4 GPUs x 250 effective TFLOPS = 1,000 TFLOPS: $0.008 per TFLOP-hour, the same as one such GPU
    # at $2/h: equal cost, equal points (the GPU count dropped would make the four-GPU one 4x dearer).
    items = [_c("four", 8.0, count=4, eff=250), _c("single", 2.0, count=1, eff=250)]
    rank(items)
    got = _by_id(items)
    assert got["four"].basis_kind == "usd_per_effective_tflop_hour"
    assert got["four"].basis == pytest.approx(0.008) and got["single"].basis == pytest.approx(0.008)
    assert got["four"].cost_points == got["single"].cost_points == 100.0


def test_per_unit_is_the_cost_compared_when_every_priced_candidate_has_one():
    items = [_c("a", 3.0, tps=100, unit=0.02), _c("b", 1.0, tps=100, unit=0.05)]
    rank(items)
    got = _by_id(items)
    assert {c.basis_kind for c in items} == {"usd_per_unit"}
    assert (got["a"].basis, got["b"].basis, got["b"].best) == (0.02, 0.05, 0.02)
    assert got["a"].cost_points == 100.0 and got["b"].cost_points == 40.0
    assert [c.sizing.gpu.id for c in items] == ["a", "b"]  # per unit decides, not $/h


def test_a_zero_unit_cost_is_not_a_price_the_basis_falls_back():
    # A candidate whose units per hour cannot be computed has usd_per_unit 0: that is no cost, not a free one.
    items = [_c("a", 2.0, tps=100, unit=0.0), _c("b", 3.0, tps=200, unit=0.01)]
    rank(items)
    got = _by_id(items)
    assert {c.basis_kind for c in items} == {"usd_per_million_output_tokens"}
    assert got["b"].cost_points == 100.0 and got["a"].cost_points == 75.0  # $5.56 vs $4.17 per million


def test_a_list_where_only_some_have_throughput_is_compared_per_tflop_hour():
    # `any` in place of `all` would divide by the zero throughput.
    items = [_c("a", 2.0, tps=100, eff=100), _c("b", 2.0, tps=0.0, eff=200)]
    rank(items)
    got = _by_id(items)
    assert {c.basis_kind for c in items} == {"usd_per_effective_tflop_hour"}
    assert got["b"].cost_points == 100.0 and got["a"].cost_points == 50.0


def test_an_unpriced_candidate_gets_no_cost_points_and_ranks_after_the_priced():
    for tps, unit in ((0.0, 0.0), (100.0, 0.0)):
        items = [_c("free", 0.0, tps=tps, unit=unit), _c("paid", 5.0, tps=100, unit=0.0)]
        rank(items)
        got = _by_id(items)
        assert got["free"].cost_points == 0.0 and got["paid"].cost_points == 100.0
        assert [c.sizing.gpu.id for c in items] == ["paid", "free"]


def test_nobody_priced_gives_nobody_cost_points():
    items = [_c("a", 0.0, tps=10), _c("b", 0.0)]
    rank(items)
    assert [c.cost_points for c in items] == [0.0, 0.0] and all(math.isinf(c.basis) for c in items)


def test_equal_scores_list_the_cheaper_per_hour_first_then_by_id():
    # Equal cost per token, equal points: the smaller commitment ($/h) first; equal in both, the id decides.
    items = [_c("big", 20.0, tps=1000), _c("small", 2.0, tps=100), _c("also-small", 2.0, tps=100)]
    rank(items)
    assert [c.score for c in items] == [100.0, 100.0, 100.0]
    assert [c.sizing.gpu.id for c in items] == ["also-small", "small", "big"]


def test_rule_points_add_to_the_cost_points():
    items = [_c("a", 1.0, tps=100), _c("b", 2.0, tps=100, points=60.0)]
    rank(items)
    got = _by_id(items)
    assert got["b"].score == 50.0 + 60.0 and got["a"].score == 100.0
    assert [c.sizing.gpu.id for c in items] == ["b", "a"]


# -- properties --------------------------------------------------------------------------------------------

_usd = st.floats(min_value=0.05, max_value=500, allow_nan=False, allow_infinity=False)


@st.composite
def _candidates(draw: st.DrawFn, n_min: int = 1) -> list[Scored]:
    """A list whose priced candidates share one basis kind's inputs (each has tokens, or each has units, or
    throughput is mixed), with rule points from a few values so equal scores happen."""
    n = draw(st.integers(n_min, 6))
    with_tps = draw(st.sampled_from(("all", "none", "some")))
    with_unit = draw(st.booleans())
    out = []
    for i in range(n):
        usd = draw(_usd)
        tps = draw(st.floats(1, 1e4)) if with_tps == "all" or (with_tps == "some" and draw(st.booleans())) else 0.0
        out.append(_c(f"g{i}", usd, tps=tps, unit=usd / draw(st.floats(1, 1e5)) if with_unit else 0.0,
                      count=draw(st.integers(1, 16)), replicas=draw(st.integers(1, 4)),
                      eff=draw(st.floats(1, 2000)), points=draw(st.sampled_from((0.0, 0.0, 5.0, -10.0, 25.0)))))
    return out


def _clone(items: list[Scored]) -> list[Scored]:
    return [Scored(c.sizing, {}, points=c.points) for c in items]


@settings(max_examples=300, deadline=None)
@given(items=_candidates(), unpriced=st.lists(st.tuples(st.floats(0, 1e4), st.integers(1, 8), st.floats(0, 2000),
                                                         st.sampled_from((0.0, 5.0, 25.0))), min_size=1, max_size=3))
def test_an_unpriced_candidate_never_changes_another_score_or_leads_them(items, unpriced):
    alone = _clone(items)
    rank(alone)
    extra = [_c(f"free{i}", 0.0, tps=tps, count=count, eff=eff, points=points)
             for i, (tps, count, eff, points) in enumerate(unpriced)]
    mixed = _clone(items) + extra
    rank(mixed)
    before, after = _by_id(alone), _by_id(mixed)
    for gid, c in before.items():
        assert (after[gid].score, after[gid].cost_points, after[gid].basis_kind) == (
            c.score, c.cost_points, c.basis_kind), gid
    for e in extra:
        assert e.cost_points == 0.0
    # Among equal rule points, every priced candidate comes before every unpriced one.
    order = [c.sizing.gpu.id for c in mixed]
    for e in extra:
        for gid, c in before.items():
            if c.points >= e.points:
                assert order.index(gid) < order.index(e.sizing.gpu.id), (gid, e.sizing.gpu.id)


@settings(max_examples=300, deadline=None)
@given(items=_candidates(n_min=2), which=st.integers(0, 5), factor=st.floats(0.1, 0.99))
def test_a_cheaper_offer_never_ranks_worse_all_else_equal(items, which, factor):
    which %= len(items)
    gid = items[which].sizing.gpu.id
    before = _clone(items)
    rank(before)
    cheaper = _clone(items)
    s = cheaper[which].sizing
    cheaper[which] = Scored(Sizing(gpu=s.gpu, count=s.count, replicas=s.replicas, usd_per_hour=s.usd_per_hour * factor,
                                   tokens_per_second=s.tokens_per_second, usd_per_unit=s.usd_per_unit * factor,
                                   effective_tflops=s.effective_tflops), {}, points=items[which].points)
    rank(cheaper)
    was = [c.sizing.gpu.id for c in before].index(gid)
    now = [c.sizing.gpu.id for c in cheaper].index(gid)
    assert now <= was
    assert _by_id(cheaper)[gid].score >= _by_id(before)[gid].score


@settings(max_examples=300, deadline=None)
@given(items=_candidates())
def test_the_order_is_by_score_ties_to_the_smaller_commitment_and_the_best_cost_is_the_least(items):
    rank(items)
    finite = [c.basis for c in items if math.isfinite(c.basis)]
    for c in items:
        assert c.best == (min(finite) if finite else math.inf)
        relative = 100.0 * c.best / c.basis if math.isfinite(c.basis) and c.basis > 0 else 0.0
        assert (c.cost_points, c.score) == (round(relative, 2), round(relative + c.points, 2))
    for a, b in zip(items, items[1:], strict=False):
        # Issue 34: scores closer than TIE_POINTS are a tie, and the smaller commitment (a lower $/h, never an
        # unpriced $0/h) goes first; otherwise the higher score does.
        assert not (a.score - b.score < TIE_POINTS and 0 < b.sizing.usd_per_hour < a.sizing.usd_per_hour)
        if a.score < b.score:
            assert b.score - a.score < TIE_POINTS and 0 < a.sizing.usd_per_hour < b.sizing.usd_per_hour
        if a.score == b.score and a.sizing.usd_per_hour == b.sizing.usd_per_hour:
            assert (not math.isfinite(a.basis), a.sizing.gpu.id) <= (not math.isfinite(b.basis), b.sizing.gpu.id)


# -- a fixed demand's month, thin throughput, nothing delivered --------------------------------------------


def _fixed(gid: str, usd: float, month: float, *, fixed: bool = True, tps: float = 0.0, eff: float = 500.0) -> Scored:
    s = Sizing(gpu=_gpu(gid), count=1, usd_per_hour=usd, usd_per_month=month, fixed_demand=fixed,
               tokens_per_second=tps, effective_tflops=eff)
    return Scored(s, {}, points=0.0)


def test_a_fixed_demand_with_no_unit_cost_compares_the_months():
    # Every candidate serves the brief's stated rate (a video's seconds: no unit to price): the cheaper month is
    # the cheaper work. $1,000 against $1,500: 100 and 66.67 points, whatever their $/h or TFLOPS say
    # (per TFLOP-hour the $1,500 one would win: $2/h over 1,000 TFLOPS against $1/h over 100).
    items = [_fixed("dear", 2.0, 1500.0, eff=1000.0), _fixed("cheap", 1.0, 1000.0, eff=100.0)]
    rank(items)
    got = _by_id(items)
    assert {c.basis_kind for c in items} == {"usd_per_month"}
    assert (got["cheap"].basis, got["dear"].basis, got["dear"].best) == (1000.0, 1500.0, 1000.0)
    assert got["cheap"].cost_points == 100.0 and got["dear"].cost_points == 66.67
    assert [c.sizing.gpu.id for c in items] == ["cheap", "dear"]
    # any positive month is a month (half a dollar too)
    items = [_fixed("a", 1.0, 0.5), _fixed("b", 1.0, 1.0)]
    rank(items)
    assert {c.basis_kind for c in items} == {"usd_per_month"} and _by_id(items)["b"].cost_points == 50.0


def test_the_months_are_compared_only_when_every_priced_candidate_serves_the_stated_demand_with_a_month():
    # One not serving a fixed demand, or one with no month: the months are not comparable work; the ranking
    # falls back (here to $ per effective TFLOP-hour).
    for items in ([_fixed("a", 2.0, 1500.0), _fixed("b", 1.0, 1000.0, fixed=False)],
                  [_fixed("a", 2.0, 1500.0), _fixed("b", 1.0, 0.0)]):
        rank(items)
        assert {c.basis_kind for c in items} == {"usd_per_effective_tflop_hour"}


def test_a_throughput_below_one_token_a_second_is_still_priced_per_million_tokens():
    # $1/h at 0.5 tokens/s = 1,800 tokens an hour: $555.56 per million; $1/h at 1 token/s: $277.78.
    items = [_c("slow", 1.0, tps=0.5), _c("fast", 1.0, tps=1.0)]
    rank(items)
    got = _by_id(items)
    assert {c.basis_kind for c in items} == {"usd_per_million_output_tokens"}
    assert got["slow"].basis == pytest.approx(1e6 / 1800) and got["slow"].cost_points == 50.0


def test_a_priced_candidate_that_delivers_nothing_has_no_cost_not_a_division_by_zero():
    # Per TFLOP-hour, 0 effective TFLOPS delivers nothing: no cost compared (infinite), no cost points.
    items = [_c("none", 2.0, eff=0.0), _c("some", 2.0, eff=100.0)]
    rank(items)
    got = _by_id(items)
    assert math.isinf(got["none"].basis) and got["none"].cost_points == 0.0
    assert got["some"].cost_points == 100.0 and [c.sizing.gpu.id for c in items] == ["some", "none"]


# -- rentable candidates first -----------------------------------------------------------------------------


class _Ranked:
    def __init__(self, survivors: list[Scored], limit: int) -> None:
        self.survivors, self.limit = survivors, limit
        self.shown = survivors[:limit]


def _placeable(gid: str, rentable: bool, loaded: bool = True, quote: bool = False) -> Scored:
    placement = Placed(Offer("p", "i", gid, 1, None, None, "r", "US", "on_demand", 2.0, date(2026, 1, 1), "s",
                             date(2026, 1, 1), None), 1, 2.0, "ON_DEMAND") if rentable and not quote else None
    s = Sizing(gpu=_gpu(gid), count=1, usd_per_hour=2.0, placement=placement,
               quote=Quote(gid, 2.0) if quote else None, offers_loaded=loaded)
    return Scored(s, {})


def test_a_candidate_is_rentable_on_an_offer_in_scope_or_on_the_callers_quote():
    assert rentable(_placeable("a", True).sizing)
    assert rentable(_placeable("b", True, quote=True).sizing)
    assert not rentable(_placeable("c", False).sizing)


def test_rentable_candidates_go_first_keeping_each_groups_order():
    # best first: x (no offer), a (offer), y (no offer), b (quote): rentable a, b first, then x, y
    survivors = [_placeable("x", False), _placeable("a", True), _placeable("y", False),
                 _placeable("b", True, quote=True)]
    ranked = _Ranked(survivors, limit=3)
    assert placed_first(ranked) is True  # the first pick changed: the route is decided again
    assert [c.sizing.gpu.id for c in ranked.survivors] == ["a", "b", "x", "y"]
    assert [c.sizing.gpu.id for c in ranked.shown] == ["a", "b", "x"]


def test_a_reorder_below_the_first_pick_is_not_a_new_first_pick():
    survivors = [_placeable("a", True), _placeable("x", False), _placeable("b", True)]
    ranked = _Ranked(survivors, limit=2)
    assert placed_first(ranked) is False
    assert [c.sizing.gpu.id for c in ranked.survivors] == ["a", "b", "x"]
    assert [c.sizing.gpu.id for c in ranked.shown] == ["a", "b"]


def test_nothing_moves_when_already_in_order_or_when_no_offers_were_loaded():
    in_order = [_placeable("a", True), _placeable("b", True), _placeable("x", False)]
    ranked = _Ranked(list(in_order), limit=1)
    assert placed_first(ranked) is False and ranked.survivors == in_order and ranked.shown == in_order[:1]
    # no offer table loaded (a catalog-only rulebook): there is nothing to be rentable on; the order stays
    unloaded = [_placeable("x", False, loaded=False), _placeable("a", True, loaded=False)]
    ranked = _Ranked(list(unloaded), limit=2)
    assert placed_first(ranked) is False and ranked.survivors == unloaded
    # one candidate with offers loaded is enough for the rule to apply
    mixed = [_placeable("x", False, loaded=False), _placeable("a", True, loaded=True)]
    ranked = _Ranked(list(mixed), limit=2)
    assert placed_first(ranked) is True and [c.sizing.gpu.id for c in ranked.survivors] == ["a", "x"]


def test_scores_half_a_point_apart_are_not_a_tie():
    # Same cost per token ($2/h at 100 tokens/s and $4/h at 200: 100 cost points each); rule points 0.5 and
    # 0.49 on the dearer one. 100.5 against 100 is exactly TIE_POINTS apart: the higher score leads; 100.49
    # is within it: a tie, and the smaller commitment ($2/h) leads.
    apart = [_c("cheap", 2.0, tps=100), _c("dear", 4.0, tps=200, points=TIE_POINTS)]
    rank(apart)
    assert [(c.sizing.gpu.id, c.score) for c in apart] == [("dear", 100.5), ("cheap", 100.0)]
    tied = [_c("cheap", 2.0, tps=100), _c("dear", 4.0, tps=200, points=0.49)]
    rank(tied)
    assert [(c.sizing.gpu.id, c.score) for c in tied] == [("cheap", 100.0), ("dear", 100.49)]
