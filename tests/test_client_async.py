"""The installed client's AsyncClient (grpc.aio) and the errors both clients raise, against real servers on
127.0.0.1: the same answers as the sync client, one exception class per status (INVALID_ARGUMENT's fields read
from the BadRequest the server sends, UNAVAILABLE for a closed port, DEADLINE_EXCEEDED), a dict brief checked
before any call, and enum names read off answers. No pytest-asyncio: each test runs its coroutine."""

from __future__ import annotations

import asyncio
import itertools
import socket
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor_pb2

from tests.conftest import Running

try:
    import gpu_advisor_client as gac
    from gpu_advisor_client import AsyncClient, Client, enum_name
except ImportError as err:  # pragma: no cover - a setup problem, reported as such
    pytest.fail(f"gpu_advisor_client is not installed ({err}): run `make client` (make test does)",
                pytrace=False)

BRIEF = {
    "workload": "WORKLOAD_TYPE_REALTIME_INFERENCE",
    "model": {"params_billion": 8, "precision": "PRECISION_BF16", "context_tokens": 8192},
    "traffic": {"concurrent_sessions": 8, "avg_input_tokens": 1000, "avg_output_tokens": 300},
    "latency": {"p95_ms": 2000},
    "economics": {"hours_per_month": 730, "horizon_months": 6, "demand": "DEMAND_STEADY"},
}
BAD_UTILIZATION = {**BRIEF, "economics": {**BRIEF["economics"], "utilization": 2}}


_unique = itertools.count(1)


def fresh_brief() -> dict:
    """BRIEF with a model size no earlier call used, so no memo of the server's shortens its work (tens of ms)."""
    return {**BRIEF, "model": {**BRIEF["model"], "params_billion": 7 + next(_unique) / 1000}}


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound by the kernel, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- AsyncClient against the real server -----------------------------------------------------------------------


def test_async_answers_as_the_sync_client_does(server: Running):
    async def main():
        async with AsyncClient(server.addr, timeout=20) as advisor:
            return await asyncio.gather(advisor.recommend(BRIEF, max_candidates=3), advisor.list_gpus(),
                                        advisor.get_ruleset())

    answer, gpus, ruleset = asyncio.run(main())
    with Client(server.addr, timeout=20) as client:
        expected = client.recommend(BRIEF, max_candidates=3)
    assert isinstance(answer, gac.pb.RecommendResponse)
    assert [c.gpu for c in answer.candidates] == [c.gpu for c in expected.candidates]
    assert 1 <= len(answer.candidates) <= 3
    assert {"h100-sxm", "mi300x", "l4"} <= {g.id for g in gpus.gpus}
    assert ruleset.revision == answer.ruleset.revision == server.store.status().revision


def test_async_calls_share_one_channel(server: Running):
    async def main():
        async with AsyncClient(server.addr, timeout=30) as advisor:
            answers = await asyncio.gather(*(advisor.recommend(BRIEF, locale=loc) for loc in ["en", "zh-CN"] * 4))
            return answers, advisor.channel

    answers, channel = asyncio.run(main())
    assert len({a.candidates[0].gpu for a in answers}) == 1
    assert any("\u4e00" <= ch <= "\u9fff" for ch in answers[1].summary)
    assert isinstance(channel, grpc.aio.Channel)


def test_async_invalid_argument_names_the_fields_the_server_sent(server: Running):
    async def main():
        async with AsyncClient(server.addr) as advisor:
            await advisor.recommend(BAD_UTILIZATION)

    with pytest.raises(gac.InvalidArgument) as caught:
        asyncio.run(main())
    err = caught.value
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT
    assert isinstance(err, gac.GpuAdvisorError) and isinstance(err, ValueError)
    assert isinstance(err.__cause__, grpc.aio.AioRpcError), "sent and refused by the server, not a local check"
    assert [v.field for v in err.violations] == ["brief.economics.utilization"]
    field, description = err.violations[0]
    assert field == "brief.economics.utilization" and description
    assert "brief.economics.utilization" in err.violations and dict(err.violations) == {field: description}


