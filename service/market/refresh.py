"""`gpu-advisor offers refresh`: download the published catalogs, import them, vet the result as the server vets a
rules version, swap the new tables in atomically and print what changed.

Sources (the only network access the product makes, and only when this command runs):
- SkyPilot's catalog: `<base>/<version>/<provider>/vms.csv` for each provider named (`--skypilot-url`, default the
  public catalog repository; `--catalog-version` is tried in order, v8 then v7 by default).
- dstack gpuhunt's published catalog: `<base>/version` names the latest build, `<base>/<build>/catalog.zip` holds
  one `<provider>.csv` per provider (`--gpuhunt-url`).
HTTPS only (plain HTTP only to a loopback address, for tests and a local mirror). A provider whose download or import
fails is reported and its table is left as it was; the others still update. The candidate tables are vetted in a
staging copy of the rules folder (load, checks, rule tests), after the sanity gates (market/gates.py: a provider
that lost too many rows or whose median price moved too far keeps its last good table unless the operator passes
--accept-market-move for it); a provider whose new table the vetting refuses is
dropped from the update and the rest vetted again. Tables are written with a temporary file and a rename, so the
server watching the folder reads either the old table or the new one.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import ipaddress
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TextIO

from ..domain.offers import Offer
from ..engine.load import Problem
from ..rulebook.accelerators import AcceleratorMap, read_accelerator_map
from ..rulebook.atomic import write_atomically
from ..rulebook.offer_files import read_offers
from .diff import Diff, diff
from .gates import Limits, Priced, check, read_limits
from .importers.__main__ import catalog_memory
from .importers.common import ImportReport, offers_csv_text
from .importers.gpuhunt import import_gpuhunt_csv
from .importers.skypilot import import_vms_csv
from .progress import Progress

SKYPILOT_URL = "https://raw.githubusercontent.com/skypilot-org/skypilot-catalog/master/catalogs"
GPUHUNT_URL = "https://dstack-gpu-pricing.s3.eu-west-1.amazonaws.com/v1"
SKYPILOT_PROVIDERS = ("aws", "cudo", "gcp", "lambda", "nebius", "runpod", "vast")
GPUHUNT_PROVIDERS = ("azure",)
VERSIONS = ("v8", "v7")
MAX_BYTES = 64 * 2**20  # a catalog file is a few MB; a larger answer is not one
TIMEOUT_S = 60.0
EXIT_OK, EXIT_PARTIAL, EXIT_NOTHING = 0, 1, 2


class FetchError(Exception):
    pass


def check_url(url: str) -> None:
    u = urllib.parse.urlsplit(url)
    if u.scheme == "https":
        return
    host = u.hostname or ""
    loopback = host == "localhost"
    with contextlib.suppress(ValueError):  # a name, not an address
        loopback = loopback or ipaddress.ip_address(host).is_loopback
    if u.scheme == "http" and loopback:
        return
    raise FetchError(f"{url}: only https:// (or http:// to a loopback address) is fetched")


def fetch(url: str, timeout: float = TIMEOUT_S, max_bytes: int = MAX_BYTES) -> bytes:
    """The body of a GET, or FetchError saying why not (HTTP status, network error, size)."""
    check_url(url)
    req = urllib.request.Request(url, headers={"User-Agent": "gpu-advisor offers refresh"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - scheme checked above
            body = resp.read(max_bytes + 1)
    except urllib.error.HTTPError as exc:
        raise FetchError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise FetchError(f"{url}: {getattr(exc, 'reason', exc)}") from None
    if len(body) > max_bytes:
        raise FetchError(f"{url}: larger than {max_bytes:,} bytes")
    return body


@dataclass
class Candidate:
    """One provider's new table, or why there is none."""

    provider: str
    origin: str = ""
    rows: list[Offer] = field(default_factory=list)
    report: ImportReport | None = None
    error: str = ""


