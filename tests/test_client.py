"""The `gpu-advisor-client` package as installed from ./client (the Makefile's `client` step), against real
servers on 127.0.0.1: the three-line use, typed answers, field errors, retries on UNAVAILABLE, deadlines, the
token and TLS, and stubs that match the proto in this checkout."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterator
from concurrent import futures
from importlib import metadata
from pathlib import Path

import grpc
import pytest
import trustme
from google.protobuf import descriptor_pb2, json_format

from service.serving.server import Servicer
from service.wire.api import pb as service_pb
from service.wire.api import pb_grpc as service_pb_grpc
from tests.conftest import Running

try:
    import gpu_advisor_client as gac
    from gpu_advisor_client import AdvisorError, Client, RetryPolicy
    from gpu_advisor_client.v1 import advisor_pb2, advisor_pb2_grpc
except ImportError as err:  # pragma: no cover - a setup problem, reported as such
    pytest.fail(f"gpu_advisor_client is not installed ({err}): run `make client` (make test does)",
                pytrace=False)

REPO = Path(__file__).parents[1]
BRIEF = {
    "workload": "WORKLOAD_TYPE_REALTIME_INFERENCE",
    "model": {"params_billion": 8, "precision": "PRECISION_BF16", "context_tokens": 8192},
    "traffic": {"concurrent_sessions": 8, "avg_input_tokens": 1000, "avg_output_tokens": 300},
    "latency": {"p95_ms": 2000},
    "success_unit": "SUCCESS_UNIT_RESPONSE",
    "economics": {"hours_per_month": 730, "horizon_months": 6, "acceptance_rate": 0.9,
                  "needs_hardware_control": True, "has_platform_team": True, "demand": "DEMAND_STEADY"},
}


# -- the package itself ------------------------------------------------------------------------------------


def test_installed_package_not_the_source_tree():
    installed = Path(gac.__file__).resolve()
    assert REPO / "client" not in installed.parents, f"imported from the source tree: {installed}"
    assert (installed.parent / "v1" / "advisor_pb2.pyi").is_file(), "typing stubs are shipped"
    assert (installed.parent / "py.typed").is_file()
    assert gac.__version__ == metadata.version("gpu-advisor-client")


def test_one_version_for_client_and_server():
    # client/setup.py takes the server's version; a release bumps pyproject.toml and both follow.
    server_version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert metadata.version("gpu-advisor-client") == gac.__version__ == server_version, (
        "the installed client was built from another pyproject.toml: run `make client`")


def test_stubs_match_the_proto_in_this_checkout(tmp_path: Path):
    from grpc_tools import protoc

    out = tmp_path / "set.binpb"
    assert protoc.main(["protoc", "-Iprotos", f"--descriptor_set_out={out}", "gpuadvisor/v1/advisor.proto"]) == 0
    expected = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    messages = list(expected.message_type)
    while messages:  # generated code leaves out the default JSON names
        message = messages.pop()
        messages += message.nested_type
        for field in message.field:
            field.ClearField("json_name")
    shipped = descriptor_pb2.FileDescriptorProto.FromString(advisor_pb2.DESCRIPTOR.serialized_pb)
    assert shipped == expected, "the installed client is older than protos/: run `make client`"


def test_dependency_floors_cover_the_generated_code():
    # Generated code refuses to run on an older grpcio/protobuf; the package must ask for at least those.
    requires = {r.split(">=")[0].strip(): r.split(">=")[1].split(",")[0].strip()
                for r in metadata.requires("gpu-advisor-client") or [] if ">=" in r}
    grpc_generated = advisor_pb2_grpc.GRPC_GENERATED_VERSION
    assert _version(requires["grpcio"]) >= _version(grpc_generated)
    pb_source = Path(advisor_pb2.__file__).read_text()
    major, minor, patch = (int(line.strip().rstrip(",")) for line in pb_source.split("Domain.PUBLIC,")[1].split(
        "\n")[1:4])
    assert _version(requires["protobuf"]) >= (major, minor, patch)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".")[:3])


def test_retry_policy_is_grpc_service_config():
    config = gac.service_config(RetryPolicy(max_attempts=3, initial_backoff_s=0.1), "round_robin")
    assert '"retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]' in config
    assert '"service": "gpuadvisor.v1.GpuAdvisor"' in config
    assert '"initialBackoff": "0.100s"' in config and '"maxAttempts": 3' in config
    assert '"loadBalancingConfig": [{"round_robin": {}}]' in config
    with pytest.raises(ValueError, match="2..5"):
        RetryPolicy(max_attempts=9)


# -- against the real server ---------------------------------------------------------------------------------


def test_three_lines_in_a_fresh_interpreter(server: Running):
    # As the README says: pip install ./client, then three lines. Run outside the repository.
    lines = (
        "from gpu_advisor_client import recommend\n"
        f"answer = recommend({server.addr!r}, {{'workload': 'WORKLOAD_TYPE_REALTIME_INFERENCE', "
        "'model': {'params_billion': 8}})\n"
        "print(answer.candidates[0].gpu, answer.candidates[0].count, answer.summary.splitlines()[0])\n"
    )
    with tempfile.TemporaryDirectory() as cwd:
        run = subprocess.run([sys.executable, "-c", lines], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    gpu, count, *_ = run.stdout.split()
    catalog = {g.id for g in server.stub.ListGpus(service_pb.ListGpusRequest(), timeout=10).gpus}
    assert gpu in catalog and int(count) >= 1
    assert "GPU Advisor" in run.stdout


def test_recommend_returns_the_servers_answer(server: Running):
    message = json_format.ParseDict(BRIEF, advisor_pb2.WorkloadBrief())
    with Client(server.addr, timeout=20) as client:
        from_dict = client.recommend(BRIEF, max_candidates=3)
        from_message = client.recommend(message, max_candidates=3)
        ruleset = client.get_ruleset()
    assert isinstance(from_dict, advisor_pb2.RecommendResponse)
    assert 1 <= len(from_dict.candidates) <= 3
    assert [c.gpu for c in from_dict.candidates] == [c.gpu for c in from_message.candidates]
    assert from_dict.ruleset.revision == ruleset.revision == server.store.status().revision
    # The same request sent without the client gets the same ranking.
    raw = service_pb.RecommendRequest(brief=service_pb.WorkloadBrief.FromString(message.SerializeToString()),
                                      max_candidates=3)
    direct = server.stub.Recommend(raw, timeout=20)
    assert [c.gpu for c in direct.candidates] == [c.gpu for c in from_dict.candidates]


def test_quotes_and_locale_pass_through(server: Running):
    with Client(server.addr) as client:
        answer = client.recommend(BRIEF, locale="zh-CN", quotes=[{"gpu": "mi300x", "usd_per_hour": 0.01,
                                                                  "provider": "test", "as_of": "2026-01-01"}])
    top = answer.candidates[0]
    assert top.gpu == "mi300x"  # an almost free MI300X wins on cost
    assert top.cost.usd_per_hour == pytest.approx(0.01 * top.count)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in answer.summary), "zh-CN summary"


def test_bad_field_is_named(server: Running):
    bad = {**BRIEF, "economics": {**BRIEF["economics"], "utilization": 2}}
    with Client(server.addr) as client, pytest.raises(AdvisorError) as caught:
        client.recommend(bad)
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "brief.economics.utilization" in caught.value.violations


def test_unknown_dict_field_is_a_local_error():
    with Client("127.0.0.1:1") as client, pytest.raises(ValueError, match="params_bilion"):
        client.recommend({"model": {"params_bilion": 8}})


def test_list_gpus(server: Running):
    with Client(server.addr) as client:
        gpus = client.list_gpus().gpus
    assert {"h100-sxm", "mi300x", "l4"} <= {g.id for g in gpus}


# -- retries, deadlines, token, TLS (servers built around the real servicer) -----------------------------------


class FlakyServicer(Servicer):
    """The real servicer, answering UNAVAILABLE to the first `failures` Recommend calls (as a draining or
    not-yet-ready server does), then normally; it counts every attempt that reached it."""

    def __init__(self, store, failures: int = 0, delay_s: float = 0.0):
        super().__init__(store)
        self.failures, self.delay_s, self.attempts = failures, delay_s, 0
        self.lock = threading.Lock()

    def Recommend(self, request, context):  # noqa: N802
        with self.lock:
            self.attempts += 1
            fail = self.attempts <= self.failures
        if fail:
            context.abort(grpc.StatusCode.UNAVAILABLE, "not ready (test)")
        time.sleep(self.delay_s)
        return super().Recommend(request, context)


def _start(servicer: Servicer, credentials: grpc.ServerCredentials | None = None) -> tuple[grpc.Server, int]:
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    service_pb_grpc.add_GpuAdvisorServicer_to_server(servicer, srv)
    port = (srv.add_secure_port("127.0.0.1:0", credentials) if credentials
            else srv.add_insecure_port("127.0.0.1:0"))
    srv.start()
    return srv, port


@pytest.fixture
def flaky(server: Running) -> Iterator[tuple[FlakyServicer, int]]:
    servicer = FlakyServicer(server.store, failures=2)
    srv, port = _start(servicer)
    yield servicer, port
    srv.stop(None).wait()


def test_unavailable_is_retried_by_grpc(flaky: tuple[FlakyServicer, int]):
    servicer, port = flaky
    with Client(f"127.0.0.1:{port}", retry=RetryPolicy(max_attempts=4, initial_backoff_s=0.05)) as client:
        answer = client.recommend(BRIEF)
    assert answer.candidates
    assert servicer.attempts == 3  # two refusals, then the answer


def test_without_retries_unavailable_surfaces(flaky: tuple[FlakyServicer, int]):
    servicer, port = flaky
    with Client(f"127.0.0.1:{port}", retry=None) as client, pytest.raises(AdvisorError) as caught:
        client.recommend(BRIEF)
    assert caught.value.code == grpc.StatusCode.UNAVAILABLE
    assert servicer.attempts == 1


def test_retries_stop_at_max_attempts(server: Running):
    servicer = FlakyServicer(server.store, failures=10)
    srv, port = _start(servicer)
    try:
        with Client(f"127.0.0.1:{port}", retry=RetryPolicy(max_attempts=3, initial_backoff_s=0.05)) as client, \
                pytest.raises(AdvisorError) as caught:
            client.recommend(BRIEF)
    finally:
        srv.stop(None).wait()
    assert caught.value.code == grpc.StatusCode.UNAVAILABLE
    assert servicer.attempts == 3


def test_invalid_argument_is_not_retried(server: Running):
    servicer = FlakyServicer(server.store)
    srv, port = _start(servicer)
    try:
        with Client(f"127.0.0.1:{port}") as client, pytest.raises(AdvisorError) as caught:
            client.recommend({**BRIEF, "economics": {"utilization": 2}})
    finally:
        srv.stop(None).wait()
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert servicer.attempts == 1


def test_deadline_is_enforced(server: Running):
    servicer = FlakyServicer(server.store, delay_s=3.0)
    srv, port = _start(servicer)
    try:
        with Client(f"127.0.0.1:{port}", timeout=0.3) as client, pytest.raises(AdvisorError) as caught:
            client.recommend(BRIEF)
    finally:
        srv.stop(None).wait()
    assert caught.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert servicer.attempts == 1  # a deadline is an answer, not a reason to retry


def test_token_reaches_the_server(rules_copy: Path, start_server):
    running = start_server(rules_copy, admin_token="s3cret", watch=False)
    with Client(running.addr) as anonymous, pytest.raises(AdvisorError) as caught:
        anonymous.reload_rules()
    assert caught.value.code == grpc.StatusCode.UNAUTHENTICATED
    with Client(running.addr, token="s3cret") as admin:
        assert admin.reload_rules().ruleset.revision == running.store.status().revision


def test_tls(server: Running):
    ca = trustme.CA()
    cert = ca.issue_cert("localhost")
    creds = grpc.ssl_server_credentials([(cert.private_key_pem.bytes(), cert.cert_chain_pems[0].bytes())])
    srv, port = _start(FlakyServicer(server.store), creds)
    try:
        with Client(f"localhost:{port}", root_certificates=ca.cert_pem.bytes()) as client:
            assert client.recommend(BRIEF).candidates
        # The system's roots do not trust the test CA: the handshake fails (no retries to keep it short).
        with Client(f"localhost:{port}", tls=True, retry=None, timeout=10) as client, \
                pytest.raises(AdvisorError) as caught:
            client.list_gpus()
        assert caught.value.code == grpc.StatusCode.UNAVAILABLE
    finally:
        srv.stop(None).wait()