def test_async_unavailable_for_a_closed_port():
    async def main():
        async with AsyncClient(f"127.0.0.1:{closed_port()}", retry=None, timeout=10) as advisor:
            await advisor.list_gpus()

    with pytest.raises(gac.Unavailable) as caught:  # refused, not waited out: that would be DeadlineExceeded
        asyncio.run(main())
    assert caught.value.code == grpc.StatusCode.UNAVAILABLE and not caught.value.violations
    assert not isinstance(caught.value, gac.DeadlineExceeded)


def test_async_retries_then_unavailable_for_a_closed_port():
    async def main():
        async with AsyncClient(f"127.0.0.1:{closed_port()}", timeout=10,
                               retry=gac.RetryPolicy(max_attempts=3, initial_backoff_s=0.05)) as advisor:
            await advisor.recommend(BRIEF)

    with pytest.raises(gac.Unavailable):
        asyncio.run(main())


# A deadline of 0.1 ms against tens of ms of work (a fresh brief, with the trace): the server's check of the time
# left, or the client's timer, ends it. Not ListGpus: on loopback its answer (well under a millisecond) can come
# back before either looks, and a repeated brief can be answered from the server's memos about as fast.


def test_async_tiny_deadline(server: Running):
    async def main():
        async with AsyncClient(server.addr, timeout=1e-4) as advisor:
            await advisor.recommend(fresh_brief(), include_trace=True)

    with pytest.raises(gac.DeadlineExceeded) as caught:
        asyncio.run(main())
    assert caught.value.code == grpc.StatusCode.DEADLINE_EXCEEDED


def test_async_per_call_timeout_overrides_the_clients(server: Running):
    async def main():
        async with AsyncClient(server.addr, timeout=30) as advisor:
            await advisor.recommend(fresh_brief(), include_trace=True, timeout=1e-4)

    with pytest.raises(gac.DeadlineExceeded):
        asyncio.run(main())


def test_async_admin_errors_and_token(rules_copy: Path, start_server, server: Running):
    running = start_server(rules_copy, admin_token="s3cret", watch=False)

    async def main():
        async with AsyncClient(server.addr) as no_admin_token_set:
            with pytest.raises(gac.PermissionDenied):
                await no_admin_token_set.reload_rules()
        async with AsyncClient(running.addr) as anonymous:
            with pytest.raises(gac.Unauthenticated):
                await anonymous.reload_rules()
        async with AsyncClient(running.addr, token="s3cret") as admin:
            return await admin.reload_rules()

    assert asyncio.run(main()).ruleset.revision == running.store.status().revision


# -- a dict brief is checked before any call (both clients) ---------------------------------------------------


@pytest.mark.parametrize(("brief", "field", "hint"), [
    ({"model": {"params_bilion": 8}}, "brief.model.params_bilion", "did you mean 'params_billion'"),
    ({"modle": {"params_billion": 8}}, "brief.modle", "did you mean 'model'"),
    ({"workload": "WORKLOAD_TYPE_REALTIME_INFERENC"}, "brief.workload",
     "did you mean 'WORKLOAD_TYPE_REALTIME_INFERENCE'"),
    ({"model": {"precision": "FP8"}}, "brief.model.precision", "did you mean 'PRECISION_FP8'"),
    ({"model": {"params_billion": "seventy"}}, "brief.model.params_billion", "seventy"),
])
def test_a_bad_dict_brief_is_invalid_argument_before_any_call(brief, field, hint):
    target = f"127.0.0.1:{closed_port()}"  # a call would end UNAVAILABLE, not INVALID_ARGUMENT

    async def main():
        async with AsyncClient(target) as advisor:
            await advisor.recommend(brief)

    with pytest.raises(gac.InvalidArgument) as in_async:
        asyncio.run(main())
    with Client(target) as client, pytest.raises(gac.InvalidArgument) as in_sync:
        client.recommend(brief)
    for caught in (in_async, in_sync):
        err = caught.value
        assert err.__cause__ is None, "raised here, not by a call"
        assert err.violations.fields == [field]
        assert hint in err.violations[0].description and hint in str(err)


