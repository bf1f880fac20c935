"""Training runs measured against the speed model (calibration/training.csv, issue 41): tokens/s per GPU at
the measured GPU count and peak memory per GPU, with the named training efficiencies fitted on every source but
one and each row estimated by the fit that did not see its source (folds held out by source).

`python -m service.accuracy.training` prints the fit over all sources (what rules/assumptions.yaml ships) and the
held-out error per source; `make accuracy` puts the held-out points in results.yaml beside serving's.
"""

from __future__ import annotations

import csv
import itertools
import statistics
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from ..decide.sizing.per_gpu import size
from ..decide.sizing.shape import shape_of
from ..decide.sizing.training import adapter_breakdown, adapter_rate, full_rate, full_training_need, ranks_memory
from ..domain.accuracy import classes_of
from ..domain.assumptions import Assumptions
from ..domain.brief import Brief, Model, Traffic, Training
from ..domain.catalog import Gpu
from ..physics import memory as mem
from .datasets import DATA, Skipped
from .harness import Point

TRAINING_CSV = "training.csv"
# The named efficiencies fitted, each over its grid (coordinate descent, a few sweeps).
FITTED: dict[str, tuple[float, ...]] = {
    "mfu_training": tuple(round(0.40 + 0.02 * i, 2) for i in range(21)),
    "training_layer_half_ms": (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0),
    "model_parallel_efficiency": (0.85, 0.88, 0.9, 0.92, 0.94, 0.95, 0.96, 0.97, 0.98, 0.99, 1.0),
    "gradient_comm_overlap": (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0),
    "moe_training_efficiency": tuple(round(0.3 + 0.05 * i, 2) for i in range(12)),
    "fp8_training_speedup": (1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7),
}
SWEEPS = 3


@dataclass(frozen=True)
class Run:
    """One measured training configuration."""

    id: str
    source: str
    brief: Brief
    gpu: str
    gpus: int
    measured: dict[str, float] = field(default_factory=dict)  # train_tps, train_memory, train_memory_ceiling
    not_expressed: str = ""  # why the brief cannot describe this run (then it is listed, not compared)


def _num(text: str | None) -> float:
    return float(text) if text not in (None, "") else 0.0


