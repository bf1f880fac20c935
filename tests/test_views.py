"""RecommendRequest.view: a summary is the full answer of the same brief with the explanations cut, every figure
it keeps the same."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from google.protobuf.json_format import MessageToJson, ParseDict
from ruamel.yaml import YAML

from service.frontends import cli
from service.wire import views
from service.wire.api import pb
from tests.conftest import Running
from tests.test_server import good_request

CASES = Path(__file__).parent / "cases"


def _case_requests() -> list[pb.RecommendRequest]:
    yaml = YAML(typ="safe")
    out = []
    for f in sorted(CASES.glob("*.yaml")):
        case = yaml.load(f.read_text(encoding="utf-8"))
        if "status" not in case.get("expect", {}):
            out.append(ParseDict(case["request"], pb.RecommendRequest()))
    return out


def _both(server: Running, request: pb.RecommendRequest) -> tuple[pb.RecommendResponse, pb.RecommendResponse]:
    full, summary = pb.RecommendRequest(), pb.RecommendRequest()
    full.CopyFrom(request)
    summary.CopyFrom(request)
    full.view, summary.view = pb.VIEW_FULL, pb.VIEW_SUMMARY
    return server.stub.Recommend(full, timeout=30), server.stub.Recommend(summary, timeout=30)


def test_a_summary_keeps_the_ranking_costs_and_headline_and_drops_the_reasons(server: Running):
    full, summary = _both(server, good_request())
    assert [c.gpu for c in summary.candidates] == [c.gpu for c in full.candidates]
    assert len(full.candidates) > 1 and any(c.reasons for c in full.candidates)
    for s, f in zip(summary.candidates, full.candidates, strict=True):
        assert (s.score, s.count, s.gpus_needed) == (f.score, f.count, f.gpus_needed)
        assert s.cost == f.cost and s.ownership == f.ownership and s.performance == f.performance
        assert s.memory == f.memory and s.market == f.market
        assert s.score_breakdown.cost_points == f.score_breakdown.cost_points
        assert not s.reasons and not s.caveats and not s.score_breakdown.rules
        assert list(s.placements) == list(f.placements[:1])
    assert summary.summary == full.summary and summary.route.kind == full.route.kind
    assert summary.metric == full.metric and list(summary.warnings) == list(full.warnings)
    assert list(summary.questions) == list(full.questions) and summary.provisional == full.provisional
    assert summary.ruleset == full.ruleset and list(summary.not_shown) == list(full.not_shown)
    assert not summary.notes and not summary.route.rationale and not summary.benchmark_plan
    assert all(not e.reasons for e in summary.excluded)
    assert [e.gpu for e in summary.excluded] == [e.gpu for e in full.excluded]
    assert summary.ByteSize() < full.ByteSize() / 2, (summary.ByteSize(), full.ByteSize())


def test_unspecified_is_the_full_answer(server: Running):
    request = good_request()
    full, _ = _both(server, request)
    plain = server.stub.Recommend(request, timeout=30)
    assert plain.SerializeToString(deterministic=True) == full.SerializeToString(deterministic=True)


@pytest.mark.parametrize("request_", _case_requests(), ids=lambda r: r.brief.workload and str(r.brief.workload))
def test_on_every_golden_case_a_summary_is_the_full_answer_cut(server: Running, request_: pb.RecommendRequest):
    full, summary = _both(server, request_)
    cut = pb.RecommendResponse()
    cut.CopyFrom(full)
    assert views.summarize(cut).SerializeToString(deterministic=True) == summary.SerializeToString(
        deterministic=True)


def test_a_summary_makes_no_trace(server: Running):
    request = good_request()
    request.include_trace = True
    full, summary = _both(server, request)
    assert full.trace and not summary.trace
    request.include_trace = False
    _, untraced = _both(server, request)
    assert untraced.SerializeToString(deterministic=True) == summary.SerializeToString(deterministic=True)


def test_an_unknown_view_is_invalid_argument_naming_the_field(server: Running):
    request = good_request()
    request.view = 9
    with pytest.raises(grpc.RpcError) as caught:
        server.stub.Recommend(request, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "view" in caught.value.details()


def test_the_cli_asks_for_a_summary(server: Running, capsys: pytest.CaptureFixture[str], tmp_path: Path):
    brief = tmp_path / "brief.yaml"
    brief.write_text(json.dumps({"brief": json.loads(MessageToJson(good_request().brief))}))
    assert cli.main(["recommend", str(brief), "--addr", server.addr, "--json", "--view", "summary"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["candidates"] and not any("reasons" in c for c in shown["candidates"])
    assert cli.main(["recommend", str(brief), "--addr", server.addr, "--json"]) == 0
    assert any("reasons" in c for c in json.loads(capsys.readouterr().out)["candidates"])


def test_the_client_asks_for_a_summary_by_name(server: Running):
    from gpu_advisor_client import Client, InvalidArgument

    with Client(server.addr, timeout=30) as client:
        brief = good_request().brief
        summary = client.recommend(brief, view="summary")
        full = client.recommend(brief, view="VIEW_FULL")
        with pytest.raises(InvalidArgument, match="view"):
            client.recommend(brief, view="short")
    assert [c.gpu for c in summary.candidates] == [c.gpu for c in full.candidates]
    assert not any(c.reasons for c in summary.candidates) and any(c.reasons for c in full.candidates)


def test_the_mcp_recommend_tool_offers_the_view_and_explain_does_not():
    from service.frontends import mcp_server

    assert "VIEW_SUMMARY" in json.dumps(mcp_server.request_schema()["properties"]["view"])
    assert "view" not in mcp_server.explain_schema()["properties"]
