"""How the server and the multi-process supervisor hear signals: SIGTERM/SIGINT stop, SIGHUP does their own thing."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any


def stop_on_signals(on_hup: Callable[[], None], log: Any) -> threading.Event:
    """Install the handlers and return the event SIGTERM/SIGINT set; SIGHUP (where it exists) calls `on_hup`."""
    stop = threading.Event()
    hup = getattr(signal, "SIGHUP", None)

    def handle(signum: int, _frame: object) -> None:
        if signum == hup:
            on_hup()
            return
        log.info("stopping", signal=signal.Signals(signum).name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT, hup):
        if sig is not None:
            signal.signal(sig, handle)
    return stop
