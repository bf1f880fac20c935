"""`gpu-advisor mcp --transport http`: who may call the MCP server over HTTP.

On loopback (the default, 127.0.0.1:8765) the MCP SDK's DNS-rebinding protection checks Host and Origin. Off
loopback (`--listen 0.0.0.0:PORT`) any host could call every tool and open sessions without end (2,000
initialize calls kept 2,000 sessions: 96 -> 174 MB). So there:
- a bearer token is required (GPU_ADVISOR_MCP_TOKEN, or a file: `--token-file` / GPU_ADVISOR_MCP_TOKEN_FILE; never
  a flag's value, which `ps` shows); the server refuses to start off loopback without one;
- Host and Origin are checked against allow-lists when given (`--allowed-hosts`, `--allowed-origins`);
- sessions are capped (`--max-sessions`, 503 beyond) and a session idle for `--session-idle-seconds` is closed.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..serving.credentials import ConfigError, read_secret_file

TOKEN_ENV = "GPU_ADVISOR_MCP_TOKEN"
DEFAULT_MAX_SESSIONS = 100
DEFAULT_SESSION_IDLE_SECONDS = 600.0
LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
LOOPBACK_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")


@dataclass(frozen=True)
class HttpAccess:
    token: str = ""
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    max_sessions: int = DEFAULT_MAX_SESSIONS
    session_idle_seconds: float = DEFAULT_SESSION_IDLE_SECONDS


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_from(env: Mapping[str, str], token_file: str | None) -> str:
    from_env = env.get(TOKEN_ENV, "").strip()
    if token_file:
        if from_env:
            raise ConfigError(f"the MCP token is set twice: {TOKEN_ENV} and --token-file; keep one")
        return read_secret_file(token_file, "MCP token file").decode("utf-8").strip()
    return from_env


def check_access(host: str, access: HttpAccess) -> None:
    """Refuse a setting that would leave the MCP server open to other hosts."""
    if not is_loopback(host) and not access.token:
        raise ConfigError(f"MCP over HTTP on {host} (not loopback) needs a bearer token: set {TOKEN_ENV} or "
                          "--token-file (env GPU_ADVISOR_MCP_TOKEN_FILE)")
    if access.max_sessions < 1 or access.session_idle_seconds <= 0:
        raise ConfigError("--max-sessions must be at least 1 and --session-idle-seconds above 0")


def transport_security(host: str, access: HttpAccess) -> Any:
    from mcp.server.transport_security import TransportSecuritySettings

    if access.allowed_hosts or access.allowed_origins:
        loop = is_loopback(host)
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=list(access.allowed_hosts or (LOOPBACK_HOSTS if loop else ())),
            allowed_origins=list(access.allowed_origins or (LOOPBACK_ORIGINS if loop else ())),
        )
    if is_loopback(host):
        return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=list(LOOPBACK_HOSTS),
                                         allowed_origins=list(LOOPBACK_ORIGINS))
    return None  # off loopback without lists: the token is the gate (the SDK checks no Host for other addresses)


Asgi = Callable[[dict[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


class BearerToken:
    """ASGI middleware: every HTTP request needs `Authorization: Bearer <token>`, else 401."""

    def __init__(self, app: Asgi, token: str):
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            sent = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(sent, self._expected):
                body = json.dumps({"error": "a bearer token is required (Authorization: Bearer ...)"}).encode()
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b'Bearer realm="gpu-advisor-mcp"'),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def access_from_args(args: Any, env: Mapping[str, str] = os.environ) -> HttpAccess:
    def listed(value: str | None) -> tuple[str, ...]:
        return tuple(x.strip() for x in (value or "").split(",") if x.strip())

    return HttpAccess(
        token=token_from(env, args.token_file),
        allowed_hosts=listed(args.allowed_hosts), allowed_origins=listed(args.allowed_origins),
        max_sessions=args.max_sessions, session_idle_seconds=args.session_idle_seconds,
    )


def add_flags(parser: Any) -> None:
    env = os.environ.get
    parser.add_argument("--token-file", metavar="PATH", default=env("GPU_ADVISOR_MCP_TOKEN_FILE"),
                        help="file holding the bearer token HTTP callers must send (env GPU_ADVISOR_MCP_TOKEN_FILE; "
                             f"or the token itself in env {TOKEN_ENV}); required off loopback")
    parser.add_argument("--allowed-hosts", metavar="LIST", default=env("GPU_ADVISOR_MCP_ALLOWED_HOSTS", ""),
                        help="comma-separated Host headers accepted, e.g. 'mcp.example.com:*' (env "
                             "GPU_ADVISOR_MCP_ALLOWED_HOSTS; loopback names on loopback)")
    parser.add_argument("--allowed-origins", metavar="LIST", default=env("GPU_ADVISOR_MCP_ALLOWED_ORIGINS", ""),
                        help="comma-separated Origin headers accepted (env GPU_ADVISOR_MCP_ALLOWED_ORIGINS)")
    parser.add_argument("--max-sessions", type=int, metavar="N",
                        default=int(env("GPU_ADVISOR_MCP_MAX_SESSIONS", str(DEFAULT_MAX_SESSIONS))),
                        help="MCP sessions open at once; more get 503 (env GPU_ADVISOR_MCP_MAX_SESSIONS, default "
                             "%(default)s)")
    parser.add_argument("--session-idle-seconds", type=float, metavar="S",
                        default=float(env("GPU_ADVISOR_MCP_SESSION_IDLE_SECONDS", str(DEFAULT_SESSION_IDLE_SECONDS))),
                        help="a session with no request for this long is closed (env "
                             "GPU_ADVISOR_MCP_SESSION_IDLE_SECONDS, default %(default)s)")
