"""Wiring: the gRPC server, health, reflection, interceptors, signals and rules reloading.

The servicer is thin: validate → map → the active rules version's `advise` → map back.
"""

from __future__ import annotations

import argparse
import hmac
import os
import signal
import sys
import threading
from concurrent import futures
from datetime import date
from typing import NoReturn

import grpc
import structlog
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from grpc_status import rpc_status

from . import api, cache, metrics, processes
from .api import pb, pb_grpc
from .interceptors import RequestContextInterceptor
from .logging import configure
from .ruletests import self_test
from .store import Bundle, RulesetStatus, RuleStore
from .validate import validate

log = structlog.get_logger("gpu_advisor.server")

DEFAULT_ADDR = "127.0.0.1:50051"


def _invalid(context: grpc.ServicerContext, violations: list[tuple[str, str]]) -> NoReturn:
    """INVALID_ARGUMENT with a google.rpc.BadRequest naming every bad field (raises like context.abort)."""
    field_violation = error_details_pb2.BadRequest.FieldViolation
    bad = error_details_pb2.BadRequest(
        field_violations=[field_violation(field=f, description=d) for f, d in violations]
    )
    detail = any_pb2.Any()
    detail.Pack(bad)
    message = "; ".join(f"{f}: {d}" for f, d in violations[:5])
    status = status_pb2.Status(code=code_pb2.INVALID_ARGUMENT, message=message, details=[detail])
    context.abort_with_status(rpc_status.to_status(status))
    raise AssertionError("unreachable: abort_with_status raises")


def _status_to_proto(st: RulesetStatus) -> pb.RulesetInfo:
    return pb.RulesetInfo(
        revision=st.revision, content_hash=st.content_hash,
        loaded_at=st.loaded_at.isoformat() if st.loaded_at else "", counts=st.counts,
        last_error=st.last_error,
        last_attempted_revision=st.last_attempted_revision,
        last_attempted_at=st.last_attempted_at.isoformat() if st.last_attempted_at else "",
        source_dir=st.source_dir,
    )


class Servicer(pb_grpc.GpuAdvisorServicer):
    def __init__(self, store: RuleStore, admin_token: str = ""):
        self.store = store
        self.admin_token = admin_token

    def _bundle(self, context: grpc.ServicerContext) -> Bundle:
        # Taken once per call: a reload during the call swaps the store's reference, not this one.
        bundle = self.store.active()
        if bundle is None:
            context.abort(grpc.StatusCode.UNAVAILABLE, "no valid rules are loaded yet")
            raise AssertionError("unreachable: abort raises")
        return bundle

    def Recommend(self, request: pb.RecommendRequest, context: grpc.ServicerContext) -> pb.RecommendResponse:  # noqa: N802
        bundle = self._bundle(context)
        violations = validate(request, bundle.known_gpu_ids())
        if violations:
            _invalid(context, violations)
        advice = bundle.advise(api.request_from_proto(request))
        return api.advice_to_proto(advice)

    def ListGpus(self, request: pb.ListGpusRequest, context: grpc.ServicerContext) -> pb.ListGpusResponse:  # noqa: N802
        bundle = self._bundle(context)
        try:
            day = date.fromisoformat(request.as_of) if request.as_of else date.today()
        except ValueError:
            _invalid(context, [("as_of", "must be a date YYYY-MM-DD")])
        return pb.ListGpusResponse(
            gpus=[api.gpu_to_proto(g, day) for g in bundle.catalog],
            ruleset=pb.RulesetRef(revision=bundle.revision, content_hash=bundle.content_hash),
        )

    def GetRuleset(self, request: pb.GetRulesetRequest, context: grpc.ServicerContext) -> pb.RulesetInfo:  # noqa: N802
        return _status_to_proto(self.store.status())

    def ReloadRules(  # noqa: N802
        self, request: pb.ReloadRulesRequest, context: grpc.ServicerContext
    ) -> pb.ReloadRulesResponse:
        if self.admin_token:
            sent = dict(context.invocation_metadata()).get("authorization", "")
            if not hmac.compare_digest(sent.encode(), f"Bearer {self.admin_token}".encode()):
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "ReloadRules needs the admin bearer token")
        result = self.store.reload()
        return pb.ReloadRulesResponse(ruleset=_status_to_proto(self.store.status()), reloaded=result.changed)


