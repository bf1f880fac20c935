"""What a route depends on is kept per rules version by the plan fields route_depends_on reads: every other plan
field changes nothing it gives, and what it keeps is what it works out."""

from __future__ import annotations

from typing import Any

import pytest

from service.decide import advisor, provisional
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


def test_a_value_of_another_type_is_another_key(bundle: Bundle) -> None:
    rules = bundle.book.program.for_fact("plan")
    fields, kept = provisional._kept(rules)
    assert fields is not None and "horizon_months" in fields
    plan = {f: 0.0 for f in fields}
    provisional.route_depends_on(rules, plan, "RESERVE", advisor.DEFAULT_ROUTE)
    size = len(kept)
    provisional.route_depends_on(rules, {**plan, "horizon_months": 0}, "RESERVE", advisor.DEFAULT_ROUTE)
    assert len(kept) == size + 1