@dataclass
class Options:
    skypilot_url: str = SKYPILOT_URL
    versions: tuple[str, ...] = VERSIONS
    skypilot: tuple[str, ...] = SKYPILOT_PROVIDERS
    gpuhunt_url: str = GPUHUNT_URL
    gpuhunt: tuple[str, ...] = GPUHUNT_PROVIDERS
    timeout: float = TIMEOUT_S
    as_of: date | None = None
    accept: tuple[str, ...] = ()  # providers whose table may pass the sanity gates' limits ("all": every one)

    def accepts(self, provider: str) -> bool:
        return provider in self.accept or "all" in self.accept


def _decode(body: bytes, where: str) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FetchError(f"{where}: not UTF-8 text (byte {exc.start})") from None


def _usable(c: Candidate) -> Candidate:
    """A file that imports to no offer is not a catalog (an HTML error page, a truncated file): refused."""
    if not c.error and not c.rows:
        notes = "; ".join(c.report.notes[:2]) if c.report else ""
        c.error = f"{c.origin}: no offer imported" + (f" ({notes})" if notes else "")
    return c


def skypilot_tables(opts: Options, accel: AcceleratorMap, day: date,
                    get: Callable[[str], bytes], progress: Progress | None = None) -> list[Candidate]:
    out = []
    for prov in opts.skypilot:
        if progress is not None:
            progress.note(f"now {prov} (SkyPilot)")
        c = Candidate(prov)
        errors = []
        for version in opts.versions:
            url = f"{opts.skypilot_url.rstrip('/')}/{version}/{prov}/vms.csv"
            try:
                text = _decode(get(url), url)
            except FetchError as exc:
                errors.append(str(exc))
                continue
            c.origin = url
            source = f"SkyPilot catalog {version}, {prov}/vms.csv, read {day.isoformat()}"
            c.rows, c.report = import_vms_csv(f"{version}/{prov}/vms.csv", text, accel, day, prov, source)
            break
        else:
            c.error = "; ".join(errors)
        out.append(_usable(c))
        if progress is not None:
            progress.update(1)
    return out


def gpuhunt_tables(opts: Options, accel: AcceleratorMap, day: date,
                   get: Callable[[str], bytes], progress: Progress | None = None) -> list[Candidate]:
    if not opts.gpuhunt:
        return []
    if progress is not None:
        progress.note("now the gpuhunt catalog")
    base = opts.gpuhunt_url.rstrip("/")
    try:
        build = _decode(get(f"{base}/version"), f"{base}/version").strip()
        if not build or "/" in build or len(build) > 64:
            raise FetchError(f"{base}/version: not a catalog build name ({build[:40]!r})")
        url = f"{base}/{build}/catalog.zip"
        archive = zipfile.ZipFile(io.BytesIO(get(url)))
    except (FetchError, zipfile.BadZipFile) as exc:
        why = str(exc) if isinstance(exc, FetchError) else f"{base}: catalog.zip is not a zip archive"
        if progress is not None:
            progress.update(len(opts.gpuhunt))
        return [Candidate(p, error=why) for p in opts.gpuhunt]
    names = {Path(n).name: n for n in archive.namelist()}
    out = []
    # gpuhunt names some providers its own way
    theirs = {"lambda": "lambdalabs", "vast": "vastai", "cudo": "cudocompute"}
    for prov in opts.gpuhunt:
        c = Candidate(prov, origin=f"{url} {theirs.get(prov, prov)}.csv")
        member = names.get(f"{theirs.get(prov, prov)}.csv")
        if member is None:
            c.error = f"{url}: no {theirs.get(prov, prov)}.csv in the archive"
        else:
            try:
                text = _decode(archive.read(member), c.origin)
                source = f"dstack gpuhunt catalog {build}, {theirs.get(prov, prov)}.csv, read {day.isoformat()}"
                c.rows, c.report = import_gpuhunt_csv(member, text, accel, day, theirs.get(prov, prov), source)
            except (FetchError, zipfile.BadZipFile, OSError) as exc:
                c.error = str(exc)
        out.append(_usable(c))
        if progress is not None:
            progress.update(1)
    return out


