"""Rules are checked in a killable, memory-capped process before the server loads them (service/rulebook/vetting.py).

The slow and the hungry folders here are real: one file within every size limit that ruamel.yaml takes tens of
seconds (1 MB of comment lines) or hundreds of MB (a 1 MB flow list, ~720 MB) to parse. The limits in the tests
are small (1 s, 4 MB) so each is stopped within about a second.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from service.rulebook import files as rulefiles
from service.rulebook import vetting
from service.rulebook.folder import CHANGED_WHILE_CHECKED, load_rulebook, now
from service.rulebook.ruletests import self_test
from service.rulebook.store import RuleStore
from service.rulebook.version import cap_problems, prepare
from service.wire.api import SERVICE_NAME, pb
from tests.conftest import ADMIN, ADMIN_TOKEN, Running, call
from tests.test_reload import REQUEST, h100_price, set_h100_rent


def _slow_file(rules: Path) -> None:
    """Parses for ~25 s on this machine with little memory: only the time limit stops it."""
    (rules / "notes.yaml").write_text("kind: rules\n" + "#\n" * (rulefiles.MAX_FILE_BYTES // 2 - 16), encoding="utf-8")


def _hungry_file(rules: Path) -> None:
    """A flow list of ~500k zeros: ~720 MB of parser nodes (and ~40 s) from 1 MB."""
    zeros = ",".join(["0"] * (rulefiles.MAX_FILE_BYTES // 2 - 16))
    (rules / "bomb.yaml").write_text(f"kind: rules\nx: [{zeros}]\n", encoding="utf-8")


def _reload(running: Running) -> pb.ReloadRulesResponse:
    return running.stub.ReloadRules(pb.ReloadRulesRequest(), metadata=ADMIN, timeout=60)


def _still_serving(running: Running, revision: str) -> None:
    out = call(running.stub.Recommend, REQUEST, timeout=10)
    assert out.code == grpc.StatusCode.OK and out.response.ruleset.revision == revision
    health = health_pb2_grpc.HealthStub(running.channel)
    status = health.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=5).status
    assert status == health_pb2.HealthCheckResponse.SERVING


def _children_of(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            if f"\nPPid:\t{pid}\n" in status:
                out.append(int(entry.name))
    return out


def _wait_no_children(pid: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while _children_of(pid):
        assert time.monotonic() < deadline, f"the vetting child of {pid} is still running"
        time.sleep(0.05)


def test_a_load_that_hangs_is_killed_and_the_next_reload_is_accepted(rules_copy, start_server):
    running = start_server(rules_copy, watch=False, admin_token=ADMIN_TOKEN)
    store = running.store
    good = store.status().revision
    assert good and store.vetter is not None
    _slow_file(rules_copy)
    store.load_timeout = 1.0
    result = _reload(running)
    # Stopped by the 1 s limit, not waited out: the file parses for ~25 s, and the child is gone (below).
    assert not result.reloaded
    info = result.ruleset
    assert info.last_error == "rules load took longer than 1 s and was stopped"
    assert info.revision == good
    _still_serving(running, good)
    helper = store.vetter.helper_pid
    assert helper is not None
    _wait_no_children(helper)  # killed, not abandoned
    # Checks are forked from the helper, a child of this (gRPC-threaded) process that has one thread itself.
    status = Path(f"/proc/{helper}/status").read_text()
    assert "\nThreads:\t1\n" in status and f"\nPPid:\t{os.getpid()}\n" in status
    # The next reload is accepted at once (nothing is left running to refuse it) and serves the new version.
    (rules_copy / "notes.yaml").unlink()
    set_h100_rent(rules_copy, 3.44)
    store.load_timeout = 30.0  # a real check on a busy machine can take over a second
    result = _reload(running)
    assert result.reloaded and result.ruleset.last_error == "", result.ruleset.last_error
    assert h100_price(running.stub) == pytest.approx(3.44)


def test_a_memory_bomb_is_stopped_by_the_limit(rules_copy, start_server):
    running = start_server(rules_copy, watch=False, admin_token=ADMIN_TOKEN)
    store = running.store
    good = store.status().revision
    _hungry_file(rules_copy)
    store.memory_mb, store.load_timeout = 4, 20.0  # the time limit is far: memory must be what stops it
    result = _reload(running)
    assert not result.reloaded
    error = result.ruleset.last_error
    assert error.startswith("rules load exceeded the 4 MB memory limit and was stopped"), error
    assert "/tmp/" not in error and len(error.splitlines()) == 1
    _still_serving(running, good)
    (rules_copy / "bomb.yaml").unlink()
    set_h100_rent(rules_copy, 3.55)
    store.memory_mb, store.load_timeout = vetting.DEFAULT_MEMORY_MB, 30.0
    result = _reload(running)
    assert result.reloaded, result.ruleset.last_error
    assert h100_price(running.stub) == pytest.approx(3.55)


def test_a_child_the_kernel_kills_is_reported_as_out_of_memory(rules_copy):
    # Under a container's memory limit the OOM killer may strike before RLIMIT_AS: it must pick the child (its
    # score is raised), and the verdict must say what most likely happened.
    _slow_file(rules_copy)
    vetter = vetting.shared()
    box: dict[str, vetting.Verdict] = {}
    checking = threading.Thread(
        target=lambda: box.setdefault("v", vetter.vet(rules_copy, 30, vetting.DEFAULT_MEMORY_MB))
    )
    checking.start()
    deadline = time.monotonic() + 20
    children: list[int] = []
    while not children:
        assert time.monotonic() < deadline, "no vetting child appeared"
        helper = vetter.helper_pid
        children = _children_of(helper) if helper else []
        time.sleep(0.02)
    child = children[0]
    score = Path(f"/proc/{child}/oom_score_adj")
    while score.read_text().strip() != "1000":  # set by the child first thing after the fork
        assert time.monotonic() < deadline, score.read_text()
        time.sleep(0.01)
    os.kill(child, signal.SIGKILL)  # as the OOM killer does
    checking.join(30)
    verdict = box["v"]
    assert not verdict.ok and verdict.stopped == "memory"
    assert verdict.problems == ("rules load was killed by the system, most likely for lack of memory",)


def test_the_verdict_carries_the_problems_an_in_process_load_gives(rules_copy):
    routing = rules_copy / "routing.yaml"
    routing.write_text(routing.read_text(encoding="utf-8").replace("demand: VOLATILE", "demand: VOLATLE"),
                       encoding="utf-8")
    for i in range(30):  # more problems than are shown: the cap and its last line must match too
        (rules_copy / f"broken-{i:02d}.yaml").write_text(f"kind: rules\nx{'y' * 400}: [\n", encoding="utf-8")
    here = prepare(rules_copy, self_test(rules_copy), now())
    verdict = vetting.shared().vet(rules_copy, timeout=30, memory_mb=vetting.DEFAULT_MEMORY_MB)
    assert not verdict.ok and verdict.stopped == ""
    assert list(verdict.problems) == cap_problems(here.errors)
    assert any(p.startswith("rules/broken-00.yaml:") for p in verdict.problems)
    assert all(not p.startswith("/") and len(p) <= 300 for p in verdict.problems)


def test_a_failing_rule_test_in_the_child_names_the_case(rules_copy):
    cases = rules_copy / "tests" / "routing.yaml"
    cases.write_text(cases.read_text(encoding="utf-8").replace("route_in: [BUY]", "route_in: [MODEL_API]", 1),
                     encoding="utf-8")
    verdict = vetting.shared().vet(rules_copy, timeout=30, memory_mb=vetting.DEFAULT_MEMORY_MB)
    assert not verdict.ok and verdict.revision
    assert any(p.startswith("rule test failed: rules/tests/routing.yaml:") for p in verdict.problems)
    store = RuleStore(rules_copy, vetter=vetting.shared())  # rule tests off: the same folder passes
    assert store.reload().ok
    store.close()


def test_a_dead_helper_is_started_again(rules_copy):
    vetter = vetting.shared()
    store = RuleStore(rules_copy, vetter=vetter)
    assert store.reload().ok
    helper = vetter.helper_pid
    assert helper is not None
    os.kill(helper, signal.SIGKILL)
    deadline = time.monotonic() + 30  # a bound on the wait, not a speed claim
    while vetter.helper_pid == helper:  # reaped
        assert time.monotonic() < deadline
        time.sleep(0.05)
    set_h100_rent(rules_copy, 3.66)
    result = store.reload()
    assert result.ok and result.changed, result.problems
    assert vetter.helper_pid not in (None, helper)
    store.close()


def test_the_server_loads_only_the_bytes_that_were_checked(rules_copy):
    book, problems = load_rulebook(rules_copy)
    assert book is not None
    same, _ = load_rulebook(rules_copy, expect_hash=book.content_hash)
    assert same is not None and same.content_hash == book.content_hash
    set_h100_rent(rules_copy, 3.77)  # changed after the check: nothing of it is parsed
    other, problems = load_rulebook(rules_copy, expect_hash=book.content_hash)
    assert other is None and [p.message for p in problems] == [CHANGED_WHILE_CHECKED]


def test_content_that_passed_today_is_not_checked_again(rules_copy, monkeypatch):
    vetter = vetting.shared()
    first = RuleStore(rules_copy, self_test=self_test(rules_copy), vetter=vetter)
    assert first.reload().ok
    checks: list[Path] = []
    real_vet = vetter.vet

    def counted(rules_dir, *args, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        checks.append(Path(rules_dir))
        return real_vet(rules_dir, *args, **kw)

    monkeypatch.setattr(vetter, "vet", counted)
    second = RuleStore(rules_copy, self_test=self_test(rules_copy), vetter=vetter)  # another store, same bytes
    result = second.reload()
    assert result.ok and result.changed and second.active() is not None and checks == []
    assert second.reload().changed is False and checks == []  # a reload that finds nothing new: no check
    set_h100_rent(rules_copy, 3.88)  # new bytes are checked
    result = second.reload()
    assert result.ok and result.changed and len(checks) == 1
    without_tests = RuleStore(rules_copy, vetter=vetter)  # a pass with rule tests off says nothing about them
    assert without_tests.reload().ok and len(checks) == 2
    for store in (first, second, without_tests):
        store.close()
