"""What a route depends on (decide/provisional.py), on a small rulebook written here (issue 42): each unknown
brief field is tried at its plausible values and named when one of them changes the route, the derived plan
fields are worked out again for each try, and the incremental evaluation answers as the plain one does (a
Hypothesis property). The rules are built directly, so each test reads only provisional.py and the
evaluator; the shipped rules' own dependencies are held by rules/tests and the golden cases."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.decide import provisional as P
from service.engine.ir import Action, Condition, Rule

DEFAULT = "RENT"


def _rule(rid: str, route: str | None, priority: int, *conds: tuple[str, str, Any], group: str = "plan",  # noqa: ANN401
          order: int = 0) -> Rule:
    actions = (Action("route", (("kind", route),)),) if route else (Action("note", (("id", rid),)),)
    return Rule(rid, "plan", group, "first", priority, order, (tuple(Condition(*c) for c in conds),), actions,
                f"{rid}.yaml:1")


# API when an API in scope is cheaper and may do the work; BUY when buying pays back within the horizon;
# PRIVATE for a team that needs the hardware and has a platform team; RESERVE for steady use of 500 h or more;
# BURST to the spot market for bursts. A rule with no route is never read.
RULES = [
    _rule("reserve", "RESERVE", 10, ("hours_per_month", "ge", 500.0), ("demand", "eq", "STEADY")),
    _rule("note", None, 99, ("hours_per_month", "ge", 0.0)),
    _rule("buy", "BUY", 20, ("break_even_within_horizon", "eq", True)),
    _rule("api", "API", 30, ("api_cheaper", "eq", True), ("api_comparable", "eq", True)),
    _rule("private", "PRIVATE", 15, ("hardware_control", "eq", "YES"), ("platform_team", "eq", "YES")),
    _rule("burst", "SPOT", 12, ("run_cycle", "eq", "BURST")),
]
ORDERED = P.route_rules(tuple(RULES))


def _fresh() -> tuple[Rule, ...]:
    """The rules as a new tuple: provisional keeps its route table and answers per rules object, so each test
    (and each Hypothesis example) works them out itself instead of reading another test's."""
    return tuple(RULES)


def _plan(**kw: Any) -> dict[str, Any]:  # noqa: ANN401
    """A plan fact with every route input known, no API in scope and no purchase price; `kw` overrides."""
    plan = {
        "hours_per_month": 300.0, "horizon_months": 12.0, "demand": "STEADY", "run_cycle": "ALWAYS_ON",
        "hardware_control": "NO", "platform_team": "NO", "utilization_given": True, "utilization": 0.5,
        "top_usd_per_million_tokens": 2.0, "top_usd_per_unit": 0.01, "workload": "REALTIME_INFERENCE",
        "api_scope": "NONE", "api_usd_per_unit": 0.0, "top_break_even_months": -1.0,
        **kw,
    }
    return P._derive(plan)


def _route(plan: dict[str, Any]) -> str:
    return P.route_of(ORDERED, plan) or DEFAULT


def _depends(plan: dict[str, Any]) -> tuple[str, ...]:
    rules = _fresh()
    got = P.route_depends_on(rules, plan, _route(plan), DEFAULT)
    assert P.route_depends_on(rules, plan, _route(plan), DEFAULT) == got  # asked again: the kept answer
    return got


def test_the_route_rules_are_read_highest_priority_first_then_by_group_and_order():
    tied = (_rule("b2", "B", 5, group="b", order=2), _rule("b1", "B", 5, group="b", order=1),
            _rule("a9", "A", 5, group="a", order=9), _rule("top", "T", 6, group="z"))
    assert [r.id for r in P.route_rules(tied)] == ["top", "a9", "b1", "b2"]
    assert [r.id for r in ORDERED] == ["api", "buy", "private", "burst", "reserve"]  # "note" gives no route


def test_the_route_is_the_first_matching_rule_in_that_order_else_none():
    assert P.route_of(ORDERED, _plan()) is None
    assert P.route_of(P.route_rules(_fresh()), _plan(run_cycle="BURST")) == "SPOT"
    assert P.route_of(ORDERED, _plan(hours_per_month=730.0)) == "RESERVE"
    # both match: API (30) before RESERVE (10)
    assert P.route_of(ORDERED, _plan(hours_per_month=730.0, api_scope="IN_SCOPE", api_usd_per_unit=0.005)) == "API"


