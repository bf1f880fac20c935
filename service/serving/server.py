"""Wiring: the gRPC server (grpc.aio: an open stream costs no thread), health, reflection, admission, signals and
rules reloading.

The servicer is thin: validate → map → the active rules version's `advise` → map back, checking before each
expensive step that the caller still waits for the answer.
"""

from __future__ import annotations

import hmac
import os
import select
import signal
import socket
import sys
import threading
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, NoReturn

import grpc
import structlog
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection

from ..decide.cancel import Cancelled
from ..rulebook import vetting
from ..rulebook.builtin import BUILTIN_COPY, describe
from ..rulebook.last_good import BUILTIN_RULES, LastGood
from ..rulebook.ruletests import self_test
from ..rulebook.store import RulesetStatus, RuleStore
from ..rulebook.version import Bundle
from ..wire import api, views
from ..wire.api import pb, pb_grpc
from ..wire.validate import MAX_ANSWER_BYTES, MAX_REQUEST_BYTES, validate, validate_list_models
from . import answering, cache, fanout, heartbeat, interpreter, metrics, paging, processes, rules_flag
from .dispatch import Dispatcher
from .errors import abort_invalid as _invalid
from .flags import (
    CONNECTION_AGE_GRACE_SECONDS,
    DEALLOCATING_STREAMS,
    DEFAULT_MAX_CALLS,
    DEFAULT_MAX_CONCURRENT,
    DEFAULT_MAX_CONNECTION_AGE,
    DEFAULT_MAX_CONNECTION_IDLE,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_QUEUE,
    DEFAULT_MAX_REFLECTION_STREAMS,
    DEFAULT_MAX_STREAMS,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_STREAM_IDLE_TIMEOUT,
    REFLECTION_PER_CONNECTION,
    parse_args,
)
from .handlers import add_servicer
from .health import Health
from .interceptors import RETRY_PUSHBACK, AdmissionControl
from .lifecycle import AdvisorServer, LoopThread
from .logging import configure
from .probe import STALE_SECONDS, ProbeProcess
from .signals import stop_on_signals
from .streams import REFLECTION_V1, StreamCap, capped_stream, reflection_handlers  # noqa: F401 (tests import it here)
from .workers import Workers

log = structlog.get_logger("gpu_advisor.server")

# Worker threads beyond one per running call: answers whose caller left keep their thread until their next
# stage, while the slot has passed on. Health checks and reflection answer on the event loop, without a thread.
SPARE_WORKERS = 4
WATCH_STREAMS_TOTAL = 100
HEALTH_SERVICE = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
HEALTH_CHECK = f"/{HEALTH_SERVICE}/Check"
RECOMMEND = f"/{api.SERVICE_NAME}/Recommend"  # the method path, as metrics label it
PEER_WAIT_MARGIN_S = 0.25  # ReloadRules stops waiting for the other workers this long before its deadline


def _shown_dir(source_dir: str, full: bool) -> str:
    """The rules folder as GetRuleset shows it: the absolute path to an admin caller, else relative to the
    server's working folder, or nothing when it lies outside it (an absolute path tells any client where the
    server's files live)."""
    if full or not source_dir:
        return source_dir
    rel = os.path.relpath(os.path.abspath(source_dir), os.getcwd())
    return "" if rel == ".." or rel.startswith(".." + os.sep) else rel


def _status_to_proto(st: RulesetStatus, full_path: bool = True) -> pb.RulesetInfo:
    return pb.RulesetInfo(
        revision=st.revision, content_hash=st.content_hash,
        loaded_at=st.loaded_at.isoformat() if st.loaded_at else "", counts=st.counts,
        last_error=st.last_error,
        last_attempted_revision=st.last_attempted_revision,
        last_attempted_at=st.last_attempted_at.isoformat() if st.last_attempted_at else "",
        source_dir=_shown_dir(st.source_dir, full_path),
        fallback=st.fallback and f"serving {st.fallback}, because the rules folder's version was refused at start "
                                 "(last_error says why)",
    )


def _still_wanted(context: grpc.ServicerContext) -> bool:
    # time_remaining() is exact; is_active() notices a caller that hung up (or a deadline Core already enforced).
    return context.time_remaining() > 0 and context.is_active()


