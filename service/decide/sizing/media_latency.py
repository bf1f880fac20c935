"""Image and video generation against the brief's p95 target (issue 37 item 3): one image or clip takes
1 / (outputs per second of one copy); requests at `traffic.requests_per_second` queue for the copies (one job
queue in front of them: physics/queueing). Copies are added past what the load alone needs while that brings the
p95 under the target; a single output slower than the target is unmet at any count."""

from __future__ import annotations

import math

from ...domain.brief import Brief
from ...physics import memory as mem
from ...physics.queueing import latency_quantile_s
from .common import MAX_GPUS, Sizing

# Copies tried beyond what the load needs before the target is called unmet: past ~4x the wait is the service time
# alone, so more copies would not help a target they have not met by then.
EXTRA_COPIES = 4


def check_latency(s: Sizing, brief: Brief, one_copy: mem.MemoryBreakdown) -> None:
    """After the copies for the load: a media brief's latency at the offered rate against its target; a target
    the sizing has no estimate for (embeddings) is not claimed met with an estimate of 0 ms."""
    if s.latency_target and brief.workload == "MEDIA_GENERATION":
        media_latency(s, brief, one_copy)
    s.latency_target = s.latency_target and s.est_latency_ms > 0


def media_latency(s: Sizing, brief: Brief, one_copy: mem.MemoryBreakdown) -> None:
    """Sets est_latency_ms (the p95 per output at the offered load, at s.replicas copies, raised for the target
    where that meets it) and meets_latency; TTFT stays 0 (an image has no first token) and is never a target."""
    rate = s.tokens_per_second  # outputs per second of one copy
    if rate <= 0:
        return
    service_s, offered = 1 / rate, brief.traffic.requests_per_second
    target_s = brief.latency.p95_ms / 1000
    p95 = latency_quantile_s(service_s, offered, s.replicas)
    if target_s > 0 and service_s <= target_s < p95:
        most = min(MAX_GPUS // max(1, s.per_replica), s.replicas * EXTRA_COPIES + 8)
        replicas = s.replicas
        while replicas < most and p95 > target_s:
            replicas += 1
            p95 = latency_quantile_s(service_s, offered, replicas)
        if p95 <= target_s:
            s.replicas, s.count = replicas, replicas * s.per_replica
            s.memory = mem.MemoryBreakdown(tuple((c, v * replicas) for c, v in one_copy.components))
        else:
            p95 = latency_quantile_s(service_s, offered, s.replicas)
    s.est_latency_ms = p95 * 1000 if math.isfinite(p95) else float(MAX_GPUS) * 1000
    s.est_ttft_ms = 0.0
    s.meets_latency = target_s <= 0 or p95 <= target_s
