"""AIConfigurator's own estimates of the measured rows (calibration/peer-aiconfigurator.csv, written by
`make peer-estimates`) set beside ours: per estimate and per class, on the rows both express, each side's median
absolute error and how many rows each is closer on; and the rows only one side expresses.

Read from the results document (`results.results`), not from the harness, so the comparison is of the very figures
`make accuracy` prints; never written into rules/accuracy/results.yaml (answers cite our bands only).
"""

from __future__ import annotations

import csv
import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..domain.accuracy import CLASSES

PEER = "peer-aiconfigurator.csv"  # beside the datasets (calibration/)
COLUMNS = ("row", "dataset", "aiconfigurator", "backend", "measured_version", "version_used", "quant", "tp", "pp",
           "attention_dp", "moe_tp", "moe_ep", "ttft_ms", "tpot_ms", "why")
# our estimate key -> the peer file's column for the same figure
ESTIMATES = {"ttft": "ttft_ms", "itl": "tpot_ms"}
NAMES = {"ttft": "TTFT", "itl": "ITL/TPOT"}
ENGINES = ("vllm", "sglang", "trtllm")  # the peer file's backend names: a class of their own here
PEER_NAME = "AIConfigurator"


class PeerFileError(ValueError):
    """The peer file cannot be read: the message says where and why."""


@dataclass(frozen=True)
class PeerRow:
    row: str
    dataset: str
    version: str  # AIConfigurator's, that made the estimate
    backend: str  # the engine, by AIConfigurator's name
    measured_version: str  # the engine version the row was measured on ("" = not recorded)
    version_used: str  # the engine version of its database it estimated with
    estimates: dict[str, float]  # by our estimate key (ESTIMATES); empty when it could not express the row
    why: str = ""  # why it could not


