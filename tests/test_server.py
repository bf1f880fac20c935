"""The wiring against a real server: health, reflection, catalog, ruleset, input errors, request ids, failures
that must not leak, reloads, stopping, and the `gpu-advisor` command."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from service.frontends import cli
from service.wire.api import SERVICE_NAME, pb
from service.wire.validate import MAX_QUOTES, MAX_STRING, MAX_TOOLCHAIN
from tests.conftest import Running, call

REPO = Path(__file__).parents[1]
GPU_IDS = {"b200", "gb200", "h200", "h100-sxm", "h100-pcie", "a100-80gb", "a100-40gb", "l40s", "l4",
           "rtx-4090", "rtx-5090", "mi300x", "mi325x", "mi355x", "b300", "gb300", "rtx-pro-6000", "h20"}


def good_request() -> pb.RecommendRequest:
    r = pb.RecommendRequest()
    b = r.brief
    b.workload = pb.WORKLOAD_TYPE_REALTIME_INFERENCE
    b.model.params_billion = 8
    b.model.precision = pb.PRECISION_BF16
    b.model.context_tokens = 8192
    b.traffic.concurrent_sessions = 8
    b.latency.p95_ms = 2000
    b.latency.p99_ms = 4000
    b.run_cycle = pb.RUN_CYCLE_ALWAYS_ON
    b.success_unit = pb.SUCCESS_UNIT_RESPONSE
    b.economics.hours_per_month = 730
    b.economics.horizon_months = 6
    b.economics.acceptance_rate = 0.9
    b.economics.needs_hardware_control = True
    b.economics.has_platform_team = True
    b.economics.demand = pb.DEMAND_STEADY
    return r


# -- health, reflection, catalog, ruleset ------------------------------------------------------------------


@pytest.mark.parametrize("service", ["", SERVICE_NAME])
def test_health_serving(server: Running, service: str):
    health = health_pb2_grpc.HealthStub(server.channel)
    resp = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
    assert resp.status == health_pb2.HealthCheckResponse.SERVING


def test_reflection_lists_the_service(server: Running):
    stub = reflection_pb2_grpc.ServerReflectionStub(server.channel)
    ask = reflection_pb2.ServerReflectionRequest(list_services="")
    replies = stub.ServerReflectionInfo(iter([ask]), timeout=5)
    names = {s.name for reply in replies for s in reply.list_services_response.service}
    assert {"gpuadvisor.v1.GpuAdvisor", "grpc.health.v1.Health"} <= names


def test_reflection_serves_the_proto(server: Running):
    # grpcurl needs the file descriptor too, not only the name, to call a method without .proto files.
    stub = reflection_pb2_grpc.ServerReflectionStub(server.channel)
    req = reflection_pb2.ServerReflectionRequest(file_containing_symbol="gpuadvisor.v1.GpuAdvisor")
    reply = next(iter(stub.ServerReflectionInfo(iter([req]), timeout=5)))
    assert reply.file_descriptor_response.file_descriptor_proto


def test_list_gpus_all_ids_with_dated_sourced_prices(stub):
    resp = stub.ListGpus(pb.ListGpusRequest(), timeout=10)
    assert {g.id for g in resp.gpus} == GPU_IDS
    assert resp.ruleset.revision and resp.ruleset.content_hash
    for g in resp.gpus:
        assert g.name and g.memory_gb > 0 and g.tflops_bf16 > 0 and g.tdp_w > 0, g.id
        assert {p.kind for p in g.prices} >= {"rent", "purchase"}, g.id
        for p in g.prices:
            assert p.usd > 0 and p.source, (g.id, p)
            date.fromisoformat(p.as_of)
        rent = [p for p in g.prices if p.kind == "rent" and p.current]
        if rent:  # derived from the current rent price: $/GPU-hour over dense BF16 TFLOPS
            assert g.usd_per_tflop_hour == pytest.approx(rent[0].usd / g.tflops_bf16, rel=1e-3), g.id


def test_list_gpus_bad_date(stub):
    out = call(stub.ListGpus, pb.ListGpusRequest(as_of="yesterday"))
    assert out.code == grpc.StatusCode.INVALID_ARGUMENT and "as_of" in out.fields


def test_get_ruleset(stub, server: Running):
    info = stub.GetRuleset(pb.GetRulesetRequest(), timeout=5)
    assert info.revision and len(info.content_hash) >= 32 and info.content_hash.startswith(info.revision)
    assert info.counts and all(v >= 0 for v in info.counts.values())
    assert info.loaded_at and info.last_error == ""
    # Any client may ask: the path is relative to the server's working folder (the repo here), never absolute.
    assert info.source_dir == os.path.relpath(server.rules_dir) == "rules"


def test_get_ruleset_shows_the_absolute_rules_path_to_an_admin_only(start_server, rules_copy):
    from tests.conftest import ADMIN, ADMIN_TOKEN

    running = start_server(rules_copy, watch=False, admin_token=ADMIN_TOKEN)
    plain = running.stub.GetRuleset(pb.GetRulesetRequest(), timeout=5)
    assert plain.source_dir == ""  # a temporary folder outside the working folder: omitted
    admin = running.stub.GetRuleset(pb.GetRulesetRequest(), metadata=ADMIN, timeout=5)
    assert admin.source_dir == str(rules_copy)


def test_recommend_ok_and_names_the_ruleset(stub):
    resp = stub.Recommend(good_request(), timeout=30)
    assert resp.candidates and resp.summary
    assert resp.route.kind != pb.ROUTE_KIND_UNSPECIFIED
    info = stub.GetRuleset(pb.GetRulesetRequest(), timeout=5)
    assert (resp.ruleset.revision, resp.ruleset.content_hash) == (info.revision, info.content_hash)


# -- structurally bad input → INVALID_ARGUMENT with the field path ----------------------------------------


def _set(path: str, value: object) -> Callable[[pb.RecommendRequest], None]:
    def apply(r: pb.RecommendRequest) -> None:
        *parents, leaf = path.split(".")
        msg = r
        for p in parents:
            msg = getattr(msg, p)
        setattr(msg, leaf, value)
    return apply


def _toolchain(items: list[str]) -> Callable[[pb.RecommendRequest], None]:
    return lambda r: r.brief.toolchain.extend(items)


def _quotes(n: int, gpu: str = "h100-sxm", usd: float = 2.0) -> Callable[[pb.RecommendRequest], None]:
    return lambda r: r.quotes.extend(pb.PriceQuote(gpu=gpu, usd_per_hour=usd) for _ in range(n))


BAD = {
    "negative-params": (_set("brief.model.params_billion", -7.0), "brief.model.params_billion"),
    "negative-int": (_set("brief.traffic.concurrent_sessions", -1), "brief.traffic.concurrent_sessions"),
    "negative-hours": (_set("brief.economics.hours_per_month", -1.0), "brief.economics.hours_per_month"),
    "negative-budget": (_set("brief.economics.budget_usd_per_hour", -5.0),
                        "brief.economics.budget_usd_per_hour"),
    "utilization-1.5": (_set("brief.economics.utilization", 1.5), "brief.economics.utilization"),
    "acceptance-1.2": (_set("brief.economics.acceptance_rate", 1.2), "brief.economics.acceptance_rate"),
    "p99-below-p95": (_set("brief.latency.p99_ms", 1000.0), "brief.latency.p99_ms"),
    "ttft-above-p95": (_set("brief.latency.ttft_ms", 2500.0), "brief.latency.ttft_ms"),  # contract, third round
    "unknown-workload": (_set("brief.workload", 99), "brief.workload"),
    "unknown-precision": (_set("brief.model.precision", 42), "brief.model.precision"),
    "unknown-demand": (_set("brief.economics.demand", -3), "brief.economics.demand"),
    "nan-params": (_set("brief.model.params_billion", math.nan), "brief.model.params_billion"),
    "inf-rps": (_set("brief.traffic.requests_per_second", math.inf), "brief.traffic.requests_per_second"),
    "absurd-params": (_set("brief.model.params_billion", 200_000.0), "brief.model.params_billion"),
    "absurd-context": (_set("brief.model.context_tokens", 20_000_000), "brief.model.context_tokens"),
    "hours-over-744": (_set("brief.economics.hours_per_month", 800.0), "brief.economics.hours_per_month"),
    "oversized-string": (_toolchain(["x" * (MAX_STRING + 1)]), "brief.toolchain[0]"),
    "oversized-list": (_toolchain(["vllm"] * (MAX_TOOLCHAIN + 1)), "brief.toolchain"),
    "too-many-quotes": (_quotes(MAX_QUOTES + 1), "quotes"),
    "quote-no-gpu": (_quotes(1, gpu=""), "quotes[0].gpu"),
    "quote-unknown-gpu": (_quotes(1, gpu="tpu-v9"), "quotes[0].gpu"),
    "quote-negative-price": (_quotes(1, usd=-1.0), "quotes[0].usd_per_hour"),
    "quote-bad-date": (lambda r: r.quotes.add(gpu="l4", usd_per_hour=0.5, as_of="last week"),
                       "quotes[0].as_of"),
    "unknown-attention": (_set("brief.model.attention", 9), "brief.model.attention"),
    "negative-kv-lora-rank": (_set("brief.model.kv_lora_rank", -512), "brief.model.kv_lora_rank"),
    "negative-window": (_set("brief.model.sliding_window_tokens", -1), "brief.model.sliding_window_tokens"),
    "absurd-global-batch": (_set("brief.training.global_batch_tokens", 20_000_000_000),
                            "brief.training.global_batch_tokens"),
    "price-tier-purchase": (_set("brief.economics.price_tier", pb.PRICE_TIER_LIST_PURCHASE),
                            "brief.economics.price_tier"),
    "quote-tier-purchase": (lambda r: r.quotes.add(gpu="l4", usd_per_hour=0.5, tier=pb.PRICE_TIER_LIST_PURCHASE),
                            "quotes[0].tier"),
    "locale": (_set("locale", "fr"), "locale"),
    "as-of": (_set("as_of", "2026-13-45"), "as_of"),
    "max-candidates-high": (_set("max_candidates", 51), "max_candidates"),
    "max-candidates-negative": (_set("max_candidates", -1), "max_candidates"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_is_invalid_argument_with_field_path(stub, name: str):
    mutate, field = BAD[name]
    request = good_request()
    mutate(request)
    out = call(stub.Recommend, request)
    assert out.code == grpc.StatusCode.INVALID_ARGUMENT, (out.code, out.details)
    assert field in out.fields, out.fields
    # The message names the field as well, for clients that ignore status details.
    assert field in out.details


def test_every_violation_is_reported_at_once(stub):
    request = good_request()
    request.brief.model.params_billion = -1
    request.brief.economics.utilization = 2
    request.locale = "xx"
    out = call(stub.Recommend, request)
    assert {"brief.model.params_billion", "brief.economics.utilization", "locale"} <= set(out.fields)


def test_missing_input_is_not_an_error(stub):
    resp = stub.Recommend(pb.RecommendRequest(), timeout=30)
    # An empty brief becomes questions, not INVALID_ARGUMENT: first what the work is and how big the model.
    fields = [q.field for q in resp.questions]
    assert fields[:2] == ["workload", "model.params_billion"], fields
    assert {"model.precision", "model.context_tokens", "economics.hours_per_month"} <= set(fields), fields


def test_known_quote_is_accepted(stub):
    request = good_request()
    request.quotes.add(gpu="h100-sxm", usd_per_hour=1.10, provider="example", as_of="2026-11-20")
    request.max_candidates = 20
    resp = stub.Recommend(request, timeout=30)
    h100 = [c for c in resp.candidates if c.gpu == "h100-sxm"]
    assert h100 and h100[0].cost.usd_per_hour == pytest.approx(1.10 * h100[0].count, rel=0.01)


def test_server_keeps_answering_after_bad_input(stub):
    for name in ("nan-params", "unknown-workload", "oversized-list"):
        request = good_request()
        BAD[name][0](request)
        assert call(stub.Recommend, request).code == grpc.StatusCode.INVALID_ARGUMENT
    assert stub.Recommend(good_request(), timeout=30).candidates


# -- request ids and failures --------------------------------------------------------------------------------


def test_request_id_is_echoed(stub):
    out = call(stub.Recommend, good_request(), metadata=(("x-request-id", "rid-test-42"),))
    assert out.code == grpc.StatusCode.OK
    assert out.initial_metadata.get("x-request-id") == "rid-test-42"
    assert out.trailing_metadata.get("x-request-id") == "rid-test-42"


def test_request_id_is_made_when_missing_and_kept_on_errors(stub):
    request = good_request()
    request.brief.model.params_billion = -1
    out = call(stub.Recommend, request)
    assert out.code == grpc.StatusCode.INVALID_ARGUMENT
    rid = out.initial_metadata.get("x-request-id")
    assert rid and len(rid) >= 32  # a uuid4
    assert out.trailing_metadata.get("x-request-id") == rid
    assert out.fields  # the request id in trailing metadata did not push out the status details


class _Exploding:
    """A bundle whose engine fails: what the client sees must not carry the failure's text or stack."""

    revision = "boom"
    content_hash = "boom"
    catalog = ()

    def known_gpu_ids(self) -> frozenset[str]:
        return frozenset()

    def advise(self, request: object) -> object:
        raise RuntimeError("secret internal detail /etc/passwd")


