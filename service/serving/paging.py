"""Page tokens for list RPCs: opaque to callers, bound to the query and the rules version they came from, so a
token replayed against other filters or newer rules is refused rather than silently skipping rows."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def _digest(query: Any, content_hash: str) -> str:  # noqa: ANN401 - a frozen query dataclass
    return hashlib.sha256(f"{query.key()}|{content_hash}".encode()).hexdigest()[:16]


def page(rows: Sequence[T], query: Any, content_hash: str) -> tuple[Sequence[T] | None, str]:  # noqa: ANN401
    """(this page's rows, the next page's token or ""), or (None, "") for a token that is not ours."""
    start = 0
    if query.page_token:
        try:
            raw = base64.urlsafe_b64decode(query.page_token.encode("ascii") + b"==").decode("ascii")
            offset, digest = raw.split(":", 1)
            start = int(offset)
        except (ValueError, UnicodeError):
            return None, ""
        if digest != _digest(query, content_hash) or not 0 <= start <= len(rows):
            return None, ""
    end = start + query.page_size
    token = ""
    if end < len(rows):
        token = base64.urlsafe_b64encode(f"{end}:{_digest(query, content_hash)}".encode()).decode().rstrip("=")
    return rows[start:end], token
