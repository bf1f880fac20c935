"""Structural checks of a Recommend request → field violations (path, description).

Only what is wrong, never what is missing: a missing field becomes a question in the answer. Paths follow the
brief's proto field names, e.g. `brief.model.params_billion`, `quotes[0].gpu`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import date
from typing import Any

from google.protobuf.message import Message

from .brief import LOCALES

Violation = tuple[str, str]

MAX_STRING = 256
MAX_TOOLCHAIN = 32
MAX_QUOTES = 64
MAX_CANDIDATES = 50

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
    "brief.traffic.concurrent_sessions": 10_000_000,
    "brief.traffic.batch_size": 10_000_000,
    "brief.traffic.avg_input_tokens": 10_000_000,
    "brief.traffic.p95_input_tokens": 10_000_000,
    "brief.traffic.avg_output_tokens": 10_000_000,
    "brief.traffic.requests_per_second": 10_000_000,
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
}


def _numbers(msg: Message, prefix: str) -> Iterable[tuple[str, Any, Any]]:
    for fd in msg.DESCRIPTOR.fields:
        path = f"{prefix}.{fd.name}"
        value = getattr(msg, fd.name)
        if fd.type == fd.TYPE_MESSAGE and not fd.is_repeated:
            yield from _numbers(value, path)
        else:
            yield path, fd, value


def _check_message(msg: Message, prefix: str, out: list[Violation]) -> None:
    for path, fd, value in _numbers(msg, prefix):
        if fd.is_repeated:
            continue
        if fd.type == fd.TYPE_ENUM:
            if fd.enum_type.values_by_number.get(value) is None:
                out.append((path, f"unknown {fd.enum_type.name} value {value}"))
        elif fd.type in (fd.TYPE_DOUBLE, fd.TYPE_FLOAT):
            if math.isnan(value) or math.isinf(value):
                out.append((path, "must be a finite number"))
            elif value < 0:
                out.append((path, f"must not be negative (got {value:g})"))
            elif path in LIMITS and value > LIMITS[path]:
                out.append((path, f"must be at most {LIMITS[path]:g} (got {value:g})"))
        elif fd.type in (fd.TYPE_INT32, fd.TYPE_INT64, fd.TYPE_UINT32, fd.TYPE_UINT64):
            if value < 0:
                out.append((path, f"must not be negative (got {value})"))
            elif path in LIMITS and value > LIMITS[path]:
                out.append((path, f"must be at most {LIMITS[path]:g} (got {value})"))
        elif fd.type == fd.TYPE_STRING and len(value) > MAX_STRING:
            out.append((path, f"must be at most {MAX_STRING} characters"))


def _date_ok(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def validate(request: Any, known_gpus: Iterable[str] = ()) -> list[Violation]:
    """Every structural problem of a RecommendRequest, as (field path, description)."""
    out: list[Violation] = []
    brief = request.brief
    _check_message(brief, "brief", out)
    lat = brief.latency
    if lat.p95_ms > 0 and lat.p99_ms > 0 and lat.p99_ms < lat.p95_ms:
        out.append(("brief.latency.p99_ms",
                    f"p99 ({lat.p99_ms:g} ms) cannot be below p95 ({lat.p95_ms:g} ms)"))
    m = brief.model
    if m.active_params_billion > 0 and m.params_billion > 0 and m.active_params_billion > m.params_billion:
        out.append(("brief.model.active_params_billion", "active parameters cannot exceed total parameters"))
    # No check of p95_input_tokens against the average: with rare very long prompts (RAG over big documents)
    # the mean can exceed the p95, so that is unusual input, not wrong input.
    e = brief.economics
    if 0 < e.utilization < 0.01:
        out.append(("brief.economics.utilization", "must be at least 0.01 when given (0 = use the default)"))
    if 0 < e.acceptance_rate < 0.001:
        out.append(("brief.economics.acceptance_rate", "must be at least 0.001 when given (0 = not known)"))
    if 0 < brief.training.target_days < 0.01:
        out.append(("brief.training.target_days", "must be at least 0.01 days (about 15 minutes) when given"))
    if len(brief.toolchain) > MAX_TOOLCHAIN:
        out.append(("brief.toolchain", f"at most {MAX_TOOLCHAIN} entries"))
    for i, tool in enumerate(brief.toolchain):
        if len(tool) > MAX_STRING:
            out.append((f"brief.toolchain[{i}]", f"must be at most {MAX_STRING} characters"))
    if len(request.quotes) > MAX_QUOTES:
        out.append(("quotes", f"at most {MAX_QUOTES} quotes"))
    known = set(known_gpus)
    for i, q in enumerate(request.quotes[:MAX_QUOTES]):
        p = f"quotes[{i}]"
        if not q.gpu:
            out.append((f"{p}.gpu", "is required"))
        elif known and q.gpu not in known:
            out.append((f"{p}.gpu", f"unknown GPU id '{q.gpu}'"))
        if math.isnan(q.usd_per_hour) or math.isinf(q.usd_per_hour) or q.usd_per_hour <= 0:
            out.append((f"{p}.usd_per_hour", "must be a positive finite price"))
        for name in ("gpu", "provider", "as_of"):
            if len(getattr(q, name)) > MAX_STRING:
                out.append((f"{p}.{name}", f"must be at most {MAX_STRING} characters"))
        if q.as_of and not _date_ok(q.as_of):
            out.append((f"{p}.as_of", "must be a date YYYY-MM-DD"))
    if request.locale and request.locale not in LOCALES:
        out.append(("locale", f"must be one of {', '.join(LOCALES)}"))
    if request.max_candidates < 0 or request.max_candidates > MAX_CANDIDATES:
        out.append(("max_candidates", f"must be between 0 and {MAX_CANDIDATES}"))
    if request.as_of and not _date_ok(request.as_of):
        out.append(("as_of", "must be a date YYYY-MM-DD"))
    return out
