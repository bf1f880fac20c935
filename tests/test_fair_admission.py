"""Fair admission (issue 26): capacity is shared per peer (client connection), so a peer with many calls waits
behind its own calls; a busy refusal tells a client when to retry (gRPC's retry pushback), and the project's
client honours it. The flood runs against a real server process; success shares are counted, never timed."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

import gpu_advisor_client as gac
import grpc
import pytest
from prometheus_client import REGISTRY

from service.bench.attacks import RequestFlood
from service.serving.interceptors import RETRY_PUSHBACK, Admission, Limiter
from service.wire.api import pb_grpc
from tests.test_hostile_clients import stop
from tests.test_server import good_request
from tests.test_serving import held, start_process, wait_for  # noqa: F401 (held is a fixture)

RECOMMEND = "/gpuadvisor.v1.GpuAdvisor/Recommend"


# -- the limiter ------------------------------------------------------------------------------------------


async def settle() -> None:
    """Let the loop run what the last step scheduled (a hand-over passes through wait_for and shield)."""
    for _ in range(10):
        await asyncio.sleep(0)


def test_a_lighter_peer_displaces_the_busiest_peers_newest_waiting_call_and_turns_alternate():
    async def scenario() -> None:
        limiter = Limiter(concurrent=1, queue=3)
        assert await limiter.enter(60, "flood") is Admission.ADMITTED  # running
        flood = [asyncio.ensure_future(limiter.enter(60, "flood")) for _ in range(3)]
        await settle()
        assert limiter.waiting == 3
        assert limiter.refuses("flood"), "a full queue refuses the peer that fills it"
        assert not limiter.refuses("polite"), "a peer with nothing waiting may take the busiest peer's place"
        polite = asyncio.ensure_future(limiter.enter(60, "polite"))
        await settle()
        assert flood[2].done() and flood[2].result() is Admission.FULL, "the flood's newest call gives way"
        assert limiter.waiting == 3 and limiter.displaced == 1
        limiter.leave("flood")  # the slot goes to the peers in turn: the flood's oldest waiting call first
        await settle()
        assert flood[0].done() and not polite.done()
        limiter.leave("flood")  # then the polite peer, ahead of the flood's second call, which came before it
        await settle()
        assert polite.done() and polite.result() is Admission.ADMITTED and not flood[1].done()
        limiter.leave("polite")
        await settle()
        assert flood[1].result() is Admission.ADMITTED
        limiter.leave("flood")
        assert limiter.running == 0 and limiter.waiting == 0

    asyncio.run(scenario())


def test_peers_holding_as_many_calls_do_not_displace_each_other():
    async def scenario() -> None:
        limiter = Limiter(concurrent=1, queue=2)
        assert await limiter.enter(60, "a") is Admission.ADMITTED
        waiting = [asyncio.ensure_future(limiter.enter(60, p)) for p in ("b", "c")]
        await settle()
        # d would hold one call, as b and c do: no place is taken, d is refused.
        assert limiter.refuses("d") and await limiter.enter(60, "d") is Admission.FULL
        assert not any(w.done() for w in waiting) and limiter.displaced == 0
        for peer in ("a", "b", "c"):
            limiter.leave(peer)
            await settle()
        assert limiter.running == 0 and all(w.result() is Admission.ADMITTED for w in waiting)

    asyncio.run(scenario())


def test_a_waiting_call_that_leaves_gives_its_place_back():
    async def scenario() -> None:
        limiter = Limiter(concurrent=1, queue=1)
        assert await limiter.enter(60, "a") is Admission.ADMITTED
        gone = asyncio.ensure_future(limiter.enter(60, "b"))
        await settle()
        gone.cancel()
        await settle()
        assert limiter.waiting == 0 and not limiter.refuses("c")
        assert await limiter.enter(0.01, "c") is Admission.EXPIRED
        limiter.leave("a")
        assert limiter.running == 0

    asyncio.run(scenario())


def test_a_busy_refusal_carries_the_retry_pushback(held):  # noqa: F811
    running, engine = held(max_concurrent=1, max_queue=0)
    first = running.stub.Recommend.future(good_request())
    assert engine.entered.acquire(timeout=10)
    options = [("grpc.use_local_subchannel_pool", 1), ("grpc.enable_retries", 0)]
    with grpc.insecure_channel(running.addr, options=options) as other, pytest.raises(grpc.RpcError) as refused:
        pb_grpc.GpuAdvisorStub(other).Recommend(good_request(), timeout=10)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    pushback = dict(refused.value.trailing_metadata() or ()).get(RETRY_PUSHBACK)
    assert pushback is not None and int(pushback) > 0, refused.value.trailing_metadata()
    assert f"retry after about {pushback} ms" in refused.value.details()
    engine.release.set()
    assert first.result(timeout=30).candidates


def test_the_projects_client_retries_a_busy_refusal_after_the_pushback(held):  # noqa: F811
    running, engine = held(max_concurrent=1, max_queue=0)
    first = running.stub.Recommend.future(good_request())
    assert engine.entered.acquire(timeout=10)
    refused_before = busy_refusals()

    def release_once_refused() -> None:
        wait_for(lambda: busy_refusals() > refused_before, timeout=30)
        engine.release.set()

    release = threading.Thread(target=release_once_refused, daemon=True)
    release.start()
    with gac.Client(running.addr, timeout=30, retry=gac.RetryPolicy(max_attempts=5),
                    options=[("grpc.use_local_subchannel_pool", 1)]) as client:
        # Refused while the first call is held, which is released then: a retry after the pushback gets through.
        answer = client.stub.Recommend(good_request(), timeout=30)
    release.join()
    assert busy_refusals() > refused_before
    assert answer.candidates and first.result(timeout=30).candidates


def busy_refusals() -> float:
    return REGISTRY.get_sample_value("gpu_advisor_rpcs_total",
                                     {"method": RECOMMEND, "code": "RESOURCE_EXHAUSTED"}) or 0.0


# -- a flood against a real server process -------------------------------------------------------------------


def _polite_share(addr: str, calls: int, client: str, until: Callable[[], bool]) -> tuple[int, int, dict[str, int]]:
    """One call at a time, at least `calls` of them and until `until()` holds (a hang guard of 120 s, not a speed
    claim); → (OK, total, failures by code)."""
    ok, failed = 0, {}
    request = good_request()
    options = [("grpc.use_local_subchannel_pool", 1)]
    if client == "stub":
        channel = grpc.insecure_channel(addr, options=[*options, ("grpc.enable_retries", 0)])
        call = pb_grpc.GpuAdvisorStub(channel).Recommend
    else:
        project = gac.Client(addr, timeout=5, options=options)
        channel, call = project.channel, project.stub.Recommend
    with channel:
        end = time.monotonic() + 120
        while (ok + sum(failed.values()) < calls or not until()) and time.monotonic() < end:
            try:
                call(request, timeout=5)
                ok += 1
            except grpc.RpcError as err:
                failed[err.code().name] = failed.get(err.code().name, 0) + 1
    return ok, ok + sum(failed.values()), failed


@pytest.mark.parametrize("client", ["stub", "project"])
def test_one_call_at_a_time_gets_through_a_flood_of_25_connections_x_10_streams(tmp_path: Path, client: str):
    # Before (one first-come queue per method): 44% OK for the project's client, 52% for a plain stub, every
    # failure RESOURCE_EXHAUSTED "busy: 1 calls running and 32 waiting" (h2load; this in-process flood: 25%).
    proc, port, log = start_process(tmp_path, {})
    addr = f"127.0.0.1:{port}"
    try:
        body = good_request().SerializeToString()
        with RequestFlood("127.0.0.1", port, body, connections=25, streams=10) as flood:
            assert flood.ready.wait(60)
            # The server is ending the flood's calls (answered or refused) and the flood sending more in their
            # place: it is saturated before the polite caller starts.
            wait_for(lambda: flood.sent >= 2 * 25 * 10, timeout=60)
            ok, total, failed = _polite_share(addr, 20, client, until=lambda: flood.sent > 1000)
            sent = flood.sent
        assert total >= 20, f"too few calls to judge ({total})"
        assert ok / total >= 0.95, f"{ok}/{total} OK under the flood: {failed}"
        # The flood did saturate the server: it always had calls waiting, refused many of them (answers in a
        # thread: the loop takes every arrival and refuses beyond the queue) or left them waiting in gRPC Core
        # (answers on the loop, which takes arrivals between stages), and took most of the answers.
        text = log.read_text()
        answered, refused = text.count('"code": "OK"'), text.count('"RESOURCE_EXHAUSTED"')
        assert sent > 1000 and sent > 10 * (answered + refused)
        assert refused > 100 or answered > 5 * ok, (answered, refused, ok)
    finally:
        stop(proc)
