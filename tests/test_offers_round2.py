"""Issue 21, the offer a team should take: reserved terms in the tables, a reserve route priced on a term the
horizon covers, the market spread over the brief's scope, rentable candidates first, and the table that says
where each is rented. In-process (no server); the golden cases in tests/cases/offers2-*.yaml hold the rest."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import date
from pathlib import Path

import pytest

from service.decide.facts import SCHEMA
from service.decide.placement import reserve_term
from service.decide.rank import TIE_POINTS
from service.domain.assumptions import Assumptions
from service.domain.brief import AdviceRequest, Brief, Economics, Model, PlacementPolicy, Traffic
from service.domain.offers import OfferTable, offer_filter
from service.frontends.cli import print_advice
from service.frontends.offers_cli import offer_rows
from service.rulebook.folder import load_rulebook
from service.rulebook.offer_checks import check_offers
from service.rulebook.offer_files import read_offers
from service.rulebook.version import Bundle
from service.wire.api import advice_to_proto, offer_to_proto

from .conftest import TODAY

HEAD = "provider,instance_type,gpu,gpus_per_instance,region,country,tier,usd_per_hour,as_of,source,valid_from"
STEADY = Economics(hours_per_month=730, horizon_months=12, demand="STEADY", has_platform_team=False,
                   utilization=0.7)
SERVING = Brief(workload="REALTIME_INFERENCE", model=Model(70, precision="FP8", context_tokens=8192),
                traffic=Traffic(concurrent_sessions=64, avg_input_tokens=1000, avg_output_tokens=300),
                run_cycle="ALWAYS_ON", success_unit="TOKEN", economics=STEADY)


def _bundle(rules: Path) -> Iterator[Bundle]:
    book, problems = load_rulebook(rules, today=TODAY)
    assert book is not None, [str(p) for p in problems]
    b = Bundle(book, loaded_at=None)  # type: ignore[arg-type]
    yield b
    b.retire(None)


@pytest.fixture
def with_three_years(rules_copy: Path) -> Iterator[Bundle]:
    """The shipped rules plus a 36-month Lambda term cheaper than every 12-month one."""
    f = rules_copy / "offers" / "reserved.csv"
    f.write_text(f.read_text(encoding="utf-8") + 'lambda,gpu_8x_h100_sxm5,h100-sxm,8,208,1800,us-east-1,US,reserved,'
                 '36,9.00,2026-12-01,"test fixture: a 3-year term",2026-12-01,\n', encoding="utf-8")
    yield from _bundle(rules_copy)


def test_term_months_is_optional_and_only_reserved_rows_carry_one():
    rows, problems = read_offers("a.csv", HEAD + "\nlambda,x,h100-sxm,1,r,US,on_demand,2,2026-12-01,s,2026-12-01\n")
    assert problems == [] and rows[0].term_months == 0
    text = (HEAD + ",term_months\nlambda,x,h100-sxm,1,r,US,reserved,2,2026-12-01,s,2026-12-01,\n"
            "lambda,y,h100-sxm,1,r,US,on_demand,2,2026-12-01,s,2026-12-01,12\n"
            "lambda,z,h100-sxm,1,r,US,reserved,2,2026-12-01,s,2026-12-01,12\n"
            "lambda,z,h100-sxm,1,r,US,reserved,1.5,2026-12-01,s,2026-12-01,36\n")
    rows, problems = read_offers("a.csv", text)
    assert problems == [] and [o.term_months for o in rows] == [0, 12, 12, 36]
    bad = check_offers(rows, {"h100-sxm"}, TODAY, 365)
    # a reserved row without a term and an on-demand row with one; a 1- and a 3-year term of one shape are two
    assert [(p.line, p.rule_id) for p in bad] == [(2, "offers.term"), (3, "offers.term")]
    assert offer_to_proto(rows[3]).term_months == 36
    _, problems = read_offers("a.csv", HEAD + ",term_months\nlambda,x,h100-sxm,1,r,US,reserved,2,2026-12-01,s,"
                              "2026-12-01,a year\n")
    assert [str(p) for p in problems] == ['a.csv:2:12 term_months: "a year" is not a whole number']


def test_shipped_reserved_terms_are_published_and_dated():
    rows, problems = read_offers("reserved.csv", (Path("rules") / "offers" / "reserved.csv").read_text())
    assert problems == [] and rows
    assert len({o.provider for o in rows}) >= 4
    for o in rows:
        assert o.tier == "reserved" and o.term_months in (12, 36), o
        assert not re.search(r"\bshared\b|\.csv|rules/", o.source), o.source  # a published page, not a path
        assert o.source.startswith("computed:") or "$" in o.source, o.source  # the figure or its derivation


def test_shipped_longer_terms_cost_less_and_derived_rows_say_so():
    """A 3-year term of a shape is cheaper than its 1-year term (two swapped columns would show here), and a
    row worked out from a discount percentage rather than read off a price list says so first."""
    rows, _ = read_offers("reserved.csv", (Path("rules") / "offers" / "reserved.csv").read_text())
    by_shape: dict[tuple[str, str, str], dict[int, float]] = {}
    for o in rows:
        by_shape.setdefault((o.provider, o.instance_type, o.region), {})[o.term_months] = o.usd_per_hour
        if re.search(r"\bless \d+%|% discount|discount of", o.source):
            assert o.source.startswith("computed:"), o.source
    both = {k: v for k, v in by_shape.items() if {12, 36} <= v.keys()}
    assert both, "no shape is shipped with both a 1-year and a 3-year term"
    assert all(v[36] < v[12] for v in both.values()), both


def test_the_offers_table_shows_a_reserved_term():
    rows, _ = read_offers("a.csv", HEAD + ",term_months\ngcp,a2-highgpu-1g,a100-40gb,1,us-central1,US,reserved,"
                          "1.2857,2026-08-20,s,2026-08-20,36\n")
    table = offer_rows([offer_to_proto(rows[0])])
    assert table[1][table[0].index("tier")] == "reserved 36 mo"


def test_reserve_term_follows_the_horizon():
    a = Assumptions({"reserve_term_months_default": 12}, {})
    assert reserve_term(SERVING, a) == 12
    assert reserve_term(replace(SERVING, economics=replace(STEADY, horizon_months=36)), a) == 36
    assert reserve_term(replace(SERVING, economics=replace(STEADY, horizon_months=0)), a) == 0  # none unasked
    assert reserve_term(replace(SERVING, economics=replace(STEADY, horizon_months=0, price_tier="RESERVED")), a) == 12


# A need that only a whole 8-GPU node holds (a 405B model in FP8), rented at Lambda: its on-demand node, its
# 12-month term and the fixture's cheaper 36-month one price the same configuration, so the month decides alone.
NODE_NEED = replace(SERVING, model=Model(405, precision="FP8", context_tokens=8192),
                    traffic=Traffic(concurrent_sessions=16, avg_input_tokens=1000, avg_output_tokens=300),
                    gpus=("h100-sxm",), placement=PlacementPolicy(providers=("lambda",)))


@pytest.mark.parametrize(("horizon", "term"), [(12, 12), (24, 12), (36, 36)])
def test_a_reserve_route_is_priced_on_a_term_the_horizon_covers(with_three_years: Bundle, horizon: int, term: int):
    """One pass over every tier (issue 34): the pick is priced on the cheapest month of the terms the horizon
    covers, and the route reserves because that term is the cheapest month, so the route and the pick agree."""
    brief = replace(NODE_NEED, economics=replace(STEADY, horizon_months=horizon))
    advice = with_three_years.advise(AdviceRequest(brief=brief, as_of=TODAY, max_candidates=20))
    top = advice.candidates[0]
    assert advice.route.kind == "RESERVE" and advice.route.rationale[0].rule_id == "routing.reserve"
    assert top.cost.price_tier == "RESERVED" and top.placements[0].offer.term_months == term
    assert all(p.offer.term_months <= horizon for c in advice.candidates for p in c.placements)
    months = [p.usd_per_month for p in top.placements]
    assert months == sorted(months) and top.usd_per_month == months[0]  # cheapest month first, and it prices
    # the reserved month beside the on-demand one, and the rent buying is weighed against named
    assert f"Reserved {term} months" in advice.summary and "on-demand at" in advice.summary
    be = next(r.text for r in top.reasons if r.rule_id == "ownership.break-even")
    assert f"{term}-month term at {top.placements[0].offer.provider}" in be


def test_the_market_spread_is_over_the_brief_scope(bundle: Bundle):
    eu = replace(SERVING, economics=Economics(), placement=PlacementPolicy(countries=("EU",)))
    advice = bundle.advise(AdviceRequest(brief=eu, as_of=TODAY, max_candidates=20))
    table: OfferTable = bundle.book.offers
    in_eu = offer_filter(tiers=["on_demand"], countries=["EU"])
    for c in advice.candidates:
        if c.market is None:
            continue
        prices = [o.usd_per_gpu_hour for o in table.valid_for(c.gpu, TODAY) if in_eu(o)]
        # every offer counted is in the EU (the host-RAM rule may leave out some of them)
        assert any(abs(c.market.min_usd_per_gpu_hour - p) < 1e-4 for p in prices), c.gpu
        assert c.market.min_usd_per_gpu_hour >= min(prices) - 1e-4 and c.market.offers <= len(prices)


def test_contract_names_exist():
    assert "placed" in SCHEMA["plan"] and "placed" in SCHEMA["candidate"]
    assert "gpus_needed" in SCHEMA["candidate"]


def test_the_table_says_where_each_candidate_is_rented(bundle: Bundle):
    brief = Brief(workload="REALTIME_INFERENCE", model=Model(70, precision="FP8", context_tokens=8192),
                  traffic=Traffic(concurrent_sessions=50, avg_input_tokens=1000, avg_output_tokens=300),
                  run_cycle="ALWAYS_ON", placement=PlacementPolicy(countries=("EU",)))
    advice = bundle.advise(AdviceRequest(brief=brief, as_of=TODAY, max_candidates=20))
    out = io.StringIO()
    print_advice(advice_to_proto(advice), out)
    text = out.getvalue()
    top = advice.candidates[0].placements[0].offer
    rows = [line.strip() for line in text.splitlines() if line.strip()[:1].isdigit() and "  " in line]
    row = next(line for line in rows if line.startswith("1 "))
    assert f"{top.provider} {top.instance_type}" in row and "on-demand" in row
    unplaced = [c.gpu for c in advice.candidates if not c.placements]
    assert unplaced, "an EU brief leaves some GPU without an offer in scope"
    assert all("no offer in scope" in line for line in rows if line.split()[1] in unplaced)
    assert sum("no offer in scope" in line for line in rows) == len(unplaced)
    # ranked after every placed one
    placed = [bool(c.placements) for c in advice.candidates]
    assert placed == sorted(placed, reverse=True)


def test_unplaced_rank_behind_on_every_route_but_buy(bundle: Bundle):
    """A buy route keeps the score order (a tie, within rank.TIE_POINTS, to the lower $/h): the catalog's purchase
    price may still rank a GPU no offer rents."""
    brief = replace(SERVING, boundary="ON_PREM", placement=PlacementPolicy(providers=("lambda",)),
                    economics=replace(STEADY, horizon_months=36))
    advice = bundle.advise(AdviceRequest(brief=brief, as_of=date(2026, 12, 1), max_candidates=20))
    assert advice.route.kind == "BUY"
    scores = [c.score for c in advice.candidates]
    assert all(a > b - TIE_POINTS for i, a in enumerate(scores) for b in scores[i + 1:]), scores
    assert "NO_OFFER_IN_SCOPE" not in {w.code for w in advice.warnings}
