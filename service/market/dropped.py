"""`gpu-advisor offers --dropped`: every offer row a rules folder holds that no answer will use, with its reason.

Three kinds: rows the checks refuse (an error on the row's line keeps it out of the table), rows another file's
newer row supersedes, and rows the placement rules leave out (host RAM below `min_host_ram_per_gpu_memory` times
the GPUs' memory). Read locally from the folder, as the server would load it; no server is needed.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TextIO

from ..decide.host_ram import host_ram_needed, host_ram_ok
from ..rulebook.folder import load_rulebook


@dataclass(frozen=True)
class Dropped:
    where: str  # path:line
    what: str  # provider instance region tier, or "" for a file-level problem
    reason: str
    kind: str  # refused | superseded | placement


def dropped_rows(root: Path, day: date | None = None) -> tuple[list[Dropped], int]:
    """(every dropped row, the offers the table serves)."""
    book, problems = load_rulebook(root, today=day)
    out: list[Dropped] = []
    for p in problems:
        if not p.rule_id.startswith("offers.") and "/offers/" not in f"/{p.path}":
            continue
        if p.severity == "error":
            out.append(Dropped(f"{p.path}:{p.line}", "", p.message, "refused"))
        elif p.rule_id == "offers.superseded":
            out.append(Dropped(f"{p.path}:{p.line}", "", p.message, "superseded"))
    if book is None:
        return out, 0
    ratio = float(book.assumptions.values.get("min_host_ram_per_gpu_memory", 0.0))
    gib = {g.id: g.capacity_gb * 1e9 / 2**30 for g in book.catalog}
    served = 0
    for o in book.offers.rows:
        if host_ram_ok(o, gib.get(o.gpu, 0.0), ratio):
            served += 1
            continue
        need = host_ram_needed(o, gib.get(o.gpu, 0.0), ratio)
        out.append(Dropped(f"{o.path}:{o.line}", f"{o.provider} {o.instance_type} {o.region} {o.tier}",
                           f"host RAM {o.memory_gib:g} GiB is below {need:.1f} GiB (min_host_ram_per_gpu_memory "
                           f"{ratio:g} x {o.gpus_per_instance} x {o.gpu})", "placement"))
    return out, served


def print_dropped(root: Path, day: date | None, out: TextIO) -> int:
    rows, served = dropped_rows(root, day)
    for d in rows:
        print(f"{d.where}  {d.kind:<10}  {d.what + ': ' if d.what else ''}{d.reason}", file=out)
    kinds = Counter(d.kind for d in rows)
    said = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "none"
    print(f"\n{len(rows)} offer rows dropped ({said}); {served} offers placed from {os.fspath(root)}", file=out)
    return 0
