"""Small frozen inputs for the sizing behaviour tests (tests/test_sizing_*_behaviour.py): the rules and catalog
loaded once when the module is imported (mutmut's fork server imports the test modules once, so no mutant pays
for the load), GPUs and assumptions changed field by field, briefs built from keywords."""

from __future__ import annotations

import dataclasses
from datetime import date
from pathlib import Path
from typing import Any

from service.domain.assumptions import Assumptions
from service.domain.brief import Brief, Latency, Model, Parallelism, Traffic
from service.domain.catalog import Gpu
from service.rulebook.folder import load_rulebook

RULES = Path(__file__).parents[1] / "rules"
BOOK, _PROBLEMS = load_rulebook(RULES, today=date(2026, 11, 15))
assert BOOK is not None, _PROBLEMS
A: Assumptions = BOOK.assumptions
GPUS: dict[str, Gpu] = {g.id: g for g in BOOK.catalog}


def gpu(gid: str = "h100-sxm", **changes: Any) -> Gpu:  # noqa: ANN401
    """A catalog GPU, with `changes` applied (a new object: nothing keyed by a catalog GPU's id() is shared)."""
    return dataclasses.replace(GPUS[gid], **changes)


def rules(base: Assumptions | None = None, **values: Any) -> Assumptions:  # noqa: ANN401
    """The rules' assumptions (or `base`) with `values` replaced; a value of None removes the key. A new object
    every call: memos keyed by the assumptions' id() never see it before."""
    merged = dict((base or A).values)
    for k, v in values.items():
        if v is None:
            merged.pop(k, None)
        else:
            merged[k] = v
    return Assumptions(values=merged, sources=dict((base or A).sources))


def brief(workload: str = "REALTIME_INFERENCE", *, toolchain: tuple[str, ...] = (), latency: Latency | None = None,
          parallelism: Parallelism | None = None, **parts: Any) -> Brief:  # noqa: ANN401
    """A brief of `workload`; `model=dict(...)`, `traffic=dict(...)` give those parts' fields."""
    return Brief(workload=workload, model=Model(**parts.get("model", {})), traffic=Traffic(**parts.get("traffic", {})),
                 latency=latency or Latency(), toolchain=toolchain, parallelism=parallelism or Parallelism())
