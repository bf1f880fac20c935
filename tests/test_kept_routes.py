"""What a route depends on is kept per rules version by the plan fields route_depends_on reads: every other plan
field changes nothing it gives, and what it keeps is what it works out."""

from __future__ import annotations

from typing import Any

import pytest

from service.decide import advisor, provisional
from service.memo import IdentityMemo
from service.rulebook.version import Bundle
from service.wire.api import request_from_proto
from service.wire.validate import validate
from tests.fuzz_requests import request_from_seed


def _plans(bundle: Bundle, monkeypatch: pytest.MonkeyPatch) -> list[tuple[dict[str, Any], str]]:
    seen: list[tuple[dict[str, Any], str]] = []
    real = advisor.route_depends_on

    def spy(rules, plan, route, default):  # noqa: ANN001, ANN202
        seen.append((dict(plan), route))
        return real(rules, plan, route, default)

    monkeypatch.setattr(advisor, "route_depends_on", spy)
    for seed in range(120):
        r = request_from_seed(seed * 7919 + 5)
        if not validate(r, bundle.known_gpu_ids()):
            bundle.advise(request_from_proto(r))
    monkeypatch.undo()
    return seen


def _other(v: Any) -> Any:  # noqa: ANN401
    if isinstance(v, bool):
        return not v
    if isinstance(v, (int, float)):
        return v * 3 + 7
    return f"{v}-other"


def test_route_depends_on_reads_only_the_fields_it_is_kept_by(bundle: Bundle,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    rules = bundle.book.program.for_fact("plan")
    fields, _ = provisional._kept(rules)
    assert fields is not None
    plans = _plans(bundle, monkeypatch)
    assert len(plans) > 20
    assert any(provisional._route_depends_on(rules, p, r, advisor.DEFAULT_ROUTE) for p, r in plans)
    for plan, route in plans:
        worked = provisional._route_depends_on(rules, plan, route, advisor.DEFAULT_ROUTE)
        assert provisional.route_depends_on(rules, plan, route, advisor.DEFAULT_ROUTE) == worked
        # every field outside the key changed at once: the same result, from the work or the store
        other = {k: (v if k in fields else _other(v)) for k, v in plan.items()}
        assert provisional._route_depends_on(rules, other, route, advisor.DEFAULT_ROUTE) == worked
        assert provisional.route_depends_on(rules, other, route, advisor.DEFAULT_ROUTE) == worked


def test_a_value_of_another_type_is_another_key(bundle: Bundle, monkeypatch: pytest.MonkeyPatch) -> None:
    # A store of this test's own: the shared one, filled by every other test's answers, empties itself at
    # DEPENDS_KEPT entries, and an insert that empties it would read as one entry, not size + 1.
    monkeypatch.setattr(provisional, "_kept", IdentityMemo(provisional._fields_read, limit=8))
    rules = bundle.book.program.for_fact("plan")
    fields, kept = provisional._kept(rules)
    assert fields is not None and "horizon_months" in fields
    plan = {f: 0.0 for f in fields}
    provisional.route_depends_on(rules, plan, "RESERVE", advisor.DEFAULT_ROUTE)
    size = len(kept)
    provisional.route_depends_on(rules, {**plan, "horizon_months": 0}, "RESERVE", advisor.DEFAULT_ROUTE)
    assert len(kept) == size + 1


def test_placements_and_spreads_shown_are_kept_by_what_they_show(bundle: Bundle,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """answer.placements_of and market_of keep what they build by the (immutable) Placed and spread they show:
    equal to building it afresh, and the same object for the same placement in another answer."""
    from service.bench.loadgen import distinct_briefs
    from service.decide import answer
    from service.domain.advice import MarketSpread, Placement
    from service.memo import IdentityMemo
    from service.wire.api import pb

    # Memos of this test's own: the module's are shared with every other test and empty themselves when full,
    # which between the two answers below would make equal placements distinct objects (it failed 2 runs in 20).
    monkeypatch.setattr(answer, "_placement_of", IdentityMemo(answer._placement, limit=1 << 20))
    monkeypatch.setattr(answer, "_spread_of", IdentityMemo(answer._spread, limit=1 << 20))

    req = request_from_proto(pb.RecommendRequest.FromString(distinct_briefs(1)[0][5:]))
    first, again = bundle.advise(req), bundle.advise(req)
    shown = [(c, d) for c, d in zip(first.candidates, again.candidates, strict=True) if c.placements]
    assert shown and any(c.market for c, _ in shown)
    for c, d in shown:
        assert all(p is q for p, q in zip(c.placements, d.placements, strict=True))
        assert c.placements == tuple(Placement(p.offer, p.instances, p.usd_per_hour, p.usd_per_month)
                                      for p in c.placements)
        if c.market is not None:
            m = c.market
            assert m is d.market
            assert m == MarketSpread(m.tier, m.min_usd_per_gpu_hour, m.median_usd_per_gpu_hour,
                                     m.max_usd_per_gpu_hour, m.offers, m.providers)
    assert answer._placement_of._items and answer._spread_of._items


def test_placements_listed_from_the_kept_options_equal_those_worked_out(bundle: Bundle,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """placement.place keeps the placements it lists beside the options they come from: answers placed without
    anything kept (kept=None) are the same bytes."""
    from service.bench.loadgen import distinct_briefs
    from service.decide import placement
    from service.wire.api import advice_to_proto, pb

    reqs = [request_from_proto(pb.RecommendRequest.FromString(b[5:])) for b in distinct_briefs(3)]
    for seed in range(60):
        r = request_from_seed(seed * 7919 + 5)
        if not validate(r, bundle.known_gpu_ids()):
            reqs.append(request_from_proto(r))
    kept = [advice_to_proto(bundle.advise(r)).SerializeToString(deterministic=True) for r in reqs * 2]
    real = placement.place
    monkeypatch.setattr(advisor, "place", lambda *args: real(*args[:-1], None))
    afresh = [advice_to_proto(bundle.advise(r)).SerializeToString(deterministic=True) for r in reqs * 2]
    assert kept == afresh
    assert any(c.placements for r in reqs for c in bundle.advise(r).candidates)