def test_a_brief_with_every_route_input_known_depends_on_nothing():
    assert _depends(_plan()) == () and _depends(_plan(hours_per_month=730.0)) == ()


def test_unknown_hours_are_named_when_a_plausible_month_changes_the_route():
    # 0 hours (not given) and steady demand: 730 h a month would reserve; the route now is RENT.
    assert _depends(_plan(hours_per_month=0.0)) == ("economics.hours_per_month",)
    # with demand that never reserves, no month changes it
    assert _depends(_plan(hours_per_month=0.0, demand="VOLATILE")) == ()


def test_unknown_demand_is_named_when_steady_demand_would_reserve():
    assert _depends(_plan(demand="UNSPECIFIED", hours_per_month=730.0)) == ("economics.demand",)
    assert _depends(_plan(demand="UNSPECIFIED", hours_per_month=100.0)) == ()


def test_the_fields_are_named_in_their_fixed_order_each_once():
    plan = _plan(hours_per_month=0.0, run_cycle="UNSPECIFIED", hardware_control="UNKNOWN", platform_team="YES")
    assert _depends(plan) == ("economics.hours_per_month", "run_cycle", "economics.needs_hardware_control")


def test_a_rule_no_try_touches_keeps_its_match():
    # Bursts route to the spot market (priority 12) whatever the month: trying 730 h (which alone would reserve,
    # priority 10) leaves SPOT first, so the hours change nothing.
    plan = _plan(hours_per_month=0.0, run_cycle="BURST")
    assert _route(plan) == "SPOT" and _depends(plan) == ()


def test_each_field_is_tried_alone():
    # Hours and demand both unknown: 730 h with demand still unknown does not reserve, nor does steady demand
    # at 0 h; only the two together would. Neither alone changes the route, so neither is named.
    assert _depends(_plan(hours_per_month=0.0, demand="UNSPECIFIED")) == ()


@pytest.mark.parametrize(("months", "depends"), [
    (-1.0, False),  # never pays back
    (0.0, True),    # pays back at once: within any horizon
    (6.0, True),    # within 6 months exactly (the shorter horizon tried)
    (7.0, True),    # within 36
    (36.0, True),   # within 36 exactly
    (37.0, False),  # beyond both
])
def test_an_unknown_horizon_is_named_when_buying_pays_back_within_a_plausible_one(months: float, depends: bool):
    # The plan's own break_even_within_horizon is False (no horizon): each try works it out again.
    plan = _plan(horizon_months=0.0, top_break_even_months=months)
    assert plan["break_even_within_horizon"] is False
    assert _depends(plan) == (("economics.horizon_months",) if depends else ())


def test_a_known_horizon_is_the_one_break_even_is_read_against():
    assert _route(_plan(horizon_months=12.0, top_break_even_months=12.0)) == "BUY"
    assert _route(_plan(horizon_months=12.0, top_break_even_months=12.5)) == DEFAULT
    # a one-month horizon is a horizon; paying back at once (0 months) is within it
    assert _route(_plan(horizon_months=1.0, top_break_even_months=1.0)) == "BUY"
    assert _route(_plan(horizon_months=1.0, top_break_even_months=0.0)) == "BUY"
    assert _route(_plan(horizon_months=1.0, top_break_even_months=0.5)) == "BUY"


def test_unknown_utilization_moves_the_cost_per_unit_the_api_is_compared_with():
    # $0.01 per unit at the default 50% utilization; an API at $0.008 is cheaper (route API). At 90% the unit
    # would cost 0.01 x 0.5 / 0.9 = $0.00556, less than the API's: the route would change.
    plan = _plan(utilization_given=False, api_scope="IN_SCOPE", api_usd_per_unit=0.008)
    assert _route(plan) == "API"
    assert _depends(plan) == ("economics.utilization",)
    # an API at $0.004 stays cheaper at 90% ($0.00556) and at 20% ($0.025): nothing to ask
    plan = _plan(utilization_given=False, api_scope="IN_SCOPE", api_usd_per_unit=0.004)
    assert _route(plan) == "API" and _depends(plan) == ()
    # an API at $0.02 is dearer now ($0.01) but cheaper at 20% ($0.025): the route could change the other way
    plan = _plan(utilization_given=False, api_scope="IN_SCOPE", api_usd_per_unit=0.02)
    assert _route(plan) == DEFAULT and _depends(plan) == ("economics.utilization",)
    # given, it is never tried
    assert _depends(_plan(api_scope="IN_SCOPE", api_usd_per_unit=0.008)) == ()