def _stop_unless_wanted(context: grpc.ServicerContext, stage: str) -> None:
    if not _still_wanted(context):
        _abandon(context, stage)


def _abandon(context: grpc.ServicerContext, stage: str) -> NoReturn:
    """Nobody waits for this answer any more: count it and stop (the status goes nowhere, but must be one)."""
    metrics.abandoned(RECOMMEND, stage)
    code = grpc.StatusCode.DEADLINE_EXCEEDED if context.time_remaining() <= 0 else grpc.StatusCode.CANCELLED
    context.abort(code, f"stopped before {stage}: the caller no longer waits for the answer")
    raise AssertionError("unreachable: abort raises")


@dataclass(frozen=True)
class _Status:
    code: grpc.StatusCode
    details: str
    trailing_metadata: tuple[tuple[str, str], ...]


def _too_large(context: grpc.ServicerContext, size: int, with_trace: bool, revision: str) -> NoReturn:
    """An answer over the size cap: RESOURCE_EXHAUSTED (never INTERNAL), with a negative retry pushback (asking
    again unchanged gets the same answer), naming include_trace when the trace is what made it long."""
    log.warning("answer_too_large", bytes=size, limit=MAX_ANSWER_BYTES, revision=revision, trace=with_trace)
    if with_trace:
        # Only fields a caller can set: the trace is all or nothing on the wire (include_trace).
        why = "ask again with include_trace false (the same answer without its trace) for an answer within the limit"
    else:
        why = f"the rules (revision {revision}) make answers too long; their maintainers must shorten them"
    context.abort_with_status(_Status(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        f"the answer{' with its trace (include_trace)' if with_trace else ''} would be {size:,} bytes, over the "
        f"{MAX_ANSWER_BYTES:,}-byte limit: {why}", ((RETRY_PUSHBACK, "-1"),)))
    raise AssertionError("unreachable: abort raises")


