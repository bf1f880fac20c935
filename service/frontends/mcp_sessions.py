"""MCP over HTTP: what one client may hold of the session cap (issue 26).

The MCP SDK caps sessions in all (`--max-sessions`) and closes a session idle for `--session-idle-seconds`
(600 s). Alone, that let one client lock every other out: 100 initialize POSTs held the cap for 600 s, and each
later client heard 503. `SessionGuard` sits in front of the SDK's app and adds:
- a per-client share: a client (its address: the bearer token is one for all) may hold `per_client` sessions;
  one more initialize from it hears 429, while other clients still open theirs;
- a short life for sessions that never called a tool: one idle `unused_seconds` (tens of seconds) is closed,
  through the protocol itself (a DELETE for the session, as its client would send), before a new one is counted.
Sessions that called a tool keep the SDK's idle time.

A session counts from the moment its initialize is admitted, not from when its answer starts (issue 38): the SDK
awaits before it answers, so 300 initialize POSTs sent at once all passed a check that only counted answered
sessions, and one address held 99. The check and the reservation happen with no await between them (one event
loop), and the reservation becomes the session when the answer names it, or is given back when it does not.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

log = structlog.get_logger("gpu_advisor.mcp")

SESSION_HEADER = b"mcp-session-id"
DEFAULT_PER_CLIENT = 10
DEFAULT_UNUSED_SECONDS = 30.0
MAX_INSPECTED_BODY = 1 << 20  # a tools/call is found in bodies up to this size (the SDK refuses over 4 MiB)
KEPT_HEADERS = (b"host", b"origin", b"mcp-protocol-version")  # what a DELETE for the session repeats

Asgi = Callable[[dict[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


@dataclass
class _Session:
    client: str
    headers: list[tuple[bytes, bytes]]
    last_seen: float
    used: bool = False  # called a tool
    in_flight: int = 0
    scope: dict[str, Any] = field(default_factory=dict)


class SessionGuard:
    """ASGI middleware in front of the SDK's streamable HTTP app. `idle_seconds` is the SDK's own idle time (a
    session it has closed is forgotten here too); `clock` is for tests."""

    def __init__(self, app: Asgi, per_client: int = DEFAULT_PER_CLIENT, unused_seconds: float = DEFAULT_UNUSED_SECONDS,
                 idle_seconds: float = 600.0, clock: Callable[[], float] = time.monotonic,
                 max_sessions: int | None = None):
        self.app, self.per_client, self.clock = app, per_client, clock
        self.unused_seconds, self.idle_seconds = min(unused_seconds, idle_seconds), idle_seconds
        self.max_sessions = max_sessions
        self.sessions: dict[str, _Session] = {}
        self.admitting: dict[str, int] = {}  # client → initialize requests admitted, not yet answered
        self.closed_unused = 0

    def held_by(self, client: str) -> int:
        """Sessions the client holds, counting those admitted and not yet answered."""
        return sum(1 for s in self.sessions.values() if s.client == client) + self.admitting.get(client, 0)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self._sweep()
        client = (scope.get("client") or ("",))[0] or ""
        sent_id = dict(scope.get("headers") or ()).get(SESSION_HEADER)
        if sent_id is None:
            await self._open(scope, receive, send, client)
            return
        session = self.sessions.get(sent_id.decode("latin-1"))
        if session is None:
            await self.app(scope, receive, send)  # unknown or closed: the SDK answers 404
            return
        if scope.get("method") == "POST":
            receive = await self._note_tool_calls(scope, receive, session)
        session.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            session.in_flight -= 1
            session.last_seen = self.clock()
            if scope.get("method") == "DELETE":
                self.sessions.pop(sent_id.decode("latin-1"), None)

    async def _open(self, scope: dict[str, Any], receive: Any, send: Any, client: str) -> None:
        if scope.get("method") != "POST":
            await self.app(scope, receive, send)  # no session is opened but by a POST: the SDK answers
            return
        # From this check to the reservation below nothing awaits: no other request can pass in between.
        if self.held_by(client) >= self.per_client:
            log.warning("mcp_session_share_full", client=client, sessions=self.per_client)
            await _refuse(send, 429, f"this client holds {self.per_client} MCP sessions already (the share of one "
                                     "client); close one (DELETE) or reuse it")
            return
        if self.max_sessions is not None and len(self.sessions) + sum(self.admitting.values()) >= self.max_sessions:
            log.warning("mcp_sessions_full", sessions=self.max_sessions)
            await _refuse(send, 503, f"the server holds {self.max_sessions} MCP sessions already; try again later")
            return
        self.admitting[client] = self.admitting.get(client, 0) + 1
        reserved = True
        headers = [(k, v) for k, v in scope.get("headers") or () if k in KEPT_HEADERS]

        def release() -> None:
            nonlocal reserved
            if reserved:
                reserved = False
                left = self.admitting.get(client, 1) - 1
                if left > 0:
                    self.admitting[client] = left
                else:
                    self.admitting.pop(client, None)

        async def noting_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                if message.get("status", 500) < 300:
                    for key, value in message.get("headers") or ():
                        if key.lower() == SESSION_HEADER:
                            self.sessions[value.decode("latin-1")] = _Session(client, headers, self.clock(),
                                                                               scope=dict(scope))
                release()  # the reservation is now the session, or there is none
            await send(message)

        try:
            await self.app(scope, receive, noting_send)
        finally:
            release()

    async def _note_tool_calls(self, scope: dict[str, Any], receive: Any, session: _Session) -> Any:
        """Read the request body (small ones) to see whether it calls a tool; → a receive that replays it."""
        length = dict(scope.get("headers") or ()).get(b"content-length", b"")
        if not length.isdigit() or int(length) > MAX_INSPECTED_BODY:
            return receive
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return _replay([*chunks, message], receive)
            chunks.append(message)
            more = message.get("more_body", False)
        try:
            body = json.loads(b"".join(m.get("body", b"") for m in chunks))
        except ValueError:
            body = None
        calls = body if isinstance(body, list) else [body]
        if any(isinstance(c, dict) and c.get("method") == "tools/call" for c in calls):
            session.used = True
        return _replay(chunks, receive)

    async def _sweep(self) -> None:
        """Forget sessions the SDK closed for idleness; close those that never called a tool and sat idle."""
        now = self.clock()
        for sid, session in list(self.sessions.items()):
            if session.in_flight:
                continue
            idle = now - session.last_seen
            if idle > self.idle_seconds:
                self.sessions.pop(sid, None)
            elif not session.used and idle > self.unused_seconds:
                self.sessions.pop(sid, None)
                self.closed_unused += 1
                await self._delete(sid, session)

    async def _delete(self, sid: str, session: _Session) -> None:
        scope = {**session.scope, "method": "DELETE", "query_string": b"",
                 "headers": [*session.headers, (SESSION_HEADER, sid.encode("latin-1"))]}

        async def nothing() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(_message: dict[str, Any]) -> None:
            return None

        try:
            await self.app(scope, nothing, discard)
        except Exception:  # noqa: BLE001 - a session that is already gone is no error here
            log.warning("mcp_session_close_failed", exc_info=True)
        log.info("mcp_session_closed_unused", client=session.client, idle_limit_s=self.unused_seconds)


def _replay(messages: list[dict[str, Any]], receive: Any) -> Any:
    pending = list(messages)

    async def replay() -> dict[str, Any]:
        return pending.pop(0) if pending else await receive()

    return replay


async def _refuse(send: Any, status: int, why: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": why}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"retry-after", b"30")]})
    await send({"type": "http.response.body", "body": body})