def read_training(path: Path) -> list[Run]:
    runs = []
    with path.open(newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            seq, micro = int(_num(r["seq_len"])), int(_num(r["micro_batch"]))
            model = Model(_num(r["params_billion"]), _num(r["active_params_billion"]), precision=r["precision"],
                          context_tokens=seq, layers=int(_num(r["layers"])), hidden_size=int(_num(r["hidden_size"])))
            training = Training(tokens_billion=1.0, global_batch_tokens=int(_num(r["global_batch_tokens"])))
            brief = Brief(workload=r["workload"], model=model, traffic=Traffic(batch_size=micro), training=training)
            measured = {"train_tps": _num(r["tokens_per_s_per_gpu"])} if r["tokens_per_s_per_gpu"] else {}
            if r["peak_memory_gb"]:
                key = "train_memory_ceiling" if r["memory_ceiling"] == "1" else "train_memory"
                measured[key] = _num(r["peak_memory_gb"])
            runs.append(Run(r["id"], r["source"], brief, r["gpu"], int(_num(r["gpus"])), measured,
                            (r.get("not_expressed") or "").strip()))
    return runs


def estimate(run: Run, gpu: Gpu, a: Assumptions, day: date) -> dict[str, float]:
    """Tokens/s per GPU and memory per GPU of `run` at its measured GPU count, as the sizing computes them."""
    shape = shape_of(run.brief, a)
    assert shape is not None
    s = size(gpu, run.brief, shape, a, (), day)
    n = run.gpus
    if run.brief.workload == "ADAPTER_FINETUNE":
        speed = adapter_rate(s, run.brief, shape, a)(n)
        memory = ranks_memory(adapter_breakdown(shape, a, max(1, run.brief.traffic.batch_size)), n).total_gb / n
    else:
        micro = max(1, run.brief.traffic.batch_size or 1)
        recompute = a.text("recompute_full_finetune")

        def need(k: int, sequences: int = micro) -> mem.MemoryBreakdown:
            return full_training_need(shape, a, recompute, k, sequences)

        usable = gpu.capacity_gb * (1.0 - a.num("training_safety_headroom"))
        rate, _ = full_rate(s, run.brief, shape, a, need, usable)
        speed = rate(n)
        memory = need(n).total_gb / n
    return {"train_tps": speed.tokens_per_s, "train_memory": memory, "train_memory_ceiling": memory}


def compared(runs: list[Run], gpus: dict[str, Gpu]) -> list[Run]:
    """The runs the product can express on a catalog GPU."""
    return [r for r in runs if r.gpu in gpus and not r.not_expressed]


def skipped(runs: list[Run], gpus: dict[str, Gpu]) -> list[Skipped]:
    """The others, with why."""
    return [Skipped(r.id, "training", r.not_expressed or f"GPU {r.gpu} is not in the catalog")
            for r in runs if r.gpu not in gpus or r.not_expressed]


def _with(a: Assumptions, values: dict[str, float]) -> Assumptions:
    return Assumptions({**a.values, **values}, a.sources)


def _loss(runs: Iterable[Run], gpus: dict[str, Gpu], a: Assumptions, day: date) -> float:
    errs = [abs(estimate(r, gpus[r.gpu], a, day)["train_tps"] / r.measured["train_tps"] - 1)
            for r in runs if "train_tps" in r.measured]
    return statistics.median(errs) + 0.25 * statistics.fmean(errs) if errs else 0.0


def fit(runs: list[Run], gpus: dict[str, Gpu], a: Assumptions, day: date) -> dict[str, float]:
    """The FITTED efficiencies that minimise median + a quarter of the mean |tokens/s error| over `runs`."""
    best = {k: a.num(k) for k in FITTED}
    score = _loss(runs, gpus, _with(a, best), day)
    for _, (key, grid) in itertools.product(range(SWEEPS), FITTED.items()):
        for v in grid:
            trial = {**best, key: v}
            got = _loss(runs, gpus, _with(a, trial), day)
            if got < score - 1e-12:
                best, score = trial, got
    return best


def points(runs: list[Run], catalog: Iterable[Gpu], a: Assumptions, day: date) -> tuple[list[Point], dict[str, Any]]:
    """Every row's estimates by the fit that left its source out, and the folds' fitted values."""
    gpus = {g.id: g for g in catalog}
    runs = compared(runs, gpus)
    out: list[Point] = []
    folds: dict[str, Any] = {}
    for source in sorted({r.source for r in runs}):
        held = [r for r in runs if r.source == source]
        values = fit([r for r in runs if r.source != source], gpus, a, day)
        folds[source] = {k: values[k] for k in FITTED}
        fa = _with(a, values)
        for r in held:
            g = gpus[r.gpu]
            est = estimate(r, g, fa, day)
            m = r.brief.model
            classes = classes_of(r.brief.workload, m.precision, 0 < m.active_params_billion < m.params_billion, 0,
                                 g.vendor, g.gpu_class)
            for key, measured in r.measured.items():
                note = f"at the measured {r.gpus} GPUs; fitted without {source}"
                out.append(Point(r.id, "training", key, classes, measured, est[key], note))
    return out, folds


def main(argv: list[str] | None = None) -> int:
    from datetime import UTC, datetime  # noqa: PLC0415 - the CLI only

    from ..rulebook.folder import load_rulebook  # noqa: PLC0415

    args = argv or sys.argv[1:] or ["rules"]
    rules = Path(args[0])
    data = Path(args[1]) if len(args) > 1 else DATA
    day = datetime.now(UTC).date()
    book, problems = load_rulebook(rules, today=day)  # speeds read no price: the offers may stay
    if book is None:
        raise SystemExit("rules do not load:\n" + "\n".join(str(p) for p in problems))
    a, catalog = book.assumptions, book.catalog
    runs = read_training(data / TRAINING_CSV)
    gpus = {g.id: g for g in catalog}
    runs = compared(runs, gpus)
    print("fit over all sources:", fit(runs, gpus, a, day))
    pts, folds = points(runs, catalog, a, day)
    for source, values in folds.items():
        errs = [p.abs_pct for p in pts if p.estimate == "train_tps" and
                next(r.source for r in runs if r.id == p.row) == source]
        med = f"{statistics.median(errs):.1f}%" if errs else "none (memory only)"
        print(f"held out {source}: {values} median |tokens/s error| {med}")
    for p in pts:
        print(f"{p.row:45s} {p.estimate:12s} measured {p.measured:10.1f} estimated {p.estimated:10.1f} "
              f"{p.signed_pct:+6.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
