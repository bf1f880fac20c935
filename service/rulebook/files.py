"""The files of a rules folder, read as untrusted input.

Anyone who can write to the rules folder (or its ConfigMap) must not be able to make the server read elsewhere,
block or exhaust memory. So: only regular files under the folder; a symbolic link counts only when its target
stays inside the folder (a Kubernetes ConfigMap mounts every file as a link through `..data` to a hidden
`..2026_…` folder, both inside the mount); FIFOs, devices and sockets are refused from their `stat` without being
opened; a file with more than one hard link is refused, because a path cannot show where its other names are
(one may be outside the folder, read or changed from there; kubelet writes a ConfigMap's files with one link);
every file and the whole folder have a size limit; a name with a control, bidi or other invisible character is
refused (rulebook/limits.py). Hidden entries (`.git`, `..data`, editor swap files)
are skipped, as they always were. Errors name the file relative to the folder and never quote an exception.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ..engine.load import Doc, Problem, load_yaml
from .limits import unsafe_name

MAX_FILE_BYTES = 1 << 20  # the largest shipped file is ~40 KB
# Offer tables are data rows, not logic: a provider's whole catalog (AWS, every region and tier) is a few MB of
# CSV, and 50,000 rows (the scale `make bench` measures) are ~7 MB. They parse linearly (csv, no YAML).
MAX_OFFER_FILE_BYTES = 8 << 20
MAX_TOTAL_BYTES = 64 << 20
MAX_ENTRIES = 2000  # files and folders walked
MAX_DEPTH = 8


@dataclass(frozen=True)
class Entry:
    """A regular file of the folder: `rel` is its posix path relative to the folder, `real` where it lives."""

    path: Path
    rel: str
    real: str
    size: int
    mtime_ns: int
    inode: tuple[int, int] = (0, 0)  # (st_dev, st_ino) when walked: the file read must be this one


def _inside(real: str, root_real: str) -> bool:
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _hard_link(nlink: int) -> str:
    return f"is a hard link ({nlink} names for one file, perhaps outside the rules folder): refused; copy it instead"


def walk(root: Path) -> tuple[list[Entry], list[tuple[str, str]]]:
    """Regular files under `root` and the (relative path, reason) of every entry refused. Reads no file."""
    root_real = os.path.realpath(root)
    files: list[Entry] = []
    refused: list[tuple[str, str]] = []
    seen_dirs = {root_real}
    stack: list[tuple[Path, str, int]] = [(Path(root), "", 0)]
    entries = 0
    while stack:
        folder, rel_folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                children = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            refused.append((rel_folder or ".", f"cannot list the folder: {exc.strerror or 'error'}"))
            continue
        for child in children:
            if child.name.startswith("."):
                continue
            entries += 1
            if entries > MAX_ENTRIES:
                refused.append((rel_folder or ".", f"more than {MAX_ENTRIES} files and folders: refused"))
                return files, refused
            rel = f"{rel_folder}/{child.name}" if rel_folder else child.name
            unsafe = unsafe_name(child.name)
            if unsafe:
                refused.append((ascii(rel)[1:-1], f"the name {unsafe}"))
                continue
            full = Path(folder) / child.name
            real = os.path.realpath(full)
            if child.is_symlink() and not _inside(real, root_real):
                refused.append((rel, "is a symbolic link that leads outside the rules folder: refused"))
                continue
            try:
                st = os.stat(real)  # the resolved path: inside the folder, checked above
            except OSError as exc:
                reason = "is a broken symbolic link" if child.is_symlink() else f"cannot stat: {exc.strerror}"
                refused.append((rel, reason))
                continue
            if stat.S_ISDIR(st.st_mode):
                if real in seen_dirs:
                    continue  # a link back to a folder already walked (a loop, or `..data` seen twice)
                if depth + 1 > MAX_DEPTH:
                    refused.append((rel, f"folders nested deeper than {MAX_DEPTH}: refused"))
                    continue
                seen_dirs.add(real)
                stack.append((full, rel, depth + 1))
            elif stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                refused.append((rel, _hard_link(st.st_nlink)))
            elif stat.S_ISREG(st.st_mode):
                files.append(Entry(full, rel, real, st.st_size, st.st_mtime_ns, (st.st_dev, st.st_ino)))
            else:
                refused.append((rel, f"is {_kind(st.st_mode)}, not a regular file: refused without opening it"))
    files.sort(key=lambda e: e.rel)
    return files, refused


def read_regular(path: str | Path, limit: int = MAX_FILE_BYTES, inode: tuple[int, int] | None = None) -> bytes:
    """At most `limit` bytes of a regular file. Opens without blocking (a FIFO swapped in after the walk's
    `stat` must not hang the reader) and checks the opened file's type and link count again, and with `inode`
    that it is the file the walk checked (a link swapped in between must not lead elsewhere). Raises ValueError
    with a sentence fit for a rule author (no path, no exception text)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise ValueError(f"cannot open: {exc.strerror or 'error'}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"is {_kind(st.st_mode)}, not a regular file: refused")
        if st.st_nlink > 1:  # also for callers that did not walk first (the rule-test loader)
            raise ValueError(_hard_link(st.st_nlink))
        if inode is not None and (st.st_dev, st.st_ino) != inode:
            raise ValueError("changed while the folder was read: try again")
        if st.st_size > limit:
            raise ValueError(f"is {st.st_size:,} bytes; the limit is {limit:,}")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 16, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # grew after the fstat
            raise ValueError(f"is more than {limit:,} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise ValueError(f"cannot read: {exc.strerror or 'error'}") from None
    finally:
        os.close(fd)


@dataclass(frozen=True)
class RuleFile:
    rel: str
    data: bytes


def file_limit(rel: str) -> int:
    """The size limit of one file of a rules folder: offer tables (offers/*.csv) are data and may be larger."""
    return MAX_OFFER_FILE_BYTES if rel.startswith("offers/") and rel.endswith(".csv") else MAX_FILE_BYTES


def read_folder(root: Path, shown_root: str) -> tuple[list[RuleFile], list[Problem]]:
    """Every regular file of the folder with its bytes, or the problems that refuse the folder."""
    entries, refused = walk(root)
    problems = [Problem(f"{shown_root}/{rel}" if rel != "." else shown_root, 1, 1, "", why) for rel, why in refused]
    out: list[RuleFile] = []
    total = 0
    for e in entries:
        shown = f"{shown_root}/{e.rel}"
        limit = file_limit(e.rel)
        if e.size > limit:
            problems.append(Problem(shown, 1, 1, "", f"is {e.size:,} bytes; the limit is {limit:,}"))
            continue
        if total + e.size > MAX_TOTAL_BYTES:
            problems.append(Problem(shown, 1, 1, "", f"the folder holds more than {MAX_TOTAL_BYTES:,} bytes"))
            break
        try:
            data = read_regular(e.real, limit=limit, inode=e.inode)
        except ValueError as exc:
            problems.append(Problem(shown, 1, 1, "", str(exc)))
            continue
        total += len(data)
        out.append(RuleFile(e.rel, data))
    return out, problems


def read_yaml(path: str | Path, shown_as: str) -> tuple[Doc | None, list[Problem]]:
    """One YAML file outside a folder walk (a rule-test file): read as safely as the walk reads, then parsed."""
    try:
        raw = read_regular(path)
    except ValueError as exc:
        return None, [Problem(shown_as, 1, 1, "", str(exc))]
    return load_yaml(raw, shown_as)