class Servicer(pb_grpc.GpuAdvisorServicer):
    def __init__(self, store: RuleStore, admin_token: str = "", peers: fanout.Peers | None = None):
        self.store = store
        # Empty: the admin RPCs are off (closed by default).
        self.admin_token = admin_token
        # --processes N: the channel to the supervisor, through which ReloadRules reaches the other workers.
        self.peers = peers

    def _bundle(self, context: grpc.ServicerContext) -> Bundle:
        # Taken once per call: a reload during the call swaps the store's reference, not this one.
        bundle = self.store.active()
        if bundle is None:
            context.abort(grpc.StatusCode.UNAVAILABLE, "no valid rules are loaded yet")
            raise AssertionError("unreachable: abort raises")
        return bundle

    def Recommend(self, request: pb.RecommendRequest, context: grpc.ServicerContext) -> pb.RecommendResponse:  # noqa: N802
        bundle, response = self._answer(request, context)
        self._within_cap(response.ByteSize(), request, bundle, context)
        return response

    def recommend_encoded(self, request: pb.RecommendRequest, context: grpc.ServicerContext) -> bytes:
        """Recommend's reply as it goes on the wire, encoded once: the served method (`serve`). Its size is
        checked on these bytes, where `Recommend` asks `ByteSize()`, which encodes the whole reply to count it
        (~30 µs for the bench's 36 KB reply), and grpc then encoded it again on the event loop."""
        bundle, response = self._answer(request, context)
        raw = response.SerializeToString()
        self._within_cap(len(raw), request, bundle, context)
        return raw

    def _answer(self, request: pb.RecommendRequest,
                context: grpc.ServicerContext) -> tuple[Bundle, pb.RecommendResponse]:
        bundle = self._bundle(context)
        _stop_unless_wanted(context, "validate")
        violations = validate(request, bundle.known_gpu_ids(), bundle.known_model_names(), bundle.model_windows(),
                              bundle.model_shapes(), bundle.scale_up_domains(), bundle.model_ids())
        if violations:
            _invalid(context, violations)
        try:
            advice = bundle.advise(api.request_from_proto(request), lambda: _still_wanted(context))
        except Cancelled as stopped:
            _abandon(context, stopped.stage)
        _stop_unless_wanted(context, "response")
        response = api.advice_to_proto(advice)
        if views.wants_summary(request):
            response = views.summarize(response)
        return bundle, response

    @staticmethod
    def _within_cap(size: int, request: pb.RecommendRequest, bundle: Bundle, context: grpc.ServicerContext) -> None:
        if size > MAX_ANSWER_BYTES:
            _too_large(context, size, request.include_trace and not views.wants_summary(request), bundle.revision)

    def ListGpus(self, request: pb.ListGpusRequest, context: grpc.ServicerContext) -> pb.ListGpusResponse:  # noqa: N802
        bundle = self._bundle(context)
        try:
            day = date.fromisoformat(request.as_of) if request.as_of else date.today()
        except ValueError:
            _invalid(context, [("as_of", "must be a date YYYY-MM-DD")])
        return pb.ListGpusResponse(
            gpus=[api.gpu_to_proto(g, day, bundle.book.offers) for g in bundle.catalog],
            ruleset=pb.RulesetRef(revision=bundle.revision, content_hash=bundle.content_hash),
        )

    def ListOffers(self, request: pb.ListOffersRequest, context: grpc.ServicerContext) -> pb.ListOffersResponse:  # noqa: N802
        bundle = self._bundle(context)
        query, violations = api.offer_query_from_proto(request, bundle.known_gpu_ids())
        if violations:
            _invalid(context, violations)
        rows = bundle.book.offers.matching(query.gpu, query.provider, query.country, query.tier, query.day)
        page, next_token = paging.page(rows, query, bundle.content_hash)
        if page is None:
            _invalid(context, [("page_token", "is not a token this listing gave (or the rules changed since)")])
        return pb.ListOffersResponse(
            offers=[api.offer_to_proto(o) for o in page], next_page_token=next_token, total=len(rows),
            ruleset=pb.RulesetRef(revision=bundle.revision, content_hash=bundle.content_hash),
        )

    def ListModels(self, request: pb.ListModelsRequest, context: grpc.ServicerContext) -> pb.ListModelsResponse:  # noqa: N802
        bundle = self._bundle(context)
        violations = validate_list_models(request)
        if violations:
            _invalid(context, violations)
        return pb.ListModelsResponse(
            models=api.models_matching(bundle.models(), request),
            ruleset=pb.RulesetRef(revision=bundle.revision, content_hash=bundle.content_hash),
        )

    def ListApiOffers(  # noqa: N802
        self, request: pb.ListApiOffersRequest, context: grpc.ServicerContext
    ) -> pb.ListApiOffersResponse:
        bundle = self._bundle(context)
        query, violations = api.api_offer_query_from_proto(request, bundle.book.models)
        if violations:
            _invalid(context, violations)
        rows = bundle.book.api_offers.matching(query)
        page, next_token = paging.page(rows, query, bundle.content_hash)
        if page is None:
            _invalid(context, [("page_token", "is not a token this listing gave (or the rules changed since)")])
        return pb.ListApiOffersResponse(
            offers=[api.api_offer_to_proto(o) for o in page], next_page_token=next_token, total=len(rows),
            ruleset=pb.RulesetRef(revision=bundle.revision, content_hash=bundle.content_hash),
        )

    def _is_admin(self, context: grpc.ServicerContext) -> bool:
        sent = dict(context.invocation_metadata()).get("authorization", "")
        return bool(self.admin_token) and hmac.compare_digest(sent.encode(), f"Bearer {self.admin_token}".encode())

    def GetRuleset(self, request: pb.GetRulesetRequest, context: grpc.ServicerContext) -> pb.RulesetInfo:  # noqa: N802
        return _status_to_proto(self.store.status(), full_path=self._is_admin(context))

    def ReloadRules(  # noqa: N802
        self, request: pb.ReloadRulesRequest, context: grpc.ServicerContext
    ) -> pb.ReloadRulesResponse:
        if not self.admin_token:
            context.abort(grpc.StatusCode.PERMISSION_DENIED,
                          "ReloadRules is off: the server has no admin token (GPU_ADVISOR_ADMIN_TOKEN or "
                          "--admin-token-file); SIGHUP or the folder watcher reload the rules")
        sent = dict(context.invocation_metadata()).get("authorization", "")
        if not hmac.compare_digest(sent.encode(), f"Bearer {self.admin_token}".encode()):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "ReloadRules needs the admin bearer token")
        asked = self.peers.ask_others() if self.peers else None  # they reload while this worker does
        result = self.store.reload()
        response = pb.ReloadRulesResponse(ruleset=_status_to_proto(self.store.status()), reloaded=result.changed)
        if asked is not None:
            # Their reloads take as long as ours (they already ran meanwhile) unless one is stuck behind another
            # reload: wait about one load's timeout, within the caller's deadline, then say who did not report.
            wait = min(self.store.load_timeout + 2, context.time_remaining() - PEER_WAIT_MARGIN_S)
            try:
                others = asked.collect(wait)
            except fanout.SupervisorUnreachable:
                context.abort(grpc.StatusCode.UNAVAILABLE,
                              f"this worker's reload: {'a new version' if result.changed else 'no new version'} "
                              f"(revision {response.ruleset.revision or 'none'}); the other workers could not be "
                              "asked (no answer from the supervisor)")
            response.other_workers.extend(pb.WorkerReload(**vars(o)) for o in others)
        return response


