"""Structural checks of a Recommend request → field violations (path, description).

Only what is wrong, never what is missing: a missing field becomes a question in the answer. Paths follow the
brief's proto field names, e.g. `brief.model.params_billion`, `quotes[0].gpu`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import date
from functools import lru_cache
from typing import Any

from google.protobuf.message import Message

from ..domain.brief import LOCALES
from ..domain.models import nearest
from .parallelism import check_parallelism

Violation = tuple[str, str]


def _list_purchase(econ: Message) -> int:
    return _list_purchase_number(econ.DESCRIPTOR)


@lru_cache(maxsize=8)
def _list_purchase_number(desc: Any) -> int:  # noqa: ANN401
    # Read from the descriptor: only api.py imports generated code.
    tier = desc.fields_by_name["price_tier"].enum_type
    return tier.values_by_name["PRICE_TIER_LIST_PURCHASE"].number

MAX_STRING = 256
MAX_TOOLCHAIN = 32
MAX_QUOTES = 64
MAX_CANDIDATES = 50
# Per GPU-hour. The dearest rack-scale GPU rents for tens of dollars an hour; more is a monthly or whole-cluster
# price given as hourly, and no arithmetic should start from 1e308 $/h.
MAX_QUOTE_USD_PER_HOUR = 10_000
# The smallest positive number a brief or quote may carry. No field has a meaningful value below it (a millionth
# of a request a second, of a billion parameters, of a dollar), and below it products underflow: 5e-324
# requests/s x 3600 x an acceptance rate of 0.25 is 0, and the cost per accepted unit divided by it.
MIN_POSITIVE = 1e-6
ECHO = 40  # characters of a caller's own text repeated in a description
# The largest request gRPC Core lets through to Python. The biggest one the limits above admit is about 230 KB
# (64 quotes of three 256-character strings and 32 toolchain entries of 256, at 4 bytes a character); twice
# that leaves room. Core refuses a larger one with RESOURCE_EXHAUSTED before Python parses it: a 3.9 MB
# request took 46 ms to parse, holding the GIL, before any limit here could refuse it.
MAX_REQUEST_BYTES = 512 * 1024
# The largest answer the service sends. Answers are a few KB to a few tens of KB (the trace included); rules
# whose messages make one larger fail their rule tests, and at serve time the call ends with INTERNAL naming the
# rules revision rather than sending it (a template repeating a padded field made 2.4 MB answers).
MAX_ANSWER_BYTES = 256 * 1024


def _echo(text: str) -> str:
    """A caller's string as a description quotes it: bounded, so a violation list stays small."""
    return text if len(text) <= ECHO else text[:ECHO] + "…"

# Upper bounds that no real brief reaches: they keep arithmetic finite and catch unit mistakes (GB for B...).
LIMITS: dict[str, float] = {
    "brief.model.params_billion": 100_000,
    "brief.model.active_params_billion": 100_000,
    "brief.model.context_tokens": 10_000_000,
    "brief.model.layers": 10_000,
    "brief.model.kv_heads": 10_000,
    "brief.model.head_dim": 100_000,
    "brief.model.hidden_size": 1_000_000,
    "brief.model.kv_lora_rank": 1_000_000,
    "brief.model.rope_head_dim": 100_000,
    "brief.model.sliding_window_tokens": 10_000_000,
    "brief.model.sliding_window_layers": 10_000,
    "brief.model.experts": 100_000,
    "brief.model.experts_per_token": 100_000,
    "brief.model.shared_params_billion": 100_000,
    "brief.traffic.concurrent_sessions": 10_000_000,
    "brief.traffic.batch_size": 10_000_000,
    "brief.traffic.avg_input_tokens": 10_000_000,
    "brief.traffic.p95_input_tokens": 10_000_000,
    "brief.traffic.avg_output_tokens": 10_000_000,
    # A million responses a second is beyond the largest public model APIs; more is a unit mistake (per day?).
    "brief.traffic.requests_per_second": 1_000_000,
    # A million a second for a month (2.6e12): the bound above, over the month.
    "brief.traffic.requests_per_month": 2.7e12,
    "brief.traffic.window_hours": 744,  # the longest month
    "brief.traffic.cached_input_share": 1,  # a fraction
    "brief.latency.p95_ms": 86_400_000,
    "brief.latency.p99_ms": 86_400_000,
    "brief.latency.ttft_ms": 86_400_000,
    "brief.training.tokens_billion": 1_000_000_000,
    "brief.training.target_days": 36_500,
    "brief.training.global_batch_tokens": 10_000_000_000,
    "brief.economics.hours_per_month": 744,
    "brief.economics.horizon_months": 1200,
    "brief.economics.utilization": 1,
    "brief.economics.budget_usd_per_hour": 100_000_000,
    "brief.economics.electricity_usd_per_kwh": 100,
    "brief.economics.acceptance_rate": 1,
    "brief.media.denoising_steps": 10_000,
    "brief.media.width_px": 100_000,
    "brief.media.height_px": 100_000,
    "brief.media.guidance_scale": 1_000,
    "brief.media.frames": 1_000_000,
    "brief.parallelism.tensor_parallel": 1_024,
    "brief.parallelism.pipeline_parallel": 1_024,
    "brief.parallelism.expert_parallel": 1_024,
}


