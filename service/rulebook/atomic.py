"""Writing a file of a watched rules folder so that no reader ever sees it half-written.

The server's watcher loads the folder once it has held still for a moment, but a writer that pauses longer than
that mid-file (a slow disk, a process that is descheduled, a network filesystem) would be read truncated, and a
truncated table can be a valid one (issue 26: a paused import served 3 of 17 rows). So every writer of the
project writes a temporary file beside the target, flushes it to disk, and renames it over the target: a rename
within one folder is atomic, and readers see the old file or the new one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomically(path: str | Path, data: bytes | str, encoding: str = "utf-8") -> None:
    """Replace `path` with `data` in one rename; the file keeps the permissions a new file would get."""
    target = Path(path)
    raw = data.encode(encoding) if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it 0600; a file written in place would be 0666 - umask
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