def _health_handlers(health: Health, dispatcher: Dispatcher, watch_cap: StreamCap) -> grpc.GenericRpcHandler:
    """grpc.health.v1 on the loop: Check through the dispatcher (its request read within the time limit, logged
    and counted, never waiting for a worker), Watch under its stream cap."""

    async def watch(requests: Any, context: grpc.aio.ServicerContext) -> Any:
        async for request in requests:  # the one request: read within the time limit by capped_stream
            async for response in health.watch(request, context):
                yield response
            return

    check = dispatcher.unary(HEALTH_CHECK, health.check, health_pb2.HealthCheckRequest.FromString,
                             health_pb2.HealthCheckResponse.SerializeToString, counted=False)
    watch_handler = grpc.stream_stream_rpc_method_handler(
        capped_stream(watch_cap, watch, dispatcher.request_timeout),
        request_deserializer=health_pb2.HealthCheckRequest.FromString,
        response_serializer=health_pb2.HealthCheckResponse.SerializeToString,
    )
    return grpc.method_handlers_generic_handler(HEALTH_SERVICE, {"Check": check, "Watch": watch_handler})


async def _build(store: RuleStore, settings: Limits, addr: str, tls: grpc.ServerCredentials | None,
                 servicer: Servicer, health: Health, options: list[tuple[str, int]],
                 beat_address: str = "") -> tuple[Any, ...]:
    """The grpc.aio server with every handler, bound (not started); created on the loop it will run on."""
    limited = [f"/{api.SERVICE_NAME}/{m.name}" for m in pb.DESCRIPTOR.services_by_name["GpuAdvisor"].methods]
    admission = AdmissionControl(limited, settings.max_concurrent, settings.max_queue)
    # Only the answers need threads: one per running call of each method, plus spares for cancelled answers
    # that have not reached their next stage yet. Waiting calls wait on the loop.
    executor = Workers(len(limited) * settings.max_concurrent + SPARE_WORKERS, thread_name_prefix="rpc")
    dispatcher = Dispatcher(executor, settings.request_timeout, answering.answers(answering.mode_from_env(), executor))
    server = grpc.aio.server(options=options, maximum_concurrent_rpcs=settings.max_calls or None)
    add_servicer(servicer, server, dispatcher, admission)  # bad bytes: INVALID_ARGUMENT
    server.add_generic_rpc_handlers((_health_handlers(health, dispatcher, StreamCap("health Watch", 2,
                                                                                      WATCH_STREAMS_TOTAL)),))
    if settings.reflection:
        cap = StreamCap("reflection", REFLECTION_PER_CONNECTION, settings.max_reflection_streams)
        server.add_generic_rpc_handlers(reflection_handlers(
            (api.SERVICE_NAME, HEALTH_SERVICE, reflection.SERVICE_NAME), cap, settings.stream_idle_timeout))
    try:
        port = server.add_secure_port(addr, tls) if tls else server.add_insecure_port(addr)
        if port and beat_address:
            server.add_insecure_port(beat_address)  # the probe's heartbeat: heartbeat.py
    except RuntimeError:
        port = 0
    return server, port, executor, dispatcher, admission


