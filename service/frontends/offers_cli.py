"""`gpu-advisor offers`: what a team can rent (ListOffers) as a table; `offers --dropped`, the rows a rules folder
holds that no answer uses and why; `offers import`, which turns a SkyPilot catalog or a dstack gpuhunt CSV on disk
into a rules/offers table (no server, no network); `offers refresh`, which downloads them (market/refresh.py)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import Any, TextIO

from google.protobuf.json_format import MessageToJson

from ..market.dropped import print_dropped
from ..market.importers.__main__ import add_arguments as add_import_arguments
from ..market.importers.__main__ import run as run_import
from ..market.refresh import add_arguments as add_refresh_arguments
from ..market.refresh import run as run_refresh
from ..wire.api import enum_number, pb
from .table import print_table

EXIT_OK = 0
HEADER = ["gpu", "provider", "instance type", "GPUs", "region", "country", "tier", "$/h", "$/GPU-h", "as of"]
TIERS = ("on_demand", "reserved", "spot", "marketplace")


def offer_rows(offers: Sequence[Any]) -> list[list[str]]:
    """The header and one row per Offer: what the CLI table and the MCP tool's markdown show."""
    rows = [HEADER]
    for o in offers:
        tier = pb.PriceTier.Name(o.tier).removeprefix("PRICE_TIER_").lower().replace("_", "-")
        if o.term_months:  # a reserved row's commitment: the same shape is often sold for 12 and 36 months
            tier += f" {o.term_months} mo"
        rows.append([
            o.gpu, o.provider, o.instance_type, str(o.gpus_per_instance), o.region, o.country or "-", tier,
            f"{o.usd_per_hour:,.2f}", f"{o.usd_per_gpu_hour:,.2f}", o.as_of,
        ])
    return rows


def print_offers(resp: pb.ListOffersResponse, out: TextIO | None = None) -> None:
    out = out or sys.stdout  # looked up per call, so redirection is honoured
    rows = offer_rows(resp.offers)
    if len(rows) == 1:
        print("no offer matches", file=out)
        return
    print_table(rows, {3, 7, 8}, out)
    more = f"; more with --page-token {resp.next_page_token}" if resp.next_page_token else ""
    print(f"\n{len(resp.offers)} of {resp.total} offers, cheapest per GPU-hour first, rules {resp.ruleset.revision}"
          f"{more}", file=out)


def add_parser(sub: Any, common: argparse.ArgumentParser, stub: Callable[[argparse.Namespace], Any]) -> None:  # noqa: ANN401
    """`offers` (the table, from a server) and `offers import` (local) under the CLI's subcommands."""
    offers = sub.add_parser("offers", parents=[common], help="list the offers a team can rent (provider, shape, "
                                                             "region, tier, price)")
    offers.add_argument("--gpu", default="", help="a catalog GPU id (e.g. h100-sxm)")
    offers.add_argument("--provider", default="", help="a provider as the offers name it (aws, lambda, ...)")
    offers.add_argument("--country", default="", help="ISO 3166-1 alpha-2 code, or EU for the member states")
    offers.add_argument("--tier", choices=TIERS, help="only this tier")
    offers.add_argument("--as-of", default="", help="YYYY-MM-DD: the offers valid that day (default today)")
    offers.add_argument("--page-size", type=int, default=50, help="offers per page (at most 1000)")
    offers.add_argument("--page-token", default="", help="the token the previous page printed")
    offers.add_argument("--dropped", action="store_true",
                        help="no server: every offer row of the rules folder (--rules) that no answer uses, and why")
    offers.add_argument("--rules", type=Path, default=Path(os.environ.get("GPU_ADVISOR_RULES", "rules")),
                        help="the rules folder --dropped reads (env GPU_ADVISOR_RULES, default rules)")
    offers.set_defaults(run=lambda a: _list(a, stub))
    inner = offers.add_subparsers(dest="offers_command")
    imp = inner.add_parser("import", help="turn a SkyPilot catalog (v7/v8 <provider>/vms.csv) or a gpuhunt CSV "
                                          "into a rules/offers table, with a report of dropped rows")
    add_import_arguments(imp)
    imp.set_defaults(run=run_import)
    ref = inner.add_parser("refresh", help="download the SkyPilot and gpuhunt catalogs, import, vet and swap the "
                                           "rules folder's offer tables in atomically; prints what changed")
    add_refresh_arguments(ref)
    ref.set_defaults(run=run_refresh)


def _list(args: argparse.Namespace, stub: Callable[[argparse.Namespace], Any]) -> int:
    if args.dropped:
        return print_dropped(args.rules, date.fromisoformat(args.as_of) if args.as_of else None, sys.stdout)
    channel, client = stub(args)
    request = pb.ListOffersRequest(
        gpu=args.gpu, provider=args.provider, country=args.country, as_of=args.as_of, page_size=args.page_size,
        page_token=args.page_token, tier=enum_number("PriceTier", args.tier.upper()) if args.tier else 0,
    )
    with channel:
        resp = client.ListOffers(request, timeout=args.timeout)
    if args.json:
        print(MessageToJson(resp, preserving_proto_field_name=True, ensure_ascii=False))
    else:
        print_offers(resp)
    return EXIT_OK
