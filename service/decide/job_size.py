"""How big the brief's job is, as brief fields: rules ask about horizons, platform teams and hardware control, and
warn about platform ownership, only where the job's size and kind make the answer matter (a few hours of one rented
card is not a months-long commitment)."""

from __future__ import annotations

from typing import Any

from ..domain.brief import TRAINING_WORKLOADS, Brief
from ..engine.parse import FieldSpec
from .sizing.common import Sizing

# Run cycles that repeat: a training brief with one of these is not a single run, whatever its token count.
RECURRING_CYCLES = ("ALWAYS_ON", "SCHEDULED_BATCH")

JOB_FIELDS: dict[str, FieldSpec] = {
    "single_run": FieldSpec(
        "bool", "one training run of a known token count (not a recurring run cycle): the job ends when it finishes"
    ),
    "run_headline": FieldSpec(
        "bool", "a training run of a known token count with a deadline, or a single run: the headline is the run's "
        "cost and duration, never a month around the clock (issue 34 item 9)"
    ),
    "job_gpu_hours": FieldSpec(
        "number",
        "GPU-hours the whole job takes on the configuration that needs fewest: a single run's GPU-hours, else "
        "fewest GPUs x hours_per_month x horizon_months (0 = not known)",
    ),
    "small_job": FieldSpec(
        "bool",
        "job_gpu_hours is known and at most small_job_gpu_hours, on at most small_job_max_gpus GPUs (assumptions): "
        "a rental a person sets up, not a platform",
    ),
}


def job_fields(brief: Brief, sizings: list[Sizing], small_gpu_hours: float, small_max_gpus: float) -> dict[str, Any]:
    fitting = [s for s in sizings if s.fits]
    single = (
        brief.workload in TRAINING_WORKLOADS
        and brief.training.tokens_billion > 0
        and brief.run_cycle not in RECURRING_CYCLES
    )
    min_gpus = min((s.count for s in fitting), default=0)
    e = brief.economics
    if single:
        hours = min((s.gpu_hours for s in fitting if s.gpu_hours > 0), default=0.0)
    elif min_gpus and e.hours_per_month > 0 and e.horizon_months > 0:
        hours = min_gpus * e.hours_per_month * e.horizon_months
    else:
        hours = 0.0
    run = brief.workload in TRAINING_WORKLOADS and brief.training.tokens_billion > 0 and (
        single or (brief.training.target_days > 0 and e.hours_per_month <= 0))
    return {
        "single_run": single,
        "run_headline": run,
        "job_gpu_hours": round(hours, 1),
        "small_job": 0 < hours <= small_gpu_hours and 0 < min_gpus <= small_max_gpus,
    }