@dataclass(frozen=True)
class Limits:
    """What one client, or all of them, may hold of the server."""

    max_concurrent: int = DEFAULT_MAX_CONCURRENT
    max_queue: int = DEFAULT_MAX_QUEUE
    max_calls: int = DEFAULT_MAX_CALLS
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    stream_idle_timeout: float = DEFAULT_STREAM_IDLE_TIMEOUT
    max_reflection_streams: int = DEFAULT_MAX_REFLECTION_STREAMS
    reflection: bool = True


def _core_options(shared_port: bool, max_streams: int, max_connections: int, max_connection_age: float,
                  reset_protection: bool = True, max_connection_idle: float = 0) -> list[tuple[str, int]]:
    options: list[tuple[str, int]] = [("grpc.so_reuseport", int(shared_port)),
                                      ("grpc.max_receive_message_length", MAX_REQUEST_BYTES)]
    if max_streams > 0:
        # Core's "overload protection" also counts a connection's streams that ended but are not yet freed (the
        # server's call object outlives the stream a little), and refuses a new stream beyond the cap with
        # RST_STREAM REFUSED_STREAM. That is what holds off HTTP/2 rapid reset (CVE-2023-44487): a client opening
        # and resetting streams in a loop (2-3 million resets in 10 s) left legitimate calls on other
        # connections 1442/1442 and 1266/1266 OK with it on, RSS +4 MB; with it off, 6/171 OK and RSS 80 -> 343
        # MB (make bench BENCH_ARGS=--attack). Counted against the advertised cap alone, the streams still being
        # freed made it refuse well-behaved clients too: a channel with 4 calls in flight and no retries saw
        # 18 of 1,000 Recommend calls and 16% of health checks refused. `grpc.http2.max_deallocating_streams`
        # allows that many ended-but-not-freed streams beside the open ones: 0 refused of 5,000 checks, and a
        # rapid-reset client still holds at most that many (docs/operations.md, Rapid reset).
        options += [("grpc.max_concurrent_streams", max_streams),
                    ("grpc.http.overload_protection", int(reset_protection))]
        if reset_protection:
            options.append(("grpc.http2.max_deallocating_streams", DEALLOCATING_STREAMS))
    if max_connections > 0:
        # Core closes a connection accepted beyond this many at once (the client sees UNAVAILABLE and retries).
        options.append(("grpc.max_allowed_incoming_connections", max_connections))
    if max_connection_age > 0:
        options += [("grpc.max_connection_age_ms", max(1, round(max_connection_age * 1000))),
                    ("grpc.max_connection_age_grace_ms", round(CONNECTION_AGE_GRACE_SECONDS * 1000))]
    if max_connection_idle > 0:
        options.append(("grpc.max_connection_idle_ms", max(1, round(max_connection_idle * 1000))))
    return options