def test_unexpected_exception_is_internal_without_details(server: Running, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(server.store, "active", lambda: _Exploding())
    out = call(server.stub.Recommend, good_request(), metadata=(("x-request-id", "rid-boom"),))
    assert out.code == grpc.StatusCode.INTERNAL
    assert all(leak not in out.details for leak in ("secret", "Traceback", "RuntimeError", "passwd"))
    assert "rid-boom" in out.details  # enough to find the trace in the log
    monkeypatch.undo()
    assert server.stub.Recommend(good_request(), timeout=30).candidates


# -- rules that fail to load, reloads, admin token ----------------------------------------------------------


def test_not_serving_until_rules_load(tmp_path: Path, start_server):
    empty = tmp_path / "no-rules"
    empty.mkdir()
    # Nothing to fall back on either (no state folder, no shipped rules, no built-in copy): a refused folder alone
    # starts on the rules shipped with the server (tests/test_last_good.py) or the copy (tests/test_builtin_rules.py).
    running = start_server(empty, watch=False, builtin_rules=tmp_path / "nothing-shipped",
                           builtin_copy=tmp_path / "no-built-in-copy")
    health = health_pb2_grpc.HealthStub(running.channel)
    for service in ("", SERVICE_NAME):
        resp = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        assert resp.status == health_pb2.HealthCheckResponse.NOT_SERVING
    assert call(running.stub.Recommend, good_request()).code == grpc.StatusCode.UNAVAILABLE
    info = running.stub.GetRuleset(pb.GetRulesetRequest(), timeout=5)
    assert info.revision == "" and info.last_error


def test_reload_needs_the_token_and_keeps_the_last_good_version(rules_copy: Path, start_server):
    running = start_server(rules_copy, admin_token="s3cret", watch=False)
    stub = running.stub
    auth = (("authorization", "Bearer s3cret"),)
    assert call(stub.ReloadRules, pb.ReloadRulesRequest()).code == grpc.StatusCode.UNAUTHENTICATED
    wrong = call(stub.ReloadRules, pb.ReloadRulesRequest(), metadata=(("authorization", "Bearer nope"),))
    assert wrong.code == grpc.StatusCode.UNAUTHENTICATED

    before = stub.GetRuleset(pb.GetRulesetRequest(), timeout=5)
    same = stub.ReloadRules(pb.ReloadRulesRequest(), metadata=auth, timeout=60)
    assert not same.reloaded and same.ruleset.revision == before.revision
    token_file = rules_copy.parent / "admin-token"
    token_file.write_text("s3cret\n", encoding="utf-8")
    assert cli.main(["reload", "--addr", running.addr, "--token-file", str(token_file)]) == 0
    token_file.write_text("wrong\n", encoding="utf-8")
    assert cli.main(["reload", "--addr", running.addr, "--token-file", str(token_file)]) == 1

    # A broken edit is rejected, reported, and the good version keeps serving.
    routing = rules_copy / "routing.yaml"
    good_text = routing.read_text(encoding="utf-8")
    routing.write_text(good_text + "\nrows: [this is: not: valid\n", encoding="utf-8")
    bad = stub.ReloadRules(pb.ReloadRulesRequest(), metadata=auth, timeout=60)
    assert not bad.reloaded and bad.ruleset.last_error and bad.ruleset.revision == before.revision
    assert stub.Recommend(good_request(), timeout=30).ruleset.revision == before.revision

    # A real change (a comment is enough: the hash covers the bytes) becomes the new active version.
    routing.write_text(good_text + "\n# reviewed\n", encoding="utf-8")
    new = stub.ReloadRules(pb.ReloadRulesRequest(), metadata=auth, timeout=60)
    assert new.reloaded and new.ruleset.last_error == "" and new.ruleset.revision != before.revision
    assert stub.Recommend(good_request(), timeout=30).ruleset.revision == new.ruleset.revision
    assert len(new.other_workers) == 0  # one process: nobody else to ask (--processes N: test_reload_fanout)


# -- stopping ----------------------------------------------------------------------------------------------


def test_stop_without_signals(rules_copy: Path):
    running = Running(rules_copy, watch=False)
    assert running.stub.Recommend(good_request(), timeout=30).candidates
    assert running.server.stop(grace=2).wait(timeout=60)  # stopped (a bound on the wait, not a speed claim)
    running.store.close()
    after = call(running.stub.GetRuleset, pb.GetRulesetRequest(), timeout=2)
    assert after.code == grpc.StatusCode.UNAVAILABLE
    running.channel.close()


def test_sigterm_stops_the_process_cleanly(tmp_path: Path):
    env = {**os.environ, "GPU_ADVISOR_ADDR": "127.0.0.1:0", "GPU_ADVISOR_RULES": str(REPO / "rules"),
           "GPU_ADVISOR_LOG_LEVEL": "INFO", "PYTHONPATH": str(REPO)}
    log = tmp_path / "server.log"
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "service", "--no-watch"], cwd=REPO, env=env,
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        port = 0
        deadline = time.monotonic() + 60
        while not port and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            for line in log.read_text().splitlines():
                if line.startswith("{") and json.loads(line).get("event") == "serving":
                    port = json.loads(line)["port"]
        assert port, log.read_text()
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == \
                health_pb2.HealthCheckResponse.SERVING
        proc.send_signal(signal.SIGHUP)  # reload: the same files, so nothing changes and it keeps serving
        wait_until = time.monotonic() + 60
        while "sighup_reload" not in log.read_text() and time.monotonic() < wait_until:
            time.sleep(0.1)
        assert proc.poll() is None and "sighup_reload" in log.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        events = [json.loads(x).get("event") for x in log.read_text().splitlines() if x.startswith("{")]
        assert "stopping" in events and "stopped" in events
        assert "rpc" in events  # the health check got its structured log line
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# -- the gpu-advisor command -------------------------------------------------------------------------------