def serve(
    addr: str, rules_dir: str, admin_token: str = "", watch: bool = True, workers: int = 4,
    poll_seconds: float = 0.5, shared_port: bool = False, response_cache: int = 0,
) -> tuple[grpc.Server, int, RuleStore]:
    """Start serving and return (server, bound port, store). Health stays NOT_SERVING until rules load.
    `shared_port`: one of `--processes N` workers (SO_REUSEPORT); otherwise a busy port fails here.
    `response_cache`: keep that many Recommend answers for repeated identical requests (0 = off)."""
    store = RuleStore(rules_dir, poll_seconds=poll_seconds)
    store.self_test = self_test(store.rules_dir)
    health_servicer = health.HealthServicer()
    for name in ("", api.SERVICE_NAME):
        health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)

    def mark_serving(_bundle: object) -> None:
        for name in ("", api.SERVICE_NAME):
            health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)

    store.on_activate.append(mark_serving)
    store.on_activate.append(lambda bundle: metrics.rules_activated(bundle.revision))
    store.on_reject.append(lambda _error: metrics.rules_rejected())
    # The rule engine holds the GIL, so a few threads suffice; they keep health checks answering.
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers),
                         interceptors=[RequestContextInterceptor()],
                         options=[("grpc.so_reuseport", int(shared_port))])
    servicer = Servicer(store, admin_token)
    if response_cache > 0:
        servicer.Recommend = cache.ResponseCache(response_cache).wrap(store, servicer.Recommend)  # type: ignore[method-assign]
    pb_grpc.add_GpuAdvisorServicer_to_server(servicer, server)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    health_name = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
    reflection.enable_server_reflection((api.SERVICE_NAME, health_name, reflection.SERVICE_NAME), server)
    try:
        port = server.add_insecure_port(addr)
    except RuntimeError:
        port = 0
    if port == 0:
        log.error("bind_failed", addr=addr, hint="address in use or not local; --processes N shares a port")
        store.close()
        raise processes.BindError(f"cannot bind {addr}")
    result = store.reload()
    if not result.ok:
        log.error("rules_invalid_at_start", problems=list(result.problems)[:50], rules=rules_dir)
    server.start()
    if watch:
        store.start_watching()
    log.info("serving", addr=addr, port=port, rules=rules_dir, revision=store.status().revision or None)
    return server, port, store


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu-advisor-server", description="Serve GPU Advisor over gRPC.")
    parser.add_argument("--addr", default=os.environ.get("GPU_ADVISOR_ADDR", DEFAULT_ADDR))
    parser.add_argument("--rules", default=os.environ.get("GPU_ADVISOR_RULES", "rules"))
    parser.add_argument("--admin-token", default=os.environ.get("GPU_ADVISOR_ADMIN_TOKEN", ""))
    parser.add_argument("--no-watch", action="store_true", help="do not watch the rules folder for changes")
    parser.add_argument("--log-level", default=None)
    parser.add_argument("--metrics-addr", default=os.environ.get("GPU_ADVISOR_METRICS_ADDR", ""),
                        help="serve Prometheus metrics on host:port (off when empty)")
    parser.add_argument("--processes", type=int, default=processes.default_processes(),
                        help=f"worker processes sharing the port (env {processes.ENV}, default 1)")
    parser.add_argument("--shared-port", action="store_true", help=argparse.SUPPRESS)  # set for the workers
    parser.add_argument("--response-cache", type=int, default=int(os.environ.get(cache.ENV, "0") or 0),
                        help=f"cache this many Recommend answers for identical requests (env {cache.ENV}; 0 = off)")
    args = parser.parse_args(argv)
    configure(args.log_level, pid=args.shared_port or args.processes > 1)
    if args.processes < 1:
        parser.error("--processes must be at least 1")
    if args.processes > 1:
        return processes.supervise(args.processes, args.addr, sys.argv[1:] if argv is None else argv,
                                   args.metrics_addr)
    try:
        server, _port, store = serve(args.addr, args.rules, args.admin_token, watch=not args.no_watch,
                                     shared_port=args.shared_port, response_cache=args.response_cache)
    except processes.BindError:
        return 1
    if args.metrics_addr:
        log.info("metrics", port=metrics.serve_metrics(args.metrics_addr))
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        if signum == getattr(signal, "SIGHUP", None):
            log.info("sighup_reload")
            threading.Thread(target=store.reload, name="sighup-reload", daemon=True).start()
            return
        log.info("stopping", signal=signal.Signals(signum).name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            signal.signal(sig, on_signal)
    stop.wait()
    server.stop(grace=5).wait()
    store.close()
    log.info("stopped")
    return 0
