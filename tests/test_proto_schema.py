"""The proto → JSON Schema generator: the schemas accept what protobuf's JSON form is, in both directions."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
from google.protobuf.json_format import MessageToDict, ParseDict
from ruamel.yaml import YAML

from service.frontends.cli import load_request
from service.wire import proto_schema as ps
from service.wire.api import pb

EXAMPLES = sorted((Path(__file__).parents[1] / "examples").glob("*.yaml"))


def _valid(schema: dict, data: object) -> list[str]:
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(data)]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_fits_the_input_schema_and_parses(path: Path) -> None:
    data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    body = data if "brief" in data else {"brief": data}
    assert _valid(ps.message_schema(pb.RecommendRequest.DESCRIPTOR), body) == []
    ParseDict(body, pb.RecommendRequest())  # what fits the schema, the service's parser takes


def test_output_schema_takes_what_message_to_dict_writes() -> None:
    # 64-bit integers come out as strings, which the input schema (numbers for assistants) refuses.
    written = MessageToDict(load_request(EXAMPLES[0].parent / "realtime-70b-fp8.yaml"),
                            preserving_proto_field_name=True)
    assert written["brief"]["model"]["context_tokens"] == "8192"
    assert _valid(ps.message_schema(pb.RecommendRequest.DESCRIPTOR, output=True), written) == []
    info = MessageToDict(pb.RulesetInfo(revision="r", counts={"rules": 95, "gpus": 14}),
                         preserving_proto_field_name=True)
    assert _valid(ps.message_schema(pb.RulesetInfo.DESCRIPTOR, output=True), info) == []
    assert _valid(ps.message_schema(pb.RulesetInfo.DESCRIPTOR, output=True), {"counts": {"rules": "x"}})


def test_input_schema_refuses_what_the_parser_would_misread() -> None:
    schema = ps.message_schema(pb.RecommendRequest.DESCRIPTOR)
    assert _valid(schema, {"brief": {"workload": "WORKLOAD_TYPE_UNSPECIFIED"}})  # leave it out instead
    assert _valid(schema, {"brief": {"model": {"params": 70}}})  # a misspelt field is not dropped silently
    assert _valid(schema, {"brief": {"economics": {"needs_hardware_control": "yes"}}})
    assert _valid(schema, {"brief": {"toolchain": "vllm"}})


def test_comments_units_and_optional_fields() -> None:
    econ = ps.message_schema(pb.Economics.DESCRIPTOR)["properties"]
    assert "0..1" in econ["utilization"]["description"]
    assert econ["budget_usd_per_hour"]["x-unit"] == "USD per hour"
    assert "not the same as false" in econ["needs_hardware_control"]["description"]
    assert ps.unit_of("p95_ms") == "milliseconds" and ps.unit_of("hours_per_month") == "hours per month"
    assert ps.unit_of("interconnect_gbs") == "GB/s" and ps.unit_of("concurrent_sessions") == ""


def test_without_the_proto_source_the_schema_keeps_structure_and_units(tmp_path: Path) -> None:
    assert ps.source_comments(pb.DESCRIPTOR.name, (tmp_path,)) == {}
    bare = ps.message_schema(pb.Economics.DESCRIPTOR, comments={})
    assert bare["properties"]["utilization"] == {"type": "number"}
    assert bare["properties"]["hours_per_month"]["x-unit"] == "hours per month"


def test_field_lookup_by_path() -> None:
    assert ps.field_at(pb.WorkloadBrief.DESCRIPTOR, "model.params_billion").name == "params_billion"
    assert ps.field_at(pb.WorkloadBrief.DESCRIPTOR, "model.nope") is None
    assert ps.field_at(pb.WorkloadBrief.DESCRIPTOR, "workload.x") is None
    assert ps.json_type(ps.field_at(pb.WorkloadBrief.DESCRIPTOR, "economics.demand")) == "enum"
