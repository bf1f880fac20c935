"""Typed access to rules/assumptions.yaml: every constant the formulas use, owned by rule authors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..physics.memory import ArchitectureBand

REQUIRED_NUMBERS = (
    "electricity_usd_per_kwh",
    "pue",
    "maintenance_fraction_per_year",
    "ownership_years",
    "default_utilization",
    "hours_per_month",
    "mfu_training",
    "mfu_prefill",
    "mbu_decode",
    "mbu_decode_consumer",
    "parallel_efficiency_fast_link",
    "parallel_efficiency_pcie",
    "safety_headroom",
    "thin_headroom",
    "engine_overhead_gb",
    "activation_bytes_per_token_hidden",
    "sampler_bytes_per_vocab_entry",
    "serving_max_batched_tokens",
    "training_safety_headroom",
    "qlora_bytes_per_param",
    "fp8_training_speedup",
    "node_power_per_gpu_tdp",
    "nodes_per_rack",
    "interruptions_per_gpu_day",
    "hardware_share_of_interruptions",
    "hours_lost_per_interruption",
    "node_repair_days",
    "media_default_steps",
    "media_default_width_px",
    "media_default_height_px",
    "media_default_guidance_scale",
    # issue 23: denoising utilization, encoder passes, the embedding record length
    "mfu_denoising",
    "encoder_activation_traffic_bytes_per_token_hidden",
    "encoder_layer_overhead_us",
    "embedding_default_input_tokens",
    "moe_training_efficiency",
    "kv_cache_bytes",
    "adam_state_bytes_per_param",
    "lora_rank",
    "lora_targets_per_layer",
    "reference_matmul_efficiency",
    "default_context_tokens",
    "media_activation_peak_gb",
    "max_inference_nodes",
    "adapter_flops_per_param_token",
    "default_cached_input_share",
    "kernel_saturation_ms",
    "decode_step_floor_ms",
    "tp_allreduce_latency_us_fast_link",
    "tp_allreduce_latency_us_slow_link",
    "pcie_gpus_per_socket",
    "default_prefill_batch_tokens",
    "default_global_batch_tokens",
    "long_training_run_days",
    "small_job_gpu_hours",
    "small_job_max_gpus",
    "closest_within",
    "mla_kv_lora_rank",
    "mla_rope_head_dim",
    # issue 41: training speed
    "training_layer_half_ms",
    "model_parallel_efficiency",
    "gradient_comm_overlap",
    "qlora_dequant_bytes_per_param",
    "qlora_dequant_bandwidth_use",
    "training_startup_hours",
)


@dataclass(frozen=True)
class Assumptions:
    values: dict[str, Any]  # key → value
    sources: dict[str, str]  # key → source, for explanations

    def num(self, key: str) -> float:
        return float(self.values[key])

    def text(self, key: str) -> str:
        return str(self.values[key])

    def bytes_per_param(self, precision: str) -> float:
        table = self.values["bytes_per_param"]
        return float(table.get(precision, table["BF16"]))

    def bands(self) -> tuple[ArchitectureBand, ...]:
        rows = self.values["architecture_bands"]
        return tuple(
            sorted(
                (
                    ArchitectureBand(
                        max_params_billion=float(r["max_params_billion"]),
                        layers=int(r["layers"]),
                        kv_heads=int(r["kv_heads"]),
                        head_dim=int(r["head_dim"]),
                        hidden_size=int(r["hidden_size"]),
                        attention_heads=int(r["attention_heads"]),
                        vocab_size=int(r["vocab_size"]),
                    )
                    for r in rows
                ),
                key=lambda b: b.max_params_billion,
            )
        )


def missing_keys(values: dict[str, Any]) -> list[str]:
    need = [
        *REQUIRED_NUMBERS,
        "bytes_per_param",
        "architecture_bands",
        "media_default_denoiser",
        "media_default_image_denoiser",
        "recompute_full_finetune",
        "recompute_adapter",
        "pcie_cross_socket_gbs",
    ]
    return [k for k in need if k not in values]
