"""A fresh server never comes up empty (issue 26): started on a rules folder whose version is refused, it serves
the last version that passed vetting, saved under its state folder, or with none saved the rules shipped with
the server; health SERVING and every answer flagged (newer_rules_rejected). Real server processes."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2

from service.rulebook.files import read_folder
from service.rulebook.folder import content_hash
from service.wire.api import pb, pb_grpc
from tests.conftest import RULES
from tests.test_hostile_clients import stop
from tests.test_server import good_request
from tests.test_serving import health_status, log_events, start_process

SERVING = health_pb2.HealthCheckResponse.SERVING


def _start(tmp_path: Path, rules: Path, state: Path | None, *args: str) -> tuple[subprocess.Popen[bytes], str, Path]:
    proc, port, log = start_process(
        tmp_path, {"GPU_ADVISOR_STATE_DIR": str(state)} if state is not None else {}, "--rules", str(rules), *args,
        watch=True, unset=() if state is not None else ("GPU_ADVISOR_STATE_DIR",),
        log_name=f"server-{time.monotonic_ns()}.log", wait_s=90,
    )
    return proc, f"127.0.0.1:{port}", log


def folder_hash(folder: Path) -> str:
    files, problems = read_folder(folder, folder.name)
    assert not problems
    return content_hash(files)


def _break(rules: Path) -> None:
    with (rules / "routing.yaml").open("a") as f:
        f.write("\nthis: [is not: valid yaml\n")


def _answer(addr: str) -> tuple[int, pb.RecommendResponse]:
    with grpc.insecure_channel(addr, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        status = health_status(channel, timeout=10)
        return status, pb_grpc.GpuAdvisorStub(channel).Recommend(good_request(), timeout=30)


def _wait(predicate, timeout: float = 60) -> bool:  # noqa: ANN001
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


def test_a_refused_folder_at_start_serves_the_last_good_version_saved_in_the_state_folder(tmp_path: Path):
    rules, state = tmp_path / "rules", tmp_path / "state"
    shutil.copytree(RULES, rules)
    (rules / "README.md").write_text((rules / "README.md").read_text() + "\nThis copy differs from the shipped one.\n")
    good = folder_hash(rules)
    proc, _addr, _log = _start(tmp_path, rules, state, "--no-watch")
    try:
        assert _wait(lambda: (state / "last-good").is_dir()), "the activated version was not saved"
    finally:
        stop(proc)
    assert folder_hash(state / "last-good") == good

    _break(rules)
    proc, addr, log = _start(tmp_path, rules, state)
    try:
        status, answer = _answer(addr)
        assert status == SERVING
        assert answer.candidates and answer.ruleset.content_hash == good, "not the saved version"
        assert answer.newer_rules_rejected and "routing.yaml" in answer.newer_rules_error
        assert any(e.get("event") == "rules_fallback_serving" and "last good" in e["kind"] for e in log_events(log))
        assert (state / "last-good").resolve().name == good[:16], "the refused version must never be saved"

        # The folder is still watched: its next good version replaces the fallback, and answers are not flagged.
        shutil.rmtree(rules)
        shutil.copytree(RULES, rules)
        assert _wait(lambda: not _answer(addr)[1].newer_rules_rejected)
        assert _answer(addr)[1].ruleset.content_hash == folder_hash(RULES)
        assert _wait(lambda: folder_hash(state / "last-good") == folder_hash(RULES))
    finally:
        stop(proc)


def test_a_refused_folder_with_nothing_saved_serves_the_rules_shipped_with_the_server(tmp_path: Path):
    rules = tmp_path / "rules"
    shutil.copytree(RULES, rules)
    _break(rules)
    for state in (None, tmp_path / "empty-state"):
        proc, addr, log = _start(tmp_path, rules, state, "--no-watch")
        try:
            status, answer = _answer(addr)
            assert status == SERVING
            assert answer.candidates and answer.ruleset.content_hash == folder_hash(RULES)
            assert answer.newer_rules_rejected and "routing.yaml" in answer.newer_rules_error
            assert any(e.get("event") == "rules_fallback_serving" and "shipped" in e["kind"]
                       for e in log_events(log))
        finally:
            stop(proc)
