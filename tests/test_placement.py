"""Offers in the answer: placement on whole instances, ListOffers, the offers CLI and MCP tool, bad offer files."""

from __future__ import annotations

import io
import shutil
from datetime import date
from pathlib import Path
from typing import Any

import grpc
import pytest

from service.decide.placement import instances_needed
from service.decide.sizing.common import Sizing
from service.domain.catalog import Gpu
from service.domain.offers import COLUMNS
from service.frontends.cli import main as cli_main
from service.frontends.offers_cli import print_offers
from service.rulebook.folder import load_rulebook
from service.wire.api import pb

from .conftest import RULES, TODAY, bad_request_fields

FIXTURES = Path(__file__).parent / "fixtures" / "offers"


@pytest.fixture(scope="module")
def h100() -> Gpu:
    book, problems = load_rulebook(RULES, today=TODAY)
    assert book is not None, [str(p) for p in problems]
    gpu = next(g for g in book.catalog if g.id == "h100-sxm")
    assert gpu.gpus_per_node == 8
    return gpu


def _sizing(gpu: Gpu, per_replica: int, replicas: int, count: int | None = None) -> Sizing:
    s = Sizing.blank(gpu, "ON_DEMAND")
    s.per_replica, s.replicas, s.count = per_replica, replicas, count or per_replica * replicas
    return s


@pytest.mark.parametrize(("per_replica", "replicas", "gpi", "want"), [
    (1, 5, 8, 1),  # five one-GPU copies fit one 8-GPU instance
    (1, 5, 1, 5),  # or five 1-GPU instances
    (1, 5, 2, 3),  # or three 2-GPU instances (one GPU spare, serving a sixth copy)
    (2, 5, 8, 2),  # TP 2: four copies an instance
    (4, 1, 2, None),  # a TP-4 group never spans two 2-GPU instances
    (16, 1, 8, 2),  # a copy wider than a node takes whole nodes (pipeline stages)
    (16, 2, 8, 4),
    (16, 1, 4, None),  # ... but not half nodes
])
def test_a_model_copy_stays_inside_one_instance(h100: Gpu, per_replica: int, replicas: int, gpi: int,
                                                want: int | None):
    assert instances_needed(_sizing(h100, per_replica, replicas), gpi, training=False) == want


@pytest.mark.parametrize(("count", "gpi", "want"), [(1, 8, 1), (5, 8, 1), (64, 8, 8), (12, 8, 2), (64, 1, None),
                                                    (2, 2, 1), (16, 4, None)])
def test_training_takes_whole_nodes_beyond_one_instance(h100: Gpu, count: int, gpi: int, want: int | None):
    assert instances_needed(_sizing(h100, count, 1, count), gpi, training=True) == want


def _offers(stub: Any, **kw: Any) -> Any:
    return stub.ListOffers(pb.ListOffersRequest(**kw), timeout=30)


def test_list_offers_filters_and_orders(stub: Any):
    eu = _offers(stub, country="EU", tier=pb.PRICE_TIER_ON_DEMAND, page_size=1000)
    assert eu.total == len(eu.offers) > 0 and not eu.next_page_token
    assert {o.country for o in eu.offers} <= {"AT", "BE", "BG", "HR", "CY", "CZ", "DK", "EE", "FI", "FR", "DE",
                                               "GR", "HU", "IE", "IT", "LV", "LT", "LU", "MT", "NL", "PL", "PT",
                                               "RO", "SK", "SI", "ES", "SE"}
    assert all(o.tier == pb.PRICE_TIER_ON_DEMAND for o in eu.offers)
    per_gpu = [o.usd_per_gpu_hour for o in eu.offers]
    assert per_gpu == sorted(per_gpu)
    lam = _offers(stub, provider="LAMBDA", gpu="h100-sxm", page_size=1000)
    assert lam.offers and all(o.provider == "lambda" and o.gpu == "h100-sxm" for o in lam.offers)
    for o in lam.offers:
        assert o.usd_per_gpu_hour == pytest.approx(o.usd_per_hour / o.gpus_per_instance, rel=1e-6)
        assert o.source and o.as_of


def test_pages_cover_the_listing_once(stub: Any):
    whole = _offers(stub, page_size=1000)
    seen, token = [], ""
    for _ in range(100):
        page = _offers(stub, page_size=17, page_token=token)
        seen += [(o.provider, o.instance_type, o.region, o.tier) for o in page.offers]
        token = page.next_page_token
        if not token:
            break
    assert seen == [(o.provider, o.instance_type, o.region, o.tier) for o in whole.offers]
    assert len(seen) == whole.total