def serve(
    addr: str, rules_dir: str, admin_token: str = "", watch: bool = True,
    poll_seconds: float = 0.5, max_concurrent: int = DEFAULT_MAX_CONCURRENT, max_queue: int = DEFAULT_MAX_QUEUE,
    tls: grpc.ServerCredentials | None = None, shared_port: bool = False, response_cache: int = 0,
    max_streams: int = DEFAULT_MAX_STREAMS, health_addr: str = "", peers: fanout.Peers | None = None,
    max_connection_age: float = DEFAULT_MAX_CONNECTION_AGE, max_connections: int = DEFAULT_MAX_CONNECTIONS,
    max_connection_idle: float = DEFAULT_MAX_CONNECTION_IDLE,
    max_calls: int = DEFAULT_MAX_CALLS, request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    stream_idle_timeout: float = DEFAULT_STREAM_IDLE_TIMEOUT,
    max_reflection_streams: int = DEFAULT_MAX_REFLECTION_STREAMS, reflection_on: bool = True,
    probe_stale_seconds: float = STALE_SECONDS, reset_protection: bool = True, state_dir: str = "",
    builtin_rules: str | Path = BUILTIN_RULES, settle_seconds: float | None = None,
    builtin_copy: str | Path = BUILTIN_COPY,
) -> tuple[AdvisorServer, int, RuleStore]:
    """Start serving and return (server, bound port, store). Health stays NOT_SERVING until rules load.

    Each GpuAdvisor method runs at most `max_concurrent` calls with `max_queue` more waiting (on the event loop:
    a waiting call costs no thread). `tls`: plaintext when None.
    `shared_port`: one of `--processes N` workers (SO_REUSEPORT); otherwise a busy port fails here.
    `response_cache`: keep that many Recommend answers for repeated identical requests (0 = off).
    `health_addr`: also answer grpc.health.v1 (only) on this host:port, plaintext, from a process of its own
    that mirrors this server's health as long as the server answers its own health calls
    (service/serving/probe.py, service/serving/heartbeat.py).
    `peers`: a `--processes N` worker's channel to its supervisor; ReloadRules then reloads every worker.
    `max_connection_age`: seconds before a client connection is asked to move to a new one (0 = never);
    `max_connection_idle`: seconds a connection may stay open with no call (0 = for ever).
    `max_connections`, `max_calls`: connections and calls (streams) open at once on the whole server (0 = no cap);
    `request_timeout`: seconds a call may take to send its request; `stream_idle_timeout`: a silent reflection
    stream is closed after it; `max_reflection_streams`: reflection streams open at once in all;
    `reflection_on`: False leaves server reflection out. `reset_protection`: Core refuses a connection's streams
    beyond `max_streams` until the ended ones are freed (HTTP/2 rapid reset).
    `state_dir`: every version activated is saved there, and a start whose rules folder is refused serves the
    last saved one, flagged; with none saved (or no state folder), `builtin_rules`, flagged (rulebook/last_good.py);
    when that is the refused folder itself, `builtin_copy`, the vetted copy made at install (rulebook/builtin.py).
    `settle_seconds`: the watched folder must hold still that long before a change is loaded (None: the default).
    """
    # The rules-checking helper is spawned before gRPC starts its threads (service/rulebook/vetting.py).
    store = RuleStore(rules_dir, poll_seconds=poll_seconds, vetter=vetting.shared(), settle_seconds=settle_seconds)
    store.self_test = self_test(store.rules_dir)
    runner = LoopThread()
    health = Health(runner.loop)
    for name in ("", api.SERVICE_NAME):
        health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)

    def mark_serving(_bundle: object) -> None:
        for name in ("", api.SERVICE_NAME):
            health.set(name, health_pb2.HealthCheckResponse.SERVING)

    store.on_activate.append(mark_serving)
    store.on_activate.append(lambda bundle: metrics.rules_activated(bundle.revision))
    store.on_reject.append(lambda _error: metrics.rules_rejected())
    limits = Limits(max_concurrent, max_queue, max_calls, request_timeout, stream_idle_timeout,
                    max_reflection_streams, reflection_on)
    servicer = Servicer(store, admin_token, peers)
    # The served Recommend hands the dispatcher the reply's bytes (dispatch.py sends bytes as they are): encoded
    # once, stored in the response cache as they are and sent again from it without being decoded and encoded.
    recommend: Any = servicer.recommend_encoded
    if response_cache > 0:
        recommend = cache.ResponseCache(response_cache).wrap(store, recommend, encoded=True)
    servicer.Recommend = rules_flag.flag_newer_rules(store, recommend)  # type: ignore[method-assign]
    options = _core_options(shared_port, max_streams, max_connections, max_connection_age, reset_protection,
                            max_connection_idle)
    beat = heartbeat.SelfCheck() if health_addr else None
    server, port, executor, dispatcher, admission = runner.run(
        _build(store, limits, addr, tls, servicer, health, options, beat.address if beat else ""))
    probe = None
    try:
        if port == 0:
            raise processes.BindError(f"cannot bind {addr}")
        if health_addr:
            probe = ProbeProcess(health_addr, health, ("", api.SERVICE_NAME), shared_port,
                                 stale_seconds=probe_stale_seconds, beat_check=beat)
            store.on_activate.append(lambda _bundle: probe.send())
    except processes.BindError:
        log.error("bind_failed", addr=health_addr if port else addr,
                  hint="address in use or not local; --processes N shares a port")
        runner.close()
        store.close()
        if beat is not None:
            beat.close()
        raise
    if peers is not None:
        peers.start(store)
    saved = LastGood(state_dir) if state_dir else None
    if saved is not None:
        store.on_activate.append(lambda bundle: saved.save(store.rules_dir, bundle.content_hash))
    result = store.reload()
    if not result.ok:
        log.error("rules_invalid_at_start", problems=list(result.problems)[:50], rules=rules_dir)
        _start_on_fallback(store, saved, Path(builtin_rules), Path(builtin_copy))
    runner.run(server.start())
    if watch:
        store.start_watching()
    log.info("serving", addr=addr, port=port, rules=rules_dir, revision=store.status().revision or None,
             tls=tls is not None, health_port=probe.port if probe else None,
             admin=bool(admin_token), max_concurrent=max_concurrent, max_queue=max_queue, max_streams=max_streams,
             max_connection_age=max_connection_age, max_connection_idle=max_connection_idle,
             max_connections=max_connections, max_calls=max_calls,
             request_timeout=request_timeout, reflection=reflection_on)
    return AdvisorServer(server, runner, executor, dispatcher.inflight, health, admission, probe,
                         on_stopped=beat.close if beat else None), port, store