def read_peer(path: Path) -> dict[tuple[str, str], PeerRow]:
    """The peer file by (dataset, row id); PeerFileError names the line and the problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise PeerFileError(f"{path}: cannot be read ({e.strerror or e})") from e
    reader = csv.DictReader(text.splitlines())
    if tuple(reader.fieldnames or ()) != COLUMNS:
        raise PeerFileError(f"{path}: columns {reader.fieldnames} are not {list(COLUMNS)}")
    out: dict[tuple[str, str], PeerRow] = {}
    for line, r in enumerate(reader, start=2):
        where = f"{path}:{line}"
        if None in r or any(v is None for v in r.values()):
            raise PeerFileError(f"{where}: {len(COLUMNS)} fields expected")
        if not r["row"] or not r["dataset"]:
            raise PeerFileError(f"{where}: row and dataset must be given")
        estimates = {}
        for key, col in ESTIMATES.items():
            if r[col]:
                try:
                    value = float(r[col])
                except ValueError:
                    raise PeerFileError(f"{where}: {col} {r[col]!r} is not a number") from None
                if not math.isfinite(value) or value <= 0:
                    raise PeerFileError(f"{where}: {col} {r[col]!r} is not a positive time")
                estimates[key] = value
        if bool(estimates) == bool(r["why"]):
            raise PeerFileError(f"{where}: give the estimates ({', '.join(ESTIMATES.values())}) or why not, not both")
        if estimates and len(estimates) != len(ESTIMATES):
            raise PeerFileError(f"{where}: both {' and '.join(ESTIMATES.values())} are needed")
        key = (r["dataset"], r["row"])
        if key in out:
            raise PeerFileError(f"{where}: row {r['row']} of {r['dataset']} is listed twice")
        out[key] = PeerRow(r["row"], r["dataset"], r["aiconfigurator"], r["backend"], r["measured_version"],
                           r["version_used"], estimates, r["why"])
    return out


def _r(x: float) -> float:
    return round(x, 1) + 0.0


def _reason(why: str) -> str:
    """A why's kind: its text before the first colon or parenthesis, a figure or row id in it as N (they differ
    per row)."""
    kind = re.sub(r"(?<![\w-])\d\S*", "N", why.split(":")[0].split("(")[0].strip())
    return "the same measurement as another row" if kind.startswith("the same measurement as") else kind


def compare(doc: dict[str, Any], peer: dict[tuple[str, str], PeerRow]) -> dict[str, Any]:
    """Ours against the peer's on the rows of the datasets the peer file covers: per estimate (ESTIMATES) and class
    ('all', the datasets, the engines, CLASSES) the points both express, each side's median |error| and median
    signed error (%), the rows each is closer on (ties: equal at 0.1%); and which rows only one side expresses."""
    datasets = sorted({d for d, _ in peer})
    ours = [r for r in doc["rows"] if r["dataset"] in datasets and r["estimate"] in ESTIMATES]
    table: dict[str, dict[str, Any]] = {}
    for key in ESTIMATES:
        pairs = []
        for r in ours:
            p = peer.get((r["dataset"], r["row"]))
            if r["estimate"] != key or p is None or key not in p.estimates:
                continue
            theirs = (p.estimates[key] - r["measured"]) / r["measured"] * 100
            pairs.append((r, p.backend, r["error_pct"], theirs))
        per: dict[str, Any] = {}
        for cls in ("all", *datasets, *ENGINES, *CLASSES):
            got = [(a, b) for r, engine, a, b in pairs
                   if cls in ("all", r["dataset"], engine) or cls in r["classes"]]
            if not got:
                continue
            per[cls] = {
                "points": len(got),
                "ours_median_abs_pct": _r(statistics.median(abs(a) for a, _ in got)),
                "ours_median_signed_pct": _r(statistics.median(a for a, _ in got)),
                "peer_median_abs_pct": _r(statistics.median(abs(b) for _, b in got)),
                "peer_median_signed_pct": _r(statistics.median(b for _, b in got)),
                "ours_closer": sum(_r(abs(a)) < _r(abs(b)) for a, b in got),
                "peer_closer": sum(_r(abs(b)) < _r(abs(a)) for a, b in got),
            }
        table[key] = per
    compared = {(r["dataset"], r["row"]) for r in ours}
    why = {(s["dataset"], s["row"]): s["why"] for s in doc["not_expressed"]}
    only_peer = sorted(k for k, p in peer.items() if p.estimates and k not in compared)
    only_ours = sorted(k for k in compared if k not in peer or not peer[k].estimates)
    return {
        "datasets": datasets,
        "versions": sorted({p.version for p in peer.values()}),
        "engine_versions": sorted(Counter(f"{p.backend} {p.version_used}" for p in peer.values()
                                          if p.estimates).items()),
        "at_measured_version": sum(1 for p in peer.values() if p.estimates and p.version_used == p.measured_version),
        "table": table,
        "only_peer": len(only_peer),
        "only_peer_why": sorted(Counter(_reason(why.get(k, "not in the datasets")) for k in only_peer).items(),
                                key=lambda kv: (-kv[1], kv[0])),
        "only_ours": len(only_ours),
        "only_ours_why": sorted(Counter(_reason(peer[k].why) if k in peer else "not in the peer file"
                                        for k in only_ours).items(), key=lambda kv: (-kv[1], kv[0])),
    }


def verdict(s: dict[str, Any]) -> str:
    """Who is closer on one class: the lower median |error|; equal medians go to the side closer on more rows."""
    a, b = s["ours_median_abs_pct"], s["peer_median_abs_pct"]
    if a != b:
        return "ours" if a < b else PEER_NAME
    if s["ours_closer"] != s["peer_closer"]:
        return "ours" if s["ours_closer"] > s["peer_closer"] else PEER_NAME
    return "even"


def render(cmp: dict[str, Any], source: str = f"calibration/{PEER}") -> str:
    out = [f"Beside {PEER_NAME} ({source}: {PEER_NAME} {', '.join(cmp['versions'])}; the engine versions of its "
           "database it estimated with, rows: " + ", ".join(f"{v} {n}" for v, n in cmp["engine_versions"])
           + f"; {cmp['at_measured_version']} at the version measured)",
           f"  on the rows both express of {', '.join(cmp['datasets'])}; error = (estimate - measured) / measured"]
    head = (f"  {'class':<22}{'points':>7}{'ours |err|':>12}{'signed':>9}{'AIC |err|':>11}{'signed':>9}"
            f"{'ours closer':>13}{'AIC closer':>12}  closer")
    for key, per in cmp["table"].items():
        out += ["", f"{NAMES[key]} (median |error| and median signed error; AIC = {PEER_NAME}):", head]
        if not per:
            out.append("  no row both express")
        for cls, s in per.items():
            out.append(f"  {cls:<22}{s['points']:>7}{s['ours_median_abs_pct']:>11.1f}%"
                       f"{s['ours_median_signed_pct']:>+8.1f}%{s['peer_median_abs_pct']:>10.1f}%"
                       f"{s['peer_median_signed_pct']:>+8.1f}%{s['ours_closer']:>13}{s['peer_closer']:>12}"
                       f"  {verdict(s)}")
    closer = [f"{NAMES[k]} {verdict(per['all'])}" for k, per in cmp["table"].items() if "all" in per]
    out += ["", f"closer (median |error|, all rows both express): {'; '.join(closer) or 'no row both express'}"]
    out.append(f"rows only {PEER_NAME} expresses: {cmp['only_peer']}"
               + "".join(f"\n  {n} {why}" for why, n in cmp["only_peer_why"]))
    out.append(f"rows only ours expresses: {cmp['only_ours']}"
               + "".join(f"\n  {n} {why}" for why, n in cmp["only_ours_why"]))
    return "\n".join(out)


def section(doc: dict[str, Any], folder: Path) -> tuple[str, str]:
    """(the comparison as text, a problem) for `make accuracy`: ("", "") without a peer file; a file that cannot be
    read gives ("", why) and no comparison."""
    path = folder / PEER
    if not path.exists():
        return "", ""
    try:
        peer = read_peer(path)
    except PeerFileError as e:
        return "", f"{e}: the comparison with {PEER_NAME} is left out (make peer-estimates writes the file)"
    return render(compare(doc, peer), str(path)), ""
