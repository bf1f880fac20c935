"""The results document as the table `make accuracy` prints."""

from __future__ import annotations

from typing import Any

from ..domain.accuracy import CLASSES, ESTIMATES
from .datasets import DATASETS


def render(doc: dict[str, Any], rows: bool = False) -> str:
    out = ["Accuracy: the product's estimates against measurements (error = (estimate - measured) / measured)", ""]
    for d in doc["datasets"]:
        out.append(f"  {d['id']}: {d['compared']} of {d['rows']} rows compared ({d['source']}; {d['licence']})")
    head = f"  {'class':<15}{'points':>7}{'median |err|':>14}{'within 25%':>12}{'median signed':>15}  worst rows"
    for key, what in ESTIMATES:
        out += ["", f"{key}: {what}", head]
        for cls in ("all", *DATASETS, *CLASSES):
            s = doc["table"][key][cls]
            if not s["points"]:
                if cls == "all":
                    out.append(f"  {'all':<15}{0:>7}  no measured points")
                continue
            worst = ", ".join(f"{w['row']} {w['error_pct']:+.0f}%" for w in s["worst"])
            out.append(f"  {cls:<15}{s['points']:>7}{s['median_abs_pct']:>13.1f}%{s['within_25_pct']:>11.0f}%"
                       f"{s['median_signed_pct']:>+14.1f}%  {worst}")
        empty = [c for c in CLASSES if not doc["table"][key][c]["points"]]
        if doc["table"][key]["all"]["points"] and empty:
            out.append(f"  no points: {', '.join(empty)}")
    if rows:
        out += ["", "rows:"]
        for r in doc["rows"]:
            note = f"  ({r['note']})" if r.get("note") else ""
            out.append(f"  {r['row']} {r['estimate']}: measured {r['measured']:g}, estimated {r['estimated']:g}, "
                       f"{r['error_pct']:+.1f}%{note}")
    out += ["", f"not expressed ({len(doc['not_expressed'])} rows the API cannot ask yet):"]
    out += [f"  {s['row']}: {s['why']}" for s in doc["not_expressed"]]
    return "\n".join(out)
