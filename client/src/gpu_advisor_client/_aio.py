"""The asyncio client: Client's methods as coroutines, over one grpc.aio channel."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any

import grpc
from google.protobuf.message import Message

from ._client import DEFAULT_RETRY, DEFAULT_TIMEOUT_S, Brief, Quote, RetryPolicy, channel_arguments, recommend_request
from ._errors import GpuAdvisorError
from ._lists import api_offers_request, models_request, offers_request
from .v1 import advisor_pb2 as pb
from .v1 import advisor_pb2_grpc as pb_grpc


class AsyncClient:
    """A GPU Advisor client for asyncio: `async with AsyncClient(target) as advisor: await advisor.recommend(...)`.

    The arguments, deadlines, retries, TLS, token and exceptions are Client's. Make it inside the event loop
    that uses it (grpc.aio binds a channel to its loop), and close it (`await advisor.close()`, or `async with`).
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
            self.channel = grpc.aio.secure_channel(target, credentials, options=channel_options)
        else:
            self.channel = grpc.aio.insecure_channel(target, options=channel_options)
        self.stub = pb_grpc.GpuAdvisorStub(self.channel)

    async def recommend(
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
        """Ranked GPU configurations for a brief (see Client.recommend)."""
        request = recommend_request(brief, quotes, locale, max_candidates, include_trace, as_of, view)
        return await self._call(self.stub.Recommend, request, timeout)

    async def list_gpus(self, as_of: str = "", *, timeout: float | None = None) -> pb.ListGpusResponse:
        """The catalog as loaded, with the prices current on `as_of` (default today)."""
        return await self._call(self.stub.ListGpus, pb.ListGpusRequest(as_of=as_of), timeout)

    async def list_offers(self, gpu: str = "", *, provider: str = "", country: str = "", tier: str | int = 0,
                          as_of: str = "", page_size: int = 0, page_token: str = "",
                          timeout: float | None = None) -> pb.ListOffersResponse:
        """One page of offers, cheapest per GPU-hour first (see Client.list_offers)."""
        request = offers_request(gpu, provider, country, tier, as_of, page_size, page_token)
        return await self._call(self.stub.ListOffers, request, timeout)

    async def list_api_offers(self, model: str = "", *, provider: str = "", country: str = "", as_of: str = "",
                              page_size: int = 0, page_token: str = "",
                              timeout: float | None = None) -> pb.ListApiOffersResponse:
        """One page of model-API prices (see Client.list_api_offers)."""
        request = api_offers_request(model, provider, country, as_of, page_size, page_token)
        return await self._call(self.stub.ListApiOffers, request, timeout)

    async def list_models(self, query: str = "", *, kind: str | int = 0,
                          timeout: float | None = None) -> pb.ListModelsResponse:
        """The model registry (see Client.list_models)."""
        return await self._call(self.stub.ListModels, models_request(kind, query), timeout)

    async def get_ruleset(self, *, timeout: float | None = None) -> pb.RulesetInfo:
        """The active rules version and the last reload attempt."""
        return await self._call(self.stub.GetRuleset, pb.GetRulesetRequest(), timeout)

    async def reload_rules(self, *, timeout: float | None = None) -> pb.ReloadRulesResponse:
        """Admin: reload the rules from disk now (needs `token` when the server has an admin token)."""
        return await self._call(self.stub.ReloadRules, pb.ReloadRulesRequest(), timeout)

    async def _call(self, method: Any, request: Message, timeout: float | None) -> Any:
        try:
            return await method(request, timeout=self.timeout if timeout is None else timeout,
                                metadata=self._metadata, wait_for_ready=self.wait_for_ready)
        except grpc.RpcError as err:
            raise GpuAdvisorError.from_rpc_error(err) from err

    async def close(self) -> None:
        await self.channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()
