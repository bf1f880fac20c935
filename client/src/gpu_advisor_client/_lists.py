"""Requests of the list calls (ListOffers, ListModels), shared by Client and AsyncClient: enums may be given by
their full name ("PRICE_TIER_SPOT"), their short name ("spot", "SPOT") or number; a bad one raises InvalidArgument
before anything is sent."""

from __future__ import annotations

from ._messages import to_message
from .v1 import advisor_pb2 as pb


def _enum(value: str | int, prefix: str) -> str | int:
    if isinstance(value, str) and value and not value.upper().startswith(prefix):
        return prefix + value.upper()
    return value.upper() if isinstance(value, str) else value


def offers_request(gpu: str = "", provider: str = "", country: str = "", tier: str | int = 0, as_of: str = "",
                   page_size: int = 0, page_token: str = "") -> pb.ListOffersRequest:
    fields = {"gpu": gpu, "provider": provider, "country": country, "as_of": as_of, "page_size": page_size,
              "page_token": page_token}
    if tier:
        fields["tier"] = _enum(tier, "PRICE_TIER_")
    return to_message(fields, pb.ListOffersRequest, "")


def api_offers_request(model: str = "", provider: str = "", country: str = "", as_of: str = "", page_size: int = 0,
                       page_token: str = "") -> pb.ListApiOffersRequest:
    fields = {"model": model, "provider": provider, "country": country, "as_of": as_of, "page_size": page_size,
              "page_token": page_token}
    return to_message(fields, pb.ListApiOffersRequest, "")


def models_request(kind: str | int = 0, query: str = "") -> pb.ListModelsRequest:
    fields: dict[str, str | int] = {"query": query}
    if kind:
        fields["kind"] = _enum(kind, "MODEL_KIND_")
    return to_message(fields, pb.ListModelsRequest, "")
