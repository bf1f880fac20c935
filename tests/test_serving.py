"""Serving under pressure and in production: admission control, deadlines, drain on SIGTERM, the admin token
and TLS/mTLS, each against a real server on 127.0.0.1 with an ephemeral port.

Where a call must be "in progress" at a given moment, the bundle's engine is replaced by a wrapper that holds
the first rules stage until the test releases it, so no assertion depends on how fast this machine is.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import REGISTRY

from service.frontends import cli
from service.serving import processes
from service.serving.credentials import channel_credentials, server_credentials
from service.serving.loop_answers import give_turn
from service.serving.server import RECOMMEND, parse_args, serve
from service.wire.api import pb, pb_grpc
from tests.conftest import RULES, Running, call, retrying_channel
from tests.test_server import good_request

REPO = Path(__file__).parents[1]
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.01)


class HeldEngine:
    """Replaces a bundle's engine.evaluate: records every rules stage asked for, and holds the first one
    ("brief") until `release` is set."""

    def __init__(self, running: Running):
        bundle = running.store.active()
        assert bundle is not None
        self.real = bundle.engine.evaluate
        self.stages: list[str] = []
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)
        bundle.engine.evaluate = self  # type: ignore[method-assign]

    def __call__(self, fact_type: str, facts: list[dict[str, Any]]) -> dict[str, set[str]]:
        self.stages.append(fact_type)
        if fact_type == "brief":
            self.entered.release()
            # An answer on the event loop (service/serving/answering.py) gives the loop a turn while it waits, as
            # a long stage would between stages; in a worker thread give_turn does nothing.
            until = time.monotonic() + 30
            while not self.release.wait(0.002) and time.monotonic() < until:
                give_turn()
        return self.real(fact_type, facts)


@pytest.fixture
def held(start_server: Callable[..., Running]) -> Iterator[Callable[..., tuple[Running, HeldEngine]]]:
    """held(**serve_kwargs) → (a server on the repo's rules, its held engine); released at teardown so no
    worker thread outlives the test."""
    engines: list[HeldEngine] = []

    def make(**kw: Any) -> tuple[Running, HeldEngine]:
        # These tests drive the admission queue with every call on one connection, so no stream cap unless asked
        # for: the cap would keep the extra calls in the client (its own test shows that).
        kw.setdefault("max_streams", 0)
        running = start_server(RULES, watch=False, **kw)
        engines.append(HeldEngine(running))
        return running, engines[-1]

    yield make
    for engine in engines:
        engine.release.set()


def health_status(channel: grpc.Channel, timeout: float = 5) -> int:
    return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=timeout).status


def abandoned(stage: str) -> float:
    value = REGISTRY.get_sample_value("gpu_advisor_abandoned_total", {"method": RECOMMEND, "stage": stage})
    return value or 0.0


# -- admission control --------------------------------------------------------------------------------------


def test_a_full_queue_is_refused_at_once_while_health_answers(held):
    running, engine = held(max_concurrent=1, max_queue=2, request_timeout=60)
    limiter = running.server.admission.limiters[RECOMMEND]
    # No deadline on these: a call without one reports ~forever as its time left, and must queue all the same.
    accepted = [running.stub.Recommend.future(good_request()) for _ in range(3)]
    assert engine.entered.acquire(timeout=10)
    wait_for(lambda: limiter.running == 1 and limiter.waiting == 2)

    # One running (held), two waiting: everything else is refused without waiting for them.
    refused = [call(running.stub.Recommend, good_request(), timeout=20) for _ in range(5)]
    assert {o.code for o in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
    assert "busy" in refused[0].details
    # Health, and the other methods (each has its own admission), still answer while Recommend is saturated.
    assert all(health_status(running.channel) == SERVING for _ in range(20))
    assert call(running.stub.GetRuleset, pb.GetRulesetRequest(), timeout=5).code == grpc.StatusCode.OK

    # Refused before its request is read: a call that sends only its headers hears it at once, not after the
    # request timeout (60 s here).
    silent = threading.Event()

    def never() -> Iterator[pb.RecommendRequest]:
        silent.wait(30)
        yield from ()

    headers_only = running.channel.stream_unary(RECOMMEND, request_serializer=pb.RecommendRequest.SerializeToString,
                                                response_deserializer=pb.RecommendResponse.FromString)
    try:
        with pytest.raises(grpc.RpcError) as err:
            headers_only(never(), timeout=20)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        silent.set()

    engine.release.set()
    assert all(f.result(timeout=30).candidates for f in accepted)
    assert engine.stages.count("brief") == 3, "refused calls must never reach the engine"
    assert limiter.running == 0 and limiter.waiting == 0


def retrying_stub(addr: str) -> tuple[grpc.Channel, pb_grpc.GpuAdvisorStub]:
    channel = retrying_channel(addr)
    return channel, pb_grpc.GpuAdvisorStub(channel)


def test_a_flood_beyond_the_stream_cap_waits_in_its_client_while_another_connection_gets_through(held):
    running, engine = held(max_concurrent=1, max_queue=8, max_streams=2)
    limiter = running.server.admission.limiters[RECOMMEND]
    channel, stub = retrying_stub(running.addr)
    # Six calls on one connection that allows two open streams: the first runs (held), the second queues, and
    # the other four must wait in the client, never reaching the server, let alone its Python loop.
    flood = [stub.Recommend.future(good_request()) for _ in range(6)]
    assert engine.entered.acquire(timeout=10)
    wait_for(lambda: limiter.running == 1 and limiter.waiting == 1)

    # A second connection (a probe's) is not limited by the first one's cap: its Check answers and its
    # Recommend reaches the admission queue, although all six of the flood's were sent before it.
    with grpc.insecure_channel(running.addr, options=[("grpc.use_local_subchannel_pool", 1)]) as other:
        assert all(health_status(other) == SERVING for _ in range(10))
        late = pb_grpc.GpuAdvisorStub(other).Recommend.future(good_request())
        wait_for(lambda: limiter.waiting == 2)
        assert limiter.running == 1 and limiter.waiting == 2, "the flood's extra calls must not reach the server"
        assert engine.stages.count("brief") == 1

        engine.release.set()
        # The client sent the waiting calls once streams freed up: every one answered, none refused.
        assert late.result(timeout=30).candidates
        assert all(f.result(timeout=30).candidates for f in flood)
    channel.close()
    assert engine.stages.count("brief") == 7
    assert limiter.running == 0 and limiter.waiting == 0


def test_calls_beyond_the_stream_cap_are_answered_to_a_client_that_retries_unavailable(start_server):
    # Core refuses a new stream while the connection's ended ones are not yet freed (the rapid-reset
    # protection): on the threaded server 34 of 40 of these calls failed UNAVAILABLE without retries, on the
    # asyncio one a few in a hundred. Every refused one was never started, and a retry answers it.
    running = start_server(RULES, watch=False)  # the default stream cap
    channel, stub = retrying_stub(running.addr)
    with channel:
        assert stub.Recommend(good_request(), timeout=30).candidates  # warm: the server's SETTINGS are in
        calls = [stub.Recommend.future(good_request(), timeout=60) for _ in range(40)]
        assert outcomes(calls) == [grpc.StatusCode.OK] * 40


def outcomes(calls: list[Any]) -> list[Any]:
    """Each Recommend future's status: OK for an answer with candidates, else its error code."""
    out = []
    for f in calls:
        try:
            out.append(grpc.StatusCode.OK if f.result().candidates else None)
        except grpc.RpcError as err:
            out.append(err.code())  # type: ignore[attr-defined]
    return out


# -- connection age ----------------------------------------------------------------------------------------


def _connections_while_calling(tmp_path: Path, age: str, seconds: float, callers: int = 3) -> tuple[int, list[Any]]:
    """(client connections the server saw, each call's status) over `seconds` of back-to-back Recommend calls
    on one channel, to a server process with GPU_ADVISOR_MAX_CONNECTION_AGE=`age`."""
    proc, port, log = start_process(tmp_path, {"GPU_ADVISOR_MAX_CONNECTION_AGE": age})
    codes: list[Any] = []
    try:
        channel, stub = retrying_stub(f"127.0.0.1:{port}")  # three callers, two streams: see RETRY_CONFIG
        with channel:

            def caller() -> None:
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    codes.append(call(stub.Recommend, good_request(), timeout=30).code)

            threads = [threading.Thread(target=caller) for _ in range(callers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    # Each connection comes from a port of its own: the peer in the server's line for every call tells them apart.
    peers = {e["peer"] for e in log_events(log) if e.get("event") == "rpc" and e.get("method") == RECOMMEND}
    return len(peers), codes


def test_connections_move_on_at_their_age_and_no_call_fails(tmp_path: Path):
    # A channel is one connection: without an end to it, a client's calls stay on the pod or worker it reached.
    connections, codes = _connections_while_calling(tmp_path, "0.5", 3.5)
    assert len(codes) > 20 and set(codes) == {grpc.StatusCode.OK}
    assert connections >= 4, f"{connections} connection(s) in 3.5 s at an age of 0.5 s"


def test_many_calls_in_flight_across_connection_ends_all_answer(start_server):
    # A new connection starts before its client knows the stream cap, with dozens of calls waiting: the
    # streams beyond the cap are refused at the HTTP/2 level, which gRPC clients retry on their own.
    running = start_server(RULES, watch=False, max_connection_age=0.3)
    channel, stub = retrying_stub(running.addr)  # and those refused while ended ones are freed: RETRY_CONFIG
    with channel:
        calls = [stub.Recommend.future(good_request(), timeout=60) for _ in range(40)]  # on a cold channel
        for _ in range(200):  # ~1.5 s: several ages, with calls in flight at each GOAWAY
            calls.append(stub.Recommend.future(good_request(), timeout=60))
            time.sleep(0.0075)
        assert outcomes(calls) == [grpc.StatusCode.OK] * 240


def test_without_an_age_one_connection_carries_every_call(tmp_path: Path):
    connections, codes = _connections_while_calling(tmp_path, "0", 2.0)
    assert set(codes) == {grpc.StatusCode.OK} and connections == 1


def test_connection_age_flag_and_env(monkeypatch):
    monkeypatch.delenv("GPU_ADVISOR_MAX_CONNECTION_AGE", raising=False)
    assert parse_args([])[1]["max_connection_age"] == 300
    assert parse_args(["--max-connection-age", "0"])[1]["max_connection_age"] == 0
    monkeypatch.setenv("GPU_ADVISOR_MAX_CONNECTION_AGE", "60")
    assert parse_args([])[1]["max_connection_age"] == 60
    for bad in ("-1", "nan", "3000000"):  # Core holds the age in milliseconds as a 32-bit int
        with pytest.raises(SystemExit):
            parse_args(["--max-connection-age", bad])


def test_connection_idle_flag_and_env(monkeypatch):
    monkeypatch.delenv("GPU_ADVISOR_MAX_CONNECTION_IDLE", raising=False)
    assert parse_args([])[1]["max_connection_idle"] == 120
    assert parse_args(["--max-connection-idle", "0"])[1]["max_connection_idle"] == 0
    monkeypatch.setenv("GPU_ADVISOR_MAX_CONNECTION_IDLE", "30")
    assert parse_args([])[1]["max_connection_idle"] == 30
    for bad in ("-1", "nan", "3000000"):
        with pytest.raises(SystemExit):
            parse_args(["--max-connection-idle", bad])


# -- deadlines ---------------------------------------------------------------------------------------------


def rule_stages(engine: Any) -> list[str]:  # noqa: ANN401
    return [s for s in engine.stages if s != "offer"]


def test_a_passed_deadline_stops_the_work(held):
    running, engine = held(max_concurrent=1, max_queue=8)
    limiter = running.server.admission.limiters[RECOMMEND]
    in_queue, in_advise = abandoned("queue"), abandoned("candidates")

    # Deadlines long enough for every call to reach the server on a busy machine, far shorter than the hold.
    first = running.stub.Recommend.future(good_request(), timeout=2)
    assert engine.entered.acquire(timeout=10)  # running, held inside its first rules stage
    queued = [running.stub.Recommend.future(good_request(), timeout=2) for _ in range(4)]
    for f in [first, *queued]:
        with pytest.raises(grpc.RpcError) as err:
            f.result()
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    # The waiting calls give up their place when their deadline passes, without ever starting.
    wait_for(lambda: limiter.waiting == 0 and abandoned("queue") == in_queue + 4)

    engine.release.set()
    wait_for(lambda: abandoned("candidates") == in_advise + 1)
    # The placement scopes ("offer", asked once per rules version and brief shape) are not a stage of their own.
    assert rule_stages(engine) == ["brief"], "the held call must stop before its next stage; the queued never start"
    wait_for(lambda: limiter.running == 0)  # the slot is given back once the worker thread is done

    # A caller that hangs up while queued leaves the queue too, and its call never starts.
    engine.release.clear()
    blocker = running.stub.Recommend.future(good_request(), timeout=30)
    assert engine.entered.acquire(timeout=10)
    left = running.stub.Recommend.future(good_request(), timeout=30)
    wait_for(lambda: limiter.waiting == 1)
    left.cancel()
    wait_for(lambda: limiter.waiting == 0 and abandoned("queue") == in_queue + 5)
    engine.release.set()
    assert blocker.result().candidates
    # A rent route whose first pick no offer in scope prices decides its route again on the first that one does
    # (issue 21): the plan stage may run twice, the others once.
    stages = rule_stages(engine)
    assert [s for i, s in enumerate(stages) if s != "plan" or stages[i - 1] != "plan"] == [
        "brief", "brief", "candidate", "plan", "outcome"], stages

    # The same request with time to spare goes through every stage.
    assert running.stub.Recommend(good_request(), timeout=30).candidates
    assert rule_stages(engine)[len(stages):] in (["brief", "candidate", "plan", "outcome"],
                                                 ["brief", "candidate", "plan", "plan", "outcome"])


# -- drain --------------------------------------------------------------------------------------------------


def test_drain_goes_not_serving_first_and_finishes_accepted_calls(held):
    running, engine = held(max_concurrent=1, max_queue=4)
    accepted = [running.stub.Recommend.future(good_request(), timeout=30) for _ in range(3)]
    assert engine.entered.acquire(timeout=10)
    wait_for(lambda: running.server.admission.limiters[RECOMMEND].waiting == 2)
    result: list[bool] = []
    drain = threading.Thread(target=lambda: result.append(running.server.drain(grace=20)))
    drain.start()
    # While the accepted calls are still held, probes already see NOT_SERVING.
    wait_for(lambda: health_status(running.channel) == NOT_SERVING)
    assert drain.is_alive()
    engine.release.set()
    drain.join(30)
    assert result == [True]
    assert all(f.result().candidates for f in accepted)


def test_drain_is_bounded_by_its_grace(held):
    running, engine = held(max_concurrent=1, max_queue=1)
    stuck = running.stub.Recommend.future(good_request(), timeout=30)
    assert engine.entered.acquire(timeout=10)
    assert running.server.drain(grace=0.5) is False
    with pytest.raises(grpc.RpcError) as err:
        stuck.result()
    # Core cuts calls still running when the grace ends ("Cancelling all calls").
    assert err.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)


# -- the health-only probe port -------------------------------------------------------------------------------


def test_probe_port_answers_health_only_and_follows_the_drain(held):
    running, engine = held(max_concurrent=1, max_queue=2, health_addr="127.0.0.1:0")
    probe_port = running.server.probe_port
    assert probe_port not in (0, running.port)
    with grpc.insecure_channel(f"127.0.0.1:{probe_port}") as probe:
        # The probe process hears the server's statuses through a pipe, a moment after the rules load.
        wait_for(lambda: health_status(probe) == SERVING)
        assert health_pb2_grpc.HealthStub(probe).Check(
            health_pb2.HealthCheckRequest(service="gpuadvisor.v1.GpuAdvisor"), timeout=5).status == SERVING
        # Health is all it answers: the advisor's methods are on the main port only.
        assert call(pb_grpc.GpuAdvisorStub(probe).GetRuleset, pb.GetRulesetRequest(),
                    timeout=5).code == grpc.StatusCode.UNIMPLEMENTED

        # Recommend saturated on the main port (one running, held; two waiting): the probe still answers.
        accepted = [running.stub.Recommend.future(good_request(), timeout=30) for _ in range(3)]
        assert engine.entered.acquire(timeout=10)
        wait_for(lambda: running.server.admission.limiters[RECOMMEND].waiting == 2)
        assert all(health_status(probe) == SERVING for _ in range(20))

        # A drain shows on the probe port at once, while accepted calls still finish.
        result: list[bool] = []
        drain = threading.Thread(target=lambda: result.append(running.server.drain(grace=20)))
        drain.start()
        wait_for(lambda: health_status(probe) == NOT_SERVING)
        engine.release.set()
        drain.join(30)
        assert result == [True]
        assert all(f.result().candidates for f in accepted)
        # Once the main server has stopped, so has the probe server.
        wait_for(lambda: call(health_pb2_grpc.HealthStub(probe).Check, health_pb2.HealthCheckRequest(),
                              timeout=2).code == grpc.StatusCode.UNAVAILABLE)


def test_a_busy_probe_port_fails_at_start(start_server):
    first = start_server(RULES, watch=False, health_addr="127.0.0.1:0")
    with pytest.raises(processes.BindError):
        serve("127.0.0.1:0", str(RULES), watch=False, health_addr=f"127.0.0.1:{first.server.probe_port}")


def test_probe_port_flag_and_env(monkeypatch):
    monkeypatch.delenv("GPU_ADVISOR_HEALTH_ADDR", raising=False)
    assert parse_args([])[1]["health_addr"] == ""
    assert parse_args(["--health-addr", "0.0.0.0:50052"])[1]["health_addr"] == "0.0.0.0:50052"
    monkeypatch.setenv("GPU_ADVISOR_HEALTH_ADDR", "127.0.0.1:9000")
    assert parse_args([])[1]["health_addr"] == "127.0.0.1:9000"


def start_process(
    tmp_path: Path, env: dict[str, str], *args: str, watch: bool = False, unset: tuple[str, ...] = (),
    log_name: str = "server.log", wait_s: float = 60,
) -> tuple[subprocess.Popen[bytes], int, Path]:
    """`python -m service` on an ephemeral port → (process, port, its log file). `unset`: environment variables
    the server must not inherit (its defaults are under test)."""
    log = tmp_path / log_name
    full_env = {**os.environ, "GPU_ADVISOR_ADDR": "127.0.0.1:0", "GPU_ADVISOR_RULES": str(RULES),
                "GPU_ADVISOR_LOG_LEVEL": "INFO", "PYTHONPATH": str(REPO), **env}
    for name in unset:
        full_env.pop(name, None)
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "service", *([] if watch else ["--no-watch"]), *args],
                                cwd=REPO, env=full_env, stdout=subprocess.DEVNULL, stderr=err)
    end = time.monotonic() + wait_s
    while time.monotonic() < end and proc.poll() is None:
        for event in log_events(log):
            if event.get("event") == "serving":
                return proc, int(event["port"]), log
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"the server did not start: {log.read_text()}")


