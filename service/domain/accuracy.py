"""How far the estimates are from measurements: the classes a workload falls in, and the measured error of each
class (rules/accuracy/results.yaml, written by `make accuracy`), which an answer cites beside its figures.

The classes are the same for the harness that measures (service/accuracy) and the answer that cites: a dataset
row and a candidate with the same workload, precision, model kind, prompt length and GPU land in the same class.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .frozen import build

# Estimates the harness measures: (key, what it is).
ESTIMATES = (
    ("itl", "time per output token (ITL/TPOT), ms"),
    ("ttft", "time to first token, ms"),
    ("throughput", "output tokens/s of one model copy"),
    ("memory", "memory one model copy needs, GB (against a published ceiling)"),
    ("gpu_hours", "GPU-hours of one training run"),
    ("images", "images/s of one GPU"),
    # issue 41: training runs at their measured GPU count (calibration/training.csv)
    ("train_tps", "training tokens/s per GPU"),
    ("train_memory", "training peak memory per GPU, GB"),
    ("train_memory_ceiling", "training memory per GPU, GB (against a published ceiling)"),
)
CLASSES = ("dense", "moe", "fp4", "long_context", "amd", "consumer", "training", "media")
# A prompt this long or longer is "long context": prefill attention grows with its square.
LONG_CONTEXT_INPUT_TOKENS = 8192
TRAINING = ("PRETRAINING", "FULL_FINETUNE", "ADAPTER_FINETUNE")
# The class an answer cites: a GPU the rest of the data was not measured on first (no borrowing a datacenter
# NVIDIA error for an AMD or a consumer card), then the workload, then the most specific serving class.
HARDWARE = ("amd", "consumer")
SERVING_ORDER = ("fp4", "long_context", "moe", "dense")


def classes_of(workload: str, precision: str, moe: bool, input_tokens: int, vendor: str, gpu_class: str,
               ) -> tuple[str, ...]:
    """Every class a brief on one GPU belongs to (a row counts in each)."""
    out: list[str] = []
    # The hardware classes hold serving measurements: training, media and embeddings on those GPUs do not borrow them.
    serving = workload not in TRAINING and workload not in ("MEDIA_GENERATION", "EMBEDDING")
    if vendor == "amd" and serving:
        out.append("amd")
    if gpu_class == "consumer" and serving:
        out.append("consumer")
    if workload in TRAINING:
        out.append("training")
    elif workload == "MEDIA_GENERATION":
        out.append("media")
    elif workload == "EMBEDDING":
        pass  # prefill-only: no ITL or TTFT, and no measured embedding throughput yet
    else:
        if precision == "FP4":
            out.append("fp4")
        if input_tokens >= LONG_CONTEXT_INPUT_TOKENS:
            out.append("long_context")
        out.append("moe" if moe else "dense")
    return tuple(out)


@dataclass(frozen=True)
class Band:
    """One class's measured error, as the answer cites it: median absolute % error per estimate, 0 where the class
    has no measured point of that estimate (`points` counts the class's rows of every estimate)."""

    basis: str  # the class and its datasets, e.g. "MoE serving: aiconfigurator, published"
    points: int
    itl_error_pct: float = 0.0
    ttft_error_pct: float = 0.0
    throughput_error_pct: float = 0.0
    of: str = ""  # the class's key (CLASSES), for the answer's words for it; not on the wire


# The fields of the API's Accuracy message (wire/api.py fills it from these).
WIRE_FIELDS = ("basis", "points", "itl_error_pct", "ttft_error_pct", "throughput_error_pct")


@dataclass(frozen=True)
class AccuracyTable:
    """The shipped results: class → Band; empty when the rules carry no results file."""

    bands: Mapping[str, Band] = field(default_factory=dict)
    location: str = ""  # the results file, for explanations

    def band_for(self, classes: tuple[str, ...]) -> tuple[Band | None, str]:
        """The band an answer cites for a candidate in `classes`, and the class it came from ("" = none: either
        no class of the candidate's has points, or its hardware class has none)."""
        for c in HARDWARE:
            if c in classes:
                band = self.bands.get(c)
                return (band, c) if band and band.points else (None, c)
        for c in ("training", "media", *SERVING_ORDER):
            band = self.bands.get(c)
            if c in classes and band and band.points:
                return band, c
        return None, ""


EMPTY = AccuracyTable()


@dataclass(frozen=True)
class Margin:
    """One target of the brief beside the estimate it depends on and that estimate's measured error."""

    target_field: str  # brief path: latency.p95_ms, latency.ttft_ms, training.target_days
    figure: float  # the estimate (ms or days)
    target: float
    band_pct: float  # measured error of the figure, %

    @property
    def at_risk(self) -> bool:
        """Met, but by less than the measured error: an estimate as far off as the class's median misses it."""
        return self.figure <= self.target < self.figure * (1 + self.band_pct / 100)

    @property
    def near_miss(self) -> bool:
        """Missed, but by no more than the measured error: an estimate as far off the other way meets it (issue 37:
        a near miss is kept and marked at risk, as a near hit is)."""
        return self.target < self.figure <= self.target * (1 + self.band_pct / 100)


def margins(band: Band | None, p95_target: float, ttft_target: float, days_target: float, e2e_ms: float,
            ttft_ms: float, training_days: float) -> tuple[Margin, ...]:
    """The brief's targets with the measured error of the figure each depends on (none without a band). An
    end-to-end latency is TTFT plus the decode steps: its error is theirs weighted by their share of it (a part
    with no measured point takes the other's error)."""
    if band is None:
        return ()
    out = []
    itl, ttft = band.itl_error_pct or band.ttft_error_pct, band.ttft_error_pct or band.itl_error_pct
    if p95_target > 0 and e2e_ms > 0 and itl > 0:
        share = min(1.0, ttft_ms / e2e_ms)
        out.append(build(Margin, target_field="latency.p95_ms", figure=e2e_ms, target=p95_target,
                         band_pct=share * ttft + (1 - share) * itl))
    if ttft_target > 0 and ttft_ms > 0 and ttft > 0:
        out.append(build(Margin, target_field="latency.ttft_ms", figure=ttft_ms, target=ttft_target, band_pct=ttft))
    if days_target > 0 and training_days > 0 and band.throughput_error_pct > 0:
        # GPU-hours at a fixed count are days: their measured error is the deadline's.
        out.append(build(Margin, target_field="training.target_days", figure=training_days, target=days_target,
                         band_pct=band.throughput_error_pct))
    return tuple(out)

