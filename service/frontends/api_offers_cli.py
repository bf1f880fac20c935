"""`gpu-advisor api-offers`: what hosted model APIs charge per million tokens (ListApiOffers), and
`api-offers import` / `api-offers refresh`, which turn LiteLLM's price table into `rules/api_offers/litellm.csv`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from google.protobuf.json_format import MessageToJson

from ..market.api_import import add_import_arguments, add_refresh_arguments, run_import, run_refresh
from ..wire.api import pb
from .table import print_table

EXIT_OK = 0
HEADER = ["model", "provider", "provider's id", "$/1M in", "$/1M out", "$/1M cached in", "context", "region",
          "country", "as of"]


def _usd(x: float) -> str:
    return f"{x:,.3f}".rstrip("0").rstrip(".") if x else "-"


def api_offer_rows(offers: Sequence[Any]) -> list[list[str]]:
    """The header and one row per ApiOffer: what the CLI table and the MCP tool's markdown show."""
    rows = [HEADER]
    for o in offers:
        rows.append([o.registry_model, o.provider, o.model, _usd(o.usd_per_million_input),
                     _usd(o.usd_per_million_output), _usd(o.usd_per_million_cached_input),
                     f"{o.context_tokens:,}" if o.context_tokens else "-", o.region or "-", o.country or "-",
                     o.as_of])
    return rows


def print_api_offers(resp: Any, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    rows = api_offer_rows(resp.offers)
    if len(rows) == 1:
        print("no API offer matches", file=out)
        return
    print_table(rows, {3, 4, 5, 6}, out)
    more = f"; more with --page-token {resp.next_page_token}" if resp.next_page_token else ""
    print(f"\n{len(resp.offers)} of {resp.total} API offers, cheapest first, rules {resp.ruleset.revision}{more}",
          file=out)


def add_parser(sub: Any, common: argparse.ArgumentParser, stub: Callable[[argparse.Namespace], Any]) -> None:  # noqa: ANN401
    api = sub.add_parser("api-offers", parents=[common], help="list what hosted model APIs charge per 1M tokens "
                                                              "(provider, model, input/output/cached-input price)")
    api.add_argument("--model", default="", help="a registry model id or alias (e.g. llama-3.1-8b-instruct)")
    api.add_argument("--provider", default="", help="an API provider as the price table names it (deepinfra, ...)")
    api.add_argument("--country", default="", help="ISO 3166-1 alpha-2 code, or EU for the member states")
    api.add_argument("--as-of", default="", help="YYYY-MM-DD (default today)")
    api.add_argument("--page-size", type=int, default=50, help="offers per page (at most 1000)")
    api.add_argument("--page-token", default="", help="the token the previous page printed")
    api.set_defaults(run=lambda a: _list(a, stub))
    inner = api.add_subparsers(dest="api_offers_command")
    imp = inner.add_parser("import", help="turn LiteLLM's model_prices_and_context_window JSON (a file) into "
                                          "rules/api_offers/litellm.csv, with a report of dropped entries")
    add_import_arguments(imp)
    imp.set_defaults(run=run_import)
    ref = inner.add_parser("refresh", help="download the price table from --url, import, vet and swap "
                                           "rules/api_offers/litellm.csv in atomically")
    add_refresh_arguments(ref)
    ref.set_defaults(run=run_refresh)


def _list(args: argparse.Namespace, stub: Callable[[argparse.Namespace], Any]) -> int:
    channel, client = stub(args)
    request = pb.ListApiOffersRequest(model=args.model, provider=args.provider, country=args.country,
                                      as_of=args.as_of, page_size=args.page_size, page_token=args.page_token)
    with channel:
        resp = client.ListApiOffers(request, timeout=args.timeout)
    if args.json:
        print(MessageToJson(resp, preserving_proto_field_name=True, ensure_ascii=False))
    else:
        print_api_offers(resp)
    return EXIT_OK
