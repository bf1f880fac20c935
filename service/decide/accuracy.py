"""How sure each candidate's figures are: the measured error of its class (rules/accuracy/results.yaml, written
by `make accuracy`), a caveat where a target is met by less than that error, and a note where a shown candidate's
class has no measured points."""

from __future__ import annotations

from typing import Any

from ..domain.accuracy import LONG_CONTEXT_INPUT_TOKENS, Band, classes_of, margins
from ..domain.advice import Candidate, Reason
from ..domain.frozen import build
from ..memo import IdentityMemo
from ..render.accuracy import margins_of, risk_params
from .run import Run, Scored


def band_of(c: Scored, run: Run) -> tuple[Band | None, str]:
    """The band a candidate cites and its class ("" when none of its classes has points). Kept per rules
    version by all it reads (the input length only as long-context or not): the same few GPU kinds come back
    for every GPU of every brief."""
    f, gpu = c.fact, c.sizing.gpu
    total, active = f["params_billion"], f["active_params_billion"]
    precision = f["precision"] if f["precision"] != "UNSPECIFIED" else "BF16"
    moe, long = 0 < active < total, f["avg_input_tokens"] >= LONG_CONTEXT_INPUT_TOKENS
    key = (f["workload"], precision, moe, long, gpu.vendor, gpu.gpu_class)
    table = run.book.accuracy
    kept = _bands(table)
    hit = kept.get(key)
    if hit is None:
        # classes_of reads the input length only against LONG_CONTEXT_INPUT_TOKENS: a length on the same side
        # of it gives the same classes.
        length = LONG_CONTEXT_INPUT_TOKENS if long else 0
        hit = kept[key] = table.band_for(classes_of(f["workload"], precision, moe, length, gpu.vendor,
                                                    gpu.gpu_class))
    return hit


# Per accuracy table (a rules version's): band_of's answers by its key, a few dozen at most (workloads x precisions
# x GPU kinds), so bounded by what the rules name.
_bands: IdentityMemo[Any, dict[tuple[Any, ...], tuple[Band | None, str]]] = IdentityMemo(lambda _table: {}, limit=8)


def risk_caveats(perf: Any, band: Band | None, run: Run, brief: dict[str, Any]) -> tuple[Reason, ...]:  # noqa: ANN401
    if band is None:
        return ()
    out = []
    for m in margins_of(perf, band, brief):
        at_risk = m.at_risk
        if at_risk or m.near_miss:
            out.append(build(Reason, rule_id="accuracy.at_risk", text=run.text(
                "caveat.accuracy_at_risk" if at_risk else "caveat.accuracy_near_miss", risk_params(m, band, run.text))))
    return tuple(out)


def mark_near_misses(scored: list[Scored], run: Run) -> None:
    """Sets each candidate fact's `latency_near_miss` before the candidate rules run: every latency target it
    misses, it misses by no more than its class's measured error (issue 37: 1,082 ms against a 1,000 ms TTFT
    target with a ±15% error is at risk, as 6.7% under is, not excluded)."""
    for c in scored:
        s, f = c.sizing, c.fact
        if not s.latency_target or s.meets_latency:
            continue
        p95, ttft, e2e_ms, ttft_ms = f["p95_ms"], f["ttft_ms"], s.est_latency_ms, s.est_ttft_ms
        missed_p95, missed_ttft = p95 > 0 and e2e_ms > p95, ttft > 0 and ttft_ms > ttft
        if not (missed_p95 or missed_ttft):
            f["latency_near_miss"] = False
            continue
        band = band_of(c, run)[0]
        near = {m.target_field for m in margins(band, p95, ttft, 0.0, e2e_ms, ttft_ms, 0.0) if m.near_miss}
        f["latency_near_miss"] = ((not missed_p95 or "latency.p95_ms" in near)
                                  and (not missed_ttft or "latency.ttft_ms" in near))


def unmeasured_note(shown: list[Scored], candidates: tuple[Candidate, ...], run: Run) -> Reason | None:
    """Said once per answer: the shown candidates whose class has no measured points, and the class."""
    missing: dict[str, list[str]] = {}
    for c, cand in zip(shown, candidates, strict=True):
        if cand.performance is not None and cand.performance.accuracy is None:
            _, cls = band_of(c, run)
            missing.setdefault(cls, []).append(cand.gpu)
    if not missing:
        return None
    sep = run.text("summary.list_separator", {})
    parts = [run.text("note.accuracy_none_class" if cls else "note.accuracy_none_any",
                      {"gpus": sep.join(gpus), "class_name": run.text(f"accuracy.class.{cls}", {}) if cls else ""})
             for cls, gpus in missing.items()]
    return Reason("accuracy.unmeasured", " ".join(parts))
