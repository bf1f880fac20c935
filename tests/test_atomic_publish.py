"""Half-written files are never served (issue 26): the watcher loads a folder only once it held still for its
settle time, the project's writers replace files in one rename, and a version published by one symlink swap (as
Kubernetes ConfigMaps do) is picked up whole. The settle wait runs on a clock the test drives; the symlink swap
against a real server process watching a private rules copy."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import grpc

from service.frontends.cli import main as cli
from service.rulebook.atomic import write_atomically
from service.rulebook.store import RuleStore
from service.wire.api import pb, pb_grpc
from tests.conftest import RULES
from tests.test_hostile_clients import stop
from tests.test_last_good import folder_hash
from tests.test_serving import log_events, start_process

FIXTURES = Path(__file__).parent / "fixtures" / "models"


def _start(tmp_path: Path, rules: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    proc, port, log = start_process(tmp_path, {}, "--rules", str(rules), watch=True,
                                    unset=("GPU_ADVISOR_RULES_SETTLE_SECONDS",),  # the default settle time
                                    log_name=f"server-{time.monotonic_ns()}.log", wait_s=90)
    return proc, f"127.0.0.1:{port}", log


def _served_hash(addr: str) -> str:
    with grpc.insecure_channel(addr, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        return pb_grpc.GpuAdvisorStub(channel).GetRuleset(pb.GetRulesetRequest(), timeout=10).content_hash


def _wait(predicate, timeout: float = 60) -> bool:  # noqa: ANN001
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


class _PausedWriter:
    """The watcher's clock and pause, driven here: a writer that wrote half of a file finishes it `after_s`
    seconds later on this clock. No sleep races the settle time on a busy machine."""

    def __init__(self, path: Path, text: str, after_s: float):
        self.now, self.path, self.rest, self.after_s = 0.0, path, text[len(text) // 2:], after_s

    def clock(self) -> float:
        return self.now

    def pause(self, seconds: float) -> bool:
        self.now += seconds
        if self.rest and self.now >= self.after_s:
            with self.path.open("a") as f:
                f.write(self.rest)
            self.rest = ""
        return False  # not stopped


def _settle_after_a_paused_write(tmp_path: Path, after_s: float) -> tuple[RuleStore, _PausedWriter, tuple, tuple]:
    rules = tmp_path / "rules"
    shutil.copytree(RULES, rules)
    text = (rules / "README.md").read_text() + "\n## Local notes\n\n" + "A line of notes written slowly.\n" * 40
    store = RuleStore(rules, settle_seconds=1.0, poll_seconds=0.5)
    (rules / "README.md").write_text(text[: len(text) // 2])  # in place, as `offers import --out` did
    writer = _PausedWriter(rules / "README.md", text, after_s)
    store.clock, store.pause = writer.clock, writer.pause
    half = store.fingerprint()
    return store, writer, half, store._settled(half)


def test_a_writer_that_pauses_mid_file_within_the_settle_time_is_not_read_half_written(tmp_path: Path):
    store, writer, half, settled = _settle_after_a_paused_write(tmp_path, after_s=0.6)  # within 1 s
    assert not writer.rest and settled != half and settled == store.fingerprint(), "settled on the half file"
    assert writer.now >= 0.6 + store.settle_seconds  # held still for the settle time after the last write
    assert store.reload().ok and store.status().content_hash == folder_hash(store.rules_dir)  # the whole file
    store.close()


def test_a_pause_beyond_the_settle_time_is_read_half_written(tmp_path: Path):
    # Why the project's writers publish in one rename (write_atomically, below): the settle time only narrows it.
    store, writer, half, settled = _settle_after_a_paused_write(tmp_path, after_s=1.5)
    assert settled == half and writer.now < 1.5
    store.close()


def test_a_version_published_by_one_symlink_swap_is_served(tmp_path: Path):
    v1, v2 = tmp_path / "versions" / "v1", tmp_path / "versions" / "v2"
    shutil.copytree(RULES, v1)
    current = tmp_path / "current"
    current.symlink_to(v1)
    proc, addr, log = _start(tmp_path, current)
    try:
        assert _served_hash(addr) == folder_hash(v1)
        shutil.copytree(v1, v2)  # the new version, written in full beside the served one
        (v2 / "README.md").write_text((v2 / "README.md").read_text() + "\nVersion two.\n")
        swap = tmp_path / "current.new"
        swap.symlink_to(v2)
        os.replace(swap, current)  # the publication: one rename
        assert _wait(lambda: _served_hash(addr) == folder_hash(v2))
        assert not any(e.get("event") == "rules_rejected" for e in log_events(log))
    finally:
        stop(proc)


def test_write_atomically_replaces_the_file_in_one_rename(tmp_path: Path):
    target = tmp_path / "gpus.yaml"
    target.write_text("old\n")
    before = target.stat().st_ino
    write_atomically(target, "new\n")
    assert target.read_text() == "new\n" and target.stat().st_ino != before  # a new file renamed over it
    assert [p.name for p in tmp_path.iterdir()] == ["gpus.yaml"], "no temporary file is left behind"
    assert target.stat().st_mode & 0o777 == 0o666 & ~_umask()


def test_models_import_writes_its_file_atomically(tmp_path: Path):
    out = tmp_path / "imported.yaml"
    out.write_text("# an earlier import\n")
    before = out.stat().st_ino
    src = FIXTURES / "Llama-3.1-8B-Instruct.config.json"
    assert cli(["models", "import", str(src), "--id", "my-llama", "--out", str(out)]) == 0
    assert "id: my-llama\n" in out.read_text() and out.stat().st_ino != before


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
