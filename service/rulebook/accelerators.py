"""Provider accelerator names → catalog GPU ids (`rules/offers/accelerators.csv`).

Columns `provider,accelerator,instance_pattern,gpu,note`, mapped by header name. `provider` `*` = any provider;
`instance_pattern` is an fnmatch pattern over the instance type (`*` = any). Names and patterns compare
case-insensitively (providers spell `H100_NVL`, `h100-nvl`, `H100-NVL`). The first matching row wins, so the
specific rows come first. A row with an empty `gpu` says "this is a known part with no catalog id" and stops the
search, so that e.g. an H100 NVL is not taken for the SXM part by the general `H100` row below it.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from fnmatch import fnmatchcase

from ..engine.load import Problem

MAP_COLUMNS = ("provider", "accelerator", "instance_pattern", "gpu", "note")


@dataclass(frozen=True, slots=True)
class AcceleratorRule:
    provider: str  # lower case, or "*"
    accelerator: str  # lower case
    instance_pattern: str  # lower case fnmatch pattern
    gpu: str  # catalog id, "" = known part without one
    note: str
    line: int


# A GPU whose listed memory differs from the catalog part's by more than this share is another part (a 48 GB
# modified RTX 4090, a 94 GB H100 NVL listed as H100): listed sizes round (an H100's 81,559 MiB), parts do not halve.
MEMORY_TOLERANCE = 0.15


class AcceleratorMap:
    def __init__(self, rules: list[AcceleratorRule], catalog_gb: dict[str, float] | None = None):
        self.rules = tuple(rules)
        self.catalog_gb = dict(catalog_gb or {})  # catalog id → memory_gb, for the memory check in `resolve`
        # accelerator name → its rules in file order: a lookup scans a few rows, not the whole table
        self._by_name: dict[str, list[AcceleratorRule]] = {}
        for r in self.rules:
            self._by_name.setdefault(r.accelerator, []).append(r)

    def lookup(self, provider: str, accelerator: str, instance_type: str) -> AcceleratorRule | None:
        """The first rule that matches, or None when no row names this accelerator for this provider."""
        p, inst = provider.lower(), instance_type.lower()
        for r in self._by_name.get(accelerator.strip().lower(), ()):
            if r.provider in ("*", p) and fnmatchcase(inst, r.instance_pattern):
                return r
        return None

    def map_accelerator(self, provider: str, accelerator: str, instance_type: str) -> str | None:
        """The catalog GPU id, or None (no row, or a row saying the part has no catalog id)."""
        r = self.lookup(provider, accelerator, instance_type)
        return r.gpu if r is not None and r.gpu else None

    def resolve(
        self, provider: str, accelerator: str, instance_type: str, gpu_gib: float | None = None
    ) -> tuple[str | None, str]:
        """(catalog id, "") or (None, why not). With the listed memory per GPU: `<name>-<N>GB` is looked up first
        (an `A100` with 80 GiB is the A100-80GB row), and a part whose memory is not the catalog id's is refused."""
        if gpu_gib:
            sized = self.map_accelerator(provider, f"{accelerator}-{round(gpu_gib)}GB", instance_type)
            if sized:
                return sized, ""
        rule = self.lookup(provider, accelerator, instance_type)
        if rule is None:
            return None, f"accelerator {accelerator} has no catalog id"
        if not rule.gpu:
            return None, f"accelerator {accelerator}: {rule.note}" if rule.note else (
                f"accelerator {accelerator} has no catalog id")
        want = self.catalog_gb.get(rule.gpu)
        if gpu_gib and want and abs(gpu_gib - want) > MEMORY_TOLERANCE * want:
            return None, (f"accelerator {accelerator} with {gpu_gib:.0f} GB per GPU is not the catalog's {rule.gpu} "
                          f"({want:g} GB): no catalog id of that memory")
        return rule.gpu, ""


def read_accelerator_map(
    label: str, text: str, known_gpus: set[str] | None = None
) -> tuple[AcceleratorMap, list[Problem]]:
    """Parse the mapping CSV; with `known_gpus`, a gpu that is not a catalog id is an error on its line."""
    problems: list[Problem] = []
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip() for h in next(reader)]
    except (StopIteration, csv.Error):
        return AcceleratorMap([]), [Problem(label, 1, 1, "", "has no header row")]
    unknown = [h for h in header if h not in MAP_COLUMNS]
    missing = [c for c in MAP_COLUMNS if c not in header]
    if unknown or missing:
        why = "; ".join(
            [f'unknown column "{h}"' for h in unknown] + [f'the header has no column "{c}"' for c in missing]
        )
        return AcceleratorMap([]), [Problem(label, 1, 1, "", why)]
    idx = {h: i for i, h in enumerate(header)}
    rules: list[AcceleratorRule] = []
    seen: dict[tuple[str, str, str], int] = {}
    line = 1
    for cells in reader:
        start, line = line + 1, reader.line_num
        if not cells or all(not c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            problems.append(Problem(label, start, 1, "", f"has {len(cells)} values; the header names {len(header)}"))
            continue
        v = {h: cells[i].strip() for h, i in idx.items()}
        if not v["provider"] or not v["accelerator"] or not v["instance_pattern"]:
            problems.append(Problem(label, start, 1, "", "provider, accelerator and instance_pattern are required"))
            continue
        if v["gpu"] and known_gpus is not None and v["gpu"] not in known_gpus:
            problems.append(Problem(label, start, idx["gpu"] + 1, "", f'gpu "{v["gpu"]}" is not a catalog id'))
            continue
        rule = AcceleratorRule(v["provider"].lower(), v["accelerator"].lower(), v["instance_pattern"].lower(),
                               v["gpu"], v["note"], start)
        k = (rule.provider, rule.accelerator, rule.instance_pattern)
        if k in seen:  # the later row could never match: say so rather than let an author edit a dead row
            problems.append(Problem(label, start, 1, "", f"repeats line {seen[k]} (first match wins)", "warning"))
        seen.setdefault(k, start)
        rules.append(rule)
    return AcceleratorMap(rules), problems
