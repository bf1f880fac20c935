"""Issue 23 item 9: input the model cannot take is INVALID_ARGUMENT, naming the limit. A context beyond the named
model's window (the registry's context_window_tokens: bge-large-en-v1.5 takes 512 tokens, its config.json's
max_position_embeddings) and a prompt longer than the context (the brief's, else the named model's window)."""

from __future__ import annotations

from typing import Any

import grpc

from service.wire.api import pb
from service.wire.validate import validate
from tests.conftest import call


def _request(model: dict[str, Any], traffic: dict[str, Any] | None = None,
             workload: int = pb.WORKLOAD_TYPE_REALTIME_INFERENCE) -> pb.RecommendRequest:
    return pb.RecommendRequest(brief=pb.WorkloadBrief(
        workload=workload, model=pb.Model(**model), traffic=pb.Traffic(**(traffic or {}))))


def test_a_context_beyond_the_named_models_window_is_refused_naming_it(stub: Any) -> None:
    out = call(stub.Recommend, _request({"name": "bge-large-en-v1.5", "context_tokens": 8192},
                                        {"avg_input_tokens": 400}, pb.WORKLOAD_TYPE_EMBEDDING))
    assert out.code == grpc.StatusCode.INVALID_ARGUMENT, out
    assert out.fields == ("brief.model.context_tokens",)
    assert "512" in out.details and "8,192" in out.details
    # By an alias, in any case, the same window applies; at the window itself the brief is fine.
    alias = call(stub.Recommend, _request({"name": "baai/BGE-large-en-v1.5", "context_tokens": 513}))
    assert alias.fields == ("brief.model.context_tokens",)
    ok = call(stub.Recommend, _request({"name": "bge-large-en-v1.5", "context_tokens": 512},
                                       {"avg_input_tokens": 512}, pb.WORKLOAD_TYPE_EMBEDDING))
    assert ok.code == grpc.StatusCode.OK


def test_llama_takes_its_128k_window_and_not_a_token_more(stub: Any) -> None:
    # Llama 3.3 70B: max_position_embeddings 131,072 (config.json, rules/models/llama.yaml).
    at = call(stub.Recommend, _request({"name": "llama-3.3-70b-instruct", "context_tokens": 131072}))
    assert at.code == grpc.StatusCode.OK
    past = call(stub.Recommend, _request({"name": "llama-3.3-70b-instruct", "context_tokens": 200000}))
    assert past.fields == ("brief.model.context_tokens",) and "131,072" in past.details


def test_a_prompt_longer_than_the_context_is_refused_naming_the_context(stub: Any) -> None:
    out = call(stub.Recommend, _request({"params_billion": 8, "context_tokens": 4096},
                                        {"avg_input_tokens": 6000, "p95_input_tokens": 9000}))
    assert out.code == grpc.StatusCode.INVALID_ARGUMENT
    assert set(out.fields) == {"brief.traffic.avg_input_tokens", "brief.traffic.p95_input_tokens"}
    assert "4,096" in out.details and "9,000" in out.details
    only_p95 = call(stub.Recommend, _request({"params_billion": 8, "context_tokens": 4096},
                                             {"avg_input_tokens": 2000, "p95_input_tokens": 5000}))
    assert only_p95.fields == ("brief.traffic.p95_input_tokens",)


def test_without_a_context_the_named_models_window_bounds_the_prompt(stub: Any) -> None:
    out = call(stub.Recommend, _request({"name": "bge-large-en-v1.5"}, {"avg_input_tokens": 2048},
                                        pb.WORKLOAD_TYPE_EMBEDDING))
    assert out.fields == ("brief.traffic.avg_input_tokens",) and "512" in out.details


def test_unknown_windows_leave_the_brief_alone() -> None:
    # No registry windows (an unnamed model, or a caller of validate that has none): only the brief's own context.
    request = _request({"params_billion": 8}, {"avg_input_tokens": 100_000})
    assert validate(request) == []
    named = _request({"name": "bge-large-en-v1.5", "context_tokens": 8192})
    assert validate(named) == []
    assert [f for f, _ in validate(named, windows={"bge-large-en-v1.5": 512})] == ["brief.model.context_tokens"]
