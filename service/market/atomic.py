"""Writes into a folder a server may be watching: never in place. The new bytes go to a temporary file in the
same folder (same file system), are flushed to disk, then take the old name in one `os.replace`, so a reader sees
the old file or the new one, never half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: str | Path, data: str | bytes) -> None:
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    # a dot name: the rules folder reader skips hidden files, so a temp file left by a crash is never served
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