def log_events(log: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")]


def test_sigterm_loses_no_call_in_flight(tmp_path: Path):
    proc, port, log = start_process(tmp_path, {"GPU_ADVISOR_ADMIN_TOKEN": "t0ken"}, "--grace-seconds", "20")
    try:
        channel, stub = retrying_stub(f"127.0.0.1:{port}")  # 16 calls, two streams: see RETRY_CONFIG
        with channel:
            request = good_request()
            request.include_trace = True  # more work per call, so the 16 are still running at SIGTERM
            assert stub.Recommend(request, timeout=30).candidates  # connected and warm
            calls = [stub.Recommend.future(request, timeout=30) for _ in range(16)]
            proc.send_signal(signal.SIGTERM)
            codes = []
            for f in calls:
                try:
                    codes.append(grpc.StatusCode.OK if f.result().candidates else None)
                except grpc.RpcError as err:
                    codes.append(err.code())  # type: ignore[attr-defined]
        try:
            assert proc.wait(timeout=30) == 0
        except subprocess.TimeoutExpired:
            raise AssertionError("still running 30 s after SIGTERM:\n" + log.read_text()[-4000:]) from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert codes == [grpc.StatusCode.OK] * 16
    events = log_events(log)
    names = [e.get("event") for e in events]
    assert names.index("stopping") < names.index("draining") < names.index("drained") < names.index("stopped")
    after_signal = events[names.index("stopping"):]
    finished_late = [e for e in after_signal if e.get("event") == "rpc" and e.get("method") == RECOMMEND]
    assert finished_late, "no call was still in flight at SIGTERM: the test proved nothing"
    assert all(e["code"] == "OK" for e in finished_late)
    drained = events[names.index("drained")]
    assert drained["cut"] == 0 and drained["quiet"] is True


# -- admin token --------------------------------------------------------------------------------------------


def test_reload_rules_is_off_without_a_token(start_server):
    running = start_server(RULES, watch=False)
    for metadata in ((), (("authorization", "Bearer "),), (("authorization", "Bearer anything"),)):
        outcome = call(running.stub.ReloadRules, pb.ReloadRulesRequest(), metadata=metadata)
        assert outcome.code == grpc.StatusCode.PERMISSION_DENIED
        assert "off" in outcome.details


def test_admin_token_from_env_or_file_never_a_flag(tmp_path: Path, monkeypatch, start_server):
    monkeypatch.delenv("GPU_ADVISOR_ADMIN_TOKEN", raising=False)
    monkeypatch.delenv("GPU_ADVISOR_ADMIN_TOKEN_FILE", raising=False)
    token_file = tmp_path / "token"
    token_file.write_text("from-a-file\n", encoding="utf-8")  # a Secret mounted as a file ends with a newline
    _, from_file = parse_args(["--admin-token-file", str(token_file)])
    monkeypatch.setenv("GPU_ADVISOR_ADMIN_TOKEN", "from-the-env")
    _, from_env = parse_args([])

    for options, token in ((from_file, "from-a-file"), (from_env, "from-the-env")):
        running = start_server(RULES, watch=False, **options)
        reload = running.stub.ReloadRules
        assert call(reload, pb.ReloadRulesRequest()).code == grpc.StatusCode.UNAUTHENTICATED
        wrong = call(reload, pb.ReloadRulesRequest(), metadata=(("authorization", f"Bearer {token}x"),))
        assert wrong.code == grpc.StatusCode.UNAUTHENTICATED
        right = call(reload, pb.ReloadRulesRequest(), metadata=(("authorization", f"Bearer {token}"),))
        assert right.code == grpc.StatusCode.OK and not right.response.reloaded

    # A token as a flag value would show in `ps`; two sources, or an empty file, are mistakes: all refused.
    monkeypatch.delenv("GPU_ADVISOR_ADMIN_TOKEN")
    empty = tmp_path / "empty"
    empty.write_text("\n", encoding="utf-8")
    for argv in (["--admin-token", "s3cret"], ["--admin-token-file", str(empty)],
                 ["--admin-token-file", str(tmp_path / "missing")]):
        with pytest.raises(SystemExit):
            parse_args(argv)
    monkeypatch.setenv("GPU_ADVISOR_ADMIN_TOKEN", "from-the-env")
    with pytest.raises(SystemExit):
        parse_args(["--admin-token-file", str(token_file)])


# -- TLS and mTLS -------------------------------------------------------------------------------------------


class Pki:
    """A throwaway CA with a server certificate for 127.0.0.1/localhost and a client certificate, written as PEM
    files; plus a client certificate from a second, untrusted CA."""

    def __init__(self, folder: Path):
        self.folder = folder
        ca_key, ca_cert = self._ca("gpu-advisor test CA")
        self.ca = self._write("ca.pem", ca_cert)
        self.server_cert, self.server_key = self._leaf("server", ca_key, ca_cert, server=True)
        self.client_cert, self.client_key = self._leaf("client", ca_key, ca_cert, server=False)
        rogue_key, rogue_cert = self._ca("rogue CA")
        self.rogue_cert, self.rogue_key = self._leaf("rogue", rogue_key, rogue_cert, server=False)

    @staticmethod
    def _builder(subject: str, issuer: x509.Name, public_key: Any) -> x509.CertificateBuilder:
        now = dt.datetime.now(dt.UTC)
        return (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
                .issuer_name(issuer).public_key(public_key).serial_number(x509.random_serial_number())
                .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1)))

    def _ca(self, name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        cert = (self._builder(name, subject, key.public_key())
                .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                .sign(key, hashes.SHA256()))
        return key, cert

    def _leaf(self, name: str, ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate,
              server: bool) -> tuple[str, str]:
        key = ec.generate_private_key(ec.SECP256R1())
        usage = x509.oid.ExtendedKeyUsageOID.SERVER_AUTH if server else x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (self._builder(name, ca_cert.subject, key.public_key())
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        (self.folder / f"{name}.key").write_bytes(key_pem)
        return self._write(f"{name}.pem", cert), str(self.folder / f"{name}.key")

    def _write(self, name: str, cert: x509.Certificate) -> str:
        path = self.folder / name
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return str(path)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def ruleset_code(channel: grpc.Channel) -> grpc.StatusCode:
    with channel:
        return call(pb_grpc.GpuAdvisorStub(channel).GetRuleset, pb.GetRulesetRequest(), timeout=10).code


def test_tls(pki: Pki, start_server):
    running = start_server(RULES, watch=False, tls=server_credentials(pki.server_cert, pki.server_key, None))
    addr = running.addr
    assert ruleset_code(grpc.secure_channel(addr, channel_credentials(pki.ca, None, None))) == grpc.StatusCode.OK
    assert ruleset_code(grpc.insecure_channel(addr)) == grpc.StatusCode.UNAVAILABLE
    # A client that does not trust the CA refuses the server.
    untrusted = channel_credentials(pki.client_cert, None, None)
    assert ruleset_code(grpc.secure_channel(addr, untrusted)) == grpc.StatusCode.UNAVAILABLE
    # Health is served on the same TLS port.
    with grpc.secure_channel(addr, channel_credentials(pki.ca, None, None)) as channel:
        assert health_status(channel) == SERVING


def test_probe_port_is_plaintext_when_the_main_port_is_tls(pki: Pki, start_server):
    running = start_server(RULES, watch=False, tls=server_credentials(pki.server_cert, pki.server_key, None),
                           health_addr="127.0.0.1:0")
    assert ruleset_code(grpc.insecure_channel(running.addr)) == grpc.StatusCode.UNAVAILABLE
    with grpc.insecure_channel(f"127.0.0.1:{running.server.probe_port}") as probe:
        wait_for(lambda: health_status(probe) == SERVING)  # what a Kubernetes gRPC probe (plaintext only) sees


def test_mtls_refuses_clients_without_a_trusted_certificate(pki: Pki, monkeypatch, start_server,
                                                            capsys: pytest.CaptureFixture[str]):
    # The flags' environment variables, as a Kubernetes Secret mount would set them.
    monkeypatch.setenv("GPU_ADVISOR_TLS_CERT", pki.server_cert)
    monkeypatch.setenv("GPU_ADVISOR_TLS_KEY", pki.server_key)
    _, options = parse_args(["--tls-client-ca", pki.ca])
    running = start_server(RULES, watch=False, **options)
    addr = running.addr
    ok = channel_credentials(pki.ca, pki.client_cert, pki.client_key)
    assert ruleset_code(grpc.secure_channel(addr, ok)) == grpc.StatusCode.OK
    for creds in (channel_credentials(pki.ca, None, None), channel_credentials(pki.ca, pki.rogue_cert, pki.rogue_key)):
        assert ruleset_code(grpc.secure_channel(addr, creds)) == grpc.StatusCode.UNAVAILABLE
    assert ruleset_code(grpc.insecure_channel(addr)) == grpc.StatusCode.UNAVAILABLE

    # The command-line client speaks the same.
    tls = ["--tls-ca", pki.ca, "--tls-client-cert", pki.client_cert, "--tls-client-key", pki.client_key]
    assert cli.main(["ruleset", "--addr", addr, *tls]) == 0
    assert "revision" in capsys.readouterr().out
    assert cli.main(["ruleset", "--addr", addr, "--tls-ca", pki.ca, "--timeout", "5"]) == 1


def test_tls_settings_that_cannot_work_are_refused(pki: Pki, monkeypatch):
    for name in ("GPU_ADVISOR_TLS_CERT", "GPU_ADVISOR_TLS_KEY", "GPU_ADVISOR_TLS_CLIENT_CA"):
        monkeypatch.delenv(name, raising=False)
    for argv in (["--tls-cert", pki.server_cert], ["--tls-client-ca", pki.ca],
                 ["--tls-cert", pki.server_cert, "--tls-key", pki.folder.joinpath("nope.key").as_posix()]):
        with pytest.raises(SystemExit):
            parse_args(argv)


def test_a_key_that_does_not_match_or_a_ca_that_is_not_pem_is_named(pki: Pki, capsys: pytest.CaptureFixture[str]):
    # Both were logged as bind_failed "address in use" before.
    notpem = pki.folder / "ca.der"
    notpem.write_bytes(b"\x30\x82\x01\x0a not a PEM file")
    cases = [
        (["--tls-key", pki.client_key], f"TLS key {pki.client_key} does not belong to the certificate"),
        (["--tls-key", pki.server_key, "--tls-client-ca", str(notpem)], f"TLS client CA {notpem} is not a PEM"),
    ]
    for extra, words in cases:
        with pytest.raises(SystemExit):
            parse_args(["--tls-cert", pki.server_cert, *extra])
        assert words in capsys.readouterr().err


def test_health_checks_that_keep_coming_do_not_hold_the_drain(tmp_path: Path):
    # The quiet wait counted every call, so a probe asking all the time kept it waiting half the grace (and
    # it gave up, quiet False); it counts GpuAdvisor calls only.
    proc, port, log = start_process(tmp_path, {}, "--grace-seconds", "30")
    stop = threading.Event()
    answered = [0, 0, 0]  # per probe: checks answered before the drain

    def probe(i: int) -> None:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            while not stop.is_set():
                with contextlib.suppress(grpc.RpcError):  # gone: keep asking until the test stops
                    health_status(channel, timeout=5)
                    answered[i] += 1

    threads = [threading.Thread(target=probe, args=(i,)) for i in range(3)]
    try:
        for t in threads:
            t.start()
        wait_for(lambda: min(answered) >= 2, timeout=60)  # every probe is asking when the drain starts
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    events = log_events(log)
    drained = next(e for e in events if e.get("event") == "drained")
    assert drained["quiet"] is True and drained["cut"] == 0
    assert sum(1 for e in events if e.get("event") == "rpc" and e.get("method", "").endswith("/Check")) > 10


def test_the_hostile_client_bounds_come_from_flags_or_their_env(monkeypatch):
    env = {"GPU_ADVISOR_MAX_CONNECTIONS": "7", "GPU_ADVISOR_MAX_CALLS": "9", "GPU_ADVISOR_REQUEST_TIMEOUT": "3",
           "GPU_ADVISOR_STREAM_IDLE_TIMEOUT": "4", "GPU_ADVISOR_MAX_REFLECTION_STREAMS": "5",
           "GPU_ADVISOR_NO_REFLECTION": "1", "GPU_ADVISOR_NO_RAPID_RESET_PROTECTION": "1",
           "GPU_ADVISOR_PROBE_STALE_SECONDS": "6"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    _, options = parse_args([])
    assert (options["max_connections"], options["max_calls"], options["request_timeout"],
            options["stream_idle_timeout"], options["max_reflection_streams"], options["probe_stale_seconds"]) == (
        7, 9, 3.0, 4.0, 5, 6.0)
    assert options["reflection_on"] is False and options["reset_protection"] is False
    _, options = parse_args(["--max-calls", "11", "--request-timeout", "2.5"])
    assert options["max_calls"] == 11 and options["request_timeout"] == 2.5
    for name in env:
        monkeypatch.delenv(name)
    _, options = parse_args([])
    assert options["reflection_on"] is True and options["reset_protection"] is True
    with pytest.raises(SystemExit):
        parse_args(["--request-timeout", "0"])
