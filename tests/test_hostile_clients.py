"""Hostile HTTP/2 clients against a real server process on an ephemeral port: idle streams from many connections
(reflection streams that wait, calls that send only their headers), HTTP/2 rapid reset, and the server-wide caps.

Outcomes are counted, never timed: legitimate calls run alongside each attack with generous deadlines, and the
assertions are about how many were answered and what the server did to the attacker's streams.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from service.bench.attacks import REFLECTION, ConnectionFlood, IdleStreams, Legit, RapidReset, rss_mb
from service.wire.api import pb_grpc
from tests.test_server import good_request
from tests.test_serving import health_status, log_events, start_process

SERVING = health_pb2.HealthCheckResponse.SERVING


def stop(proc) -> None:  # noqa: ANN001
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except Exception:  # noqa: BLE001
        proc.kill()
        proc.wait()


def wait_until(predicate, timeout: float = 60.0) -> bool:  # noqa: ANN001
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def legit_round(addr: str, recommends: int = 3, checks: int = 10, also: Callable[[], bool] = lambda: True) -> Legit:
    """Ordinary calls until `recommends` Recommend and `checks` health outcomes are counted (and `also` holds):
    the round ends on counts, never on a duration (a hang guard of 120 s, not a speed claim)."""
    with Legit(addr, good_request(), callers=2, recommend_timeout=20, health_every=0.05, health_timeout=10) as legit:
        counted = wait_until(lambda: legit.recommend.total >= recommends and legit.health.total >= checks and also(),
                             120)
    assert counted, (legit.recommend, legit.health)
    return legit


@pytest.mark.parametrize("kind", ["reflection", "headers"])
def test_idle_streams_from_many_connections_leave_calls_answering(tmp_path: Path, kind: str):
    # 71 connections x 2 idle streams stalled the threaded server (every worker thread held): Recommend and
    # health timed out until the clients left. 200 x 2 here, more than the 142 that did it.
    proc, port, _log = start_process(tmp_path, {})
    try:
        with IdleStreams("127.0.0.1", port, connections=200, streams=2, kind=kind) as idle:
            assert idle.ready.wait(60)
            legit = legit_round(f"127.0.0.1:{port}")
            assert idle.error is None
            assert len(idle.conns) == 200
        assert legit.recommend.ok >= 3 and legit.recommend.ok == legit.recommend.total, legit.recommend
        assert legit.health.ok >= 10 and legit.health.ok == legit.health.total, legit.health
    finally:
        stop(proc)


def test_header_only_and_silent_reflection_streams_are_closed_after_their_timeout(tmp_path: Path):
    proc, port, _log = start_process(tmp_path, {"GPU_ADVISOR_REQUEST_TIMEOUT": "1",
                                                "GPU_ADVISOR_STREAM_IDLE_TIMEOUT": "1"})
    try:
        with IdleStreams("127.0.0.1", port, connections=5, streams=2, kind="headers") as headers, \
                IdleStreams("127.0.0.1", port, connections=2, streams=2, kind="reflection") as reflection:
            # Every stream the server ends is counted once (its trailers or RST_STREAM).
            assert wait_until(lambda: headers.ended_streams >= 10 and reflection.ended_streams >= 4)
            assert headers.error is None and reflection.error is None
    finally:
        stop(proc)


def test_the_server_wide_call_cap_refuses_with_resource_exhausted(tmp_path: Path):
    proc, port, _log = start_process(tmp_path, {"GPU_ADVISOR_MAX_CALLS": "20", "GPU_ADVISOR_REQUEST_TIMEOUT": "60"})
    try:
        # Twice the cap, so it stays full even if a few of these streams are refused on the way in.
        with IdleStreams("127.0.0.1", port, connections=20, streams=2, kind="headers") as idle:
            assert idle.ready.wait(60)
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                def refused() -> bool:
                    try:
                        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
                    except grpc.RpcError as err:
                        return err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                    return False

                assert wait_until(refused)
        # Once the idle streams are gone, calls answer again. The server gives their places back when it sees
        # them close, which may be a moment after the client closed them: refused until then, never another error.
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            def serving() -> bool:
                try:
                    return health_pb2_grpc.HealthStub(channel).Check(
                        health_pb2.HealthCheckRequest(), timeout=10).status == SERVING
                except grpc.RpcError as err:
                    if err.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                        raise
                    return False

            assert wait_until(serving)
    finally:
        stop(proc)


def _health_from_a_new_client(port: int) -> bool:
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        try:
            return health_status(channel) == SERVING
        except grpc.RpcError:
            return False


@pytest.mark.parametrize("idle", ["0", "1"])
def test_connections_left_idle_are_closed_and_give_the_connection_cap_back(tmp_path: Path, idle: str):
    # Silent connections held --max-connections for a whole connection age (300 s), refusing every newcomer.
    env = {"GPU_ADVISOR_MAX_CONNECTIONS": "20", "GPU_ADVISOR_MAX_CONNECTION_IDLE": idle}
    proc, port, _log = start_process(tmp_path, env)
    try:
        with ConnectionFlood("127.0.0.1", port, connections=20) as flood:
            assert flood.ready.wait(60) and not flood.refused
            if idle == "0":  # no idle limit: they stay, and the cap keeps a new client out
                # An absence cannot be an event: watch for 3x the 1 s limit of the other case; any close fails
                # at once. This orders nothing (a slow machine only makes the watch less strict, never red).
                assert not wait_until(lambda: flood.closed_by_server > 0, 3), flood.closed_by_server
                assert not _health_from_a_new_client(port)
            else:
                assert wait_until(lambda: flood.closed_by_server == 20, 30), flood.closed_by_server
                assert wait_until(lambda: _health_from_a_new_client(port), 30)
    finally:
        stop(proc)


def test_reflection_streams_are_capped_per_connection_and_in_total(tmp_path: Path):
    # More HTTP/2 streams per connection than reflection streams, so the third one reaches the server.
    proc, port, _log = start_process(tmp_path, {"GPU_ADVISOR_MAX_REFLECTION_STREAMS": "3",
                                                "GPU_ADVISOR_MAX_STREAMS": "8"})
    done = threading.Event()

    def asks():  # noqa: ANN202 - one question, then the stream stays open until the test ends
        yield reflection_pb2.ServerReflectionRequest(list_services="")
        done.wait(60)

    try:
        channels = [grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
                    for _ in range(2)]
        codes: Counter[str] = Counter()
        calls = []
        for channel in channels:
            for _ in range(3):  # two are allowed on a connection
                calls.append(reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(asks()))
        for call in calls:
            try:
                next(call)
                codes["open"] += 1
            except grpc.RpcError as err:
                codes[err.code().name] += 1
        # 2 on the first connection, 1 on the second (3 in total); the other three refused.
        assert codes == {"open": 3, "RESOURCE_EXHAUSTED": 3}, codes
        done.set()
        for call in calls:
            call.cancel()
        for channel in channels:
            channel.close()
    finally:
        stop(proc)


def test_no_reflection_leaves_reflection_unanswered(tmp_path: Path):
    proc, port, _log = start_process(tmp_path, {}, "--no-reflection")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
            with pytest.raises(grpc.RpcError) as err:
                next(call)
            assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
            assert pb_grpc.GpuAdvisorStub(channel).Recommend(good_request(), timeout=30).candidates
    finally:
        stop(proc)
    assert REFLECTION.startswith("/grpc.reflection")


def test_rapid_reset_leaves_other_connections_answering_and_memory_where_it_was(tmp_path: Path):
    # One connection opening and resetting streams in a loop (CVE-2023-44487) left the threaded server's
    # legitimate calls 16 OK / 136 CANCELLED and its RSS 64 -> 183 MB.
    proc, port, _log = start_process(tmp_path, {})
    addr = f"127.0.0.1:{port}"
    try:
        legit_round(addr, recommends=5, checks=10)  # warm: caches and allocator pools settle before the memory is read
        before = rss_mb(proc.pid)
        with RapidReset("127.0.0.1", port) as attack:
            # the attack is under way (its resets counted, or it failed) before the ordinary calls start
            assert wait_until(lambda: attack.resets >= 10 * RapidReset.BATCH or attack.error is not None)
            legit = legit_round(addr, recommends=5, checks=10, also=lambda: attack.resets > 10_000 or attack.error)
        assert attack.error is None
        assert attack.resets > 10_000, f"the attack sent only {attack.resets} resets: it proved nothing"
        assert legit.recommend.total >= 5 and legit.recommend.ok_share >= 0.95, legit.recommend
        assert legit.health.total >= 10 and legit.health.ok_share >= 0.95, legit.health
        # Freed memory may be kept by the allocator for a while: read it again until it settles.
        assert wait_until(lambda: rss_mb(proc.pid) - before <= 10, 30), (before, rss_mb(proc.pid))
    finally:
        stop(proc)
    assert [e for e in log_events(_log) if e.get("event") == "stopped"]


def test_the_probe_port_turns_not_serving_while_the_main_server_takes_no_calls(tmp_path: Path):
    # Idle streams fill the server-wide call cap: the main port refuses every call, so the probe's heartbeat
    # (a health Check through the main server) stops and the probe port says NOT_SERVING; then SERVING again.
    proc, port, log = start_process(tmp_path, {"GPU_ADVISOR_MAX_CALLS": "12", "GPU_ADVISOR_REQUEST_TIMEOUT": "120",
                                               "GPU_ADVISOR_PROBE_STALE_SECONDS": "1.5"},
                                    "--health-addr", "127.0.0.1:0")
    probe_port = next(e["health_port"] for e in log_events(log) if e.get("event") == "serving")

    def probe_status() -> int:
        with grpc.insecure_channel(f"127.0.0.1:{probe_port}") as channel:
            return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10).status

    try:
        assert wait_until(lambda: probe_status() == SERVING)
        with IdleStreams("127.0.0.1", port, connections=6, streams=2, kind="headers") as idle:
            assert idle.ready.wait(60)
            assert wait_until(lambda: probe_status() == health_pb2.HealthCheckResponse.NOT_SERVING)
        assert wait_until(lambda: probe_status() == SERVING)
    finally:
        stop(proc)
