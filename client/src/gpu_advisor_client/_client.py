"""One channel to GPU Advisor with deadlines, gRPC's own retries on UNAVAILABLE and RESOURCE_EXHAUSTED, and
optional TLS and token; AsyncClient (_aio.py) makes its channel and requests with the functions here."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import grpc
from google.protobuf.message import Message

from ._errors import GpuAdvisorError, InvalidArgument
from ._lists import api_offers_request, models_request, offers_request
from ._messages import local_invalid, to_message
from .v1 import advisor_pb2 as pb
from .v1 import advisor_pb2_grpc as pb_grpc

SERVICE = pb.DESCRIPTOR.services_by_name["GpuAdvisor"].full_name
DEFAULT_TIMEOUT_S = 30.0

# A brief or quote as the proto message, or as its proto3 JSON mapping (what grpcurl takes): field names in
# snake_case or lowerCamelCase, enums by their full names ("WORKLOAD_TYPE_REALTIME_INFERENCE").
Brief = pb.WorkloadBrief | Mapping[str, Any]
Quote = pb.PriceQuote | Mapping[str, Any]
# The name this package first gave its one exception class; every status has its own subclass now.
AdvisorError = GpuAdvisorError


@dataclass(frozen=True)
class RetryPolicy:
    """gRPC's built-in retry policy (service config), for UNAVAILABLE and RESOURCE_EXHAUSTED.

    UNAVAILABLE means the server was unreachable, draining, or had no valid rules yet; every GpuAdvisor method
    is safe to repeat (Recommend and the reads are pure, ReloadRules reloads what is on disk). RESOURCE_EXHAUSTED
    is retried as the server says: a busy server's refusal carries gRPC's retry pushback
    (`grpc-retry-pushback-ms`), the wait before the next attempt, and a refusal that a retry would not change
    (an answer over the size limit) carries a negative one, which stops the retries. Other codes are answers and
    are not retried. Backoff is randomised by gRPC between 0 and the current bound.
    """

    max_attempts: int = 4  # the first call included; gRPC caps this at 5
    initial_backoff_s: float = 0.2
    max_backoff_s: float = 2.0
    backoff_multiplier: float = 2.0

    def __post_init__(self) -> None:
        if not 2 <= self.max_attempts <= 5:
            raise ValueError("max_attempts must be 2..5 (gRPC's limit); pass retry=None for no retries")
        if self.initial_backoff_s <= 0 or self.max_backoff_s <= 0 or self.backoff_multiplier <= 0:
            raise ValueError("backoffs and multiplier must be positive")

    def as_json(self) -> dict[str, Any]:
        return {
            "maxAttempts": self.max_attempts,
            "initialBackoff": f"{self.initial_backoff_s:.3f}s",
            "maxBackoff": f"{self.max_backoff_s:.3f}s",
            "backoffMultiplier": self.backoff_multiplier,
            "retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"],
        }


DEFAULT_RETRY = RetryPolicy()


def service_config(retry: RetryPolicy | None, load_balancing: str | None = None) -> str:
    """The channel's default service config: retries for this service, and the load-balancing policy.

    round_robin spreads calls over every address the name resolves to (a Kubernetes headless Service gives
    one per pod); the default, pick_first, sticks to one.
    """
    config: dict[str, Any] = {}
    if retry is not None:
        config["methodConfig"] = [{"name": [{"service": SERVICE}], "retryPolicy": retry.as_json()}]
    if load_balancing:
        config["loadBalancingConfig"] = [{load_balancing: {}}]
    return json.dumps(config)


def channel_arguments(
    retry: RetryPolicy | None, load_balancing: str | None, options: Sequence[tuple[str, Any]],
    tls: bool, root_certificates: bytes | None, private_key: bytes | None, certificate_chain: bytes | None,
    credentials: grpc.ChannelCredentials | None,
) -> tuple[list[tuple[str, Any]], grpc.ChannelCredentials | None]:
    """The channel options and credentials (None: plaintext) both clients make their channel with."""
    channel_options = [
        ("grpc.enable_retries", 1 if retry is not None else 0),
        ("grpc.service_config", service_config(retry, load_balancing)),
        *options,
    ]
    if credentials is None and (tls or root_certificates or private_key or certificate_chain):
        credentials = grpc.ssl_channel_credentials(root_certificates, private_key, certificate_chain)
    return channel_options, credentials


def recommend_request(brief: Brief, quotes: Iterable[Quote], locale: str, max_candidates: int,
                      include_trace: bool, as_of: str, view: str | int = 0) -> pb.RecommendRequest:
    """The request; a dict brief or quote is checked here (InvalidArgument for all of them), before any call."""
    violations: list[tuple[str, str]] = []
    messages: list[Message] = []
    for value, cls, path in [(brief, pb.WorkloadBrief, "brief"),
                             *((q, pb.PriceQuote, f"quotes[{i}]") for i, q in enumerate(quotes))]:
        try:
            messages.append(to_message(value, cls, path))
        except InvalidArgument as err:
            violations += err.violations
    number = view_number(view)
    if number is None:
        violations.append(("view", f"unknown view {view!r}: full or summary"))
    if violations:
        raise local_invalid(violations)
    return pb.RecommendRequest(brief=messages[0], quotes=messages[1:], locale=locale,
                               max_candidates=max_candidates, include_trace=include_trace, as_of=as_of,
                               view=number or 0)


def view_number(view: str | int) -> int | None:
    """A View from its number, its proto name or "full" / "summary"; None when it is none of them."""
    if isinstance(view, int):
        return view if view in pb.View.values() else None
    name = view.upper() or "UNSPECIFIED"
    name = name if name.startswith("VIEW_") else f"VIEW_{name}"
    return pb.View.Value(name) if name in pb.View.DESCRIPTOR.values_by_name else None


class Client:
    """A GPU Advisor client over one gRPC channel; close it (or use `with`) when done.

    `timeout` is the default deadline of each call in seconds (None: no deadline, which a caller rarely wants).
    TLS is on when `tls` is true or any certificate or `credentials` are given; `root_certificates` None means
    the system's roots. `token` is sent as `authorization: Bearer <token>` on every call (the admin token of
    ReloadRules, or whatever a proxy in front checks); over a plaintext channel it travels in clear text, so
    keep that to loopback or a mesh that encrypts. `options` are extra gRPC channel arguments.
    """

    def __init__(
        self,
        target: str,
        *,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = DEFAULT_RETRY,
        tls: bool = False,
        root_certificates: bytes | None = None,
        private_key: bytes | None = None,
        certificate_chain: bytes | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        token: str | None = None,
        load_balancing: str | None = None,
        wait_for_ready: bool | None = None,
        options: Sequence[tuple[str, Any]] = (),
    ):
        self.timeout = timeout
        self.wait_for_ready = wait_for_ready
        self._metadata: tuple[tuple[str, str], ...] = (("authorization", f"Bearer {token}"),) if token else ()
        channel_options, credentials = channel_arguments(retry, load_balancing, options, tls, root_certificates,
                                                         private_key, certificate_chain, credentials)
        if credentials is not None:
            self.channel = grpc.secure_channel(target, credentials, options=channel_options)
        else:
            self.channel = grpc.insecure_channel(target, options=channel_options)
        self.stub = pb_grpc.GpuAdvisorStub(self.channel)

    def recommend(
        self,
        brief: Brief,
        *,
        locale: str = "en",
        max_candidates: int = 0,
        include_trace: bool = False,
        quotes: Iterable[Quote] = (),
        as_of: str = "",
        timeout: float | None = None,
        view: str | int = "",
    ) -> pb.RecommendResponse:
        """Ranked GPU configurations for a brief. Missing details come back as `questions`, not errors.

        `locale` is "en" or "zh-CN"; `max_candidates` 0 means the rules' default; `quotes` are your own
        $/GPU-hour prices; `as_of` (YYYY-MM-DD) replays the catalog prices valid that day. A dict brief or quote
        naming a field or enum value the proto lacks raises InvalidArgument before anything is sent. `view`
        "summary" asks for the ranking, costs and headline only (no reasons, trace or placements past the first).
        """
        request = recommend_request(brief, quotes, locale, max_candidates, include_trace, as_of, view)
        return self._call(self.stub.Recommend, request, timeout)

    def list_gpus(self, as_of: str = "", *, timeout: float | None = None) -> pb.ListGpusResponse:
        """The catalog as loaded, with the prices current on `as_of` (default today)."""
        return self._call(self.stub.ListGpus, pb.ListGpusRequest(as_of=as_of), timeout)

    def list_offers(self, gpu: str = "", *, provider: str = "", country: str = "", tier: str | int = 0,
                    as_of: str = "", page_size: int = 0, page_token: str = "",
                    timeout: float | None = None) -> pb.ListOffersResponse:
        """One page of what a team can rent, cheapest per GPU-hour first: filter by catalog GPU id, provider,
        country (ISO 3166-1 alpha-2 or "EU") and tier ("on_demand", "spot", ...); pass the response's
        `next_page_token` as `page_token` for the next page ("" on the last)."""
        request = offers_request(gpu, provider, country, tier, as_of, page_size, page_token)
        return self._call(self.stub.ListOffers, request, timeout)

    def list_api_offers(self, model: str = "", *, provider: str = "", country: str = "", as_of: str = "",
                        page_size: int = 0, page_token: str = "",
                        timeout: float | None = None) -> pb.ListApiOffersResponse:
        """One page of what hosted model APIs charge per 1M input, output and cached-input tokens, by model and
        cheapest first: filter by registry model (id or alias), provider and country (ISO 3166-1 alpha-2 or "EU";
        only offers whose provider names a place); `next_page_token` as `page_token` for the next page."""
        request = api_offers_request(model, provider, country, as_of, page_size, page_token)
        return self._call(self.stub.ListApiOffers, request, timeout)

    def list_models(self, query: str = "", *, kind: str | int = 0,
                    timeout: float | None = None) -> pb.ListModelsResponse:
        """The model registry: the names `brief.model.name` takes, filtered by a substring of the id, name or an
        alias and by kind ("llm", "embedding", ...)."""
        return self._call(self.stub.ListModels, models_request(kind, query), timeout)

    def get_ruleset(self, *, timeout: float | None = None) -> pb.RulesetInfo:
        """The active rules version and the last reload attempt."""
        return self._call(self.stub.GetRuleset, pb.GetRulesetRequest(), timeout)

    def reload_rules(self, *, timeout: float | None = None) -> pb.ReloadRulesResponse:
        """Admin: reload the rules from disk now (needs `token` when the server has an admin token)."""
        return self._call(self.stub.ReloadRules, pb.ReloadRulesRequest(), timeout)

    def _call(self, method: grpc.UnaryUnaryMultiCallable, request: Message, timeout: float | None) -> Any:
        try:
            return method(request, timeout=self.timeout if timeout is None else timeout,
                          metadata=self._metadata, wait_for_ready=self.wait_for_ready)
        except grpc.RpcError as err:
            raise GpuAdvisorError.from_rpc_error(err) from err

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def recommend(
    target: str,
    brief: Brief,
    *,
    locale: str = "en",
    max_candidates: int = 0,
    include_trace: bool = False,
    quotes: Iterable[Quote] = (),
    as_of: str = "",
    timeout: float | None = DEFAULT_TIMEOUT_S,
    retry: RetryPolicy | None = DEFAULT_RETRY,
    tls: bool = False,
    root_certificates: bytes | None = None,
    token: str | None = None,
    view: str | int = "",
) -> pb.RecommendResponse:
    """One Recommend call on a channel of its own; for many calls keep a `Client`."""
    with Client(target, timeout=timeout, retry=retry, tls=tls, root_certificates=root_certificates,
                token=token) as client:
        return client.recommend(brief, locale=locale, max_candidates=max_candidates, include_trace=include_trace,
                                quotes=quotes, as_of=as_of, view=view)