# What _check_message does with each field, decided once per message type from its descriptor.
_NESTED, _ENUM, _FLOAT, _INT, _STRING = range(5)
_Plan = tuple[tuple[str, str, int, Any], ...]


@lru_cache(maxsize=64)
def _plan(desc: Any, prefix: str) -> _Plan:  # noqa: ANN401
    """(field name, path, check, its argument) per checked field of `desc`, in field order, singular messages
    expanded in place. Repeated fields are checked by validate() itself."""
    out: list[tuple[str, str, int, Any]] = []
    for fd in desc.fields:
        path = f"{prefix}.{fd.name}"
        if fd.is_repeated:
            continue
        if fd.type == fd.TYPE_MESSAGE:
            out.append((fd.name, path, _NESTED, _plan(fd.message_type, path)))
        elif fd.type == fd.TYPE_ENUM:
            out.append((fd.name, path, _ENUM, (frozenset(fd.enum_type.values_by_number), fd.enum_type.name)))
        elif fd.type in (fd.TYPE_DOUBLE, fd.TYPE_FLOAT):
            out.append((fd.name, path, _FLOAT, LIMITS.get(path)))
        elif fd.type in (fd.TYPE_INT32, fd.TYPE_INT64, fd.TYPE_UINT32, fd.TYPE_UINT64):
            out.append((fd.name, path, _INT, LIMITS.get(path)))
        elif fd.type == fd.TYPE_STRING:
            out.append((fd.name, path, _STRING, None))
    return tuple(out)


def _check_message(msg: Message, prefix: str, out: list[Violation]) -> None:
    _check_plan(msg, _plan(msg.DESCRIPTOR, prefix), out)


def _check_plan(msg: Message, plan: _Plan, out: list[Violation]) -> None:
    for name, path, check, arg in plan:
        value = getattr(msg, name)
        if check == _NESTED:
            _check_plan(value, arg, out)
        elif check == _FLOAT:
            if math.isnan(value) or math.isinf(value):
                out.append((path, "must be a finite number"))
            elif value < 0:
                out.append((path, f"must not be negative (got {value:g})"))
            elif 0 < value < MIN_POSITIVE:
                out.append((path, f"must be 0 (not given) or at least {MIN_POSITIVE:g} (got {value:g})"))
            elif arg is not None and value > arg:
                out.append((path, f"must be at most {arg:g} (got {value:g})"))
        elif check == _INT:
            if value < 0:
                out.append((path, f"must not be negative (got {value})"))
            elif arg is not None and value > arg:
                out.append((path, f"must be at most {arg:g} (got {value})"))
        elif check == _ENUM:
            if value not in arg[0]:
                out.append((path, f"unknown {arg[1]} value {value}"))
        elif len(value) > MAX_STRING:
            out.append((path, f"must be at most {MAX_STRING} characters"))


