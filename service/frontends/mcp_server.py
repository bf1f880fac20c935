"""GPU Advisor for chat assistants: an MCP server that calls the gRPC service.

    gpu-advisor mcp                                   # stdio, for a desktop assistant
    gpu-advisor mcp --transport http --listen 127.0.0.1:8765   # streamable HTTP at /mcp

Tools: `recommend_gpus` (the request as a JSON Schema generated from the proto), `list_gpus`, `list_offers` (what a
team can rent: provider, shape, region, tier, price), `list_models` (the model registry: the names `model.name`
takes), `explain_recommendation` (the rule trace). Prompt: `gpu_brief`,
which walks a person through the brief by asking the open questions highest priority first. Every tool result
carries the markdown for the person and the protobuf-JSON answer as structured content, checked by the client
against the tool's generated output schema.

The gRPC service stays the only place that decides: this module maps JSON to the request and the response back,
and turns the service's refusals (INVALID_ARGUMENT with the fields) into tool errors an assistant can correct.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
import grpc
import jsonschema
import mcp_types as types
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from google.rpc import error_details_pb2, status_pb2
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from ..domain.brief import LOCALES
from ..serving.credentials import ConfigError
from ..wire import validate
from ..wire.api import pb, pb_grpc
from ..wire.proto_schema import message_schema
from . import mcp_api_offers
from .chart_files import render
from .mcp_http import BearerToken, HttpAccess, check_access, transport_security
from .mcp_sessions import SessionGuard
from .mcp_text import with_all_questions
from .models_cli import model_rows
from .offers_cli import offer_rows

NAME = "gpu-advisor"
# Fields the MCP tools set themselves (explain asks for the trace; recommend does not need it).
_TOOL_SET = ("include_trace",)


# -- schemas ------------------------------------------------------------------------------------------------


def _bounds(path: str, fd: FieldDescriptor, schema: dict[str, Any]) -> None:
    """What validate.py enforces, said up front: numbers are never negative, some have a ceiling."""
    if schema.get("type") in ("number", "integer"):
        schema["minimum"] = 0
        if (limit := validate.LIMITS.get(path)) is not None:
            schema["maximum"] = limit
    if path == "locale":
        schema["enum"] = list(LOCALES)
    if path.endswith("as_of"):
        schema["format"] = "date"


@functools.cache
def request_schema() -> dict[str, Any]:
    return message_schema(pb.RecommendRequest.DESCRIPTOR, exclude=_TOOL_SET, hook=_bounds)


@functools.cache
def explain_schema() -> dict[str, Any]:
    schema = json.loads(json.dumps(request_schema()))
    schema["properties"].pop("view", None)  # an explanation is the trace, which a summary leaves out
    schema["properties"]["fired_only"] = {
        "type": "boolean",
        "description": "Only the rules that fired (default true); false adds, for every other rule, the first "
                       "condition that failed and the actual value.",
    }
    return schema


@functools.cache
def response_schema() -> dict[str, Any]:
    return message_schema(pb.RecommendResponse.DESCRIPTOR, output=True)


@functools.cache
def gpus_request_schema() -> dict[str, Any]:
    return message_schema(pb.ListGpusRequest.DESCRIPTOR, hook=_bounds)


@functools.cache
def gpus_response_schema() -> dict[str, Any]:
    return message_schema(pb.ListGpusResponse.DESCRIPTOR, output=True)


@functools.cache
def offers_request_schema() -> dict[str, Any]:
    return message_schema(pb.ListOffersRequest.DESCRIPTOR, hook=_bounds)


@functools.cache
def offers_response_schema() -> dict[str, Any]:
    return message_schema(pb.ListOffersResponse.DESCRIPTOR, output=True)


@functools.cache
def models_request_schema() -> dict[str, Any]:
    return message_schema(pb.ListModelsRequest.DESCRIPTOR, hook=_bounds)


@functools.cache
def models_response_schema() -> dict[str, Any]:
    return message_schema(pb.ListModelsResponse.DESCRIPTOR, output=True)


def tools() -> list[types.Tool]:
    read_only = types.ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
    return [
        types.Tool(
            name="recommend_gpus",
            title="Recommend GPUs for a workload",
            description=(
                "Ranked GPU configurations (or a model API) for an AI workload brief: count, memory need vs "
                "capacity, $/h, cost per accepted unit, buy-vs-rent, the route, warnings, and the questions the "
                "brief leaves open (each with its field path, type, unit, allowed values, what the answer "
                "assumes meanwhile, and a priority: ask the highest first, then call again with the answers). "
                "Send what you know; leave out what you do not (missing is a question, never an error). "
                "With include_charts: the break-even and cost/latency charts as data, and the break-even chart "
                "as a PNG image."
            ),
            input_schema=request_schema(),
            output_schema=response_schema(),
            annotations=read_only,
        ),
        types.Tool(
            name="list_gpus",
            title="List the GPU catalog",
            description="The catalog as loaded: specs, dated prices with their sources, $ per dense TFLOP-hour.",
            input_schema=gpus_request_schema(),
            output_schema=gpus_response_schema(),
            annotations=read_only,
        ),
        types.Tool(
            name="list_offers",
            title="List the offers a team can rent",
            description=(
                "Rentable GPU offers: provider, instance type, GPUs per instance, region, country, tier (on-demand, "
                "reserved, spot, marketplace), $ per instance-hour and per GPU-hour, with date and source; cheapest "
                "per GPU-hour first. Filter by gpu (catalog id), provider, country (ISO code or EU), tier; page with "
                "page_size and page_token. Recommendations place each candidate on these (candidate.placements)."
            ),
            input_schema=offers_request_schema(),
            output_schema=offers_response_schema(),
            annotations=read_only,
        ),
        types.Tool(
            name="list_models",
            title="List the model registry",
            description=(
                "The open models the advisor knows by name, with their published architecture and its source. "
                "Put an id (or alias) in brief.model.name and leave the architecture out: the registry fills it. "
                "Filter by kind (MODEL_KIND_LLM, _EMBEDDING, _SPEECH, _IMAGE) or a query substring."
            ),
            input_schema=models_request_schema(),
            output_schema=models_response_schema(),
            annotations=read_only,
        ),
        types.Tool(
            name="explain_recommendation",
            title="Explain a recommendation",
            description=(
                "The same answer as recommend_gpus, then which rules produced it (rule id, file:line, the fact "
                "it fired on) and, with fired_only=false, why each other rule did not fire."
            ),
            input_schema=explain_schema(),
            output_schema=response_schema(),
            annotations=read_only,
        ),
        mcp_api_offers.tool(_bounds, read_only),
    ]


# -- markdown -----------------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def recommendation_markdown(resp: Any, locale: str = "en") -> str:
    """The service's own summary, in the request's locale: it says each thing once (a missed target first, the
    pick, the route, what to watch, the first questions, a newer rules version the server refused). Then every open
    question with its field path, type, unit, choices and what is assumed meanwhile (mcp_text): a host that hands
    the model only the text loses nothing the next call needs. The structured answer holds the same."""
    parts = [with_all_questions(resp.summary or "(no summary)", resp.questions, request_schema(), locale)]
    if resp.HasField("ruleset"):
        parts.append(f"\n(rules {resp.ruleset.revision})")
    return "\n".join(parts)


def trace_markdown(resp: Any, fired_only: bool, locale: str = "en") -> str:
    fired = [t for t in resp.trace if t.fired]
    lines = [recommendation_markdown(resp, locale), "", f"Rules that fired ({len(fired)}):", ""]
    lines += ["| rule | where | on |", "|---|---|---|"]
    lines += [f"| `{t.rule_id}` | {t.location} | {t.fact} |" for t in fired]
    if not fired_only:
        idle = [t for t in resp.trace if not t.fired]
        lines += ["", f"Rules that did not fire ({len(idle)}):", "", "| rule | where | on | first failing |",
                  "|---|---|---|---|"]
        lines += [f"| `{t.rule_id}` | {t.location} | {t.fact} | {_cell(t.detail)} |" for t in idle]
    return "\n".join(lines)


def gpus_markdown(resp: Any) -> str:
    lines = ["| id | name | memory GB | BF16 TFLOPS | rent $/h | $/TFLOP-h | price as of |",
             "|---|---|---:|---:|---:|---:|---|"]
    for g in resp.gpus:
        rent = next((p for p in g.prices if p.current and p.kind == "rent"), None)
        lines.append(
            f"| `{g.id}` | {_cell(g.name)} | {g.memory_gb:g} | {g.tflops_bf16:g} | "
            f"{f'{rent.usd:.2f}' if rent else '-'} | "
            f"{f'{g.usd_per_tflop_hour:.4f}' if g.usd_per_tflop_hour else '-'} | {rent.as_of if rent else '-'} |"
        )
    if resp.HasField("ruleset"):
        lines.append(f"\n(rules {resp.ruleset.revision})")
    return "\n".join(lines)


def offers_markdown(resp: Any) -> str:
    rows = offer_rows(resp.offers)
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows[1:]]
    lines.append(f"\n{len(resp.offers)} of {resp.total} offers"
                 + (f"; next page_token: `{resp.next_page_token}`" if resp.next_page_token else ""))
    return "\n".join(lines)


def models_markdown(resp: Any) -> str:
    rows = model_rows(resp.models)
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| `" + r[0] + "` | " + " | ".join(_cell(c) for c in r[1:]) + " |" for r in rows[1:]]
    if resp.HasField("ruleset"):
        lines.append(f"\n(rules {resp.ruleset.revision})")
    return "\n".join(lines)


# -- the prompt ---------------------------------------------------------------------------------------------

PROMPT = "gpu_brief"


def _field_guide() -> str:
    brief = request_schema()["properties"]["brief"]["properties"]
    lines = []
    for name, spec in brief.items():
        if spec.get("type") == "object":
            inner = ", ".join(spec["properties"])
            lines.append(f"- `{name}`: {{{inner}}}")
        else:
            choices = f" (one of {', '.join(spec['enum'])})" if "enum" in spec else ""
            lines.append(f"- `{name}`{choices}")
    return "\n".join(lines)


def prompt_text(need: str, locale: str) -> str:
    return "\n".join([
        "Help me choose GPUs (or a model API) for this AI workload, using the GPU Advisor tools.",
        "",
        f"What I need: {need or '(ask me)'}",
        "",
        "How to go about it:",
        "1. Turn what I said into a brief and call `recommend_gpus` right away with only what you know "
        f"(locale \"{locale}\"). Leave out anything I have not said: a missing field becomes a question, "
        "not an error.",
        "2. Read the answer's `questions`: they come highest `priority` first. Ask me the first two, one at a "
        "time, offering the `allowed_values` for a choice and saying the `unit` for a number, and tell me what "
        "the answer `assumed` meanwhile so I can just accept it.",
        "3. Put each answer into the brief at the question's `field` path and call `recommend_gpus` again. "
        "Repeat while the questions still change the answer; stop when I am content with what remains assumed.",
        "4. Then give me the top pick with its count, memory headroom, $/h and cost per accepted unit, the route, "
        "the warnings, and what is still assumed. Use `explain_recommendation` if I ask why.",
        "",
        "The brief's fields:",
        _field_guide(),
    ])


def prompts() -> list[types.Prompt]:
    return [types.Prompt(
        name=PROMPT,
        title="Plan GPUs for a workload",
        description="Walks a person through the workload brief, asking the questions that matter most first.",
        arguments=[
            types.PromptArgument(name="need", description="What the person wants to run, in their own words",
                                 required=False),
            types.PromptArgument(name="locale", description="Answer language: en or zh-CN", required=False),
        ],
    )]


# -- the server ---------------------------------------------------------------------------------------------


@dataclass
class Backend:
    """The gRPC side: one channel per MCP server run."""

    stub: Any
    timeout: float


class ToolInputError(Exception):
    """The arguments cannot become a request, or the service refused them: the assistant should fix them."""


def _check(arguments: dict[str, Any], schema: dict[str, Any]) -> None:
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(arguments),
                    key=lambda e: [str(p) for p in e.path])
    if errors:
        raise ToolInputError("\n".join(
            f"{'.'.join(str(p) for p in e.path) or '(arguments)'}: {e.message}" for e in errors[:10]
        ))


def _parse(arguments: dict[str, Any], message: Any) -> Any:
    try:
        return ParseDict(arguments, message)
    except ParseError as exc:
        raise ToolInputError(str(exc)) from exc


def _structured(msg: Any) -> dict[str, Any]:
    return MessageToDict(msg, preserving_proto_field_name=True)


def _violations(err: grpc.aio.AioRpcError) -> list[str]:
    """`field: description` of the google.rpc.BadRequest in an aio error (grpc_status reads only sync calls)."""
    out = []
    for key, value in err.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        for detail in status_pb2.Status.FromString(value).details:
            bad = error_details_pb2.BadRequest()
            if detail.Unpack(bad):
                out += [f"{v.field}: {v.description}" for v in bad.field_violations]
    return out


async def _call(method: Callable[..., Awaitable[Any]], request: Any, timeout: float) -> Any:
    try:
        return await method(request, timeout=timeout)
    except grpc.aio.AioRpcError as err:
        if err.code() == grpc.StatusCode.INVALID_ARGUMENT:
            lines = _violations(err) or [err.details() or "INVALID_ARGUMENT"]
            raise ToolInputError("the service rejected the request:\n" + "\n".join(lines)) from err
        raise


def _result(markdown: str, structured: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=markdown)],
                                structured_content=structured)


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


async def _recommend(b: Backend, args: dict[str, Any]) -> types.CallToolResult:
    _check(args, request_schema())
    request = _parse(args, pb.RecommendRequest())
    resp = await _call(b.stub.Recommend, request, b.timeout)
    result = _result(recommendation_markdown(resp, request.locale or "en"), _structured(resp))
    if request.include_charts:
        # Drawing takes a CPU-bound ~second: off the event loop, so other sessions' calls go on meanwhile.
        image = await anyio.to_thread.run_sync(break_even_png, resp)
        if image is not None:
            result.content.append(types.ImageContent(type="image", data=base64.b64encode(image).decode("ascii"),
                                                     mime_type="image/png"))
    return result


def break_even_png(resp: Any) -> bytes | None:  # noqa: ANN401 - a RecommendResponse
    """The answer's break-even chart as PNG bytes (chart_files.render, as `--chart` draws it); None when the
    answer has none or matplotlib (the charts extra) is not installed: the chart stays in the structured answer."""
    charts = [c for c in resp.charts if c.kind == pb.CHART_KIND_BREAK_EVEN]
    if not charts:
        return None
    try:
        data, _ = render(charts, "png", list(resp.candidates))
    except ImportError:
        return None
    return data


async def _explain(b: Backend, args: dict[str, Any]) -> types.CallToolResult:
    _check(args, explain_schema())
    args = dict(args)
    fired_only = bool(args.pop("fired_only", True))
    request = _parse(args, pb.RecommendRequest())
    request.include_trace = True
    request.view = pb.VIEW_FULL
    resp = await _call(b.stub.Recommend, request, b.timeout)
    if fired_only:
        kept = [t for t in resp.trace if t.fired]
        del resp.trace[:]
        resp.trace.extend(kept)
    return _result(trace_markdown(resp, fired_only, request.locale or "en"), _structured(resp))


async def _gpus(b: Backend, args: dict[str, Any]) -> types.CallToolResult:
    _check(args, gpus_request_schema())
    resp = await _call(b.stub.ListGpus, _parse(args, pb.ListGpusRequest()), b.timeout)
    return _result(gpus_markdown(resp), _structured(resp))


async def _offers(b: Backend, args: dict[str, Any]) -> types.CallToolResult:
    _check(args, offers_request_schema())
    resp = await _call(b.stub.ListOffers, _parse(args, pb.ListOffersRequest()), b.timeout)
    return _result(offers_markdown(resp), _structured(resp))


async def _models(b: Backend, args: dict[str, Any]) -> types.CallToolResult:
    _check(args, models_request_schema())
    resp = await _call(b.stub.ListModels, _parse(args, pb.ListModelsRequest()), b.timeout)
    return _result(models_markdown(resp), _structured(resp))


async def _api_offers(b: Backend, args: dict[str, Any]) -> types.CallToolResult:
    _check(args, mcp_api_offers.request_schema(_bounds))
    resp = await _call(b.stub.ListApiOffers, _parse(args, pb.ListApiOffersRequest()), b.timeout)
    return _result(mcp_api_offers.markdown(resp, _cell), _structured(resp))


_TOOLS: dict[str, Callable[[Backend, dict[str, Any]], Awaitable[types.CallToolResult]]] = {
    "recommend_gpus": _recommend,
    "list_gpus": _gpus,
    "list_models": _models,
    "list_offers": _offers,
    "explain_recommendation": _explain,
    mcp_api_offers.NAME: _api_offers,
}


def build_server(addr: str, timeout: float = 30.0,
                 credentials: grpc.ChannelCredentials | None = None) -> Server[Backend]:
    """The MCP server, talking to the GPU Advisor gRPC service at `addr` (host:port); TLS with `credentials`."""

    @contextlib.asynccontextmanager
    async def lifespan(_: Server[Backend]) -> AsyncIterator[Backend]:
        # grpc.aio binds a channel to the running event loop, so it is made here, not at import.
        channel = (grpc.aio.secure_channel(addr, credentials) if credentials is not None
                   else grpc.aio.insecure_channel(addr))
        async with channel:
            yield Backend(pb_grpc.GpuAdvisorStub(channel), timeout)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        run = _TOOLS.get(params.name)
        if run is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}; tools: {', '.join(_TOOLS)}")
        try:
            return await run(ctx.lifespan_context, dict(params.arguments or {}))
        except ToolInputError as exc:
            return _error(str(exc))
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.UNAVAILABLE:
                return _error(f"no GPU Advisor service at {addr} ({err.details()})")
            return _error(f"the GPU Advisor service failed: {err.code().name}: {err.details()}")

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=prompts())

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if params.name != PROMPT:
            raise MCPError(types.INVALID_PARAMS, f"unknown prompt {params.name!r}; prompts: {PROMPT}")
        args = params.arguments or {}
        locale = args.get("locale") or "en"
        if locale not in LOCALES:
            raise MCPError(types.INVALID_PARAMS, f"locale must be one of {', '.join(LOCALES)}")
        text = prompt_text(args.get("need", ""), locale)
        return types.GetPromptResult(
            description="Plan GPUs for a workload, one question at a time",
            messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))],
        )

    return Server(
        NAME,
        version=_version(),
        instructions=(
            "GPU Advisor recommends GPUs (or a model API) for AI workloads. Call recommend_gpus with what is "
            "known, then ask the person the returned questions highest priority first; the gpu_brief prompt "
            "walks through it."
        ),
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpu-advisor")
    except PackageNotFoundError:
        return "0"


# -- running ------------------------------------------------------------------------------------------------


async def serve_stdio(addr: str, timeout: float, credentials: grpc.ChannelCredentials | None = None) -> None:
    from mcp.server.stdio import stdio_server

    server = build_server(addr, timeout, credentials)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def http_app(addr: str, timeout: float, host: str, access: HttpAccess | None = None,
             credentials: grpc.ChannelCredentials | None = None) -> Any:
    """The streamable HTTP app (Starlette) at /mcp: Host/Origin checks, the session cap and idle expiry, and the
    bearer token when `access` has one (service/frontends/mcp_http.py)."""
    access = access or HttpAccess()
    app = build_server(addr, timeout, credentials).streamable_http_app(
        host=host, transport_security=transport_security(host, access), max_sessions=access.max_sessions,
        session_idle_timeout=access.session_idle_seconds)
    app = SessionGuard(app, min(access.sessions_per_client, access.max_sessions), access.unused_session_seconds,
                       access.session_idle_seconds, max_sessions=access.max_sessions)
    return BearerToken(app, access.token) if access.token else app


async def serve_http(addr: str, timeout: float, sock: socket.socket, access: HttpAccess | None = None,
                     credentials: grpc.ChannelCredentials | None = None) -> None:
    """Serve streamable HTTP on an already bound socket (so a test can take an ephemeral port first)."""
    import uvicorn

    host = sock.getsockname()[0]
    proxies = list((access or HttpAccess()).trusted_proxies)
    # uvicorn believes X-Forwarded-For from loopback unless told otherwise: a local caller could then name any
    # client address and take a share of the sessions per name. Only the configured proxies are believed.
    config = uvicorn.Config(http_app(addr, timeout, host, access, credentials), log_level="warning",
                            lifespan="on", proxy_headers=bool(proxies), forwarded_allow_ips=proxies or [])
    await uvicorn.Server(config).serve(sockets=[sock])


def bind(listen: str) -> socket.socket:
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port)))
    # Listening before the port is announced: a client that connects while uvicorn is still starting waits in
    # the backlog instead of being refused.
    sock.listen(128)
    return sock


def main(addr: str, transport: str, listen: str, timeout: float, access: HttpAccess | None = None,
         credentials: grpc.ChannelCredentials | None = None) -> int:
    import anyio

    if transport == "stdio":
        anyio.run(serve_stdio, addr, timeout, credentials)
    else:
        access = access or HttpAccess()
        try:
            check_access(listen.rpartition(":")[0].strip("[]") or "127.0.0.1", access)
        except ConfigError as err:
            print(f"gpu-advisor mcp: {err}", file=sys.stderr)
            return 2
        sock = bind(listen)
        host, port = sock.getsockname()[:2]
        print(f"gpu-advisor MCP: streamable HTTP on http://{host}:{port}/mcp, service at {addr}", file=sys.stderr)
        anyio.run(serve_http, addr, timeout, sock, access, credentials)
    return 0


__all__ = ["build_server", "main", "request_schema", "response_schema", "tools"]
