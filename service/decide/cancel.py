"""Stopping an advice run whose caller no longer waits for it, without decide/ knowing about gRPC.

The server hands `advise` a plain callable that says whether the answer is still wanted (deadline not passed,
caller still connected); `advise` asks it between its expensive stages.
"""

from __future__ import annotations

from collections.abc import Callable

StillWanted = Callable[[], bool]


class Cancelled(Exception):  # noqa: N818 - it is an outcome, not a programming error
    """The caller no longer wants the answer; `stage` is the step that was about to start."""

    def __init__(self, stage: str):
        super().__init__(f"stopped before {stage}: the answer is no longer wanted")
        self.stage = stage


def checkpoint(still_wanted: StillWanted | None, stage: str) -> None:
    if still_wanted is not None and not still_wanted():
        raise Cancelled(stage)