@pytest.mark.parametrize(("request_kw", "field"), [
    ({"page_token": "not-a-token"}, "page_token"),
    ({"country": "Europe"}, "country"),
    ({"tier": pb.PRICE_TIER_LIST_PURCHASE}, "tier"),
    ({"page_size": 5000}, "page_size"),
    ({"gpu": "h100"}, "gpu"),
    ({"as_of": "yesterday"}, "as_of"),
])
def test_list_offers_names_the_bad_field(stub: Any, request_kw: dict[str, Any], field: str):
    with pytest.raises(grpc.RpcError) as err:
        _offers(stub, **request_kw)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in bad_request_fields(err.value)


def test_a_token_from_other_filters_is_refused(stub: Any):
    token = _offers(stub, page_size=5).next_page_token
    assert token
    with pytest.raises(grpc.RpcError) as err:
        _offers(stub, page_size=5, page_token=token, gpu="h100-sxm")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_offers_before_they_were_valid_are_not_listed(stub: Any):
    assert _offers(stub, as_of="2020-01-01").total == 0


def test_list_gpus_counts_each_gpus_offers(stub: Any):
    day = TODAY.isoformat()
    for g in stub.ListGpus(pb.ListGpusRequest(as_of=day), timeout=30).gpus:
        listed = _offers(stub, gpu=g.id, page_size=1000, as_of=day)
        assert g.offer_count == listed.total
        if listed.offers:
            prices = [o.usd_per_gpu_hour for o in listed.offers]  # ListOffers rounds to 6 decimals
            assert g.offer_min_usd_per_gpu_hour == pytest.approx(min(prices), abs=1e-6)
            assert g.offer_max_usd_per_gpu_hour == pytest.approx(max(prices), abs=1e-6)
        else:
            assert g.offer_min_usd_per_gpu_hour == g.offer_max_usd_per_gpu_hour == 0


def _recommend(stub: Any, brief: dict[str, Any], **kw: Any) -> Any:
    from google.protobuf.json_format import ParseDict

    return stub.Recommend(ParseDict({"brief": brief, "max_candidates": 20, **kw}, pb.RecommendRequest()), timeout=30)


BATCH = {"workload": "WORKLOAD_TYPE_BATCH_INFERENCE",
         "model": {"params_billion": 13, "precision": "PRECISION_BF16", "context_tokens": 4096},
         "traffic": {"batch_size": 8}}


def test_a_placed_candidate_is_priced_and_counted_by_its_first_placement(stub: Any):
    answer = _recommend(stub, BATCH)
    placed = [c for c in answer.candidates if c.placements and c.placements[0].offer.instance_type != "quote"]
    assert placed
    for c in placed:
        first = c.placements[0]
        assert c.count == first.instances * first.offer.gpus_per_instance
        assert c.cost.usd_per_hour == pytest.approx(first.usd_per_hour, abs=1e-3)
        assert first.usd_per_hour == pytest.approx(first.instances * first.offer.usd_per_hour, rel=1e-6)
        assert c.cost.price_tier == first.offer.tier
        assert first.offer.provider in c.cost.price_source
        assert c.market.offers >= 1 and c.market.min_usd_per_gpu_hour <= c.market.median_usd_per_gpu_hour
        # each placement after the first is another tier or another provider
        keys = [(p.offer.tier, p.offer.provider) for p in c.placements]
        assert len(keys) == len(set(keys))


def test_a_replayed_day_before_the_offers_uses_the_catalog(stub: Any):
    answer = _recommend(stub, BATCH, as_of="2026-01-15")
    assert answer.candidates
    assert all(not c.placements for c in answer.candidates)


def test_a_quote_still_prices_its_gpu_and_leads_the_placements(stub: Any):
    answer = _recommend(stub, BATCH, quotes=[{"gpu": "h100-sxm", "usd_per_hour": 1.11, "provider": "acme"}])
    h100 = next(c for c in answer.candidates if c.gpu == "h100-sxm")
    assert h100.cost.usd_per_hour == pytest.approx(1.11 * h100.count, abs=1e-3)
    assert h100.placements[0].offer.provider == "acme" and h100.placements[0].offer.instance_type == "quote"


@pytest.mark.parametrize(("placement", "field"), [
    ({"countries": ["Germany"]}, "brief.placement.countries[0]"),
    ({"providers": [""]}, "brief.placement.providers[0]"),
    ({"regions": ["r" * 65]}, "brief.placement.regions[0]"),
    ({"providers": ["p"] * 65}, "brief.placement.providers"),
])
def test_a_bad_placement_names_its_field(stub: Any, placement: dict[str, Any], field: str):
    with pytest.raises(grpc.RpcError) as err:
        _recommend(stub, {**BATCH, "placement": placement})
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in bad_request_fields(err.value)


def test_a_country_list_keeps_every_placement_there(stub: Any):
    answer = _recommend(stub, {**BATCH, "placement": {"countries": ["de", "fi"]}})
    offers = [p.offer for c in answer.candidates for p in c.placements]
    assert offers and {o.country for o in offers} <= {"DE", "FI"}


