"""A vetted copy of the built-in rules inside the package: what a server serves when its rules folder is refused at
start and nothing else is (issue 38 item 5).

A server whose `--rules` folder is the shipped one (`make run`'s `rules/`, or a container mounting its rules over
`/app/rules`) had no other copy to fall back to: with the folder broken and no `--state-dir`, health stayed
NOT_SERVING for as long as it stayed broken. So the installation keeps one more copy: `make dev` / `make run` and
the image build run `python -m service.rulebook.builtin`, which vets `rules/` exactly as the server vets a version
(load, checks, every rule test) and only then copies it into `service/rulebook/builtin_rules/` (a temporary folder
renamed into place), with a stamp beside it saying which version and when. A folder that fails vetting leaves the
previous copy as it was. The copy holds the same files, so it has the same content hash as the folder it was
made from.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
from datetime import UTC, date, datetime
from pathlib import Path

from .files import read_folder
from .folder import content_hash
from .last_good import BUILTIN_RULES

BUILTIN_COPY = Path(__file__).resolve().parent / "builtin_rules"
STAMP_SUFFIX = ".vetted.json"


def stamp_of(copy: Path) -> Path:
    return copy.with_name(copy.name + STAMP_SUFFIX)


def describe(copy: Path) -> str:
    """How a fallback onto `copy` is named in logs and GetRuleset: which copy, of what version, vetted when."""
    try:
        stamp = json.loads(stamp_of(copy).read_text(encoding="utf-8"))
        when = f", vetted {stamp['vetted_at']} from {stamp['source']}"
    except (OSError, ValueError, KeyError, TypeError):
        when = ""
    return f"the built-in rules copy vetted at install ({copy}{when})"


def vet(folder: Path, today: date | None = None) -> list[str]:
    """Every reason `folder` would be refused, as the server's vetting finds them (empty: it passes)."""
    from . import ruletests
    from .folder import load_rulebook
    from .version import Bundle

    book, problems = load_rulebook(folder, today=today)
    errors = [str(p) for p in problems if p.severity == "error"]
    if book is None or errors:
        return errors or ["the folder did not load"]
    bundle = Bundle(book, loaded_at=None)  # type: ignore[arg-type]
    try:
        report = ruletests.run(bundle, folder)
    finally:
        bundle.retire(None)
    return [str(p) for p in report.problems] + [f"{r.location} {r.name}: {'; '.join(r.failures)}"
                                                for r in report.results if not r.passed]


def build(source: Path = BUILTIN_RULES, dest: Path = BUILTIN_COPY, today: date | None = None) -> list[str]:
    """Vet `source` and, when it passes, make `dest` a copy of it (swapped in whole). → why it was refused."""
    refused = vet(source, today)
    if refused:
        return refused
    files, problems = read_folder(source, source.name)
    if problems:
        return [str(p) for p in problems]
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        new = staging / "rules"
        shutil.copytree(source, new, symlinks=False, ignore=shutil.ignore_patterns(".*", "__pycache__"))
        old = staging / "old"
        with contextlib.suppress(FileNotFoundError):
            dest.rename(old)
        new.rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    stamp = {"content_hash": content_hash(files), "vetted_at": datetime.now(UTC).isoformat(timespec="seconds"),
             "source": str(source)}
    tmp = stamp_of(dest).with_suffix(".tmp")
    tmp.write_text(json.dumps(stamp) + "\n", encoding="utf-8")
    tmp.replace(stamp_of(dest))
    return []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m service.rulebook.builtin", description=__doc__.splitlines()[0])
    ap.add_argument("--rules", type=Path, default=BUILTIN_RULES, help="the folder to vet and copy (default: the "
                                                                       "rules/ shipped beside the code)")
    ap.add_argument("--out", type=Path, default=BUILTIN_COPY, help="where the copy goes (default: inside the "
                                                                   "package)")
    args = ap.parse_args(argv)
    refused = build(args.rules, args.out)
    if refused:
        print(f"{args.rules}: refused, the built-in copy in {args.out} is left as it was:", file=sys.stderr)
        for line in refused[:20]:
            print(f"  {line}", file=sys.stderr)
        return 1
    revision = json.loads(stamp_of(args.out).read_text(encoding="utf-8"))["content_hash"][:12]
    print(f"{args.out}: a vetted copy of {args.rules} (revision {revision})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
