"""The server's command line: every flag, its environment variable and default, and the serve() keyword
arguments they set (a bad setting ends with a usage error naming the flag)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..rulebook.store import DEFAULT_SETTLE_SECONDS
from . import cache, fanout, interpreter, processes
from .credentials import ConfigError, admin_token, server_credentials
from .probe import STALE_SECONDS

DEFAULT_ADDR = "127.0.0.1:50051"
# Advice is pure Python and holds the GIL, so a second call running at once only competes for it, and every
# extra running thread competes with gRPC's loop that picks up new calls (health checks included): under h2load
# one running call per method answered 6-13% more Recommend calls a second than 2 or 4, with an equal or lower
# health p99 under a flood (make bench; docs/benchmarks.md). Scale with --processes, not threads. A short queue
# absorbs bursts, and beyond it a caller hears RESOURCE_EXHAUSTED at once rather than waiting seconds.
DEFAULT_MAX_CONCURRENT = 1
DEFAULT_MAX_QUEUE = 32
DEFAULT_GRACE_SECONDS = 10.0
# HTTP/2 streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS, enforced by gRPC Core;
# 0 = no cap). A gRPC client keeps the excess waiting on its side, so a flood on one connection never reaches
# Python, whose one loop takes arrived calls in order: a probe's Check, on a connection of its own, no longer
# waits behind hundreds of them. 2 is a running call and a queued one: with one Recommend running at a time,
# more open streams per connection add no throughput, only calls for Python to juggle (docs/operations.md, Overload).
DEFAULT_MAX_STREAMS = 2
# Streams of a connection that ended but whose call the server has not freed yet, allowed beside the open ones
# before the rapid-reset protection refuses new streams (server.py, _core_options).
DEALLOCATING_STREAMS = 16
# A client's channel is one long-lived HTTP/2 connection, so without an end to it the calls of a client stay on
# the pod (or `--processes` worker) it first reached: pods the autoscaler adds get no traffic from the clients
# already running, and a worker that got more connections keeps them. After this many seconds (Core adds +-10%
# jitter) the server sends GOAWAY; calls in flight finish within the grace and new ones go over a new
# connection, which a DNS-resolving client opens to a freshly resolved address (gRPC A9: server-side
# connection management).
DEFAULT_MAX_CONNECTION_AGE = 300.0
CONNECTION_AGE_GRACE_SECONDS = 30.0
# A connection with no call open this long gets GOAWAY and is closed (a client reconnects when it next calls):
# connections opened and left idle do not hold --max-connections against newcomers for a whole connection age.
DEFAULT_MAX_CONNECTION_IDLE = 120.0
MAX_CONNECTION_AGE = (2**31 - 1) // 1000  # Core takes the age in milliseconds, as a 32-bit int
# Connections and calls (HTTP/2 streams) open at once on the whole server; 0 = no cap. Beyond --max-calls a new
# call hears RESOURCE_EXHAUSTED at once; beyond --max-connections Core closes the new connection. Generous next
# to what admission lets run (one running and 32 waiting per method): they bound what idle clients can hold.
DEFAULT_MAX_CONNECTIONS = 1000
DEFAULT_MAX_CALLS = 500
# A call whose request message has not arrived this many seconds after its headers is ended (a unary request
# is a few KB, sent with the headers); a reflection stream silent this long is closed.
DEFAULT_REQUEST_TIMEOUT = 10.0
DEFAULT_STREAM_IDLE_TIMEOUT = 30.0
DEFAULT_MAX_REFLECTION_STREAMS = 16
REFLECTION_PER_CONNECTION = 2


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def add_serving_flags(parser: argparse.ArgumentParser) -> None:
    """Admission, drain, admin token and TLS flags; each defaults to its environment variable."""
    env = os.environ.get
    parser.add_argument("--max-concurrent", type=int, metavar="N",
                        default=env("GPU_ADVISOR_MAX_CONCURRENT", str(DEFAULT_MAX_CONCURRENT)),
                        help="calls of one GpuAdvisor method running at once (env GPU_ADVISOR_MAX_CONCURRENT, "
                             "default %(default)s)")
    parser.add_argument("--max-queue", type=int, metavar="N",
                        default=env("GPU_ADVISOR_MAX_QUEUE", str(DEFAULT_MAX_QUEUE)),
                        help="calls of one method waiting for a slot; more get RESOURCE_EXHAUSTED at once "
                             "(env GPU_ADVISOR_MAX_QUEUE, default %(default)s)")
    parser.add_argument("--max-streams", type=int, metavar="N",
                        default=env("GPU_ADVISOR_MAX_STREAMS", str(DEFAULT_MAX_STREAMS)),
                        help="HTTP/2 streams open at once on one client connection; more wait in the client "
                             "(env GPU_ADVISOR_MAX_STREAMS, default %(default)s; 0 = no cap)")
    parser.add_argument("--max-connection-age", type=float, metavar="S",
                        default=env("GPU_ADVISOR_MAX_CONNECTION_AGE", str(DEFAULT_MAX_CONNECTION_AGE)),
                        help="seconds before a client connection is asked (GOAWAY) to reconnect, so clients "
                             "spread over pods and workers added since (env GPU_ADVISOR_MAX_CONNECTION_AGE, "
                             "default %(default)s; 0 = never)")
    parser.add_argument("--max-connection-idle", type=float, metavar="S",
                        default=env("GPU_ADVISOR_MAX_CONNECTION_IDLE", str(DEFAULT_MAX_CONNECTION_IDLE)),
                        help="seconds a client connection may stay open with no call before it is closed; the "
                             "client reconnects when it next calls (env GPU_ADVISOR_MAX_CONNECTION_IDLE, default "
                             "%(default)s; 0 = never)")
    parser.add_argument("--max-connections", type=int, metavar="N",
                        default=env("GPU_ADVISOR_MAX_CONNECTIONS", str(DEFAULT_MAX_CONNECTIONS)),
                        help="client connections open at once on the server; a connection beyond it is closed "
                             "(env GPU_ADVISOR_MAX_CONNECTIONS, default %(default)s; 0 = no cap)")
    parser.add_argument("--max-calls", type=int, metavar="N",
                        default=env("GPU_ADVISOR_MAX_CALLS", str(DEFAULT_MAX_CALLS)),
                        help="calls (streams) open at once on the whole server, waiting ones and streams "
                             "included; more hear RESOURCE_EXHAUSTED (env GPU_ADVISOR_MAX_CALLS, default "
                             "%(default)s; 0 = no cap)")
    parser.add_argument("--request-timeout", type=float, metavar="S",
                        default=env("GPU_ADVISOR_REQUEST_TIMEOUT", str(DEFAULT_REQUEST_TIMEOUT)),
                        help="seconds a call may take to send its request message after its headers; then "
                             "DEADLINE_EXCEEDED (env GPU_ADVISOR_REQUEST_TIMEOUT, default %(default)s)")
    parser.add_argument("--stream-idle-timeout", type=float, metavar="S",
                        default=env("GPU_ADVISOR_STREAM_IDLE_TIMEOUT", str(DEFAULT_STREAM_IDLE_TIMEOUT)),
                        help="a reflection stream silent this long is closed (env GPU_ADVISOR_STREAM_IDLE_TIMEOUT, "
                             "default %(default)s)")
    parser.add_argument("--max-reflection-streams", type=int, metavar="N",
                        default=env("GPU_ADVISOR_MAX_REFLECTION_STREAMS", str(DEFAULT_MAX_REFLECTION_STREAMS)),
                        help=f"reflection streams open at once on the server ({REFLECTION_PER_CONNECTION} per "
                             "connection); more hear RESOURCE_EXHAUSTED (env GPU_ADVISOR_MAX_REFLECTION_STREAMS, "
                             "default %(default)s)")
    parser.add_argument("--no-rapid-reset-protection", action="store_true",
                        default=env_flag("GPU_ADVISOR_NO_RAPID_RESET_PROTECTION"),
                        help="let a connection open new streams while its ended ones are not yet freed: no refused "
                             "streams for clients with more calls in flight than --max-streams, but no defence "
                             "against HTTP/2 rapid reset (env GPU_ADVISOR_NO_RAPID_RESET_PROTECTION=1)")
    parser.add_argument("--switch-interval-ms", type=float, metavar="MS",
                        default=env("GPU_ADVISOR_SWITCH_INTERVAL_MS", str(interpreter.DEFAULT_SWITCH_INTERVAL_MS)),
                        help="how long a thread waiting for Python's GIL (the event loop, behind a running answer) "
                             "waits before asking for it (sys.setswitchinterval; env GPU_ADVISOR_SWITCH_INTERVAL_MS, "
                             f"default %(default)s; above 0, at most {interpreter.MAX_SWITCH_INTERVAL_MS:g})")
    parser.add_argument("--no-gc-freeze", action="store_true", default=env_flag("GPU_ADVISOR_NO_GC_FREEZE"),
                        help="leave the loaded rules in the garbage collector's sight: full collections then walk "
                             "them, pausing calls (env GPU_ADVISOR_NO_GC_FREEZE=1; docs/operations.md)")
    parser.add_argument("--state-dir", metavar="DIR", default=env("GPU_ADVISOR_STATE_DIR", ""),
                        help="keep the last rules version that passed vetting here; a start whose rules folder is "
                             "refused serves it (else the rules shipped with the server), flagged, instead of "
                             "nothing (env GPU_ADVISOR_STATE_DIR; off when empty)")
    parser.add_argument("--rules-settle-seconds", type=float, metavar="S",
                        default=env("GPU_ADVISOR_RULES_SETTLE_SECONDS", str(DEFAULT_SETTLE_SECONDS)),
                        help="the watched rules folder must hold still (same files, sizes and modification times) "
                             "this long before a change is loaded (env GPU_ADVISOR_RULES_SETTLE_SECONDS, default "
                             "%(default)s); publish versions atomically all the same (docs/operations.md)")
    parser.add_argument("--no-reflection", action="store_true",
                        default=env_flag("GPU_ADVISOR_NO_REFLECTION"),
                        help="do not answer server reflection (env GPU_ADVISOR_NO_REFLECTION=1)")
    parser.add_argument("--health-addr", metavar="HOST:PORT", default=env("GPU_ADVISOR_HEALTH_ADDR", ""),
                        help="also answer grpc.health.v1 on this address, plaintext, from a process of its own "
                             "that mirrors this server's health, so probes stay fast while the main port is "
                             "flooded or uses TLS "
                             "(env GPU_ADVISOR_HEALTH_ADDR; off when empty)")
    parser.add_argument("--probe-stale-seconds", type=float, metavar="S",
                        default=env("GPU_ADVISOR_PROBE_STALE_SECONDS", str(STALE_SECONDS)),
                        help="with --health-addr: the probe answers NOT_SERVING once the server has not answered "
                             "its own health call for this long (env GPU_ADVISOR_PROBE_STALE_SECONDS, default "
                             "%(default)s)")
    parser.add_argument("--grace-seconds", type=float, metavar="S",
                        default=env("GPU_ADVISOR_GRACE_SECONDS", str(DEFAULT_GRACE_SECONDS)),
                        help="on SIGTERM/SIGINT, time for accepted calls to finish (env GPU_ADVISOR_GRACE_SECONDS, "
                             "default %(default)s)")
    parser.add_argument("--admin-token-file", metavar="PATH", default=env("GPU_ADVISOR_ADMIN_TOKEN_FILE"),
                        help="file holding the ReloadRules bearer token (env GPU_ADVISOR_ADMIN_TOKEN_FILE; or the "
                             "token itself in env GPU_ADVISOR_ADMIN_TOKEN); neither: ReloadRules is off")
    parser.add_argument("--admin-token", help=argparse.SUPPRESS)  # refused below: argv shows in `ps`
    parser.add_argument("--tls-cert", metavar="PEM", default=env("GPU_ADVISOR_TLS_CERT"),
                        help="server certificate chain: serve TLS (env GPU_ADVISOR_TLS_CERT)")
    parser.add_argument("--tls-key", metavar="PEM", default=env("GPU_ADVISOR_TLS_KEY"),
                        help="its private key (env GPU_ADVISOR_TLS_KEY)")
    parser.add_argument("--tls-client-ca", metavar="PEM", default=env("GPU_ADVISOR_TLS_CLIENT_CA"),
                        help="require client certificates signed by this CA: mTLS (env GPU_ADVISOR_TLS_CLIENT_CA)")


def serving_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Any]:
    """serve() keyword arguments from the flags of `_add_serving_flags`; a bad setting ends with a usage error."""
    if args.admin_token is not None:
        parser.error("--admin-token is not accepted (a flag's value shows in `ps`): set GPU_ADVISOR_ADMIN_TOKEN "
                     "or use --admin-token-file")
    if (args.max_concurrent < 1 or args.max_queue < 0 or args.grace_seconds < 0 or args.max_streams < 0
            or not 0 <= args.max_connection_age <= MAX_CONNECTION_AGE
            or not 0 <= args.max_connection_idle <= MAX_CONNECTION_AGE):
        parser.error("--max-concurrent must be >= 1, --max-queue, --max-streams and --grace-seconds >= 0, "
                     f"--max-connection-age and --max-connection-idle from 0 to {MAX_CONNECTION_AGE}")
    if (args.max_connections < 0 or args.max_calls < 0 or args.request_timeout <= 0
            or args.stream_idle_timeout <= 0 or args.max_reflection_streams < 1 or args.probe_stale_seconds <= 0
            or args.rules_settle_seconds < 0):
        parser.error("--max-connections and --max-calls must be >= 0, --request-timeout, --stream-idle-timeout "
                     "and --probe-stale-seconds > 0, --max-reflection-streams >= 1, --rules-settle-seconds >= 0")
    if not 0 < args.switch_interval_ms <= interpreter.MAX_SWITCH_INTERVAL_MS:
        parser.error(f"--switch-interval-ms must be above 0 and at most {interpreter.MAX_SWITCH_INTERVAL_MS:g}")
    try:
        return {
            "admin_token": admin_token(os.environ, args.admin_token_file),
            "tls": server_credentials(args.tls_cert, args.tls_key, args.tls_client_ca),
            "max_concurrent": args.max_concurrent, "max_queue": args.max_queue, "max_streams": args.max_streams,
            "health_addr": args.health_addr, "max_connection_age": args.max_connection_age,
            "max_connection_idle": args.max_connection_idle,
            "max_connections": args.max_connections, "max_calls": args.max_calls,
            "request_timeout": args.request_timeout, "stream_idle_timeout": args.stream_idle_timeout,
            "max_reflection_streams": args.max_reflection_streams, "reflection_on": not args.no_reflection,
            "reset_protection": not args.no_rapid_reset_protection,
            "probe_stale_seconds": args.probe_stale_seconds, "state_dir": args.state_dir,
            "settle_seconds": args.rules_settle_seconds,
        }
    except ConfigError as err:
        parser.error(str(err))


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, dict[str, Any]]:
    """The command line (and environment) → (args, the serve() keyword arguments they set)."""
    parser = argparse.ArgumentParser(prog="gpu-advisor-server", description="Serve GPU Advisor over gRPC.")
    parser.add_argument("--addr", default=os.environ.get("GPU_ADVISOR_ADDR", DEFAULT_ADDR),
                        help="host:port to listen on (env GPU_ADVISOR_ADDR, default %(default)s)")
    parser.add_argument("--rules", default=os.environ.get("GPU_ADVISOR_RULES", "rules"),
                        help="rules folder (env GPU_ADVISOR_RULES, default %(default)s)")
    parser.add_argument("--no-watch", action="store_true", help="do not watch the rules folder for changes")
    parser.add_argument("--log-level", default=None,
                        help="DEBUG, INFO, WARNING or ERROR (env GPU_ADVISOR_LOG_LEVEL, default INFO)")
    parser.add_argument("--metrics-addr", default=os.environ.get("GPU_ADVISOR_METRICS_ADDR", ""),
                        help="serve Prometheus metrics on host:port (env GPU_ADVISOR_METRICS_ADDR; off when empty)")
    add_serving_flags(parser)
    parser.add_argument("--processes", type=int, default=processes.default_processes(),
                        help=f"worker processes sharing the port (env {processes.ENV}, default 1)")
    parser.add_argument("--shared-port", action="store_true", help=argparse.SUPPRESS)  # set for the workers
    parser.add_argument(fanout.FLAG, type=int, default=None, help=argparse.SUPPRESS)  # the workers' channel
    parser.add_argument("--response-cache", type=int,
                        default=int(os.environ.get(cache.ENV, str(cache.DEFAULT_SIZE)) or 0),
                        help=f"cache this many Recommend answers for identical requests (env {cache.ENV}, default "
                             f"{cache.DEFAULT_SIZE}; 0 = off)")
    args = parser.parse_args(argv)
    if args.processes < 1 or args.response_cache < 0:
        parser.error("--processes must be at least 1 and --response-cache at least 0")
    return args, serving_options(parser, args)