def _vet(staging: Path, day: date) -> tuple[list[Problem], list[str]]:
    """(errors, failed rule tests) of the staged folder, as the server's vetting finds them."""
    from ..rulebook import ruletests
    from ..rulebook.folder import load_rulebook
    from ..rulebook.version import Bundle

    book, problems = load_rulebook(staging, today=day)
    errors = [p for p in problems if p.severity == "error"]
    if book is None or errors:
        return errors, []
    bundle = Bundle(book, loaded_at=None)  # type: ignore[arg-type]
    try:
        report = ruletests.run(bundle, staging)
    finally:
        bundle.retire(None)
    failed = [str(p) for p in report.problems] + [f"{r.location} {r.name}: {'; '.join(r.failures)}"
                                                   for r in report.results if not r.passed]
    return errors, failed


def _stage(rules: Path, tables: dict[str, str], where: Path) -> Path:
    staging = where / rules.name
    shutil.copytree(rules, staging, symlinks=False,
                    ignore=shutil.ignore_patterns(".*"))  # ConfigMap `..data` links: the files they point at
    for prov, text in tables.items():
        (staging / "offers" / f"{prov}.csv").write_text(text, encoding="utf-8")
    return staging


def vet_tables(rules: Path, new: dict[str, str], day: date) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """(the tables that passed, provider → why refused, what still fails with none of them). A provider whose
    table an error names is dropped and the rest vetted again; a rule test failing with every new table in is
    tried without each in turn, then the update is refused whole."""
    refused: dict[str, str] = {}
    tables = dict(new)
    while True:
        with tempfile.TemporaryDirectory(prefix="offers-refresh-") as tmp:
            errors, failed = _vet(_stage(rules, tables, Path(tmp)), day)
        if not errors and not failed:
            return tables, refused, []
        named = {p for p in tables if any(f"/offers/{p}.csv" in f"/{e.path}" for e in errors)}
        if named:
            for p in named:
                refused[p] = "; ".join(str(e) for e in errors if f"/offers/{p}.csv" in f"/{e.path}")[:500]
                del tables[p]
            continue
        if not tables:
            return {}, refused, [str(e) for e in errors] + failed
        # Rule tests (or a folder-level error) fail: refuse the whole update, say why.
        for p in tables:
            refused[p] = "the rules version with the new tables fails vetting: " + "; ".join(
                [str(e) for e in errors] + failed)[:500]
        return {}, refused, [str(e) for e in errors] + failed


def _priced(rows: list[Offer]) -> list[Priced]:
    # per GPU-hour, so the whole tables' medians compare 1-GPU and 8-GPU shapes alike
    return [Priced((o.instance_type, o.region, o.tier, o.gpu), o.usd_per_hour / max(o.gpus_per_instance, 1))
            for o in rows]


def gate_tables(rules: Path, candidates: list[Candidate], opts: Options, failed: dict[str, str],
                limits: Limits | None = None) -> dict[str, str]:
    """The sanity gates (market/gates.py) on each new table against the provider's last good one: a table they
    refuse goes into `failed` with why and how to accept it; returns provider → what was let through by the accept
    flag."""
    limits = limits or read_limits(rules)
    accepted: dict[str, str] = {}
    for c in candidates:
        path = rules / "offers" / f"{c.provider}.csv"
        old = read_offers(path.name, path.read_text(encoding="utf-8"))[0] if path.exists() else []
        verdict = check(c.provider, _priced(old), _priced(c.rows), limits, " USD per GPU-hour")
        if verdict.passed:
            continue
        why = "; ".join(verdict.reasons)
        if opts.accepts(c.provider):
            accepted[c.provider] = why
        else:
            failed[c.provider] = (f"refused by the sanity gates: {why}. If the market really moved, run again with "
                                  f"--accept-market-move {c.provider}")
    return accepted


