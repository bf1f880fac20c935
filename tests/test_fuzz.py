"""Fuzzed Recommend requests get OK or INVALID_ARGUMENT naming fields, never anything else (issue 7, item 4).

20,000 generated requests (1,000 Hypothesis examples x 20) go through the real validate → map → advise → map-back
path in-process (the volume),
and 500 through a real gRPC server on an ephemeral port (the wire: status details within the metadata limit,
int32 fields that must encode). Requests come from tests/fuzz_requests.py; each run uses the same seeds
(derandomized), so a failure reproduces.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.decide.sizing.common import MAX_GPUS
from service.rulebook.store import RuleStore
from service.serving.errors import MAX_VIOLATIONS, invalid_status
from service.wire import api
from service.wire.api import pb
from service.wire.validate import (
    MAX_QUOTE_USD_PER_HOUR,
    MAX_QUOTES,
    MAX_REQUEST_BYTES,
    MAX_STRING,
    MAX_TOOLCHAIN,
    MIN_POSITIVE,
    validate,
)
from tests.conftest import Running, call
from tests.fuzz_requests import request_from_seed, seeds
from tests.test_server import GPU_IDS

RULES = Path(__file__).parents[1] / "rules"
IN_PROCESS = 20_000
BATCH = 20
OVER_GRPC = 500
METADATA_LIMIT = 16 * 1024  # gRPC's default maximum size of response headers/trailers
FIELD_PATH = re.compile(r"^[a-z][a-z0-9_]*(\[\d+\])?(\.[a-z][a-z0-9_]*(\[\d+\])?)*$")


@pytest.fixture(scope="module")
def bundle():
    store = RuleStore(RULES)
    store.load()
    yield store.active()
    store.close()


def _check_invalid(request: pb.RecommendRequest, violations: list[tuple[str, str]]) -> None:
    for field, _ in violations:
        assert FIELD_PATH.match(field), field
    status = invalid_status(violations)
    # The status goes base64-encoded into the trailers, beside grpc-message.
    assert len(status.SerializeToString()) * 4 / 3 + len(status.message.encode()) * 3 < METADATA_LIMIT
    assert len(status.details) > 0 and status.message


def _check_answer(bundle, request: pb.RecommendRequest) -> None:  # noqa: ANN001
    advice = bundle.advise(api.request_from_proto(request))
    response = api.advice_to_proto(advice)
    assert response.ByteSize() < 4 * 1024 * 1024  # gRPC's default maximum message size
    for c in response.candidates:
        assert 1 <= c.count <= MAX_GPUS
        assert math.isfinite(c.score) and math.isfinite(c.cost.usd_per_hour)


def test_generated_requests_in_process_are_answered_or_named_invalid(bundle):
    seen: set[int] = set()
    outcomes = {"ok": 0, "invalid": 0}
    known = bundle.known_gpu_ids()

    # Hypothesis's own bookkeeping costs about as much per example as a request does, so each example draws one
    # seed and runs a batch of requests derived from it: 1,000 examples x 20 requests.
    @settings(max_examples=IN_PROCESS // BATCH, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(seeds)
    def batch(seed: int) -> None:
        for i in range(BATCH):
            sub = (seed * BATCH + i) % 2**64
            seen.add(sub)
            request = request_from_seed(sub)
            violations = validate(request, known)
            if violations:
                outcomes["invalid"] += 1
                _check_invalid(request, violations)
            else:
                outcomes["ok"] += 1
                _check_answer(bundle, request)

    batch()
    assert len(seen) >= IN_PROCESS
    # Both paths must be exercised in volume, or the test proves little about one of them.
    assert outcomes["ok"] > IN_PROCESS // 10 and outcomes["invalid"] > IN_PROCESS // 10, outcomes


def test_generated_requests_over_grpc_are_ok_or_invalid_argument(server: Running):
    codes: dict[str, int] = {}

    @settings(max_examples=OVER_GRPC, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(seeds)
    def one(seed: int) -> None:
        out = call(server.stub.Recommend, request_from_seed(seed), timeout=20)
        codes[out.code.name] = codes.get(out.code.name, 0) + 1
        assert out.code in (grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT), (out.code, out.details[:300])
        if out.code == grpc.StatusCode.INVALID_ARGUMENT:
            assert 0 < len(out.fields) <= MAX_VIOLATIONS
            assert all(FIELD_PATH.match(f) for f in out.fields), out.fields

    one()
    assert codes.get("OK", 0) > OVER_GRPC // 10 and codes.get("INVALID_ARGUMENT", 0) > OVER_GRPC // 10, codes


def _base() -> pb.RecommendRequest:
    return pb.RecommendRequest(brief=pb.WorkloadBrief(
        workload=pb.WORKLOAD_TYPE_REALTIME_INFERENCE,
        model=pb.Model(params_billion=70, precision=pb.PRECISION_FP8, context_tokens=8192),
    ))


def test_a_quote_of_1e308_per_hour_is_invalid_argument_naming_the_quote(server: Running):
    r = _base()
    r.quotes.add(gpu="h100-sxm", usd_per_hour=1e308)
    out = call(server.stub.Recommend, r)
    assert out.code == grpc.StatusCode.INVALID_ARGUMENT
    assert out.fields == ("quotes[0].usd_per_hour",)
    r.quotes[0].usd_per_hour = MAX_QUOTE_USD_PER_HOUR  # the largest price allowed still gets an answer
    assert call(server.stub.Recommend, r).code == grpc.StatusCode.OK


def test_a_number_too_small_to_mean_anything_is_invalid_argument_not_an_underflow(server: Running):
    # Found by Hypothesis: 5e-324 requests/s x 3600 x an acceptance rate of 0.25 underflows to 0, and the cost
    # per accepted unit divided by it (ZeroDivisionError, INTERNAL). Every double of a brief has a floor.
    r = _base()
    r.brief.traffic.requests_per_second = 5e-324
    r.brief.economics.acceptance_rate = 0.25
    out = call(server.stub.Recommend, r)
    assert out.code == grpc.StatusCode.INVALID_ARGUMENT
    assert out.fields == ("brief.traffic.requests_per_second",)
    assert "at least 1e-06" in out.details
    r.brief.traffic.requests_per_second = MIN_POSITIVE  # the smallest allowed gets an answer
    assert call(server.stub.Recommend, r).code == grpc.StatusCode.OK
    r.quotes.add(gpu="h100-sxm", usd_per_hour=1e-300)
    out = call(server.stub.Recommend, r)
    assert out.code == grpc.StatusCode.INVALID_ARGUMENT and out.fields == ("quotes[0].usd_per_hour",)


def test_every_double_of_a_brief_at_its_floor_or_below_gets_ok_or_invalid_argument(bundle):
    # In-process: each double field of the brief, set to the smallest allowed value and to values below it,
    # on the bench brief with every success unit and a few acceptance rates.
    from service.bench.loadgen import distinct_briefs

    doubles = [(path, name) for path, name in _double_fields(pb.WorkloadBrief.DESCRIPTOR, ("brief",))]
    assert len(doubles) >= 14
    base = pb.RecommendRequest.FromString(distinct_briefs(1)[0][5:])
    for (path, name), value in ((d, v) for d in doubles for v in (5e-324, 1e-310, 1e-12, MIN_POSITIVE)):
        for unit in pb.SuccessUnit.values():
            for acceptance in (0.0, 0.001, 0.25):
                r = pb.RecommendRequest()
                r.CopyFrom(base)
                r.brief.success_unit, r.brief.economics.acceptance_rate = unit, acceptance
                msg = r
                for part in path:
                    msg = getattr(msg, part)
                setattr(msg, name, value)
                violations = validate(r, bundle.known_gpu_ids())
                if value < MIN_POSITIVE:
                    assert ".".join((*path, name)) in {v[0] for v in violations}
                elif not violations:
                    assert api.advice_to_proto(bundle.advise(api.request_from_proto(r))).summary


def _double_fields(desc, prefix):  # noqa: ANN001, ANN202
    for f in desc.fields:
        if f.type == f.TYPE_MESSAGE and not f.is_repeated:
            yield from _double_fields(f.message_type, (*prefix, f.name))
        elif f.type in (f.TYPE_DOUBLE, f.TYPE_FLOAT) and not f.is_repeated:
            yield prefix, f.name


@pytest.mark.parametrize("rps", [1e7, 1_000_000])
def test_a_load_no_cluster_serves_gets_a_representable_count(server: Running, rps: float):
    # 1,000B parameters at a million requests a second needs more GPUs than an int32 (or any cluster) holds.
    r = pb.RecommendRequest(brief=pb.WorkloadBrief(
        workload=pb.WORKLOAD_TYPE_REALTIME_INFERENCE, model=pb.Model(params_billion=1000),
        traffic=pb.Traffic(requests_per_second=rps, avg_output_tokens=10_000_000)), max_candidates=50)
    out = call(server.stub.Recommend, r)
    if rps > 1_000_000:
        assert out.code == grpc.StatusCode.INVALID_ARGUMENT
        assert out.fields == ("brief.traffic.requests_per_second",)
        return
    assert out.code == grpc.StatusCode.OK, out.details
    # No GPU can serve it: each is excluded as infeasible (or, where one could, its count is representable).
    assert len(out.response.candidates) + len(out.response.excluded) == len(GPU_IDS)
    assert all(1 <= c.count <= MAX_GPUS for c in out.response.candidates)


def test_many_long_unknown_quote_ids_give_a_bounded_invalid_argument(server: Running):
    r = _base()
    for i in range(64):
        r.quotes.add(gpu=f"unknown-gpu-{i:03d}-" + "x" * 240, usd_per_hour=2.0, provider="p" * 256)
    out = call(server.stub.Recommend, r)
    assert out.code == grpc.StatusCode.INVALID_ARGUMENT  # was RESOURCE_EXHAUSTED: trailers over 16 KB
    assert len(out.fields) == MAX_VIOLATIONS
    assert out.fields[0] == "quotes[0].gpu"
    assert "more" in out.details
    assert len(out.details) < 2000


def _largest_admitted() -> pb.RecommendRequest:
    """Every string at its length limit in 4-byte characters and every list at its entry limit: the biggest
    request the field limits let through to validation."""
    wide = "\U0001D54F" * MAX_STRING  # 𝕏, 4 bytes in UTF-8
    r = _base()
    r.locale, r.as_of = wide, wide
    r.brief.toolchain.extend([wide] * MAX_TOOLCHAIN)
    for _ in range(MAX_QUOTES):
        r.quotes.add(gpu=wide, provider=wide, as_of=wide, usd_per_hour=MAX_QUOTE_USD_PER_HOUR)
    return r


def test_the_largest_request_the_limits_admit_is_read_and_named_invalid(server: Running):
    r = _largest_admitted()
    assert MAX_REQUEST_BYTES / 3 < r.ByteSize() < MAX_REQUEST_BYTES / 2  # the margin the limit's comment claims
    out = call(server.stub.Recommend, r)
    assert out.code == grpc.StatusCode.INVALID_ARGUMENT and "quotes[0].gpu" in out.fields


def test_a_request_over_the_size_limit_is_refused_before_python_reads_it(server: Running):
    r = _base()
    r.brief.toolchain.extend(["vllm"] * ((MAX_REQUEST_BYTES - r.ByteSize()) // 6 + 1))
    assert r.ByteSize() > MAX_REQUEST_BYTES
    out = call(server.stub.Recommend, r)
    assert out.code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in out.details
    assert call(server.stub.Recommend, _base()).code == grpc.StatusCode.OK  # and the server serves on


def test_a_long_toolchain_is_checked_up_to_its_limit_only(bundle):
    # Every entry beyond the limit was checked too: 98 ms of validation for 1.3 million of them.
    r = _base()
    r.brief.toolchain.extend(["x" * (MAX_STRING + 1)] * 10_000)
    fields = [f for f, _ in validate(r, bundle.known_gpu_ids())]
    assert fields == ["brief.toolchain", *(f"brief.toolchain[{i}]" for i in range(MAX_TOOLCHAIN))]


_WIDE = st.text(alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), min_size=100, max_size=400)


@given(st.lists(st.tuples(st.one_of(st.text(max_size=2000), _WIDE), st.one_of(st.text(max_size=5000), _WIDE)),
                min_size=1, max_size=200))
@settings(max_examples=60, deadline=None, derandomize=True, database=None)
def test_any_violation_list_fits_the_trailers(violations):
    status = invalid_status(violations)
    assert len(status.SerializeToString()) * 4 / 3 + len(status.message.encode()) * 3 < METADATA_LIMIT


def _raw(server: Running, method: str):  # noqa: ANN202 - a callable taking and returning bytes
    return server.channel.unary_unary(f"/gpuadvisor.v1.GpuAdvisor/{method}",
                                      request_serializer=lambda b: b, response_deserializer=lambda b: b)


def test_bytes_that_are_not_a_request_get_invalid_argument(server: Running):
    # A string field holding invalid UTF-8, garbage, a truncated field: grpc itself would answer INTERNAL.
    cases = [("Recommend", b"\x1a\x02\xff\xfe")]  # locale (field 3) = two bytes that are not UTF-8
    cases += [(m, raw) for m in ("Recommend", "ListGpus", "GetRuleset") for raw in (b"\xff\xff\xff", b"\x0a\x05\x0a")]
    for method, raw in cases:
        try:
            _raw(server, method)(raw, timeout=10)
            raise AssertionError(f"{method} accepted {raw!r}")
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, raw, err.details())
            assert "is not a valid gpuadvisor.v1." in err.details()


@given(seed=seeds, flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=6))
@settings(max_examples=200, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
def test_corrupted_request_bytes_get_ok_or_invalid_argument(server: Running, seed: int, flips):  # noqa: ANN001
    data = bytearray(request_from_seed(seed).SerializeToString())
    for at, value in flips:
        if data:
            data[at % len(data)] = value
    try:
        _raw(server, "Recommend")(bytes(data), timeout=20)
    except grpc.RpcError as err:
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (err.code(), err.details()[:300])
