"""The contract's own checks: buf lint (STANDARD) passes, and `buf breaking` against the released image fails
on a renumbered field and passes on an added one, so CI's breaking-change check is known to bite."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[1]
PROTO = Path("protos/gpuadvisor/v1/advisor.proto")
RELEASE = re.search(r"^PROTO_RELEASE\s*:=\s*(\S+)", (REPO / "Makefile").read_text(), re.M)


def _buf() -> str:
    found = shutil.which("buf", path=str(Path(sys.executable).parent)) or shutil.which("buf")
    if not found:
        pytest.fail("buf is missing: it is a dev dependency (buf-bin); run `make dev`")
    return found


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "protos", tmp_path / "protos")
    shutil.copy(REPO / "buf.yaml", tmp_path / "buf.yaml")
    return tmp_path


def _buf_run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_buf(), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_release_image_is_named_by_the_makefile():
    assert RELEASE, "Makefile has no PROTO_RELEASE"
    assert (REPO / RELEASE.group(1)).is_file()


def test_buf_lint_passes():
    run = _buf_run(REPO, "lint")
    assert run.returncode == 0, run.stdout + run.stderr


def test_buf_breaking_passes_on_the_current_proto():
    assert RELEASE
    run = _buf_run(REPO, "breaking", "--against", RELEASE.group(1))
    assert run.returncode == 0, run.stdout + run.stderr


def test_buf_breaking_catches_a_renumbered_field(tmp_path: Path):
    assert RELEASE
    root = _copy(tmp_path)
    proto = root / PROTO
    text = proto.read_text()
    assert "double params_billion = 1;" in text
    proto.write_text(text.replace("double params_billion = 1;", "double params_billion = 99;", 1))
    run = _buf_run(root, "breaking", "--against", RELEASE.group(1))
    assert run.returncode != 0
    assert "params_billion" in run.stdout + run.stderr


def test_buf_breaking_allows_an_added_field(tmp_path: Path):
    assert RELEASE
    root = _copy(tmp_path)
    proto = root / PROTO
    text = proto.read_text()
    proto.write_text(text.replace("message Training {\n", "message Training {\n  double added_for_test = 999;\n", 1))
    run = _buf_run(root, "breaking", "--against", RELEASE.group(1))
    assert run.returncode == 0, run.stdout + run.stderr