def test_a_utilization_try_scales_both_costs_per_unit_of_work_and_leaves_unknown_ones_unknown():
    fact = _plan(utilization=0.5, top_usd_per_million_tokens=2.0, top_usd_per_unit=0.0)
    tried = P._with_utilization(fact, 0.2)
    assert tried["utilization"] == 0.2
    assert tried["top_usd_per_million_tokens"] == pytest.approx(5.0)  # 2.0 x 0.5 / 0.2
    assert tried["top_usd_per_unit"] == 0.0


def test_unknown_hardware_control_is_named_when_needing_it_rules_the_api_out_or_makes_it_private():
    # An API in scope and cheaper: needing hardware control would make the API not comparable (route changes).
    plan = _plan(hardware_control="UNKNOWN", api_scope="IN_SCOPE", api_usd_per_unit=0.005)
    assert plan["api_comparable"] is True and _route(plan) == "API"
    assert _depends(plan) == ("economics.needs_hardware_control",)
    # With a platform team: YES would route PRIVATE
    plan = _plan(hardware_control="UNKNOWN", platform_team="YES")
    assert _depends(plan) == ("economics.needs_hardware_control",)
    # and the platform team unknown, with hardware control needed: YES would route PRIVATE
    plan = _plan(hardware_control="YES", platform_team="UNKNOWN")
    assert _depends(plan) == ("economics.has_platform_team",)


def test_work_an_api_cannot_do_never_depends_on_the_api():
    plan = _plan(hardware_control="UNKNOWN", api_scope="IN_SCOPE", api_usd_per_unit=0.005, workload="PRETRAINING")
    assert plan["api_comparable"] is False and _depends(plan) == ()


def test_an_unhashable_value_is_worked_out_not_kept():
    rules = _fresh()
    plan = {**_plan(hours_per_month=0.0), "demand": ["STEADY"]}  # a list: never equal to "STEADY"
    assert P.route_depends_on(rules, plan, DEFAULT, DEFAULT) == P._route_depends_on(rules, plan, DEFAULT, DEFAULT)
    # as RESERVE: every month tried (a list is no steady demand) routes RENT, so the hours change it
    assert P.route_depends_on(rules, plan, "RESERVE", DEFAULT) == ("economics.hours_per_month",)


def test_a_kept_answer_is_the_answer_for_a_plan_that_reads_the_same():
    rules = _fresh()
    plan = _plan(hours_per_month=0.0)
    first = P.route_depends_on(rules, plan, DEFAULT, DEFAULT)
    assert first == ("economics.hours_per_month",)
    # a field no rule and no try reads does not change the answer; one they read does
    assert P.route_depends_on(rules, {**plan, "unread": 1}, DEFAULT, DEFAULT) == first
    assert P.route_depends_on(rules, {**plan, "demand": "VOLATILE"}, DEFAULT, DEFAULT) == ()
    # the route asked about is part of the question: asked as RESERVE, 730 h does not change it (300 h does)
    assert P.route_depends_on(rules, plan, "RESERVE", DEFAULT) == ("economics.hours_per_month",)
    assert P.route_depends_on(rules, {**plan, "demand": "VOLATILE"}, "RESERVE", DEFAULT) == (
        "economics.hours_per_month",)
    # a field only the tries read (no rule tests the months to break even, only the derived flag) is read too
    unknown_horizon = _plan(horizon_months=0.0, top_break_even_months=10.0)
    assert P.route_depends_on(rules, unknown_horizon, DEFAULT, DEFAULT) == ("economics.horizon_months",)
    assert P.route_depends_on(rules, {**unknown_horizon, "top_break_even_months": 40.0}, DEFAULT, DEFAULT) == ()