def _write(path: Path, rows: list[dict[str, str]]) -> None:
    lines = [",".join(COLUMNS)] + [",".join(r.get(c, "") for c in COLUMNS) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


ROW = {"provider": "examplecloud", "instance_type": "x8", "gpu": "h100-sxm", "gpus_per_instance": "8",
       "region": "eu-x", "country": "DE", "tier": "on_demand", "usd_per_hour": "16", "as_of": "2026-11-30",
       "source": "test", "valid_from": "2026-11-30"}


def test_a_bad_offer_file_is_refused_with_path_and_line(tmp_path: Path):
    rules = tmp_path / "rules"
    shutil.copytree(RULES, rules)
    _write(rules / "offers" / "bad.csv", [ROW, {**ROW, "gpu": "h100", "region": "eu-y"},
                                          {**ROW, "usd_per_hour": "99999999", "region": "eu-z"}])
    book, problems = load_rulebook(rules, today=date(2026, 12, 1))
    shown = [str(p) for p in problems if p.severity == "error"]
    assert book is None
    assert any(s.startswith("rules/offers/bad.csv:3:") and "h100" in s for s in shown), shown
    assert any(s.startswith("rules/offers/bad.csv:4:") and "placeholder" in s for s in shown), shown


def test_a_cheaper_offer_edit_reaches_the_answer(tmp_path: Path, start_server: Any):
    rules = tmp_path / "rules"
    shutil.copytree(RULES, rules)
    running = start_server(rules, watch=True, poll_seconds=0.2)
    before = _recommend(running.stub, BATCH)
    b200 = next(c for c in before.candidates if c.gpu == "b200")
    cheaper = b200.placements[0].offer.usd_per_hour * 0.9  # an 8-GPU B200 instance 10% below the cheapest one
    _write(rules / "offers" / "examplecloud.csv", [{**ROW, "gpu": "b200", "usd_per_hour": f"{cheaper:.2f}"}])
    from .test_reload import wait_for

    def placed_there() -> bool:
        answer = _recommend(running.stub, BATCH)
        return next(c for c in answer.candidates if c.gpu == "b200").placements[0].offer.provider == "examplecloud"

    wait_for(placed_there, timeout=60.0)
    info = running.stub.GetRuleset(pb.GetRulesetRequest())
    assert info.last_error == "" and info.revision != before.ruleset.revision


def test_cli_lists_offers_and_imports(stub: Any, server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert cli_main(["offers", "--addr", server.addr, "--gpu", "h100-sxm", "--country", "EU", "--page-size", "5"]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split()[:3] == ["gpu", "provider", "instance"]
    assert "h100-sxm" in table and "offers, cheapest per GPU-hour first" in table
    out = io.StringIO()
    print_offers(pb.ListOffersResponse(), out)
    assert out.getvalue().strip() == "no offer matches"
    target = tmp_path / "lambda.csv"
    code = cli_main(["offers", "import", "--from", "skypilot", str(FIXTURES / "skypilot" / "v7" / "lambda"),
                     "--out", str(target), "--as-of", "2026-12-01"])
    assert code == 0 and target.read_text(encoding="utf-8").startswith("provider,")
    assert "rows read" in capsys.readouterr().out


@pytest.mark.parametrize("workload", ["BATCH_INFERENCE", "REALTIME_INFERENCE", "FULL_FINETUNE"])
@pytest.mark.parametrize("k", [1, 2, 8])
def test_rescaled_ownership_is_what_size_ownership_makes(workload: str, k: int):
    import copy

    from service.decide.placement import _rescale_ownership
    from service.decide.sizing.common import size_ownership
    from service.decide.sizing.per_gpu import size_all
    from service.decide.sizing.shape import shape_of
    from service.domain.brief import Brief, Model, Traffic, Training

    book, _ = load_rulebook(RULES, today=TODAY)
    assert book is not None
    a = book.assumptions
    brief = Brief(workload=workload, model=Model(13, precision="BF16", context_tokens=4096),
                  traffic=Traffic(batch_size=8, concurrent_sessions=8), training=Training(tokens_billion=1))
    shape = shape_of(brief, a)
    for s in size_all(book.catalog, brief, shape, a, (), TODAY):
        fast, ref = copy.copy(s), copy.copy(s)
        for x in (fast, ref):
            x.count = s.count * k
        rent = 2.5 * fast.count
        _rescale_ownership(fast, k, rent, "market", a)
        size_ownership(ref, brief, a, rent, "market")
        for name in ("annual_power_usd", "running_usd_per_busy_hour", "owned_usd_per_hour", "break_even_hours",
                     "break_even_months", "break_even_rent"):
            assert getattr(fast, name) == pytest.approx(getattr(ref, name), rel=1e-9), (s.gpu.id, name)
        assert fast.break_even_basis == ref.break_even_basis