def refresh(rules: Path, opts: Options, out: TextIO, get: Callable[[str], bytes] | None = None) -> int:
    day = opts.as_of or date.today()
    get = get or (lambda url: fetch(url, opts.timeout))
    memory = catalog_memory(rules)
    amap_path = rules / "offers" / "accelerators.csv"
    accel, problems = read_accelerator_map(amap_path.as_posix(), amap_path.read_text(encoding="utf-8"), set(memory))
    if any(p.severity == "error" for p in problems):
        for p in problems:
            print(p, file=out)
        return EXIT_NOTHING
    accel.catalog_gb = memory
    # Downloads and vetting take minutes: progress on stderr (a bar on a terminal, a line every few seconds
    # otherwise), providers done of those asked for; the report stays on `out`.
    with Progress("offers refresh", "providers done", len(opts.skypilot) + len(opts.gpuhunt)) as progress:
        candidates = (skypilot_tables(opts, accel, day, get, progress)
                      + gpuhunt_tables(opts, accel, day, get, progress))
        failed = {c.provider: c.error for c in candidates if c.error}
        accepted = gate_tables(rules, [c for c in candidates if not c.error], opts, failed)
        new = {c.provider: offers_csv_text(c.rows) for c in candidates if c.provider not in failed}
        progress.note("vetting the new tables with the rule tests")
        passed, refused, still = vet_tables(rules, new, day) if new else ({}, {}, [])
    failed.update(refused)
    diffs: list[Diff] = []
    for prov, text in sorted(passed.items()):
        path = rules / "offers" / f"{prov}.csv"
        old = read_offers(path.name, path.read_text(encoding="utf-8"))[0] if path.exists() else []
        diffs.append(diff(prov, old, read_offers(path.name, text)[0]))
        write_atomically(path, text)
    for c in candidates:
        if c.report is not None and c.provider in passed:
            print(f"{c.provider} from {c.origin}:", file=out)
            print("\n".join("  " + line for line in c.report.render().splitlines()[1:3]), file=out)
    for d in diffs:
        print("\n".join(d.lines()), file=out)
    for prov, why in sorted(accepted.items()):
        if prov in passed:
            print(f"{prov}: updated past the sanity gates (--accept-market-move): {why}", file=out)
    for prov, why in sorted(failed.items()):
        print(f"{prov}: NOT updated, the last good table keeps serving: {why}", file=out)
    for line in still:
        print(line, file=out)
    print(f"\nrefreshed {len(passed)} of {len(candidates)} providers into {rules / 'offers'}", file=out)
    if not passed:
        return EXIT_NOTHING
    return EXIT_PARTIAL if failed else EXIT_OK


def add_arguments(ap: argparse.ArgumentParser) -> None:
    def names(text: str) -> tuple[str, ...]:
        return tuple(p.strip().lower() for p in text.split(",") if p.strip())

    ap.add_argument("--rules", type=Path, default=Path(os.environ.get("GPU_ADVISOR_RULES", "rules")),
                    help="the rules folder whose offers/ tables are refreshed, the one the server watches (env "
                         "GPU_ADVISOR_RULES, default rules)")
    ap.add_argument("--skypilot-url", default=SKYPILOT_URL, help="base URL of the SkyPilot catalog (default: "
                                                                 "the public repository)")
    ap.add_argument("--catalog-version", type=names, default=VERSIONS,
                    help="SkyPilot schema versions to try in order, comma-separated (default v8,v7)")
    ap.add_argument("--skypilot", type=names, default=SKYPILOT_PROVIDERS,
                    help="providers taken from SkyPilot, comma-separated (default %(default)s)")
    ap.add_argument("--gpuhunt-url", default=GPUHUNT_URL, help="base URL of gpuhunt's published catalog")
    ap.add_argument("--gpuhunt", type=names, default=GPUHUNT_PROVIDERS,
                    help="providers taken from gpuhunt, comma-separated ('' for none; default %(default)s)")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per download")
    ap.add_argument("--as-of", type=date.fromisoformat, default=None, help="the date stamped (default today)")
    ap.add_argument("--accept-market-move", dest="accept", type=names, default=(), metavar="PROVIDERS",
                    help="let these providers' tables (comma-separated, or 'all') past the sanity gates: more rows "
                         "lost, or the median price moved further, than rules/assumptions.yaml allows one refresh")


def run(args: argparse.Namespace) -> int:
    opts = Options(args.skypilot_url, args.catalog_version, args.skypilot, args.gpuhunt_url, args.gpuhunt,
                   args.timeout, args.as_of, args.accept)
    if not (args.rules / "offers").is_dir():
        print(f"{args.rules}: no offers/ folder to refresh", file=sys.stderr)
        return EXIT_NOTHING
    return refresh(args.rules, opts, sys.stdout)
