"""A broken rules folder at the shipped path, with no --state-dir, still serves (issue 38 item 5): the vetted
copy of the built-in rules made at install (service/rulebook/builtin.py) is served, flagged: health SERVING,
GetRuleset's `fallback` names the built-in copy and `last_error` the folder's problem, every answer carries
newer_rules_rejected. Before, such a start (`make run` on a broken rules/, or a container's rules mounted over
/app/rules) stayed NOT_SERVING for as long as the folder stayed broken. A real server on 127.0.0.1:0."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from grpc_health.v1 import health_pb2

from service.rulebook.builtin import build, main, stamp_of
from service.wire.api import pb
from tests.conftest import RULES, Running
from tests.test_last_good import _break, folder_hash
from tests.test_server import good_request
from tests.test_serving import health_status

SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


def test_the_copy_is_made_only_from_a_folder_that_passes_vetting(tmp_path: Path) -> None:
    rules, copy = tmp_path / "rules", tmp_path / "pkg" / "builtin_rules"
    shutil.copytree(RULES, rules)
    assert build(rules, copy) == []
    good = folder_hash(rules)
    assert folder_hash(copy) == good and json.loads(stamp_of(copy).read_text())["content_hash"] == good
    _break(rules)
    assert main(["--rules", str(rules), "--out", str(copy)]) == 1
    assert folder_hash(copy) == good, "a refused folder must leave the last vetted copy as it was"


def test_a_broken_folder_at_the_shipped_path_serves_the_vetted_built_in_copy(tmp_path: Path) -> None:
    shipped, copy = tmp_path / "app" / "rules", tmp_path / "pkg" / "builtin_rules"
    shutil.copytree(RULES, shipped)
    assert build(shipped, copy) == []
    good = folder_hash(shipped)
    _break(shipped)

    # what a start without the copy does (the only behaviour before): nothing to serve
    bare = Running(shipped, watch=False, builtin_rules=shipped, builtin_copy=tmp_path / "not-installed")
    try:
        assert health_status(bare.channel) == NOT_SERVING
    finally:
        bare.stop()

    running = Running(shipped, watch=False, builtin_rules=shipped, builtin_copy=copy)
    try:
        assert health_status(running.channel) == SERVING
        info = running.stub.GetRuleset(pb.GetRulesetRequest(), timeout=10)
        assert info.content_hash == good
        assert info.fallback.startswith(f"serving the built-in rules copy vetted at install ({copy}, vetted ")
        assert "because the rules folder's version was refused at start" in info.fallback
        assert "routing.yaml" in info.last_error
        answer = running.stub.Recommend(good_request(), timeout=60)
        assert answer.candidates and answer.ruleset.content_hash == good
        assert answer.newer_rules_rejected and "routing.yaml" in answer.newer_rules_error
    finally:
        running.stop()


def test_the_folders_own_version_is_no_fallback(server: Running) -> None:
    assert server.stub.GetRuleset(pb.GetRulesetRequest(), timeout=10).fallback == ""
