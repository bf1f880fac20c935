"""Whether an offer's host can hold what its GPUs load and save: host RAM of at least `min_host_ram_per_gpu_memory`
(assumptions) times the GPUs' memory. An offer that does not list its RAM (unknown: a placeholder or a size chosen
at order time, see market/importers) is never refused for it."""

from __future__ import annotations

from ..domain.offers import Offer

# Providers list host RAM in whole GiB (RunPod's 1x A100 80GB host: 80 GiB) while the GPU's memory in GiB has a
# fraction (80.0006): a share this small is rounding, not a smaller host.
ROUNDING = 0.01


def host_ram_needed(o: Offer, gpu_gib: float, ratio: float) -> float:
    """GiB of host RAM the rule asks of this offer (0 when the rule is off)."""
    return ratio * gpu_gib * o.gpus_per_instance


def host_ram_ok(o: Offer, gpu_gib: float, ratio: float) -> bool:
    if o.memory_gib is None or ratio <= 0:
        return True
    return o.memory_gib >= host_ram_needed(o, gpu_gib, ratio) * (1 - ROUNDING)
