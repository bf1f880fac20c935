"""structlog set-up: JSON lines for machines, a readable console on a terminal.

The level comes from `--log-level` or GPU_ADVISOR_LOG_LEVEL (default INFO).
"""

from __future__ import annotations

import logging
import os
import sys

import structlog


def configure(level: str | None = None) -> None:
    name = (level or os.environ.get("GPU_ADVISOR_LOG_LEVEL", "INFO")).upper()
    numeric = getattr(logging, name, logging.INFO)
    # A person at a terminal reads colours and columns; a collector (kubectl logs, journald) parses JSON.
    renderer = (structlog.dev.ConsoleRenderer() if sys.stderr.isatty()
                else structlog.processors.JSONRenderer(ensure_ascii=False))
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
