"""Parallelism that cannot run is refused (issue 38 item 4): INVALID_ARGUMENT naming
brief.parallelism.tensor_parallel when tensor parallelism does not divide the model's attention heads, splits its
KV heads unevenly (neither a divisor nor a multiple of them), or leaves one scale-up domain; pipeline stages beyond
the layers name brief.parallelism.pipeline_parallel; a GPU listed twice in brief.gpus is refused. Before, tp 3 on
a 32-head model, 5 on a 28-head one, 1,000 on an 8B model and tp = pp = 1,024 were answered."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf.json_format import ParseDict
from google.rpc import error_details_pb2, status_pb2

from service.rulebook.version import Bundle
from service.wire.api import pb
from service.wire.validate import validate

from .conftest import Running

TP, PP = "brief.parallelism.tensor_parallel", "brief.parallelism.pipeline_parallel"


def _violations(bundle: Bundle, brief: dict[str, Any]) -> list[tuple[str, str]]:
    request = ParseDict({"brief": {"workload": "WORKLOAD_TYPE_REALTIME_INFERENCE", **brief}}, pb.RecommendRequest())
    return validate(request, bundle.known_gpu_ids(), bundle.known_model_names(), bundle.model_windows(),
                    bundle.model_shapes(), bundle.scale_up_domains())


def _on(bundle: Bundle, field: str, brief: dict[str, Any]) -> list[str]:
    return [why for path, why in _violations(bundle, brief) if path == field]


@pytest.mark.parametrize(("model", "tp", "heads"), [("llama-3.1-8b-instruct", 3, 32), ("Qwen2.5-7B-Instruct", 5, 28),
                                                   ("llama-3.1-8b-instruct", 7, 32)])
def test_tensor_parallel_must_divide_the_attention_heads(bundle: Bundle, model: str, tp: int, heads: int) -> None:
    [why] = _on(bundle, TP, {"model": {"name": model}, "parallelism": {"tensor_parallel": tp}})
    assert why.startswith(f"{tp} does not divide the {heads} attention heads of {model.lower()}"), why


def test_kv_heads_split_evenly_or_replicated(bundle: Bundle) -> None:
    # 16 GPUs over Llama 3.1 8B's 8 KV heads: each replicated on 2 GPUs, as the engines do; 32 heads divide
    for tp in (16, 4):
        assert _violations(bundle, {"model": {"name": "llama-3.1-8b-instruct"},
                                    "parallelism": {"tensor_parallel": tp}}) == []
    # Gemma 3 27B's query heads are not hidden / head_dim, so only its 16 KV heads are known: 6 splits them unevenly
    [why] = _on(bundle, TP, {"model": {"name": "gemma-3-27b"}, "parallelism": {"tensor_parallel": 6}})
    assert "does not split the 16 KV heads of gemma-3-27b" in why and "replicate each KV head" in why
    # the brief's own KV heads count too, for a model the registry does not know
    [why] = _on(bundle, TP, {"model": {"params_billion": 8, "kv_heads": 8, "layers": 32},
                             "parallelism": {"tensor_parallel": 3}})
    assert "does not split the 8 KV heads of the model" in why


def test_tensor_parallel_stays_in_one_scale_up_domain(bundle: Bundle) -> None:
    [why] = _on(bundle, TP, {"model": {"params_billion": 8}, "parallelism": {"tensor_parallel": 1000}})
    assert why.startswith("1,000 GPUs cannot share one layer: the largest scale-up domain of any GPU in the "
                          "catalog is 72 GPUs"), why
    [why] = _on(bundle, TP, {"model": {"params_billion": 70}, "gpus": ["l4"], "parallelism": {"tensor_parallel": 16}})
    assert "the largest scale-up domain of the GPUs the brief names is 8 GPUs" in why


def test_a_million_gpu_split_is_refused_on_both_fields(bundle: Bundle) -> None:
    found = dict(_violations(bundle, {"model": {"params_billion": 8},
                                      "parallelism": {"tensor_parallel": 1024, "pipeline_parallel": 1024}}))
    assert TP in found and "1,024 GPUs cannot share one layer" in found[TP]
    assert found[PP].startswith("1,024 pipeline stages need at least one layer each: more than 126 layers, the most"
                                " of any model the registry knows"), found[PP]
    [why] = _on(bundle, PP, {"model": {"name": "llama-3.1-8b-instruct"}, "parallelism": {"pipeline_parallel": 33}})
    assert "more than the 32 layers of llama-3.1-8b-instruct" in why
    assert _on(bundle, PP, {"model": {"name": "llama-3.1-8b-instruct"}, "parallelism": {"pipeline_parallel": 32}}) == []


def test_a_gpu_listed_twice_is_refused(bundle: Bundle) -> None:
    [why] = _on(bundle, "brief.gpus", {"model": {"params_billion": 8}, "gpus": ["h100-sxm", "l4", "h100-sxm"]})
    assert why == "'h100-sxm' is listed 2 times; name each GPU once"


def test_the_server_answers_invalid_argument_naming_the_field(server: Running) -> None:
    request = ParseDict({"brief": {"workload": "WORKLOAD_TYPE_REALTIME_INFERENCE",
                                   "model": {"name": "qwen2.5-7b-instruct"}, "parallelism": {"tensor_parallel": 5}}},
                        pb.RecommendRequest())
    with pytest.raises(grpc.RpcError) as err:
        server.stub.Recommend(request, timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    status = status_pb2.Status.FromString(dict(err.value.trailing_metadata())["grpc-status-details-bin"])
    detail = error_details_pb2.BadRequest()
    status.details[0].Unpack(detail)
    assert [v.field for v in detail.field_violations] == [TP]