def test_a_try_that_may_change_any_field_is_compared_on_every_field_and_never_kept(monkeypatch: pytest.MonkeyPatch):
    # A path whose changed fields are not declared (not in VARIES): nothing is kept, every field is compared,
    # and the answer is the same as with the declaration.
    rules = _fresh()
    plan = _plan(hours_per_month=0.0, horizon_months=0.0)  # no purchase price: no horizon changes the route
    assert P.route_depends_on(rules, plan, DEFAULT, DEFAULT) == ("economics.hours_per_month",)
    monkeypatch.delitem(P.VARIES, "economics.horizon_months")
    rules = _fresh()
    assert P._fields_read(rules) == (None, {})
    assert P.route_depends_on(rules, plan, DEFAULT, DEFAULT) == ("economics.hours_per_month",)
    # asked as RESERVE: 300 h routes RENT, so the hours are named; so is the horizon, whose tries keep 0 h and
    # match no rule (the default, RENT)
    assert P.route_depends_on(rules, plan, "RESERVE", DEFAULT) == (
        "economics.hours_per_month", "economics.horizon_months")
    # a try no rule matches gets the default given: with "BUY" as the default and the route, the horizon's
    # tries keep it; 730 h reserves, so only the hours are named
    assert P.route_depends_on(rules, plan, "BUY", "BUY") == ("economics.hours_per_month",)
    assert P.route_depends_on(rules, _plan(), DEFAULT, DEFAULT) == ()


def test_every_try_differs_from_the_plan_only_in_the_fields_it_varies():
    plan = _plan(hours_per_month=0.0, horizon_months=0.0, demand="UNSPECIFIED", run_cycle="UNSPECIFIED",
                 hardware_control="UNKNOWN", platform_team="UNKNOWN", utilization_given=False)
    for path, (unknown, variants) in P.ROUTE_INPUTS.items():
        assert unknown(plan), path
        for variant in variants(plan):
            fact = P._derive(variant)
            moved = {k for k in fact if fact[k] != plan[k]}
            assert moved <= set(P.VARIES[path]), (path, moved)
            assert moved, path  # every try tries something


def _reference(rules: tuple[Rule, ...], plan: dict[str, Any], route: str) -> tuple[str, ...]:
    """Each unknown path's tries, every rule tested on every try: the plain reading of the docstring."""
    ordered = P.route_rules(rules)
    out = []
    for path, (unknown, variants) in P.ROUTE_INPUTS.items():
        if unknown(plan) and any((P.route_of(ordered, P._derive(v)) or DEFAULT) != route for v in variants(plan)):
            out.append(path)
    return tuple(out)


@settings(max_examples=200, deadline=None)
@given(hours=st.sampled_from((0.0, 100.0, 500.0, 730.0)), horizon=st.sampled_from((0.0, 6.0, 36.0)),
       demand=st.sampled_from(("UNSPECIFIED", "STEADY", "VOLATILE")),
       cycle=st.sampled_from(("UNSPECIFIED", "ALWAYS_ON", "BURST")),
       hw=st.sampled_from(("UNKNOWN", "YES", "NO")), team=st.sampled_from(("UNKNOWN", "YES", "NO")),
       util_given=st.booleans(), api=st.sampled_from((0.0, 0.004, 0.008, 0.02)),
       be=st.sampled_from((-1.0, 0.0, 6.0, 20.0, 40.0)),
       workload=st.sampled_from(("REALTIME_INFERENCE", "PRETRAINING")),
       asked=st.sampled_from((None, "RESERVE", "API")))
def test_the_incremental_evaluation_answers_as_the_plain_one(hours, horizon, demand, cycle, hw, team, util_given,
                                                           api, be, workload, asked):
    plan = _plan(hours_per_month=hours, horizon_months=horizon, demand=demand, run_cycle=cycle,
                 hardware_control=hw, platform_team=team, utilization_given=util_given, workload=workload,
                 api_scope="IN_SCOPE" if api else "NONE", api_usd_per_unit=api, top_break_even_months=be)
    route = asked or _route(plan)
    want = _reference(_fresh(), plan, route)
    assert P._route_depends_on(_fresh(), plan, route, DEFAULT) == want
    assert P.route_depends_on(_fresh(), plan, route, DEFAULT) == want