def test_every_bad_dict_field_is_named_at_once():
    quotes = [{"gpu": "h100-sxm", "usd_per_hr": 2.0}, gac.pb.PriceQuote(gpu="l4", usd_per_hour=0.5),
              {"gpu": "mi300x", "tier": "PRICE_TIER_SPOTT"}]
    with Client(f"127.0.0.1:{closed_port()}") as client, pytest.raises(gac.InvalidArgument) as caught:
        client.recommend({"model": {"params_bilion": 8}}, quotes=quotes)
    assert caught.value.violations.fields == ["brief.model.params_bilion", "quotes[0].usd_per_hr", "quotes[2].tier"]


def test_dict_in_camel_case_and_messages_pass(server: Running):
    camel = {"workload": "WORKLOAD_TYPE_REALTIME_INFERENCE", "model": {"paramsBillion": 8}}
    with Client(server.addr) as client:
        assert client.recommend(camel).candidates
    with pytest.raises(TypeError, match="mapping"):
        Client("127.0.0.1:1").recommend(["not", "a", "brief"])  # type: ignore[arg-type]


# -- errors and enum names --------------------------------------------------------------------------------------


def test_one_class_per_status_and_the_old_name():
    for code in grpc.StatusCode:
        if code == grpc.StatusCode.OK:
            continue
        err = gac.GpuAdvisorError(code, "x")
        assert err.code == code
        made = gac._errors.error_for(code, "why")
        assert type(made) is not gac.GpuAdvisorError and isinstance(made, gac.GpuAdvisorError)
        assert made.code == code and str(made) == f"{code.name}: why"
    assert gac.AdvisorError is gac.GpuAdvisorError
    assert gac.InvalidArgument(message="m", violations={"a": "b"}).violations == [("a", "b")]


def test_sync_client_raises_the_same_classes(server: Running):
    with Client(server.addr) as client, pytest.raises(gac.InvalidArgument) as invalid:
        client.recommend(BAD_UTILIZATION)
    assert invalid.value.violations.fields == ["brief.economics.utilization"]
    with Client(server.addr, timeout=1e-4) as client, pytest.raises(gac.DeadlineExceeded):
        client.recommend(fresh_brief(), include_trace=True)
    with Client(f"127.0.0.1:{closed_port()}", retry=None) as client, pytest.raises(gac.Unavailable):
        client.get_ruleset()
    with Client(server.addr) as client, pytest.raises(gac.PermissionDenied):
        client.reload_rules()


def test_enum_names_on_answers(server: Running):
    with Client(server.addr) as client:
        answer = client.recommend(BRIEF)
    assert enum_name(answer, "route.kind") == gac.pb.RouteKind.Name(answer.route.kind)
    assert enum_name(answer.route, "kind").startswith("ROUTE_KIND_")
    assert enum_name(answer, "price_tier") == gac.pb.PriceTier.Name(answer.price_tier)
    assert enum_name(answer.candidates[0].cost, "unit_kind").startswith("COST_UNIT_")
    assert [enum_name(w, "severity") for w in answer.warnings] == [
        gac.pb.Severity.Name(w.severity) for w in answer.warnings]


def test_enum_name_edges():
    newer = gac.pb.Route()
    newer.kind = 99  # a value a newer server may send: its number, not an exception
    assert enum_name(newer, "kind") == "99"
    options = descriptor_pb2.FieldOptions(targets=[1, 3])  # a repeated enum field
    assert enum_name(options, "targets") == ["TARGET_TYPE_FILE", "TARGET_TYPE_MESSAGE"]
    with pytest.raises(ValueError, match="not an enum"):
        enum_name(gac.pb.Route(), "provisional")
