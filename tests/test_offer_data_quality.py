"""What an author or an operator reads about offer data: every CSV mistake of a row at once with a did-you-mean,
a did-you-mean for an unknown `--gpu`, stale prices warned in the answer (both locales), and a rule-test range
relative to the catalog on an offer-priced candidate that says what to write instead."""

from __future__ import annotations

from datetime import date
from typing import Any

import grpc
from google.protobuf.json_format import ParseDict

from service.decide.freshness import freshness
from service.decide.sizing.common import Placed, Sizing
from service.domain.offers import Offer
from service.rulebook.expectations import relative_failures
from service.rulebook.offer_files import read_offers
from service.rulebook.version import Bundle
from service.wire import api

from .conftest import call, pb

HEADER = ("provider,instance_type,gpu,gpus_per_instance,vcpus,memory_gib,region,country,tier,usd_per_hour,as_of,"
          "source,valid_from,valid_until\n")


def test_a_row_with_three_mistakes_reports_all_three_with_line_and_column() -> None:
    text = HEADER + ('acme,big,h100-sxm,8,96,,us-east-1,US,on_demand,12.5,2026-12-01,"Acme list, read 2026-12-01",'
                     '2026-12-01,\n'
                     'acme,big,h100-sxn,8,96,,us-east-1,US,ondemand,12.x,2026-12-01,"Acme list, read 2026-12-01",'
                     '2026-12-01,\n')
    rows, problems = read_offers("rules/offers/acme.csv", text, {"h100-sxm", "a100-80gb"})
    assert len(rows) == 1
    assert [str(p) for p in problems] == [
        "rules/offers/acme.csv:3:3 gpu \"h100-sxn\" is not a catalog id (did you mean 'h100-sxm'?)",
        "rules/offers/acme.csv:3:9 tier: \"ondemand\" is not one of on_demand, reserved, spot, marketplace "
        "(did you mean 'on_demand'?)",
        "rules/offers/acme.csv:3:10 usd_per_hour: \"12.x\" is not a number",
    ]


def test_an_unknown_gpu_filter_gets_a_did_you_mean(stub: Any) -> None:
    got = call(stub.ListOffers, pb.ListOffersRequest(gpu="h100-sxn"))
    assert got.code == grpc.StatusCode.INVALID_ARGUMENT and got.fields == ("gpu",)
    assert "did you mean 'h100-sxm'" in got.details


def _offer(as_of: date) -> Offer:
    return Offer("acme", "big", "h100-sxm", 8, None, None, "us-east-1", "US", "on_demand", 20.0, as_of, "Acme",
                 as_of, None)


def test_freshness_counts_the_shown_candidates_priced_on_old_prices(bundle: Bundle) -> None:
    gpu = bundle.book.catalog[0]
    fresh, old = Sizing.blank(gpu, "ON_DEMAND"), Sizing.blank(gpu, "ON_DEMAND")
    fresh.placement = Placed(_offer(date(2026, 11, 20)), 1, 20.0, "ON_DEMAND")
    old.placement = Placed(_offer(date(2026, 6, 1)), 1, 20.0, "ON_DEMAND")
    day = date(2026, 12, 1)
    assert freshness([fresh, old], day, 45) == {"price_age_days": 11, "oldest_price_days": 183, "stale_prices": 1,
                                                "stale_price_days": 45}
    assert freshness([fresh], day, 45)["stale_prices"] == 0


def test_stale_prices_warn_in_both_locales_with_the_limit_and_the_refresh(bundle: Bundle) -> None:
    brief = {"workload": "WORKLOAD_TYPE_BATCH_INFERENCE", "model": {"params_billion": 8}}
    texts = {}
    for locale in ("en", "zh-CN"):
        req = ParseDict({"brief": brief, "as_of": "2027-06-01", "locale": locale}, pb.RecommendRequest())
        answer = api.advice_to_proto(bundle.advise(api.request_from_proto(req)))
        stale = [w for w in answer.warnings if w.code == "STALE_PRICES"]
        assert len(stale) == 1 and "45" in stale[0].text and "gpu-advisor offers refresh" in stale[0].text
        texts[locale] = (stale[0].title, stale[0].text)
    assert texts["en"] != texts["zh-CN"]
    # Prices read within the limit: no warning (a quote read on the day prices every shown candidate)
    req = ParseDict({"brief": brief, "as_of": "2026-12-01", "max_candidates": 1,
                     "quotes": [{"gpu": g.id, "usd_per_hour": 0.01, "provider": "acme", "as_of": "2026-12-01"}
                                for g in bundle.book.catalog]}, pb.RecommendRequest())
    answer = api.advice_to_proto(bundle.advise(api.request_from_proto(req)))
    assert "STALE_PRICES" not in [w.code for w in answer.warnings]


def test_a_catalog_relative_range_on_an_offer_priced_candidate_says_what_to_write() -> None:
    candidate = {"gpu": "h100-sxm", "cost": {"usd_per_hour": 5.16},
                 "placements": [{"usd_per_hour": 5.16, "offer": {"provider": "nebius", "instance_type": "gpu-h100",
                                                                 "usd_per_gpu_hour": 2.58}}]}
    catalog = {"h100-sxm": {"rent": 3.15}}
    fails = relative_failures("h100-sxm", "cost.usd_per_hour", 5.16, {"catalog_rent_x": [2, 8]}, catalog, candidate)
    assert len(fails) == 1
    assert "priced from an offer (nebius gpu-h100, $2.58/GPU-h), not the catalog" in fails[0]
    assert "priced_rent_x" in fails[0]
    assert relative_failures("h100-sxm", "cost.usd_per_hour", 5.16, {"priced_rent_x": [2, 8]}, catalog,
                             candidate) == []  # 2 GPUs rented at the offer's price


def test_offers_dropped_lists_each_unused_row_with_its_reason(capsys: Any) -> None:
    from service.frontends.cli import main as cli_main

    from .conftest import RULES

    assert cli_main(["offers", "--dropped", "--rules", str(RULES), "--as-of", "2026-12-01"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if line.startswith("rules/offers/")]
    assert rows and all("placement" in line and "host RAM" in line for line in rows)
    assert f"{len(rows)} offer rows dropped ({len(rows)} placement)" in out[-1]
