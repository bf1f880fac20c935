"""Every golden case (and every example brief) through a real server.

The golden cases are the product owner's requirements. The project keeps its own copy in `tests/cases/` (copied
from `../shared/cases`), which always runs, so a fresh clone passes `make test` on its own. When the shared
folder is beside the repo (or at $GPU_ADVISOR_CASES) its cases run as well, so a case the owner adds or changes
there is checked before anyone copies it in. An empty project folder fails the suite: a gate that silently skips
its cases is no gate.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.json_format import ParseDict
from ruamel.yaml import YAML

from service.rulebook.expectations import KEYS, check
from service.wire.api import pb, response_to_dict
from tests.conftest import bad_request_fields

REPO = Path(__file__).parents[1]
OWN_CASES = REPO / "tests" / "cases"
SHARED_CASES = Path(os.environ.get("GPU_ADVISOR_CASES") or REPO / ".." / "shared" / "cases").resolve()
EXAMPLES = REPO / "examples"
MISSING = OWN_CASES / "MISSING-golden-cases.yaml"


def _load(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))


def _case_folders() -> list[tuple[str, Path]]:
    """(label, folder): the project's copy always; the shared folder only when it exists."""
    folders = [("project", OWN_CASES)]
    if SHARED_CASES.is_dir() and OWN_CASES.resolve() != SHARED_CASES:
        folders.append(("shared", SHARED_CASES))
    return folders


def _case_files() -> list[Any]:
    params = [
        pytest.param(path, id=f"{label}/{path.stem}")
        for label, folder in _case_folders()
        for path in sorted(folder.glob("*.yaml"))
    ]
    # One placeholder that fails in the test body: parametrize with no values would only skip.
    return params or [pytest.param(MISSING, id="missing")]


def test_case_folders_without_and_with_shared(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A clone with no ../shared runs its own copy alone; with the shared folder present, both run."""
    monkeypatch.setattr(sys.modules[__name__], "SHARED_CASES", tmp_path / "absent")
    assert _case_folders() == [("project", OWN_CASES)]
    assert any(OWN_CASES.glob("*.yaml")), "the project's copy of the golden cases is empty"
    monkeypatch.setattr(sys.modules[__name__], "SHARED_CASES", tmp_path)
    assert [label for label, _ in _case_folders()] == ["project", "shared"]


def _recommend(stub: Any, request: pb.RecommendRequest) -> tuple[str, dict[str, Any] | None, list[str]]:
    try:
        return "OK", response_to_dict(stub.Recommend(request, timeout=60)), []
    except grpc.RpcError as err:
        assert isinstance(err, grpc.Call)
        return err.code().name, None, bad_request_fields(err)


@pytest.mark.parametrize("path", _case_files())
def test_golden_case(stub, path: Path):
    assert path != MISSING and path.exists(), f"no golden cases found in {OWN_CASES}"
    case = _load(path)
    assert isinstance(case, dict) and {"request", "expect"} <= set(case), f"{path.name}: request, expect"
    request = ParseDict(case["request"], pb.RecommendRequest())
    if {"fired", "not_fired"} & set(case["expect"]):
        request.include_trace = True  # only these keys read the trace; it is costly to build
    status, body, violations = _recommend(stub, request)
    failures = check(case["expect"], status, body, violations)
    assert failures == [], f"{path.name} ({case.get('source', '')}):\n" + "\n".join(failures)


@pytest.mark.parametrize(("label", "folder"), [pytest.param(*f, id=f[0]) for f in _case_folders()])
def test_checker_knows_every_documented_expect_key(label: str, folder: Path):
    """The README's table is the vocabulary; the checker must implement all of it (and reject typos)."""
    readme = folder / "README.md"
    assert readme.exists(), f"{readme} is missing ({label} cases)"
    documented: set[str] = set()
    for line in readme.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `"):
            documented |= set(re.findall(r"`([a-z0-9_]+)`", line.split("|")[1]))
    assert documented, "no expect keys found in the README table"
    assert documented <= set(KEYS), sorted(documented - set(KEYS))
    assert check({"no_such_key": 1}, "OK", {}) != []


@pytest.mark.parametrize(
    ("expect", "body", "ok"),
    [
        # ranges are inclusive
        ({"count": {"h100-sxm": [2, 4]}}, {"candidates": [{"gpu": "h100-sxm", "count": 4}]}, True),
        ({"count": {"h100-sxm": [2, 4]}}, {"candidates": [{"gpu": "h100-sxm", "count": 5}]}, False),
        ({"memory_need_gb": [14, 26]}, {"candidates": [{"gpu": "l4", "memory": {"need_gb": 14.0}}]}, True),
        ({"route_in": ["BUY"]}, {"route": {"kind": "ROUTE_KIND_BUY"}}, True),
        ({"route_not": ["BUY"]}, {"route": {"kind": "ROUTE_KIND_BUY"}}, False),
        ({"not_single": ["l4"]}, {"candidates": [{"gpu": "l4", "count": 1}]}, False),
        ({"top3_any": ["l4"]}, {"candidates": [{"gpu": g} for g in ("a", "b", "c", "l4")]}, False),
        ({"summary_has_cjk": True}, {"summary": "首选 H100"}, True),
        ({"questions_nonempty": True}, {}, False),
    ],
)
def test_checker_semantics(expect: dict[str, Any], body: dict[str, Any], ok: bool):
    assert (check(expect, "OK", body) == []) is ok


def test_checker_status_and_violations():
    expect = {"status": "INVALID_ARGUMENT", "violations_include": ["brief.model.params_billion"]}
    assert check(expect, "INVALID_ARGUMENT", None, ["brief.model.params_billion"]) == []
    assert check(expect, "INVALID_ARGUMENT", None, ["locale"]) != []
    assert check(expect, "OK", {}) != []


def _example_files() -> list[Path]:
    files = sorted(EXAMPLES.glob("*.yaml"))
    assert files, f"no example briefs in {EXAMPLES}"
    return files


@pytest.mark.parametrize("path", _example_files(), ids=lambda p: p.stem)
def test_example_brief_gets_an_answer(stub, path: Path):
    data = _load(path)
    request = ParseDict(data if "brief" in data else {"brief": data}, pb.RecommendRequest())
    status, body, violations = _recommend(stub, request)
    assert status == "OK", (status, violations)
    assert body and body.get("summary")
    # A full brief gets a ranked answer and a route; a thin one gets questions instead of false confidence.
    assert body.get("candidates") or body.get("questions")
    assert body.get("route", {}).get("kind") or body.get("questions")