def test_cli_recommend_table(server: Running, capsys: pytest.CaptureFixture[str]):
    rc = cli.main(["recommend", str(REPO / "examples" / "realtime-chat-8b.yaml"), "--addr", server.addr])
    out = capsys.readouterr().out
    assert rc == 0
    assert "$/h" in out and "Route:" in out and "need/capacity GB" in out


def test_cli_json_and_explain(server: Running, capsys: pytest.CaptureFixture[str]):
    brief = str(REPO / "examples" / "lora-7b.yaml")
    assert cli.main(["recommend", brief, "--addr", server.addr, "--json", "--max", "2"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert len(body["candidates"]) <= 2 and body["summary"]
    assert cli.main(["explain", brief, "--addr", server.addr]) == 0
    out = capsys.readouterr().out
    assert "Fired (" in out and "Not fired (" in out and ".yaml:" in out


def test_cli_gpus_and_ruleset(server: Running, capsys: pytest.CaptureFixture[str]):
    assert cli.main(["gpus", "--addr", server.addr]) == 0
    out = capsys.readouterr().out
    assert all(g in out for g in GPU_IDS)
    assert cli.main(["ruleset", "--addr", server.addr]) == 0
    assert "revision" in capsys.readouterr().out


def test_cli_invalid_argument_exits_2(server: Running, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    brief = tmp_path / "bad.yaml"
    brief.write_text("workload: WORKLOAD_TYPE_BATCH_INFERENCE\nmodel: {params_billion: -3}\n")
    assert cli.main(["recommend", str(brief), "--addr", server.addr]) == 2
    assert "brief.model.params_billion" in capsys.readouterr().err


def test_cli_unreadable_brief_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    brief = tmp_path / "bad.yaml"
    brief.write_text("workload: NOT_A_WORKLOAD\n")
    assert cli.main(["recommend", str(brief), "--addr", "127.0.0.1:1"]) == 2
    assert "workload" in capsys.readouterr().err
