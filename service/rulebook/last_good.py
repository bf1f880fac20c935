"""The last rules version that passed vetting, kept on disk so that a server never starts serving nothing.

A pod restarted while its rules folder holds a version that fails vetting (a bad edit, a half-done import) had
no rules at all: health NOT_SERVING, every call UNAVAILABLE, and the startup probe restarting it in a loop. Now
every version the server activates is copied under the state folder (`--state-dir`), and a server whose folder
is refused at start serves the copy instead, flagged; with no copy, the rules shipped with the code. The folder
is still watched, and its next good version replaces the fallback. OPA keeps its last activated bundle the same
way.

Layout: `versions/<content hash>/` holds one version's files, written into a temporary folder and renamed into
place (a reader never sees half a version); `last-good` is a symbolic link to the newest, swapped by one rename.
`--processes N` workers share the folder: each writes the same bytes under the same name, the first rename wins.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import structlog

from .files import read_folder
from .folder import content_hash

log = structlog.get_logger("gpu_advisor.last_good")

# The rules folder shipped beside the code (the repository's rules/, the container image's /app/rules).
BUILTIN_RULES = Path(__file__).resolve().parents[2] / "rules"
LINK = "last-good"
KEEP = 3  # versions kept; older ones are removed when a new one is saved


class LastGood:
    def __init__(self, state_dir: str | Path):
        self.root = Path(state_dir)

    def latest(self) -> Path | None:
        """The folder of the last saved version, or None."""
        link = self.root / LINK
        try:
            target = link.resolve(strict=True)
        except (OSError, RuntimeError):
            return None
        return target if target.is_dir() else None

    def save(self, rules_dir: Path, expected_hash: str) -> Path | None:
        """Copy the folder's files when they are still the version `expected_hash` (what was vetted): → where
        they were saved, or None (the folder changed meanwhile, or the state folder cannot be written)."""
        files, problems = read_folder(rules_dir, rules_dir.name)
        if problems or content_hash(files) != expected_hash:
            return None  # the folder moved on since it was vetted: the next activation saves that version
        versions = self.root / "versions"
        target = versions / expected_hash[:16]
        try:
            if not target.is_dir():
                versions.mkdir(parents=True, exist_ok=True)
                tmp = Path(tempfile.mkdtemp(prefix=".new-", dir=versions))
                for f in files:
                    path = tmp / f.rel
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(f.data)
                try:
                    os.rename(tmp, target)
                except OSError:  # another worker saved the same version first
                    shutil.rmtree(tmp, ignore_errors=True)
            if self.latest() != target.resolve():
                link_tmp = self.root / f".{LINK}-{os.getpid()}"
                with contextlib.suppress(FileNotFoundError):
                    link_tmp.unlink()
                os.symlink(os.path.relpath(target, self.root), link_tmp)
                os.replace(link_tmp, self.root / LINK)  # the swap: one rename
            self._prune(versions, target)
        except OSError as exc:
            log.warning("last_good_not_saved", state_dir=str(self.root), error=str(exc))
            return None
        return target

    def _prune(self, versions: Path, keep: Path) -> None:
        saved = sorted((p for p in versions.iterdir() if p.is_dir() and not p.name.startswith(".")),
                       key=lambda p: p.stat().st_mtime, reverse=True)
        for old in saved[KEEP:]:
            if old.resolve() != keep.resolve():
                shutil.rmtree(old, ignore_errors=True)
