"""The server's interpreter settings (service/serving/interpreter.py): the switch interval and the garbage
collector's frozen rules, with their flags and environment variables."""

from __future__ import annotations

import gc
import sys
import time
import weakref
from collections.abc import Iterator

import pytest

from service.serving import interpreter
from service.serving.server import parse_args


@pytest.fixture
def restored() -> Iterator[None]:
    interval = sys.getswitchinterval()
    yield
    sys.setswitchinterval(interval)
    gc.unfreeze()


def test_switch_interval_flag_and_env(monkeypatch):
    monkeypatch.delenv("GPU_ADVISOR_SWITCH_INTERVAL_MS", raising=False)
    assert parse_args([])[0].switch_interval_ms == interpreter.DEFAULT_SWITCH_INTERVAL_MS
    assert parse_args(["--switch-interval-ms", "0.5"])[0].switch_interval_ms == 0.5
    monkeypatch.setenv("GPU_ADVISOR_SWITCH_INTERVAL_MS", "2")
    assert parse_args([])[0].switch_interval_ms == 2
    assert parse_args(["--switch-interval-ms", "1"])[0].switch_interval_ms == 1  # the flag over the variable
    for bad in ("0", "-1", "nan", "101", "fast"):
        with pytest.raises(SystemExit):
            parse_args(["--switch-interval-ms", bad])
    monkeypatch.setenv("GPU_ADVISOR_SWITCH_INTERVAL_MS", "0")
    with pytest.raises(SystemExit):
        parse_args([])


def test_the_options_for_serve_leave_the_interpreter_settings_out(monkeypatch):
    # They are the process's (set by main), not one server's: serve() takes no such keyword.
    monkeypatch.delenv("GPU_ADVISOR_NO_GC_FREEZE", raising=False)
    options = parse_args(["--switch-interval-ms", "1", "--no-gc-freeze"])[1]
    assert not {"switch_interval_ms", "no_gc_freeze", "gc_freeze"} & set(options)


def test_gc_freeze_flag_and_env(monkeypatch):
    monkeypatch.delenv("GPU_ADVISOR_NO_GC_FREEZE", raising=False)
    assert parse_args([])[0].no_gc_freeze is False
    assert parse_args(["--no-gc-freeze"])[0].no_gc_freeze is True
    monkeypatch.setenv("GPU_ADVISOR_NO_GC_FREEZE", "1")
    assert parse_args([])[0].no_gc_freeze is True
    monkeypatch.setenv("GPU_ADVISOR_NO_GC_FREEZE", "0")
    assert parse_args([])[0].no_gc_freeze is False


def test_set_switch_interval(restored):
    interpreter.set_switch_interval(1)
    assert sys.getswitchinterval() == pytest.approx(0.001)
    for bad in (0, -1, float("nan"), 1000):
        with pytest.raises(ValueError, match="switch interval"):
            interpreter.set_switch_interval(bad)
    assert sys.getswitchinterval() == pytest.approx(0.001)


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_refreeze_freezes_what_lives_and_frees_a_frozen_cycle_once_it_is_garbage(restored):
    kept, dropped = _Cycle(), _Cycle()
    gone = weakref.ref(dropped)
    interpreter.refreeze()
    assert interpreter.frozen() > 0
    del dropped
    gc.collect()
    assert gone() is not None  # frozen: the collector does not see the garbage cycle
    interpreter.refreeze()  # what a reload does: the version replaced is collected
    assert gone() is None
    assert kept.me is kept


def test_the_refreezer_collects_after_activations_on_its_thread(restored):
    refreezer = interpreter.Refreezer(settle_seconds=0.05)
    dropped = _Cycle()
    gone = weakref.ref(dropped)
    interpreter.refreeze()
    del dropped
    for _ in range(3):
        refreezer.schedule(object())
    end = time.monotonic() + 30
    while refreezer.passes == 0 and time.monotonic() < end:
        time.sleep(0.01)
    assert refreezer.passes >= 1
    assert gone() is None
