"""Child processes that never outlive their parent, and are reaped or killed: what the server's workers, its
probe and its rules-vetting helper all need, kept below both serving and the rules toolchain."""

from __future__ import annotations

import ctypes
import signal
import subprocess
from collections.abc import Callable
from typing import Any

_PR_SET_PDEATHSIG = 1


def _find_prctl() -> Callable[..., int] | None:
    # Looked up in the parent: the forked child before exec only makes the one call (no dlopen there).
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None


_PRCTL = _find_prctl()


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Linux: this process gets `sig` when its parent dies, even killed outright, so no orphan lives on (a worker
    keeping the port, a rules check its helper no longer waits for). Elsewhere nothing."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, sig)


def wait_or_kill(proc: subprocess.Popen[Any], timeout: float) -> tuple[int, bool]:
    """Wait up to `timeout` s for `proc` to exit, then kill it: (its exit code, whether it had to be killed)."""
    try:
        return proc.wait(timeout=timeout), False
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(), True
