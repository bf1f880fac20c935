"""`gpu-advisor mcp --transport http`: who may call the MCP server over HTTP.

On loopback (the default, 127.0.0.1:8765) the MCP SDK's DNS-rebinding protection checks Host and Origin. Off
loopback (`--listen 0.0.0.0:PORT`) any host could call every tool and open sessions without end (2,000
initialize calls kept 2,000 sessions: 96 -> 174 MB). So there:
- a bearer token is required (GPU_ADVISOR_MCP_TOKEN, or a file: `--token-file` / GPU_ADVISOR_MCP_TOKEN_FILE; never
  a flag's value, which `ps` shows); the server refuses to start off loopback without one;
- Host and Origin are checked against allow-lists: `--allowed-hosts` and `--allowed-origins`, or by default this
  machine's names and addresses (a request naming another host is a DNS-rebinding or misrouted one: 421/403);
- sessions are capped (`--max-sessions`, 503 beyond), one client may hold `--sessions-per-client` of them (429
  beyond), a session that never called a tool is closed after `--unused-session-seconds` and any other after
  `--session-idle-seconds` (service/frontends/mcp_sessions.py);
- a client is its connection's address: `X-Forwarded-For` is believed only from the proxies listed in
  `--trusted-proxies` (none by default), so no caller names its own client identity.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..serving.credentials import ConfigError, read_secret_file
from .mcp_sessions import DEFAULT_PER_CLIENT, DEFAULT_UNUSED_SECONDS

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
    sessions_per_client: int = DEFAULT_PER_CLIENT
    unused_session_seconds: float = DEFAULT_UNUSED_SECONDS
    trusted_proxies: tuple[str, ...] = ()  # addresses (or networks) whose X-Forwarded-For names the client


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
    if (access.max_sessions < 1 or access.session_idle_seconds <= 0 or access.sessions_per_client < 1
            or access.unused_session_seconds <= 0):
        raise ConfigError("--max-sessions and --sessions-per-client must be at least 1, --session-idle-seconds and "
                          "--unused-session-seconds above 0")
    for proxy in access.trusted_proxies:
        try:
            ipaddress.ip_network(proxy.strip("[]"), strict=False)
        except ValueError:
            raise ConfigError(f"--trusted-proxies: {proxy!r} is not an IP address or network (e.g. 10.0.0.5 or "
                              "10.1.0.0/16)") from None


def machine_names(host: str) -> tuple[str, ...]:
    """The names a request to this machine may carry in Host: its host names and addresses, and the listening
    address when it is a specific one (not 0.0.0.0 or ::)."""
    names = {socket.gethostname(), socket.getfqdn(), "localhost", "127.0.0.1", "[::1]"}
    with contextlib.suppress(OSError):
        names.update(socket.gethostbyname_ex(socket.gethostname())[2])
    if host and host not in ("0.0.0.0", "::"):
        names.add(f"[{host}]" if ":" in host else host)
    return tuple(sorted(n for n in names if n))


def transport_security(host: str, access: HttpAccess) -> Any:
    """Host and Origin checks, always on: the allow-lists given, else loopback names on loopback and this
    machine's names elsewhere (a wrong Host then gets 421 and a wrong Origin 403, token or not)."""
    from mcp.server.transport_security import TransportSecuritySettings

    if is_loopback(host):
        default_hosts, default_origins = LOOPBACK_HOSTS, LOOPBACK_ORIGINS
    else:
        names = machine_names(host)
        default_hosts = tuple(f"{n}:*" for n in names) + names
        default_origins = tuple(f"{scheme}://{n}{port}" for n in names for scheme in ("http", "https")
                                for port in ("", ":*"))
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(access.allowed_hosts or default_hosts),
        allowed_origins=list(access.allowed_origins or default_origins),
    )


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
        sessions_per_client=args.sessions_per_client, unused_session_seconds=args.unused_session_seconds,
        trusted_proxies=listed(args.trusted_proxies),
    )


def add_flags(parser: Any) -> None:
    env = os.environ.get
    parser.add_argument("--token-file", metavar="PATH", default=env("GPU_ADVISOR_MCP_TOKEN_FILE"),
                        help="file holding the bearer token HTTP callers must send (env GPU_ADVISOR_MCP_TOKEN_FILE; "
                             f"or the token itself in env {TOKEN_ENV}); required off loopback")
    parser.add_argument("--allowed-hosts", metavar="LIST", default=env("GPU_ADVISOR_MCP_ALLOWED_HOSTS", ""),
                        help="comma-separated Host headers accepted, e.g. 'mcp.example.com:*' (env "
                             "GPU_ADVISOR_MCP_ALLOWED_HOSTS; default: loopback names on loopback, else this "
                             "machine's names and addresses)")
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
    parser.add_argument("--sessions-per-client", type=int, metavar="N",
                        default=int(env("GPU_ADVISOR_MCP_SESSIONS_PER_CLIENT", str(DEFAULT_PER_CLIENT))),
                        help="MCP sessions one client (address) may hold at once; more get 429 (env "
                             "GPU_ADVISOR_MCP_SESSIONS_PER_CLIENT, default %(default)s)")
    parser.add_argument("--unused-session-seconds", type=float, metavar="S",
                        default=float(env("GPU_ADVISOR_MCP_UNUSED_SESSION_SECONDS", str(DEFAULT_UNUSED_SECONDS))),
                        help="a session that never called a tool is closed after this long idle (env "
                             "GPU_ADVISOR_MCP_UNUSED_SESSION_SECONDS, default %(default)s)")
    parser.add_argument("--trusted-proxies", metavar="LIST", default=env("GPU_ADVISOR_MCP_TRUSTED_PROXIES", ""),
                        help="comma-separated addresses or networks of the proxies in front (e.g. 10.0.0.5,"
                             "10.1.0.0/16) whose X-Forwarded-For names the client the session share counts; "
                             "from anyone else it is ignored (env GPU_ADVISOR_MCP_TRUSTED_PROXIES; default none)")
