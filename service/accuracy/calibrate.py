"""Refit the serving engines' named efficiencies over the measured serving rows, and say how well they hold out.

`python -m service.accuracy.calibrate` (offline, a few minutes): every serving row of calibration/ that names
its engine (AIConfigurator's aggregated rows the registry and catalog express, the published points of
published.csv and published-serving.csv) is sized at its measured width, with the arrival pattern the row states,
by the code the answers run. Coordinate descent on a grid (within the ranges the engines' schedulers and the
GPUs allow: PREFILL_FIRST_RANGE, BANDWIDTH_USE) fits, per engine, `prefill_first`,
`decode_bandwidth_use`, `prefill_layer_ms` (and with --with-request `request_ms`; rules/assumptions.yaml
`serving_engines`) to the smallest median
|TTFT error| + 0.5 x median |TPOT error| (a throughput figure counts with TPOT). Nothing is fitted per model, GPU
or row. With `--balance sources` the medians are weighted so that every source (a row's `group`) counts as much as
any other, whatever its number of rows; with `--balance classes` the objective is the mean over the classes
(dense, MoE, FP4, long context, consumer) of each class's own objective (issue 36: 286 of 385 rows are one
harness's FP4 MoE campaigns, and an unweighted fit follows them).

The held-out error is k-fold over SOURCES, not rows (issue 36): a row's `group` (its source URL, table or
measurement campaign) moves with every other row of that source, so a fold never sees a sibling of the rows it is
judged on. It prints the held-out median per class (dense, MoE, FP4, long context, consumer...) beside the
in-sample fit. Nothing is written: a rule author copies the values it reports (docs/calibration.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..decide.models import resolve
from ..decide.sizing import width as width_module
from ..decide.sizing.engines import engine_of
from ..domain.accuracy import classes_of
from .datasets import ARRIVALS, DATA, Row
from .harness import _at_width, read_rows
from .run import catalog_bundle

PREFILL_FIRST = tuple(round(0.05 * i, 2) for i in range(21))
# Decode GEMV-like kernels on NVIDIA datacenter GPUs reach 0.6-0.9 of HBM bandwidth (a GPU family measured lower,
# MI300X's 0.44, has its own figure in decode_bandwidth_use_by_gpu, not the engine's).
BANDWIDTH_USE = tuple(round(0.6 + 0.05 * i, 2) for i in range(7))
# Issue 36: the share of the other sessions' prefill a prompt waits for is bounded by the engine's scheduler, so a
# fold with few of an engine's sources cannot move it across designs (the unbounded folds chose TensorRT-LLM 1.0 and
# vLLM 0.9 to lift rows that read low for other reasons: docs/calibration.md). vLLM V1 and TensorRT-LLM schedule the
# running decodes first and mix a new prompt's chunks into the step (chunked prefill, in-flight batching): at most
# 0.3; SGLang runs a new prefill batch before decoding by default: at least 0.5.
PREFILL_FIRST_RANGE = {"vllm": (0.0, 0.3), "tensorrt-llm": (0.0, 0.3), "sglang": (0.5, 1.0)}
REQUEST_MS = tuple(range(0, 64, 4))
# Issue 36: the host's time per layer launching a prefill step's kernels (no CUDA graph), 0-1.2 ms.
PREFILL_LAYER_MS = tuple(round(0.1 * i, 1) for i in range(13))
FIELDS = (("prefill_first", PREFILL_FIRST), ("decode_bandwidth_use", BANDWIDTH_USE),
          ("prefill_layer_ms", PREFILL_LAYER_MS))
# `--with-request` fits request_ms too: over today's rows its folds chose 16-40 ms (SGLang), 32-60 (TensorRT-LLM),
# 44-52 (vLLM) and held out worse than the cited figures (docs/calibration.md), so it is not fitted by default.
REQUEST = ("request_ms", REQUEST_MS)
Err = tuple[str, float, tuple[str, ...], str]  # estimate, |error| %, the row's classes, its source
BALANCE = ("none", "sources", "classes")
# The classes `--balance classes` weighs equally (amd is left out: its rows are one table of one GPU, and their
# bandwidth use is the GPU's figure, not the engine's).
BALANCED_CLASSES = ("dense", "moe", "fp4", "long_context", "consumer")
# `--by FEATURE`: what a row's held-out errors are grouped by (issue 36, round 5's sixteenth pass: which feature the
# error follows), each read off the row as measured and its resolved brief.
BY: dict[str, Any] = {
    "engine": lambda r, b: engine_of(r.brief.toolchain),
    "gpu": lambda r, b: r.gpu,
    "model": lambda r, b: b.model.name,
    "attention": lambda r, b: b.model.attention if b.model.attention != "UNSPECIFIED" else "GQA",
    "experts": lambda r, b: f"{b.model.experts} top-{b.model.experts_per_token}" if b.model.experts else "dense",
    "sessions": lambda r, b: str(b.traffic.concurrent_sessions or b.traffic.batch_size),
    "prompt": lambda r, b: str(r.class_input_tokens or b.traffic.avg_input_tokens),
    "gpus": lambda r, b: str(r.gpus),
    "token_budget": lambda r, b: str(r.deployment.token_budget or "default"),
    "recv_interval": lambda r, b: str(r.deployment.recv_interval or "default"),
    "source": lambda r, b: r.group or r.id,
}


def serving_rows(bundle: Any, folder: Path, unexpressed: bool = False) -> list[Row]:  # noqa: ANN401
    """Rows with a TTFT, TPOT or throughput measured on a named engine, at a width the catalog's GPU allows; with
    `unexpressed`, also the rows a stated rule keeps out of the comparison (harness.unexpressed), sized as the
    harness would size them, to report the figures both ways."""
    rows, _ = read_rows(bundle, folder)
    keep, seen = [], set()
    for row in rows:
        if row.unexpressed and not unexpressed:
            continue
        key = (row.gpu, row.gpus, tuple(sorted(row.measured.items())))
        if key in seen or not row.gpus or not engine_of(row.brief.toolchain):
            continue
        if not {"itl", "ttft", "throughput"} & set(row.measured):
            continue
        seen.add(key)
        keep.append(row)
    return keep


def errors(bundle: Any, rows: list[Row], day: Any, signed: list[tuple[str, str, float]] | None = None,  # noqa: ANN401
           ) -> list[Err]:
    """(estimate, |error| %, classes) of every measured serving figure of `rows` under the bundle's current
    assumptions (the engines' figures are read afresh: the sizing keeps them per rules version otherwise).
    `signed` (optional) gets (row id, estimate, signed error %) of each."""
    width_module._ENGINE_ON.clear()
    out = []
    for row in rows:
        brief = resolve(row.brief, bundle.book.models)
        gpu = next((g for g in bundle.book.catalog if g.id == row.gpu), None)
        if gpu is None:
            continue
        m = brief.model
        moe = 0 < m.active_params_billion < m.params_billion
        precision = m.precision if m.precision != "UNSPECIFIED" else "BF16"
        prompt = row.class_input_tokens or brief.traffic.avg_input_tokens  # the nominal prompt's class
        classes = classes_of(brief.workload, precision, moe, prompt, gpu.vendor, gpu.gpu_class)
        est = _at_width(bundle, brief, gpu, row.gpus, day, ARRIVALS.get(row.arrivals), row.deployment)
        for key in ("itl", "ttft", "throughput"):
            if key in row.measured and row.measured[key] > 0:
                err = (est[key] - row.measured[key]) / row.measured[key] * 100
                out.append((key, abs(err), classes, row.group or row.id))
                if signed is not None:
                    signed.append((row.id, key, err))
    return out


def score(errs: list[Err] | list[tuple[str, float]]) -> tuple[float, float, float]:
    """median |TTFT error| + 0.5 x median |TPOT or throughput error|, and the two medians."""
    ttft = [e[1] for e in errs if e[0] == "ttft"]
    tpot = [e[1] for e in errs if e[0] != "ttft"]
    t = statistics.median(ttft) if ttft else 0.0
    p = statistics.median(tpot) if tpot else 0.0
    return t + 0.5 * p, t, p


def weighted_median(points: list[tuple[float, float]]) -> float:
    """The median of (value, weight) pairs: the value where the cumulative weight reaches half the total (the mean
    of the two values around it when it lands exactly on half, so equal weights give statistics.median)."""
    ordered = sorted(points)
    total = sum(w for _, w in ordered)
    run = 0.0
    for i, (value, weight) in enumerate(ordered):
        run += weight
        if abs(run - total / 2) <= 1e-9 * total and i + 1 < len(ordered):
            return (value + ordered[i + 1][0]) / 2
        if run > total / 2:
            return value
    return ordered[-1][0] if ordered else 0.0


def source_score(errs: list[Err]) -> tuple[float, float, float]:
    """score() with every source weighing the same: each point of an estimate (TTFT; TPOT or throughput) weighs
    1 / (that source's points of it)."""
    out = []
    for ttft in (True, False):
        mine = [e for e in errs if (e[0] == "ttft") == ttft]
        count: dict[str, int] = {}
        for e in mine:
            count[e[3]] = count.get(e[3], 0) + 1
        out.append(weighted_median([(e[1], 1 / count[e[3]]) for e in mine]) if mine else 0.0)
    return out[0] + 0.5 * out[1], out[0], out[1]


def objective(errs: list[Err], balance: str = "none") -> float:
    """What the fit minimises: score() over every point ("none"), weighted per source ("sources"), or the mean of
    each class's score() over the BALANCED_CLASSES that hold points ("classes")."""
    if balance == "sources":
        return source_score(errs)[0]
    if balance == "classes":
        per = [score([e for e in errs if cls in e[2]])[0] for cls in BALANCED_CLASSES
               if any(cls in e[2] for e in errs)]
        return sum(per) / len(per) if per else 0.0
    return score(errs)[0]


def fit(bundle: Any, rows: list[Row], day: Any, passes: int = 2,  # noqa: ANN401
        fields: tuple[tuple[str, tuple[Any, ...]], ...] = FIELDS, balance: str = "none",
        ) -> dict[str, dict[str, float]]:
    """Coordinate descent over `fields` for the engines `rows` name, minimising objective(balance); leaves the best
    values in the bundle."""
    table = bundle.book.assumptions.values["serving_engines"]
    engines = sorted({engine_of(r.brief.toolchain) for r in rows} & set(table))
    best = objective(errors(bundle, rows, day), balance)
    for _ in range(passes):
        moved = False
        for engine in engines:
            mine = [r for r in rows if engine_of(r.brief.toolchain) == engine]
            others = errors(bundle, [r for r in rows if r not in mine], day)
            for name, grid in fields:
                keep = table[engine][name]
                lo, hi = PREFILL_FIRST_RANGE.get(engine, (0.0, 1.0)) if name == "prefill_first" else (-1e9, 1e9)
                for value in grid:
                    if not lo <= value <= hi:
                        continue
                    table[engine][name] = value
                    s = objective(others + errors(bundle, mine, day), balance)
                    if s < best - 1e-9:
                        best, keep, moved = s, value, True
                table[engine][name] = keep
        if not moved:
            break
    width_module._ENGINE_ON.clear()
    return {e: {n: table[e][n] for n, _ in fields} for e in engines}


def merge_groups(row: Row, prefixes: list[str]) -> Row:
    """`row` with its group replaced by the first of `prefixes` it starts with (one source for all of them)."""
    found = next((p for p in prefixes if row.group.startswith(p)), None)
    return dataclasses.replace(row, group=found) if found else row


def source_folds(rows: list[Row], k: int) -> list[list[Row]]:
    """Rows split into k folds by source: every row of one group in one fold, the groups dealt out largest first
    so the folds hold about as many rows each."""
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(r.group or r.id, []).append(r)
    folds: list[list[Row]] = [[] for _ in range(k)]
    for _, members in sorted(groups.items(), key=lambda g: (-len(g[1]), g[0])):
        min(folds, key=len).extend(members)
    return folds


def by_class(errs: list[Err]) -> dict[str, dict[str, tuple[int, float]]]:
    """Per class and estimate: (points, median |error| %); 'all' holds every point."""
    out: dict[str, dict[str, tuple[int, float]]] = {}
    for cls in ("all", "dense", "moe", "fp4", "long_context", "consumer", "amd"):
        for key in ("ttft", "itl", "throughput"):
            got = [e for k, e, c, _ in errs if k == key and (cls == "all" or cls in c)]
            if got:
                out.setdefault(cls, {})[key] = (len(got), statistics.median(got))
    return out


def by_feature(rows: list[Row], per_row: list[tuple[str, str, float]], feature: str, bundle: Any,  # noqa: ANN401
               ) -> str:
    """The held-out signed errors `per_row` grouped by a feature of their rows (BY): per level and estimate, the
    points, the median signed and the median |error| %, the largest groups first."""
    read = BY[feature]
    level = {r.id: read(r, resolve(r.brief, bundle.book.models)) for r in rows}
    groups: dict[tuple[str, str], list[float]] = {}
    for rid, key, err in per_row:
        groups.setdefault((level[rid], key), []).append(err)
    lines = [f"held out by {feature}: points, median signed / median |error| %",
             f"  {feature:<40}{'TTFT':>22}{'ITL/TPOT':>22}"]
    points: dict[str, int] = {}
    for (name, _), errs in groups.items():
        points[name] = points.get(name, 0) + len(errs)
    for name in sorted(points, key=lambda n: (-points[n], n)):
        cells = []
        for key in ("ttft", "itl"):
            got = groups.get((name, key), [])
            cells.append(f"{len(got)}: {statistics.median(got):+.1f} / {statistics.median(abs(e) for e in got):.1f}"
                         if got else "-")
        lines.append(f"  {name[:40]:<40}" + "".join(f"{c:>22}" for c in cells))
    return "\n".join(lines)


def _table(title: str, errs: list[Err]) -> str:
    lines = [title, f"  {'class':<14}{'TTFT':>18}{'ITL/TPOT':>18}{'throughput':>18}"]
    for cls, per in by_class(errs).items():
        cells = [f"{per[k][1]:.1f}% ({per[k][0]})" if k in per else "-" for k in ("ttft", "itl", "throughput")]
        lines.append(f"  {cls:<14}" + "".join(f"{c:>18}" for c in cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m service.accuracy.calibrate", description=__doc__)
    ap.add_argument("--rules", type=Path, default=Path("rules"))
    ap.add_argument("--data", type=Path, default=DATA, help="the measured datasets (default: calibration)")
    ap.add_argument("--folds", type=int, default=4)
    ap.add_argument("--with-request", action="store_true", help="fit serving_engines request_ms too")
    ap.add_argument("--rows", action="store_true", help="print every row's held-out signed error, worst first")
    ap.add_argument("--merge-groups", action="append", default=[], metavar="PREFIX",
                    help="hold every row whose group starts with PREFIX out as one source (e.g. inferencex: for all "
                         "of InferenceX's campaigns together)")
    ap.add_argument("--with-unexpressed", action="store_true",
                    help="keep the rows a stated rule marks not expressed (calibration/README.md), to compare")
    ap.add_argument("--balance", choices=BALANCE, default="none",
                    help="weigh every source (sources) or every class (classes) equally in the fit's objective")
    ap.add_argument("--by", action="append", default=[], choices=sorted(BY), metavar="FEATURE",
                    help=f"group the held-out errors by a feature of the rows ({', '.join(sorted(BY))})")
    args = ap.parse_args(argv)
    fields = (*FIELDS, REQUEST) if args.with_request else FIELDS
    day = datetime.now(UTC).date()
    with tempfile.TemporaryDirectory() as work:
        bundle = catalog_bundle(args.rules, Path(work))
        table = bundle.book.assumptions.values["serving_engines"]
        start = {e: dict(v) for e, v in table.items()}
        rows = [merge_groups(r, args.merge_groups)
                for r in serving_rows(bundle, args.data, args.with_unexpressed)]
        shipped = errors(bundle, rows, day)
        groups = len({r.group or r.id for r in rows})
        print(f"{len(rows)} serving rows from {groups} sources")
        print(_table("as shipped (in-sample where a row was fitted before):", shipped))
        held: list[Err] = []
        per_row: list[tuple[str, str, float]] = []
        for k, test in enumerate(source_folds(rows, args.folds)):
            for e, v in start.items():
                table[e].update(v)
            chosen = fit(bundle, [r for r in rows if r not in test], day, fields=fields,
                         balance=args.balance)
            held += errors(bundle, test, day, per_row)
            print(f"  fold {k + 1} ({len(test)} rows, {len({r.group for r in test})} sources): {chosen}")
        print(_table(f"held out ({args.folds}-fold over sources, each fold fitted on the others):", held))
        for feature in args.by:
            print(by_feature(rows, per_row, feature, bundle))
        if args.rows:
            print("held out, per row (signed: negative = the estimate is faster / fewer than measured):")
            for rid, key, err in sorted(per_row, key=lambda r: (r[1], -abs(r[2]))):
                print(f"  {key:<11}{err:+8.1f}%  {rid}")
        for e, v in start.items():
            table[e].update(v)
        values = fit(bundle, rows, day, fields=fields, balance=args.balance)
        print(f"fitted on all: {values}")
        print(_table("refit on all (in-sample):", errors(bundle, rows, day)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
