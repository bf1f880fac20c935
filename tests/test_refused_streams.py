"""The rapid-reset protection refuses no stream of a well-behaved client (issue 26): a channel with no retries and
4 calls in flight, and two channels of one process sharing a connection, against a real server process with the
default stream cap (2). Before, Core counted the connection's ended-but-not-yet-freed streams against the cap:
16% of such health checks and 18 in 1,000 Recommend calls were refused (RST_STREAM REFUSED_STREAM, UNAVAILABLE)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from service.bench.polite_bench import in_flight
from service.wire.api import pb_grpc
from tests.test_hostile_clients import stop
from tests.test_server import good_request
from tests.test_serving import start_process

NO_RETRIES = [("grpc.enable_retries", 0)]  # a refused stream would be retried transparently otherwise


def test_a_channel_with_4_calls_in_flight_sees_no_refused_stream(tmp_path: Path):
    proc, port, _log = start_process(tmp_path, {})
    addr = f"127.0.0.1:{port}"
    try:
        with grpc.insecure_channel(addr, options=[("grpc.use_local_subchannel_pool", 1), *NO_RETRIES]) as channel:
            check = health_pb2_grpc.HealthStub(channel).Check
            checks = in_flight([lambda: check(health_pb2.HealthCheckRequest(), timeout=30)], 4, 10_000)
            recommend = pb_grpc.GpuAdvisorStub(channel).Recommend
            request = good_request()
            answers = in_flight([lambda: recommend(request, timeout=30)], 4, 1_000)
        assert checks == Counter(OK=10_000), checks
        assert answers == Counter(OK=1_000), answers
    finally:
        stop(proc)


def test_two_channels_of_one_process_sharing_a_connection_see_no_refused_stream(tmp_path: Path):
    proc, port, _log = start_process(tmp_path, {})
    addr = f"127.0.0.1:{port}"
    try:
        # Same target and options, the global subchannel pool: gRPC gives both channels one connection.
        with grpc.insecure_channel(addr, options=NO_RETRIES) as one, \
                grpc.insecure_channel(addr, options=NO_RETRIES) as two:
            stubs = [health_pb2_grpc.HealthStub(one).Check, health_pb2_grpc.HealthStub(two).Check]
            calls = [lambda s=s: s(health_pb2.HealthCheckRequest(), timeout=30) for s in stubs]
            outcomes = in_flight(calls, 4, 6_000)  # 2 in flight on each channel
        assert outcomes == Counter(OK=6_000), outcomes
    finally:
        stop(proc)