def _start_on_fallback(store: RuleStore, saved: LastGood | None, builtin: Path, copy: Path) -> None:
    """The rules folder's version was refused at start: serve the last version saved in the state folder, or
    the rules shipped with the server, or (when the refused folder is the shipped one: `make run`, a container's
    rules mounted over /app/rules) the vetted copy made at install, rather than nothing (answers say newer rules
    were rejected; GetRuleset's `fallback` says which)."""
    last = saved.latest() if saved is not None else None
    if last is not None and store.start_on_fallback(last, f"the last good version saved in {saved.root}"):
        return
    for folder, kind in ((builtin, f"the rules shipped with the server ({builtin})"), (copy, describe(copy))):
        if folder.is_dir() and folder.resolve() != store.rules_dir.resolve() and store.start_on_fallback(folder, kind):
            return
    log.error("rules_no_fallback", rules=str(store.rules_dir), builtin_copy=str(copy),
              hint="no saved, shipped or built-in copy of the rules could be served: run `python -m "
                   "service.rulebook.builtin` (make dev) to make the built-in copy")


def _wait_for(stop: threading.Event) -> None:
    """Block the main thread until a signal handler sets `stop`.

    Not a plain `stop.wait()`: with calls in flight that sometimes never saw SIGTERM (about 1 run in 5 of the
    drain test, the handler never ran). Python runs handlers on the main thread only, and a signal the kernel
    gives to a busy worker thread does not interrupt the main thread's lock wait. The wake-up fd is written
    whichever thread takes the signal, so select() returns and the handler runs at once.
    """
    wake_r, wake_w = socket.socketpair()
    wake_w.setblocking(False)
    previous = signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
    try:
        while not stop.is_set():
            ready, _, _ = select.select([wake_r], [], [], 1.0)
            if ready:
                wake_r.recv(4096)  # the signal numbers; the handlers themselves run as this loop goes on
    finally:
        signal.set_wakeup_fd(previous)
        wake_r.close()
        wake_w.close()


def main(argv: list[str] | None = None) -> int:
    args, options = parse_args(argv)
    configure(args.log_level, pid=args.shared_port or args.processes > 1)
    if args.processes > 1:
        return processes.supervise(args.processes, args.addr, sys.argv[1:] if argv is None else argv,
                                   args.metrics_addr, args.health_addr)
    peers = fanout.Peers.from_fd(args.supervisor_fd) if args.supervisor_fd is not None else None
    interpreter.set_switch_interval(args.switch_interval_ms)
    try:
        server, _port, store = serve(args.addr, args.rules, watch=not args.no_watch, shared_port=args.shared_port,
                                     response_cache=args.response_cache, peers=peers, **options)
    except processes.BindError:
        return 1
    if args.metrics_addr:
        log.info("metrics", port=metrics.serve_metrics(args.metrics_addr))
    if not args.no_gc_freeze:
        refreezer = interpreter.Refreezer()
        store.on_activate.append(refreezer.schedule)
        took = interpreter.refreeze()  # the version serve() activated; later ones on the refreezer's thread
        log.info("gc_frozen", objects=interpreter.frozen(), ms=round(took, 1))

    def reload_on_hup() -> None:
        log.info("sighup_reload")
        threading.Thread(target=store.reload, name="sighup-reload", daemon=True).start()

    stop = stop_on_signals(reload_on_hup, log)
    _wait_for(stop)
    server.drain(args.grace_seconds)
    if peers is not None:
        peers.close()
    store.close()
    log.info("stopped")
    return 0
