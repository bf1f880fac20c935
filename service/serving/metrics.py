"""Prometheus metrics: calls by method and status, latency, and rules reloads. Served only when asked for
(`--metrics-addr` / GPU_ADVISOR_METRICS_ADDR), on its own HTTP port."""

from __future__ import annotations

from typing import Any

from prometheus_client import Counter, Gauge, Histogram, start_http_server

RPCS = Counter("gpu_advisor_rpcs_total", "gRPC calls handled", ["method", "code"])
LATENCY = Histogram(
    "gpu_advisor_rpc_seconds", "gRPC call latency", ["method"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
RELOADS = Counter("gpu_advisor_rules_reloads_total", "rules reload attempts that found a change", ["result"])
ABANDONED = Counter(
    "gpu_advisor_abandoned_total", "calls stopped before a step because their deadline passed or the caller left",
    ["method", "stage"],
)
CACHE = Counter("gpu_advisor_response_cache_total", "Recommend calls looked up in the response cache", ["result"])
ACTIVE = Gauge("gpu_advisor_rules_active_info", "the active rules version (value 1)", ["revision"])


# Each (method, code)'s children, looked up once: `labels()` checks and joins its arguments and takes the
# metric's lock on every call, where a call's own count needs neither (the names are a handful; nothing removes
# a child of these two metrics).
_RPC_CHILDREN: dict[tuple[str, str], tuple[Any, Any]] = {}


def observe_rpc(method: str, code: str, seconds: float) -> None:
    children = _RPC_CHILDREN.get((method, code))
    if children is None:
        children = _RPC_CHILDREN[(method, code)] = (RPCS.labels(method=method, code=code),
                                                    LATENCY.labels(method=method))
    children[0].inc()
    children[1].observe(seconds)


def abandoned(method: str, stage: str) -> None:
    ABANDONED.labels(method=method, stage=stage).inc()


def response_cache(result: str) -> None:
    """`hit` or `miss`: the hit rate tells an operator whether --response-cache is worth its memory."""
    CACHE.labels(result=result).inc()


def rules_activated(revision: str) -> None:
    RELOADS.labels(result="activated").inc()
    ACTIVE.clear()
    ACTIVE.labels(revision=revision).set(1)


def rules_rejected() -> None:
    RELOADS.labels(result="rejected").inc()


def serve_metrics(addr: str) -> int:
    """Start the /metrics HTTP server on host:port (port 0 = any free port); returns the bound port."""
    host, _, port = addr.rpartition(":")
    server, _thread = start_http_server(int(port), addr=host or "127.0.0.1")
    return int(server.server_port)
