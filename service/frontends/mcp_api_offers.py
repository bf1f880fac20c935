"""The MCP `list_api_offers` tool: what hosted model APIs charge per 1M tokens (ListApiOffers), its schemas and
its markdown. The call itself goes through mcp_server's gRPC plumbing like the other list tools."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import mcp_types as types

from ..wire.api import pb
from ..wire.proto_schema import message_schema
from .api_offers_cli import api_offer_rows

NAME = "list_api_offers"


@functools.cache
def request_schema(hook: Callable[..., None] | None = None) -> dict[str, Any]:
    return message_schema(pb.ListApiOffersRequest.DESCRIPTOR, hook=hook)


@functools.cache
def response_schema() -> dict[str, Any]:
    return message_schema(pb.ListApiOffersResponse.DESCRIPTOR, output=True)


def tool(hook: Callable[..., None], annotations: types.ToolAnnotations) -> types.Tool:
    return types.Tool(
        name=NAME,
        title="List what model APIs charge",
        description=(
            "Hosted model APIs for the registry's open models: provider, the provider's model id, our registry id, "
            "USD per 1M input, output and cached-input tokens, context, region and country where the provider "
            "names them, with date and source; by model, cheapest first. Filter by model (registry id or alias), "
            "provider, country (ISO code or EU); page with page_size and page_token. Recommendations compare the "
            "cheapest one in the brief's scope with self-hosting (RecommendResponse.api)."
        ),
        input_schema=request_schema(hook),
        output_schema=response_schema(),
        annotations=annotations,
    )


def markdown(resp: Any, cell: Callable[[str], str]) -> str:  # noqa: ANN401 - a ListApiOffersResponse
    rows = api_offer_rows(resp.offers)
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows[1:]]
    lines.append(f"\n{len(resp.offers)} of {resp.total} API offers"
                 + (f"; next page_token: `{resp.next_page_token}`" if resp.next_page_token else ""))
    return "\n".join(lines)