def is_country_code(text: str) -> bool:
    """Two ASCII letters, any case: an ISO 3166-1 alpha-2 code, or EU."""
    return len(text) == 2 and text.isascii() and text.isalpha()


MAX_PLACEMENT_ENTRIES = 64
MAX_PLACEMENT_NAME = 64


def _check_placement(p: Any, out: list[Violation]) -> None:  # noqa: ANN401 - pb.PlacementPolicy
    for name in ("providers", "regions", "countries"):
        items = getattr(p, name)
        path = f"brief.placement.{name}"
        if len(items) > MAX_PLACEMENT_ENTRIES:
            out.append((path, f"at most {MAX_PLACEMENT_ENTRIES} entries"))
        for i, item in enumerate(items[:MAX_PLACEMENT_ENTRIES]):
            if not item.strip():
                out.append((f"{path}[{i}]", "must not be empty"))
            elif len(item) > MAX_PLACEMENT_NAME:
                out.append((f"{path}[{i}]", f"must be at most {MAX_PLACEMENT_NAME} characters"))
            elif name == "countries" and not is_country_code(item):
                out.append((f"{path}[{i}]", f"must be an ISO 3166-1 alpha-2 code or EU, not '{_echo(item)}'"))


def _date_ok(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _model_name(name: str, known_models: Iterable[str] | None) -> list[Violation]:
    """An unknown model name, with the nearest known ones. `known_models` (ids and aliases; case does not matter)
    None: not checked."""
    if not name or known_models is None or len(name) > MAX_STRING:
        return []
    known = list(known_models)
    if name.strip().lower() in {k.lower() for k in known}:  # a few hundred names: cheap per request
        return []
    close = nearest(known, name)
    hint = f"; nearest: {', '.join(close)}" if close else ""
    return [("brief.model.name", f"unknown model '{_echo(name)}'{hint} (ListModels lists the registry)")]


def _beyond_window(brief: Any, windows: Mapping[str, int] | None,  # noqa: ANN401
                   ids: Mapping[str, str] | None = None) -> list[Violation]:
    """Input the model cannot take: a context beyond the named model's window (`windows`: lower-cased registry id
    or alias -> context_window_tokens, 0 = not known), and a prompt longer than the context (the brief's, else
    the named model's window). The model is named by its registry id (`ids`: lower-cased id or alias -> id),
    never by the caller's spelling of it."""
    m, t = brief.model, brief.traffic
    name = m.name.strip().lower()
    window = windows.get(name, 0) if windows and name else 0
    out: list[Violation] = []
    if window > 0 and m.context_tokens > window:
        model = (ids or {}).get(name) or _echo(m.name.strip())
        out.append(("brief.model.context_tokens",
                    f"{m.context_tokens:,} tokens is beyond the context window of {model} ({window:,} tokens)"))
    limit, what = (m.context_tokens, "context_tokens") if m.context_tokens > 0 else (window, "the model's window")
    if limit <= 0:
        return out
    for name in ("avg_input_tokens", "p95_input_tokens"):
        if getattr(t, name) > limit:
            out.append((f"brief.traffic.{name}",
                        f"{getattr(t, name):,} input tokens do not fit in {what} ({limit:,} tokens)"))
    return out


def validate(
    request: Any, known_gpus: Iterable[str] = (), known_models: Iterable[str] | None = None,  # noqa: ANN401
    windows: Mapping[str, int] | None = None, shapes: Mapping[str, tuple[str, int, int, int]] | None = None,
    scale_up: Mapping[str, int] | None = None, ids: Mapping[str, str] | None = None,
) -> list[Violation]:
    """Every structural problem of a RecommendRequest, as (field path, description). `known_models`: the registry's
    ids and aliases (a brief's model.name must be one); None leaves names unchecked. `windows`: each lower-cased
    id and alias's context window, so a context or a prompt the named model cannot take is refused. `shapes`
    (lower-cased id or alias -> registry id, query heads, KV heads, layers) and `scale_up` (GPU id -> most GPUs in one
    tensor-parallel group) refuse a parallel split that cannot run (service/wire/parallelism.py). `ids`: each
    lower-cased id and alias's registry id, which descriptions quote."""
    out: list[Violation] = []
    brief = request.brief
    _check_message(brief, "brief", out)
    out += _model_name(brief.model.name, known_models)
    out += _beyond_window(brief, windows, ids)
    lat = brief.latency
    if lat.p95_ms > 0 and lat.p99_ms > 0 and lat.p99_ms < lat.p95_ms:
        out.append(("brief.latency.p99_ms",
                    f"p99 ({lat.p99_ms:g} ms) cannot be below p95 ({lat.p95_ms:g} ms)"))
    if lat.p95_ms > 0 and lat.ttft_ms > lat.p95_ms:
        # The first token is part of the end-to-end time: a TTFT target above it can never bind.
        out.append(("brief.latency.ttft_ms",
                    f"time to first token ({lat.ttft_ms:g} ms) cannot exceed the end-to-end p95 ({lat.p95_ms:g} ms)"))
    if lat.no_latency_target and (lat.p95_ms > 0 or lat.p99_ms > 0 or lat.ttft_ms > 0):
        out.append(("brief.latency.no_latency_target", "says there is no latency target, but a target is given"))
    if brief.economics.no_budget_cap and brief.economics.budget_usd_per_hour > 0:
        out.append(("brief.economics.no_budget_cap",
                     f"says there is no cap, but budget_usd_per_hour is {brief.economics.budget_usd_per_hour:g}"))
    m = brief.model
    if m.active_params_billion > 0 and m.params_billion > 0 and m.active_params_billion > m.params_billion:
        out.append(("brief.model.active_params_billion", "active parameters cannot exceed total parameters"))
    if m.experts_per_token > 0 and m.experts > 0 and m.experts_per_token > m.experts:
        out.append(("brief.model.experts_per_token", f"cannot exceed experts ({m.experts})"))
    if m.shared_params_billion > 0 and m.params_billion > 0 and m.shared_params_billion > m.params_billion:
        out.append(("brief.model.shared_params_billion", "shared parameters cannot exceed total parameters"))
    if m.sliding_window_layers > 0 and m.layers > 0 and m.sliding_window_layers > m.layers:
        out.append(("brief.model.sliding_window_layers", f"cannot exceed layers ({m.layers})"))
    # No check of p95_input_tokens against the average: with rare very long prompts (RAG over big documents)
    # the mean can exceed the p95, so that is unusual input, not wrong input.
    e = brief.economics
    if 0 < e.utilization < 0.01:
        out.append(("brief.economics.utilization", "must be at least 0.01 when given (0 = use the default)"))
    if 0 < e.acceptance_rate < 0.001:
        out.append(("brief.economics.acceptance_rate", "must be at least 0.001 when given (0 = not known)"))
    # Rent is compared, and quotes are rent: a purchase list price is no tier to rent at.
    if e.price_tier == _list_purchase(e):
        out.append(("brief.economics.price_tier", "must be a rent tier (on-demand, marketplace or reserved)"))
    if 0 < brief.training.target_days < 0.01:
        out.append(("brief.training.target_days", "must be at least 0.01 days (about 15 minutes) when given"))
    if len(brief.toolchain) > MAX_TOOLCHAIN:
        out.append(("brief.toolchain", f"at most {MAX_TOOLCHAIN} entries"))
    for i, tool in enumerate(brief.toolchain[:MAX_TOOLCHAIN]):  # beyond it, one violation says enough
        if len(tool) > MAX_STRING:
            out.append((f"brief.toolchain[{i}]", f"must be at most {MAX_STRING} characters"))
    _check_placement(brief.placement, out)
    known = set(known_gpus)
    _check_shape(brief, known, out)
    out += check_parallelism(brief, shapes, scale_up)
    if len(request.quotes) > MAX_QUOTES:
        out.append(("quotes", f"at most {MAX_QUOTES} quotes"))
    for i, q in enumerate(request.quotes[:MAX_QUOTES]):
        p = f"quotes[{i}]"
        if not q.gpu:
            out.append((f"{p}.gpu", "is required"))
        elif known and q.gpu not in known:
            out.append((f"{p}.gpu", f"unknown GPU id '{_echo(q.gpu)}'"))
        if math.isnan(q.usd_per_hour) or math.isinf(q.usd_per_hour) or q.usd_per_hour < MIN_POSITIVE:
            out.append((f"{p}.usd_per_hour", f"must be a finite price of at least {MIN_POSITIVE:g} $ per GPU-hour"))
        elif q.usd_per_hour > MAX_QUOTE_USD_PER_HOUR:
            out.append((f"{p}.usd_per_hour",
                        f"must be at most {MAX_QUOTE_USD_PER_HOUR:g} $ per GPU-hour (got {q.usd_per_hour:g})"))
        for name in ("gpu", "provider", "as_of"):
            if len(getattr(q, name)) > MAX_STRING:
                out.append((f"{p}.{name}", f"must be at most {MAX_STRING} characters"))
        if q.tier == _list_purchase(e):
            out.append((f"{p}.tier", "a quote is a rent price: on-demand, marketplace or reserved"))
        if q.as_of and not _date_ok(q.as_of):
            out.append((f"{p}.as_of", "must be a date YYYY-MM-DD"))
    if request.locale and request.locale not in LOCALES:
        out.append(("locale", f"must be one of {', '.join(LOCALES)}"))
    if request.max_candidates < 0 or request.max_candidates > MAX_CANDIDATES:
        out.append(("max_candidates", f"must be between 0 and {MAX_CANDIDATES}"))
    if request.as_of and not _date_ok(request.as_of):
        out.append(("as_of", "must be a date YYYY-MM-DD"))
    views = request.DESCRIPTOR.fields_by_name["view"].enum_type.values_by_number
    if request.view not in views:
        out.append(("view", f"unknown View value {request.view} (VIEW_FULL or VIEW_SUMMARY)"))
    return out


MAX_GPU_IDS = 64  # more than any catalog holds


def _check_shape(brief: Any, known: set[str], out: list[Violation]) -> None:  # noqa: ANN401
    """brief.gpus names catalog GPUs (the nearest ids when not); brief.parallelism's expert width fits the copy."""
    if len(brief.gpus) > MAX_GPU_IDS:
        out.append(("brief.gpus", f"at most {MAX_GPU_IDS} entries"))
    for gpu in brief.gpus[:MAX_GPU_IDS]:
        if len(gpu) > MAX_STRING:
            out.append(("brief.gpus", f"must be at most {MAX_STRING} characters an id"))
        elif known and gpu not in known:
            close = nearest(sorted(known), gpu)
            hint = f"; nearest: {', '.join(close)}" if close else ""
            out.append(("brief.gpus", f"unknown GPU id '{_echo(gpu)}'{hint} (ListGpus lists the catalog)"))
    # Refused, not quietly de-duplicated: a repeated id is most often a slip for another GPU (h100-sxm twice
    # where h100-pcie was meant), which the caller should see.
    counts: dict[str, int] = {}
    for gpu in brief.gpus[:MAX_GPU_IDS]:
        counts[gpu] = counts.get(gpu, 0) + 1
    for gpu, n in counts.items():
        if n > 1:
            out.append(("brief.gpus", f"'{_echo(gpu)}' is listed {n} times; name each GPU once"))
    p = brief.parallelism
    width = max(1, p.tensor_parallel) * max(1, p.pipeline_parallel)
    if p.expert_parallel > 0 and (p.tensor_parallel > 0 or p.pipeline_parallel > 0) and p.expert_parallel > width:
        out.append(("brief.parallelism.expert_parallel",
                    f"cannot exceed the GPUs of one copy (tensor x pipeline parallel = {width})"))


def validate_list_models(request: Any) -> list[Violation]:  # noqa: ANN401
    """A ListModels request: a known kind and a bounded query."""
    out: list[Violation] = []
    kinds = request.DESCRIPTOR.fields_by_name["kind"].enum_type.values_by_number
    if request.kind not in kinds:
        out.append(("kind", f"unknown ModelKind value {request.kind}"))
    if len(request.query) > MAX_STRING:
        out.append(("query", f"must be at most {MAX_STRING} characters"))
    return out
