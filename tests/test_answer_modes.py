"""The three places a Recommend answer can run (GPU_ADVISOR_ANSWER_ON, service/serving/answering.py) give the same
answers, refuse bad input the same way, and leave health answering."""

from __future__ import annotations

import grpc
import pytest

from service.serving import answering
from service.wire.api import pb
from tests import test_serving as serving
from tests.conftest import RULES, Running
from tests.test_server import good_request
from tests.test_serving import health_status, held  # noqa: F401 (held is a fixture)

SERVING = 1


@pytest.mark.parametrize("mode", ["loop", "queue", "thread"])
def test_every_way_of_answering_gives_the_same_answer(mode: str, server: Running, start_server,
                                                      monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(answering.ANSWER_ON_ENV, mode)
    running = start_server(RULES, watch=False)
    request = good_request()
    expected = server.stub.Recommend(request, timeout=30).SerializeToString(deterministic=True)
    for _ in range(3):
        assert running.stub.Recommend(request, timeout=30).SerializeToString(deterministic=True) == expected
    assert health_status(running.channel) == SERVING
    bad = good_request()
    bad.brief.economics.utilization = 0.001
    with pytest.raises(grpc.RpcError) as caught:
        running.stub.Recommend(bad, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert running.stub.ListGpus(pb.ListGpusRequest(), timeout=30).gpus


def test_an_unknown_way_is_refused_by_name(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(answering.ANSWER_ON_ENV, "fibers")
    with pytest.raises(ValueError, match=answering.ANSWER_ON_ENV):
        answering.mode_from_env()


@pytest.mark.parametrize("mode", ["loop", "queue"])
@pytest.mark.parametrize("check", [serving.test_a_passed_deadline_stops_the_work,
                                   serving.test_a_full_queue_is_refused_at_once_while_health_answers],
                         ids=["deadline_stops_the_work", "full_queue_refused_while_health_answers"])
def test_the_serving_guarantees_hold_in_the_other_ways(mode: str, check, held, monkeypatch):  # noqa: F811
    # The pool is what every other test runs on; these two (admission, refusal, health beside a running answer,
    # a deadline stopping the work at its next stage, the slot given back) again with the answer elsewhere.
    monkeypatch.setenv(answering.ANSWER_ON_ENV, mode)
    check(held)
