"""The rules folder is input, not trusted code (issue 7, item 8).

Each hostile change is made to a private copy of the rules served by a real server on an ephemeral port that
watches the folder. It must be refused quickly, with a short error that names the file relative to the folder
and quotes no absolute path, exception or outside content, while health and Recommend keep answering on the
last good rules. Every wait is bounded: nothing here can hang the suite.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from service.rulebook import files as rulefiles
from service.rulebook.files import read_yaml
from service.rulebook.folder import load_rulebook
from service.rulebook.store import RuleStore
from service.rulebook.version import MAX_PROBLEMS
from service.wire.api import SERVICE_NAME, pb
from tests.conftest import RULES, Running, call
from tests.test_reload import REQUEST, h100_price, set_h100_rent, wait_for

SECRET = "TOP-SECRET-4f1c: the contents of a file outside the rules folder"
BILLION_LAUGHS = "kind: rules\n" + "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10)
)


def _outside_link(rules: Path) -> tuple[str, ...]:
    secret = rules.parent / "secret.yaml"
    secret.write_text(f"kind: rules\n{SECRET}: [\n", encoding="utf-8")  # broken YAML whose error would quote it
    (rules / "extra.yaml").symlink_to(secret)
    return "rules/extra.yaml", "outside the rules folder"


def _fifo(rules: Path) -> tuple[str, ...]:
    os.mkfifo(rules / "catalog" / "more.yaml")  # nobody ever writes to it: opening it would block forever
    return "rules/catalog/more.yaml", "FIFO"


def _alias_bomb(rules: Path) -> tuple[str, ...]:
    (rules / "bomb.yaml").write_text(BILLION_LAUGHS, encoding="utf-8")  # 9^10 strings once expanded
    return "rules/bomb.yaml", "aliases"


def _dev_zero(rules: Path) -> tuple[str, ...]:
    (rules / "zero.yaml").symlink_to("/dev/zero")
    return "rules/zero.yaml", "outside the rules folder"


def _huge_file(rules: Path) -> tuple[str, ...]:
    with open(rules / "big.yaml", "w", encoding="utf-8") as f:
        f.write("kind: rules\n")
        f.write("# padding\n" * (rulefiles.MAX_FILE_BYTES // 10 + 1))
    return "rules/big.yaml", "limit"


def _width_bomb(rules: Path) -> tuple[str, ...]:
    for locale in ("en", "zh-CN"):
        f = rules / "messages" / f"{locale}.yaml"
        text = f.read_text(encoding="utf-8")
        assert "{usd_per_hour:.2f}" in text
        f.write_text(text.replace("{usd_per_hour:.2f}", "{usd_per_hour:>100000000}", 1), encoding="utf-8")
    return "rules/messages/en.yaml", "width"


def _outside_configmap_data(rules: Path) -> tuple[str, ...]:
    # `..data` is hidden, but a visible link through it still leaves the folder when `..data` does.
    outside = rules.parent / "elsewhere"
    outside.mkdir()
    (outside / "extra.yaml").write_text(f"kind: rules\n{SECRET}: [\n", encoding="utf-8")
    (rules / "..data").symlink_to(outside)
    (rules / "extra.yaml").symlink_to(Path("..data") / "extra.yaml")
    return "rules/extra.yaml", "outside the rules folder"


def _hard_link(rules: Path) -> tuple[str, ...]:
    # A hard link is an ordinary file by every path check: only its link count says it has a name elsewhere.
    secret = rules.parent / "secret.yaml"
    secret.write_text(f"kind: rules\n{SECRET}: [\n", encoding="utf-8")
    os.link(secret, rules / "catalog" / "extra.yaml")
    return "rules/catalog/extra.yaml", "hard link"


def _long_template(rules: Path) -> tuple[str, ...]:
    # Passed every check before limits.py: 40,000 copies of a placeholder made every answer megabytes long.
    for locale in ("en", "zh-CN"):
        f = rules / "messages" / f"{locale}.yaml"
        text = f.read_text(encoding="utf-8")
        f.write_text(text.replace("{usd_per_hour:.2f}", "{usd_per_hour:.2f}" * 40_000, 1), encoding="utf-8")
    return "rules/messages/en.yaml", "characters long", "limit is 2,000"


def _many_rules(rules: Path) -> tuple[str, ...]:
    # Each one valid, together slower answers and a much larger server.
    warn = "{code: MISTAKE_HOURLY_RATE, severity: INFO, message: mistake.hourly_rate}"
    body = "".join(f"  - id: extra.hourly-rate.{i}\n    fact: brief\n    when: {{success_unit: UNSPECIFIED}}\n"
                   f"    then:\n      warn: {warn}\n" for i in range(1_000))
    (rules / "extra.yaml").write_text("kind: rules\nrules:\n" + body, encoding="utf-8")
    return "rules/extra.yaml", "rules in all", "limit is 1,000"


def _bidi_file_name(rules: Path) -> tuple[str, ...]:
    # U+202E (right-to-left override) makes "evil\u202elmay.yaml" read as "evilyaml.yaml" in a review.
    shutil.copy(rules / "mistakes.yaml", rules / "catalog" / "evil\u202elmay.yaml")
    return "rules/catalog/evil\\u202elmay.yaml", "U+202E"


HOSTILE: dict[str, Callable[[Path], tuple[str, ...]]] = {
    "long-template": _long_template,
    "many-rules": _many_rules,
    "bidi-file-name": _bidi_file_name,
    "outside-symlink": _outside_link,
    "fifo": _fifo,
    "alias-bomb": _alias_bomb,
    "dev-zero-link": _dev_zero,
    "huge-file": _huge_file,
    "format-width-bomb": _width_bomb,
    "configmap-data-leaving-the-folder": _outside_configmap_data,
    "hard-link": _hard_link,
}


def _health(running: Running) -> int:
    stub = health_pb2_grpc.HealthStub(running.channel)
    return stub.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=5).status


def _error(running: Running) -> str:
    return running.stub.GetRuleset(pb.GetRulesetRequest(), timeout=5).last_error


def _assert_clean(error: str, tmp_path: Path) -> None:
    assert len(error) < 8 * 1024
    assert len(error.splitlines()) <= MAX_PROBLEMS + 1
    assert str(tmp_path) not in error and "/tmp/" not in error  # no absolute path
    assert SECRET not in error and "TOP-SECRET" not in error  # nothing read from outside
    assert "Traceback" not in error and "Error(" not in error and "Errno" not in error  # no exception reprs


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_rules_folder_is_refused_while_the_last_good_rules_serve(case, rules_copy, tmp_path, start_server):
    running = start_server(rules_copy, watch=True, poll_seconds=0.2)
    good = running.store.status().revision
    assert good and h100_price(running.stub) == pytest.approx(3.15)
    where, *words = HOSTILE[case](rules_copy)
    wait_for(lambda: bool(_error(running)), timeout=60)  # a bound on the wait, not a speed claim
    error = _error(running)
    hits = [line for line in error.splitlines() if line.startswith(where) and all(w in line for w in words)]
    assert hits, error
    _assert_clean(error, tmp_path)
    # Still serving the last good version, and healthy.
    assert running.store.status().revision == good
    out = call(running.stub.Recommend, REQUEST, timeout=10)
    assert out.code == grpc.StatusCode.OK and out.response.ruleset.revision == good
    assert _health(running) == health_pb2.HealthCheckResponse.SERVING


def test_a_hanging_load_times_out_and_the_last_good_rules_keep_serving(rules_copy, start_server):
    # The in-process load, as a store without a vetting process runs it (a hang in the vetting process is
    # killed instead: tests/test_vetting.py).
    running = start_server(rules_copy, watch=True, poll_seconds=0.2)
    store = running.store
    store.vetter = None
    good = store.status().revision
    release = threading.Event()
    real_self_test = store.self_test
    assert real_self_test is not None

    def stuck_self_test(bundle):  # noqa: ANN001, ANN202 - stands in for any load step that never returns
        release.wait(30)
        return real_self_test(bundle)

    store.self_test = stuck_self_test
    store.load_timeout = 1.0
    try:
        set_h100_rent(rules_copy, 3.33)
        wait_for(lambda: "longer than 1 s" in _error(running), timeout=60)
        # The watcher gave up waiting; requests and health never waited at all: they are answered while the
        # load is still stuck (it cannot finish before `release` is set below).
        assert h100_price(running.stub) == pytest.approx(3.15)
        assert _health(running) == health_pb2.HealthCheckResponse.SERVING
        assert store.status().revision == good
        # While the stuck load lives on, another attempt is refused at once instead of piling up threads: it
        # returns while the load it is refused for is still running, so it did not wait for it.
        result = store.reload()
        assert not result.ok and "has not finished" in result.problems[0]
        assert store._load is not None and store._load.running() and not release.is_set()
    finally:
        release.set()
    # The abandoned load finishes late and is thrown away; the next change loads normally.
    wait_for(lambda: store._load is not None and not store._load.running(), timeout=60)
    assert store.status().revision == good
    store.self_test = real_self_test
    store.load_timeout = 30.0  # a real load on a busy machine can take over a second
    set_h100_rent(rules_copy, 3.44)
    result = store.reload()  # the watcher may get there first: then this one finds nothing new
    assert result.ok, result.problems
    assert h100_price(running.stub) == pytest.approx(3.44)


def test_errors_are_capped_in_number_and_length(rules_copy, tmp_path):
    for i in range(60):
        (rules_copy / f"broken-{i:02d}.yaml").write_text(f"kind: rules\nx{'y' * 2000}: [\n", encoding="utf-8")
    store = RuleStore(rules_copy)
    result = store.reload()
    assert not result.ok
    error = store.status().last_error
    lines = error.splitlines()
    assert len(lines) == MAX_PROBLEMS + 1 and "40 more problems" in lines[-1]
    assert all(len(line) <= 300 for line in lines)
    _assert_clean(error, tmp_path)


def test_configmap_links_inside_the_mount_are_followed(tmp_path):
    mount = tmp_path / "mount"
    mount.mkdir()
    version = mount / "..2026_12_03_04_05_06.000000001"
    shutil.copytree(RULES, version)
    (mount / "..data").symlink_to(version.name)
    for entry in version.iterdir():
        (mount / entry.name).symlink_to(Path("..data") / entry.name)
    book, problems = load_rulebook(mount)
    assert book is not None, problems
    assert "mount/catalog/gpus.yaml" in book.files


def test_a_hard_link_is_refused_by_the_walk_and_by_the_reader(rules_copy, tmp_path):
    inside = rules_copy / "assumptions.yaml"
    outside = tmp_path / "assumptions-elsewhere.yaml"
    os.link(inside, outside)  # the folder's own file, with a second name outside it
    _, refused = rulefiles.walk(rules_copy)
    assert ("assumptions.yaml", rulefiles._hard_link(2)) in refused
    with pytest.raises(ValueError, match="hard link"):  # a reader that did not walk first refuses it too
        rulefiles.read_regular(inside)
    book, problems = load_rulebook(rules_copy)
    assert book is None and any(str(p).startswith("rules/assumptions.yaml:1:1 is a hard link") for p in problems)
    outside.unlink()  # one name again: an ordinary file
    assert rulefiles.walk(rules_copy)[1] == []
    assert rulefiles.read_regular(inside)


def test_the_walk_survives_link_loops_and_deep_folders(rules_copy):
    (rules_copy / "loop").symlink_to(".")
    deep = rules_copy / "d"
    for _ in range(rulefiles.MAX_DEPTH + 2):
        deep = deep / "d"
    deep.mkdir(parents=True)
    files, refused = rulefiles.walk(rules_copy)
    assert any(rel.startswith("d/") and "deeper" in why for rel, why in refused)
    assert not any(f.rel.startswith("loop/") for f in files)


def test_read_regular_refuses_a_fifo_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    box: dict[str, str] = {}

    def read() -> None:
        try:
            rulefiles.read_regular(fifo)
        except ValueError as exc:
            box["error"] = str(exc)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive(), "opening a FIFO blocked"
    assert "FIFO" in box["error"]
    doc, problems = read_yaml(fifo, "rules/pipe.yaml")  # the rule-test loader's path (no walk before it)
    assert doc is None and "FIFO" in problems[0].message


def test_the_watcher_fingerprint_opens_nothing(rules_copy, monkeypatch):
    os.mkfifo(rules_copy / "pipe.yaml")
    (rules_copy / "zero.yaml").symlink_to("/dev/zero")
    (rules_copy / "root").symlink_to("/")  # walking it would take minutes
    listed: list[str] = []
    real_scandir = os.scandir

    def scandir(path):  # noqa: ANN001, ANN202
        listed.append(os.path.realpath(path))
        return real_scandir(path)

    def no_open(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError(f"the fingerprint opened {args[0]!r}")

    monkeypatch.setattr(rulefiles.os, "scandir", scandir)
    monkeypatch.setattr(rulefiles.os, "open", no_open)
    monkeypatch.setattr("builtins.open", no_open)
    _, entries, refused = RuleStore(rules_copy).fingerprint()
    monkeypatch.undo()
    inside = os.path.realpath(rules_copy)
    assert listed and all(p == inside or p.startswith(inside + os.sep) for p in listed), listed  # "/" not walked
    assert {rel for rel, *_ in refused} >= {"pipe.yaml", "zero.yaml", "root"}
    assert not any(rel in ("pipe.yaml", "zero.yaml") or rel.startswith("root/") for rel, *_ in entries)


@pytest.mark.parametrize(
    ("template", "words"),
    [
        ("{usd_per_hour:>100000000}", ("width 100000000", "above 40")),
        ("{usd_per_hour:.500f}", ("precision 500", "above 12")),
        ("{usd_per_hour!r}", ("conversions are not allowed",)),
        ("{usd_per_hour:{count}}", ("not a plain format",)),
        ("{gpu.__class__}", ("plain name",)),
        ("{0[0]}", ("plain name",)),
    ],
)
def test_rules_check_refuses_format_specs_that_could_blow_up_an_answer(rules_copy, template, words):
    f = rules_copy / "messages" / "en.yaml"
    text = f.read_text(encoding="utf-8")
    f.write_text(text.replace("${usd_per_hour:.2f}/h, over", f"${template}/h, over", 1), encoding="utf-8")
    book, problems = load_rulebook(rules_copy)
    assert book is None
    hits = [str(p) for p in problems if str(p).startswith("rules/messages/") and all(w in str(p) for w in words)]
    assert hits, "\n".join(map(str, problems))


def test_rendering_ignores_a_width_bomb_that_reached_it():
    from service.render.messages import fill

    assert fill("{x:>100000000}|{x:.2f}", {"x": 1.5}) == "1.5|1.50"


def test_rules_check_reports_a_fifo_instead_of_hanging(rules_copy):
    import subprocess
    import sys

    os.mkfifo(rules_copy / "pipe.yaml")
    done = subprocess.run([sys.executable, "-m", "service.frontends.rules_cli", "check", str(rules_copy)],
                          capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[1])
    assert done.returncode == 1
    assert "rules/pipe.yaml:1:1 is a FIFO, not a regular file" in done.stdout


def test_a_file_swapped_after_the_walk_is_not_read(rules_copy, tmp_path):
    files, _ = rulefiles.walk(rules_copy)
    entry = next(f for f in files if f.rel == "assumptions.yaml")
    outside = tmp_path / "outside.yaml"
    outside.write_text(SECRET, encoding="utf-8")
    os.replace(outside, entry.real)  # a different inode where the walk saw the file
    with pytest.raises(ValueError, match="changed while"):
        rulefiles.read_regular(entry.real, inode=entry.inode)


def test_devices_and_sockets_in_the_folder_are_refused_unopened(rules_copy):
    import socket
    import stat

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(rules_copy / "control.yaml"))
    try:
        expected = {"control.yaml": "a socket"}
        try:
            os.mknod(rules_copy / "zero.yaml", stat.S_IFCHR | 0o600, os.makedev(1, 5))  # what /dev/zero is
            expected["zero.yaml"] = "a device"
        except (PermissionError, OSError):
            pass  # not root here: the socket still shows the check
        _, refused = rulefiles.walk(rules_copy)
        for rel, kind in expected.items():
            assert any(r == rel and kind in why and "without opening" in why for r, why in refused), refused
        book, problems = load_rulebook(rules_copy)
        assert book is None and any("rules/control.yaml" in str(p) for p in problems)
    finally:
        sock.close()


def test_an_answer_over_the_size_limit_is_a_clear_error_at_serve_time_and_in_rule_tests(monkeypatch, start_server):
    from service.rulebook import ruletests
    from service.serving import server as server_module
    from service.wire import validate

    running = start_server(RULES, watch=False)
    size = running.stub.Recommend(REQUEST, timeout=30).ByteSize()
    # The shipped rules' answers are far below the limit; lower it below this one to see what a bigger one gets.
    assert size < validate.MAX_ANSWER_BYTES // 4
    monkeypatch.setattr(server_module, "MAX_ANSWER_BYTES", size // 2)
    out = call(running.stub.Recommend, REQUEST, timeout=30)
    # RESOURCE_EXHAUSTED, never INTERNAL (issue 26); a negative retry pushback: asking again gets the same.
    assert out.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "over the" in out.details and "limit" in out.details and running.store.status().revision in out.details
    assert out.trailing_metadata and out.trailing_metadata.get("grpc-retry-pushback-ms") == "-1"
    traced = pb.RecommendRequest()
    traced.CopyFrom(REQUEST)
    traced.include_trace = True
    out = call(running.stub.Recommend, traced, timeout=30)
    assert out.code == grpc.StatusCode.RESOURCE_EXHAUSTED and "include_trace" in out.details, out.details

    monkeypatch.setattr(validate, "MAX_ANSWER_BYTES", 1000)
    bundle = running.store.active()
    case = {"name": "x", "request": {"brief": {"workload": "WORKLOAD_TYPE_REALTIME_INFERENCE"}}, "expect": {}}
    failures, _fired = ruletests.run_case(bundle, case)
    assert [f for f in failures if "over the 1,000-byte limit" in f], failures
