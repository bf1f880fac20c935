"""Training sizing (decide/sizing/training.py) on small frozen inputs and round constants: one GPU's speed worked
by hand term by term (FLOPs per token by method, the share of peak, FP8, MoE, model parallelism, kernel size,
QLoRA's dequantization, data-parallel and FSDP traffic over the node and the network), the run's all-in hours,
the fewest GPUs that meet a deadline (held against a count from one upward), and the sizing of a full and an
adapter run: memory by GPU count, the deadline, refusals and the figures the answer reads."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from service.decide.sizing import training as t
from service.decide.sizing.common import MAX_GPUS, Sizing
from service.decide.sizing.shape import Shape
from service.domain.assumptions import Assumptions
from service.domain.brief import Brief, Model, Traffic, Training
from service.domain.catalog import Gpu
from service.physics import memory as mem

# Round constants: a share of 0.5 of peak, no kernel-size loss (half_ms 0), no interruptions unless a test adds
# them, one hour of start-up.
T = Assumptions(values={
    "mfu_training": 0.5, "reference_matmul_efficiency": 0.7, "moe_training_efficiency": 0.8,
    "model_parallel_efficiency": 0.9, "training_layer_half_ms": 0.0, "adapter_flops_per_param_token": 4,
    "fp8_training_speedup": 1.5, "recompute_adapter": "none", "qlora_dequant_bytes_per_param": 3.0,
    "qlora_dequant_bandwidth_use": 0.5, "gradient_comm_overlap": 0.0, "lora_rank": 8, "lora_targets_per_layer": 4,
    "interruptions_per_gpu_day": 0.0, "hours_lost_per_interruption": 2.4, "training_startup_hours": 1.0,
    "training_safety_headroom": 0.1, "engine_overhead_gb": 1.0, "adam_state_bytes_per_param": 16,
    "recompute_full_finetune": "full", "default_global_batch_tokens": 1_000_000, "max_inference_nodes": 4,
}, sources={})
ARCH = mem.Architecture(layers=10, kv_heads=8, head_dim=100, hidden_size=1000, attention_heads=10,
                        vocab_size=32000, exact=True)
SHAPE = Shape(1.0, 1.0, "BF16", 2.0, ARCH, 1000, 1000, 1, 0, 0, ())


def _rules(**change: object) -> Assumptions:
    return Assumptions(values={**T.values, **change}, sources={})


def _gpu(*, bf16: float = 1000.0, fp8: float = 2000.0, link: str = "nvlink", per_node: int = 8, domain: int = 8,
         gbs: float = 1000.0, scale_out: float = 50.0, mem_gb: float = 80.0, tbs: float = 2.0,
         matmul: float = 0.7) -> Gpu:
    return Gpu("g", "g", "nvidia", "datacenter", mem_gb, "HBM3", tbs, bf16, fp8, 0, 700, link, gbs, per_node, domain,
               0, matmul, "cuda", "", "", "", scale_out_gbs=scale_out)


GPU = _gpu()
FPT = 6 * 1e9 + 6 * 10 * 1000 * 1000  # 6N + 6·L·S·h: 6.06e9 FLOPs a token, full training at 1,000 tokens


def _speed(**kw: object) -> t.Speed:
    args = {"gpu": GPU, "shape": SHAPE, "a": T, "method": "full", "gpus": 1, "model_gpus": 1, "micro_tokens": 1000,
            "step_tokens": 1000.0, "tflops": 1000.0, **kw}
    return t.run_speed(**args)


# -- method and FLOPs ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("workload", "precision", "method"), [
    ("PRETRAINING", "INT4", "full"), ("FULL_FINETUNE", "BF16", "full"), ("ADAPTER_FINETUNE", "BF16", "lora"),
    ("ADAPTER_FINETUNE", "FP8", "lora"), ("ADAPTER_FINETUNE", "INT4", "qlora"), ("ADAPTER_FINETUNE", "FP4", "qlora"),
])
def test_the_method_follows_the_workload_and_the_base_s_precision(workload: str, precision: str,
                                                                   method: str) -> None:
    assert t.method_of(Brief(workload=workload), replace(SHAPE, precision=precision)) == method


def test_adapter_parameters_are_rank_times_two_hidden_per_target() -> None:
    # 10 layers x 4 targets x rank 8 x 2 x 1,000 = 640,000.
    assert t.adapter_params_billion(SHAPE, T) == pytest.approx(6.4e-4)
    assert t.adapter_params_billion(SHAPE, _rules(lora_rank=8.9, lora_targets_per_layer=2.5)) == pytest.approx(3.2e-4)


# -- one GPU's speed ----------------------------------------------------------------------------------------------


def test_a_full_run_on_one_gpu_worked_by_hand() -> None:
    # 1,000 TFLOPS x 0.5 (mfu x matmul 0.7 / reference 0.7): 500 model TFLOPS; 6.06e9 FLOPs a token.
    sp = _speed()
    assert sp.flops_per_token == FPT
    # To 1e-14: a 1e9 or 1e12 off in its last digit, or one byte of traffic on one GPU, shows.
    assert sp.model_tflops == pytest.approx(500.0, rel=1e-14)
    assert sp.tokens_per_s == pytest.approx(500e12 / FPT, rel=1e-12)


def test_a_tiny_model_still_pays_its_traffic() -> None:
    # 1e-10 billion parameters (0.1 of one) over 2 replicas: 2 x 1/2 x 0.1 x 2 B = 0.2 bytes a step, 4e-13 s.
    tiny = replace(SHAPE, params_billion=1e-10, active_params_billion=1e-10)
    fpt = 6 * 0.1 + 6e7
    compute = 1000 * fpt / 500e12
    assert _speed(shape=tiny, gpus=2).tokens_per_s == pytest.approx(1000 / (compute + 0.2 / 500e9), rel=1e-12)
    assert _speed(shape=tiny, gpus=2).tokens_per_s != _speed(shape=tiny).tokens_per_s


def test_the_share_of_peak_scales_with_the_gpu_s_matmul_efficiency() -> None:
    assert _speed(gpu=_gpu(matmul=0.35)).model_tflops == pytest.approx(250.0)


def test_an_fp8_run_is_fp8_speedup_times_bf16_not_the_fp8_peak() -> None:
    assert _speed(tflops=2000.0).model_tflops == pytest.approx(750.0)  # min(2,000, 1,000 x 1.5)
    assert _speed(tflops=1200.0).model_tflops == pytest.approx(600.0)  # a peak under that: the peak
    assert _speed(gpu=_gpu(bf16=0.0), tflops=2000.0).model_tflops == pytest.approx(1000.0)  # no 16-bit figure
    # A part under one 16-bit TFLOP is sped up all the same: min(2, 0.5 x 1.5) x 0.5.
    assert _speed(gpu=_gpu(bf16=0.5, fp8=2.0), tflops=2.0).model_tflops == pytest.approx(0.375)
    # Adapters train over a 16-bit base: the BF16 rate.
    lora = _speed(method="lora", tflops=2000.0)
    assert lora.model_tflops == pytest.approx(500.0)


def test_a_mixture_of_experts_keeps_its_share() -> None:
    moe = replace(SHAPE, params_billion=4.0)  # 1B active of 4B
    assert _speed(shape=moe).model_tflops == pytest.approx(400.0)
    assert _speed(shape=moe).flops_per_token == FPT  # FLOPs of the active parameters


def test_each_doubling_of_the_model_group_keeps_model_parallel_efficiency() -> None:
    for model_gpus, kept in ((2, 0.9), (4, 0.81), (8, 0.729)):
        sp = _speed(gpus=model_gpus, model_gpus=model_gpus)
        assert sp.model_tflops == pytest.approx(500.0 * kept)


def test_short_kernels_reach_a_share_of_the_rate() -> None:
    # 1,000 tokens x 24 x 1,000^2 at 1,000 TFLOPS: 0.024 ms a layer; half-rate at 0.024 ms -> half; at 0.072 -> 1/4.
    assert _speed(a=_rules(training_layer_half_ms=0.024)).model_tflops == pytest.approx(250.0)
    assert _speed(a=_rules(training_layer_half_ms=0.072)).model_tflops == pytest.approx(125.0)
    # Twice the micro-batch: 0.048 ms a layer -> 2/3.
    sp = _speed(a=_rules(training_layer_half_ms=0.024), micro_tokens=2000, step_tokens=2000.0)
    assert sp.model_tflops == pytest.approx(500.0 * 2 / 3)


def test_a_lora_token_costs_four_per_base_parameter_and_six_per_adapter() -> None:
    sp = _speed(method="lora")
    assert sp.flops_per_token == pytest.approx(4e9 + 6 * 6.4e5 + 6e7)
    assert sp.model_tflops == pytest.approx(500.0)
    sp = _speed(method="lora", a=_rules(adapter_flops_per_param_token=2))
    assert sp.flops_per_token == pytest.approx(2e9 + 6 * 6.4e5 + 6e7)


@pytest.mark.parametrize(("recompute", "passes"), [("none", 2), ("full", 3)])
def test_qlora_pays_the_dequantization_per_micro_batch(recompute: str, passes: int) -> None:
    # passes x 1B x 3 B / (2 TB/s x 0.5) = passes x 3 ms a micro-batch of 1,000 tokens: passes x 3 us a token.
    a = _rules(recompute_adapter=recompute)
    fpt = 4e9 + 6 * 6.4e5 + 6e7
    per_token = fpt / 500e12 + passes * 3e-3 / 1000
    sp = _speed(method="qlora", a=a)
    assert sp.tokens_per_s == pytest.approx(1 / per_token)
    # Sharded over 4 GPUs each dequantizes its quarter (and keeps 0.81 of the share).
    per_token = fpt / (500e12 * 0.81) + passes * 3e-3 / 4 / 1000
    assert _speed(method="qlora", a=a, gpus=4, model_gpus=4, micro_tokens=1000, step_tokens=1000.0).tokens_per_s == (
        pytest.approx(1 / (per_token + _fsdp_s(4, passes, 1000.0, 1000, 2.0) / 1000)))
    # A micro-batch of one token pays all of it.
    per_token = fpt / 500e12 + passes * 3e-3
    assert _speed(method="qlora", a=a, micro_tokens=1, step_tokens=1.0).tokens_per_s == pytest.approx(
        1 / per_token, rel=1e-3)
    # A lora run pays none of it.
    assert _speed(method="lora", a=a).tokens_per_s == pytest.approx(500e12 / fpt)


def _fsdp_s(model_gpus: int, passes: int, step: float, micro: int, bpp: float) -> float:
    """The frozen base gathered per micro-batch, over NVLink at half of 1,000 GB/s."""
    return passes * (model_gpus - 1) / model_gpus * 1e9 * bpp * (step / micro) / 500e9


def test_data_parallel_replicas_all_reduce_the_gradients() -> None:
    # 4 replicas of a 1B model: 2 x 3/4 x 1e9 x 2 B = 3 GB a GPU, at 500 GB/s = 6 ms, after 1,000 tokens of
    # compute (1,000 x 6.06e9 / 500e12 = 12.12 ms): 18.12 ms a step.
    compute = 1000 * FPT / 500e12
    sp = _speed(gpus=4)
    assert sp.tokens_per_s == pytest.approx(1000 / (compute + 0.006))
    assert sp.model_tflops == pytest.approx(sp.tokens_per_s * FPT / 1e12)
    # Overlap hides up to half the compute's time under it: 6 ms all hidden.
    assert _speed(gpus=4, a=_rules(gradient_comm_overlap=0.5)).tokens_per_s == pytest.approx(1000 / compute)
    # 3 GPUs over a model group of 2: 1.5 replicas all-reduce as 2, a quarter of each of 2 halves of the model.
    sp = _speed(gpus=3, model_gpus=2)
    comm = 2 * (1 / 2) * 0.5e9 * 2 / 500e9
    assert sp.tokens_per_s == pytest.approx(1000 / (compute / 0.9 + comm))


def test_an_adapter_run_all_reduces_only_its_adapters_and_gathers_the_base() -> None:
    # lora over 4 ranks holding 4 shards: no gradient traffic between replicas (one group), the base gathered
    # 2 passes (no recompute) x 3/4 x 1B x 2 B per 1,000-token micro-batch, 4 micro-batches a step.
    fpt = 4e9 + 6 * 6.4e5 + 6e7
    compute = 4000 * fpt / (500e12 * 0.81)
    sp = _speed(method="lora", gpus=4, model_gpus=4, step_tokens=4000.0)
    assert sp.tokens_per_s == pytest.approx(4000 / (compute + _fsdp_s(4, 2, 4000.0, 1000, 2.0)))
    # Replicas of a one-GPU group send the adapters' gradients only: 2 x 1/2 x 6.4e5 x 2 B over 500 GB/s.
    compute = 1000 * fpt / 500e12
    sp = _speed(method="lora", gpus=2, model_gpus=1)
    assert sp.tokens_per_s == pytest.approx(1000 / (compute + 2 * 0.5 * 6.4e5 * 2 / 500e9))
    # An 8-bit base is gathered at its own bytes.
    sp = _speed(method="lora", shape=replace(SHAPE, bytes_per_param=1.0), gpus=4, model_gpus=4, step_tokens=4000.0)
    compute = 4000 * fpt / (500e12 * 0.81)
    assert sp.tokens_per_s == pytest.approx(4000 / (compute + _fsdp_s(4, 2, 4000.0, 1000, 1.0)))
    sp = _speed(method="lora", a=_rules(recompute_adapter="full"), gpus=4, model_gpus=4, step_tokens=4000.0)
    assert sp.tokens_per_s == pytest.approx(4000 / (compute + _fsdp_s(4, 3, 4000.0, 1000, 2.0)))
    # Two ranks gather too.
    compute2 = 2000 * fpt / (500e12 * 0.9)
    sp = _speed(method="lora", gpus=2, model_gpus=2, step_tokens=2000.0)
    assert sp.tokens_per_s == pytest.approx(2000 / (compute2 + _fsdp_s(2, 2, 2000.0, 1000, 2.0)))
    # One-token micro-batches gather once a token.
    sp = _speed(method="lora", gpus=4, model_gpus=4, micro_tokens=1, step_tokens=4.0)
    compute1 = 4 * fpt / (500e12 * 0.81)
    assert sp.tokens_per_s == pytest.approx(4 / (compute1 + _fsdp_s(4, 2, 4.0, 1, 2.0)), rel=1e-3)
    # Replicas of a sharded group pay both: the adapters' gradients and the gathers.
    sp = _speed(method="lora", gpus=8, model_gpus=4, step_tokens=4000.0)
    dp = 2 * 0.5 * 6.4e5 / 4 * 2
    assert sp.tokens_per_s == pytest.approx(4000 / (compute + (dp + 3 / 4 * 2 * 1e9 * 2 * 4) / 500e9))


def test_a_run_with_a_zero_length_sequence_is_sized_at_one_token() -> None:
    sp = _speed(shape=replace(SHAPE, tokens_per_sequence=0))
    assert sp.flops_per_token == 6e9 + 6 * 10 * 1 * 1000


def test_a_step_of_no_tokens_runs_no_tokens() -> None:
    sp = _speed(step_tokens=0.0)
    assert (sp.tokens_per_s, sp.model_tflops) == (0.0, 0.0)


# -- traffic over the links ---------------------------------------------------------------------------------------


def test_traffic_inside_the_domain_runs_at_half_the_scale_up_link() -> None:
    assert t._comm_seconds(GPU, 8, 1e9) == pytest.approx(1e9 / 500e9, rel=1e-12)
    assert t._comm_seconds(_gpu(gbs=1.0), 8, 1e9) == pytest.approx(1.0)  # under 2 GB/s: 1 GB/s, not 0.5


def test_beyond_the_domain_each_gpu_sends_its_share_over_the_network() -> None:
    # 16 GPUs over nodes of 8: 1 GB local at 500 GB/s + 1/8 GB at 50 GB/s.
    assert t._comm_seconds(GPU, 16, 1e9) == pytest.approx(1e9 / 500e9 + 1e9 / 8 / 50e9, rel=1e-12)
    # A network under 1 GB/s is a network.
    assert t._comm_seconds(_gpu(scale_out=0.5), 16, 1e9) == pytest.approx(1e9 / 500e9 + 1e9 / 8 / 0.5e9)
    # No node size and no NVLink domain: a domain of one GPU.
    assert t._comm_seconds(_gpu(per_node=0, domain=0), 2, 1e9) == pytest.approx(1e9 / 500e9 + 1e9 / 50e9)
    assert t._comm_seconds(GPU, 9, 1e9) == pytest.approx(1e9 / 500e9 + 1e9 / 8 / 50e9)
    assert t._comm_seconds(_gpu(scale_out=0.0), 16, 1e9) == pytest.approx(1e9 / 500e9)  # no network figure
    # An NVL72-like domain: 72 GPUs inside it.
    big = _gpu(per_node=4, domain=72)
    assert t._comm_seconds(big, 72, 1e9) == pytest.approx(1e9 / 500e9)
    assert t._comm_seconds(big, 73, 1e9) == pytest.approx(1e9 / 500e9 + 1e9 / 72 / 50e9)
    # A PCIe card's domain is its node, whatever NVLink domain it lists.
    pcie = _gpu(link="pcie", per_node=4, domain=72, gbs=64.0)
    assert t._comm_seconds(pcie, 8, 1e9) == pytest.approx(1e9 / 32e9 + 1e9 / 4 / 50e9)
    assert t._comm_seconds(_gpu(link="pcie", per_node=0, domain=0, gbs=64.0), 2, 1e9) == pytest.approx(
        1e9 / 32e9 + 1e9 / 50e9)


# -- hours and the deadline ---------------------------------------------------------------------------------------

ONE_BILLION_IN_100_H = t.Speed(1e9 / (100 * 3600), 300.0, 6e9)  # one GPU trains 1B tokens in 100 h


def test_all_in_hours_worked_by_hand() -> None:
    # 1B tokens on 4 GPUs: 25 h of compute + 1 h of start-up.
    assert t.all_in_hours(1.0, 4, ONE_BILLION_IN_100_H, T) == pytest.approx(26.0)
    # Interruptions: 0.01 a GPU-day x 4 GPUs x 2.4 h / 24 = 0.4% of the time lost.
    a = _rules(interruptions_per_gpu_day=0.01)
    assert t.all_in_hours(1.0, 4, ONE_BILLION_IN_100_H, a) == pytest.approx(25 / 0.996 + 1)
    assert t.all_in_hours(1.0, 0, ONE_BILLION_IN_100_H, T) == math.inf
    assert t.all_in_hours(1.0, 4, t.Speed(0.0, 0.0, 6e9), T) == math.inf
    assert t.all_in_hours(1.0, 1, t.Speed(1e-9, 0.0, 6e9), T) < math.inf


def _fewest_by_counting(tokens: float, days: float, start: int, rate: t.Rate, a: Assumptions) -> int:
    for n in range(max(1, start), 20_000):
        if t.all_in_hours(tokens, n, rate(n), a) <= days * 24:
            return n
    return MAX_GPUS


def _linear(n: int) -> t.Speed:
    return ONE_BILLION_IN_100_H


@pytest.mark.parametrize("days", [0.05, 0.1, 0.5, 1.0, 23 / 24 + 1 / 24 * 0.999, 2.0, 4.25, 30.0])
@pytest.mark.parametrize("start", [1, 2, 7, 40])
def test_the_fewest_gpus_for_a_deadline_is_the_first_count_that_meets_it(days: float, start: int) -> None:
    for tokens in (0.5, 1.0, 13.0):
        got = t.fewest_for_deadline(tokens, days, start, _linear, T)
        assert got == _fewest_by_counting(tokens, days, start, _linear, T)


def test_a_deadline_met_exactly_is_met() -> None:
    # 1B tokens: 100 h / n + 1 h; 5 GPUs take exactly 21 h.
    assert t.fewest_for_deadline(1.0, 21 / 24, 1, _linear, T) == 5
    assert t.fewest_for_deadline(1.0, 21 / 24 * 0.999, 1, _linear, T) == 6


def test_a_deadline_inside_the_start_up_is_never_met() -> None:
    assert t.fewest_for_deadline(1.0, 1 / 24, 1, _linear, T) == MAX_GPUS
    assert t.fewest_for_deadline(1.0, 0.5 / 24, 1, _linear, T) == MAX_GPUS
    assert t.fewest_for_deadline(0.001, 1.01 / 24, 1, _linear, T) < MAX_GPUS


def test_past_the_fastest_width_the_deadline_is_not_met() -> None:
    # Each GPU slows as the run widens: n x (1 - n / 100) GPUs' worth, at most 25 (at 50 GPUs): 100 / 25 + 1 =
    # 5 h at best. Under that no count meets the deadline.
    def saturating(n: int) -> t.Speed:
        return t.Speed(1e9 / (100 * 3600) * max(0.0, 1 - n / 100), 0.0, 6e9)

    assert t.fewest_for_deadline(1.0, 4.9 / 24, 1, saturating, T) == MAX_GPUS
    got = t.fewest_for_deadline(1.0, 10 / 24, 1, saturating, T)
    assert got == _fewest_by_counting(1.0, 10 / 24, 1, saturating, T) == 13  # 100 / (13 x 0.87) + 1 = 9.8 h
    # A run that cannot train at all.
    assert t.fewest_for_deadline(1.0, 30.0, 1, lambda n: t.Speed(0.0, 0.0, 6e9), T) == MAX_GPUS


def test_the_search_grows_at_most_by_doubling() -> None:
    # Two GPUs do four GPUs' worth and four do half of one: the shortfall at one GPU (100 h against 26) points
    # at 4, past the fastest width; doubling to 2 finds it.
    def peaked(n: int) -> t.Speed:
        worth = {1: 1.0, 2: 4.0}.get(n, 0.5)
        return t.Speed(1e9 / (100 * 3600) * worth / n, 0.0, 6e9)

    assert t.fewest_for_deadline(1.0, 26 / 24, 1, peaked, T) == 2


def _worth(table: dict[int, float], default: float) -> t.Rate:
    """A run whose n GPUs do table[n] GPUs' worth (1B tokens in 100 h each)."""
    return lambda n: t.Speed(1e9 / (100 * 3600) * table.get(n, default) / n, 0.0, 6e9)


@pytest.mark.parametrize(("table", "default", "need", "fewest"), [
    ({1: 1.0}, 0.1, 0.9, 1),  # one GPU meets it; two are slower
    ({1: 1.0, 2: 1.5, 3: 2.5}, 0.1, 2.2, 3),  # 2 -> 3 by the shortfall, not 4 (past the fastest)
    ({1: 1, 2: 2, 3: 3, 4: 4, 5: 1, 6: 6}, 7.0, 6.5, 7),  # 4 -> 7 by the shortfall, not 5 (a dip)
    ({1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7}, 0.5, 6.9, 7),  # 4 -> 7, not 8 (a dip)
    ({1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 0.5}, 7.0, 6.2, 7),  # 4 -> 7, not 6 (a dip)
    ({1: 1, 2: 2, 3: 0.5, 4: 0.5, 5: 0.5, 6: 0.5, 7: 0.5}, 100.0, 10.0, MAX_GPUS),  # slower at 4: stop there
    ({1: 1, 2: 2, 3: 2, 4: 2, 5: 2, 6: 2, 7: 2}, 100.0, 10.0, MAX_GPUS),  # no faster at 4: stop there
])
def test_the_search_follows_the_shortfall_and_stops_when_wider_is_no_faster(table: dict, default: float,
                                                                            need: float, fewest: int) -> None:
    # A deadline `need` GPUs' worth meets: 100 / need + 1 hours.
    got = t.fewest_for_deadline(1.0, (100 / need + 1) / 24, 1, _worth(table, default), T)
    assert got == fewest


def test_the_bisection_finds_the_first_count_at_the_deadline_exactly() -> None:
    # Hours exact in binary: 3.6B tokens at 1e6 tokens/s of worth: 1 / worth + 1 h.
    worth = {1: 0.25, 2: 0.5, 3: 0.5, 4: 1, 5: 1, 6: 2, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 8, 13: 8}

    def rate(n: int) -> t.Speed:
        return t.Speed(1e6 * worth.get(n, 16) / n, 0.0, 6e9)

    assert t.all_in_hours(3.6, 9, rate(9), T) == 1.25
    assert t.fewest_for_deadline(3.6, 1.25 / 24, 1, rate, T) == 9
    assert t.all_in_hours(3.6, 14, rate(14), T) == 1.0625
    assert t.fewest_for_deadline(3.6, 1.0625 / 24, 1, rate, T) == 14


def test_the_search_stops_at_the_largest_cluster() -> None:
    # 1e9 billion tokens in a day needs more than a million GPUs at this rate.
    assert t.fewest_for_deadline(1e9, 1.0, 1, _linear, T) == MAX_GPUS
    # Just under a million: found.
    tokens = (24 - 1) * 999_000 / 100
    assert t.fewest_for_deadline(tokens, 1.0, 1, _linear, T) == 999_000
    # Just over: refused, not a count past the largest.
    tokens = (24 - 1) * 1_020_000 / 100
    assert t.fewest_for_deadline(tokens, 1.0, 1, _linear, T) == MAX_GPUS


def test_a_start_already_past_the_need_is_kept() -> None:
    assert t.fewest_for_deadline(1.0, 30.0, 64, _linear, T) == 64
    assert t.fewest_for_deadline(1.0, 30.0, 0, _linear, T) == 1


# -- the run's figures --------------------------------------------------------------------------------------------


def _brief(workload: str = "PRETRAINING", *, tokens: float = 0.0, days: float = 0.0, batch: int = 0,
           global_tokens: int = 0) -> Brief:
    return Brief(workload=workload, model=Model(params_billion=1.0), traffic=Traffic(batch_size=batch),
                 training=Training(tokens_billion=tokens, target_days=days, global_batch_tokens=global_tokens))


def test_finishing_a_run_worked_by_hand() -> None:
    # 1B tokens on 4 GPUs at 1B tokens in 100 h a GPU: 25 h of compute over 99.6% kept (0.01 interruptions a
    # GPU-day x 4 x 2.4 h / 24) + 1 h of start-up.
    a = _rules(interruptions_per_gpu_day=0.01)
    s = Sizing(gpu=GPU)
    memory = mem.MemoryBreakdown((("weights", 1.0),))
    t._finish(s, _brief(tokens=1.0), a, 4, _linear, memory)
    assert (s.count, s.per_replica, s.memory, s.effective_tflops) == (4, 4, memory, 300.0)
    assert s.train_hours == pytest.approx(25 / 0.996 + 1)
    assert s.restart_overhead_days == pytest.approx((25 / 0.996 - 25) / 24, rel=1e-9)
    assert s.fixed_hours == 1.0
    assert s.formulas == [
        "training FLOPs per token = 6e+09 (method and attention at the sequence length); 2,778 tokens/s per GPU at"
        " 4 GPUs (300 model TFLOPS); run hours = tokens / (GPUs x tokens/s) / share kept after interruptions +"
        " start-up"]


def test_a_run_with_no_tokens_has_no_hours() -> None:
    s = Sizing(gpu=GPU)
    t._finish(s, _brief(), T, 2, _linear, mem.MemoryBreakdown(()))
    assert (s.count, s.train_hours, s.restart_overhead_days, s.fixed_hours) == (2, 0.0, 0.0, 0.0)
    assert s.effective_tflops == 300.0
    assert len(s.formulas) == 1


def test_a_run_without_interruptions_loses_no_days() -> None:
    s = Sizing(gpu=GPU)
    t._finish(s, _brief(tokens=1.0), T, 4, _linear, mem.MemoryBreakdown(()))
    assert s.train_hours == pytest.approx(26.0)
    assert s.restart_overhead_days == pytest.approx(0.0, abs=1e-12)


def test_a_run_under_one_token_a_second_still_loses_days() -> None:
    # 0.5 tokens/s a GPU: 1e-6 B tokens on 4 GPUs = 500 s = 0.1389 h of compute, 0.4% of it lost.
    a = _rules(interruptions_per_gpu_day=0.01)
    s = Sizing(gpu=GPU)
    t._finish(s, _brief(tokens=1e-6), a, 4, lambda n: t.Speed(0.5, 0.0, 6e9), mem.MemoryBreakdown(()))
    compute_h = 1000 / 2 / 3600
    assert s.restart_overhead_days == pytest.approx((compute_h / 0.996 - compute_h) / 24)


def test_a_run_that_cannot_train_finishes_never() -> None:
    s = Sizing(gpu=GPU)
    t._finish(s, _brief(tokens=1.0), T, 4, lambda n: t.Speed(0.0, 0.0, 6e9), mem.MemoryBreakdown(()))
    assert s.train_hours == math.inf


# -- memory: full training ----------------------------------------------------------------------------------------

BIG_SHAPE = replace(SHAPE, params_billion=8.0, active_params_billion=8.0)


def _full_need(shape: Shape, n: int, sequences: int, a: Assumptions = T) -> mem.MemoryBreakdown:
    return mem.full_training_memory(shape.params_billion, shape.arch, shape.tokens_per_sequence, sequences,
                                    a.num("adam_state_bytes_per_param"), a.text("recompute_full_finetune"),
                                    a.num("engine_overhead_gb"), gpus=n)


def test_the_full_training_need_is_the_physics_at_the_rules_constants() -> None:
    assert t.full_training_need(BIG_SHAPE, T, "full", 3, 2) == _full_need(BIG_SHAPE, 3, 2)
    a = _rules(adam_state_bytes_per_param=12, engine_overhead_gb=2.0)
    assert t.full_training_need(BIG_SHAPE, a, "none", 3, 2) == mem.full_training_memory(
        8.0, ARCH, 1000, 2, 12, "none", 2.0, gpus=3)


def _full(brief: Brief, shape: Shape = BIG_SHAPE, gpu: Gpu = GPU, a: Assumptions = T, memo: dict | None = None,
          fast_need: t.TrainingNeed | None = None) -> Sizing:
    s = Sizing(gpu=gpu, tflops=gpu.tflops_bf16)
    t.size_full_training(s, brief, shape, a, {} if memo is None else memo, fast_need)
    return s


def _fewest_holding(shape: Shape, sequences: int, usable: float) -> int:
    n = 1
    while _full_need(shape, n, sequences).total_gb > n * usable:
        n += 1
    return n


@pytest.mark.parametrize(("params", "batch"), [(1.0, 0), (8.0, 0), (8.0, 4), (20.0, 1), (70.0, 2)])
def test_full_training_takes_the_fewest_gpus_its_states_fit_on(params: float, batch: int) -> None:
    shape = replace(BIG_SHAPE, params_billion=params, active_params_billion=params)
    s = _full(_brief("FULL_FINETUNE", batch=batch), shape)
    n = _fewest_holding(shape, max(1, batch), 72.0)
    assert s.memory_count == s.count == s.per_replica == n
    assert s.fits is True
    assert s.memory == _full_need(shape, n, max(1, batch))
    assert s.memory.total_gb <= n * 72.0
    assert (s.compute_count, s.train_hours) == (0, 0.0)  # no tokens: no deadline to meet
    assert s.micro_tokens == max(1, batch) * 1000


def test_memory_filled_exactly_fits() -> None:
    # No headroom and a GPU of exactly the run's need: one GPU, and it fits.
    a = _rules(training_safety_headroom=0.0)
    total = _full_need(BIG_SHAPE, 1, 1, a).total_gb
    s = _full(_brief("FULL_FINETUNE"), gpu=_gpu(mem_gb=total), a=a)
    assert (s.memory_count, s.count, s.fits) == (1, 1, True)
    one = t.adapter_breakdown(BIG_SHAPE, a, 1)
    s = _adapter(_brief("ADAPTER_FINETUNE"), gpu=_gpu(mem_gb=one.total_gb), a=a)
    assert (s.memory_count, s.count, s.fits) == (1, 1, True)


def test_a_model_no_cluster_holds_is_refused_at_the_largest() -> None:
    # A need that rounds to exactly the largest cluster, and still does not fit there.
    usable = 72.0

    def huge(n: int, sequences: int) -> mem.MemoryBreakdown:
        gb = usable * (MAX_GPUS - 0.5) if n < MAX_GPUS else usable * (n + 1)
        return mem.MemoryBreakdown((("weights", gb),))

    s = _full(_brief("FULL_FINETUNE"), fast_need=huge)
    assert (s.memory_count, s.count, s.fits) == (MAX_GPUS, MAX_GPUS, False)


def test_a_memo_is_filled_by_gpus_and_sequences() -> None:
    memo: dict = {}
    s = _full(_brief("FULL_FINETUNE", batch=2), memo=memo)
    assert memo[("training", s.count, 2)] == s.memory
    assert all(k[0] == "training" and k[2] == 2 for k in memo)
    # A memo already holding a need is read, not worked out again.
    fake = mem.MemoryBreakdown((("weights", 1.0),))
    memo = {("training", 1, 2): fake}
    s = _full(_brief("FULL_FINETUNE", batch=2), memo=memo)
    assert (s.count, s.memory) == (1, fake)


def test_the_fast_path_s_need_is_used_when_given() -> None:
    asked = []

    def fast(n: int, sequences: int) -> mem.MemoryBreakdown:
        asked.append((n, sequences))
        return mem.MemoryBreakdown((("weights", 100.0), ("engine", 1.0 * n)))

    memo: dict = {}
    s = _full(_brief("FULL_FINETUNE", batch=3), memo=memo, fast_need=fast)
    assert (s.count, s.memory.total_gb) == (2, 102.0)  # 101 > 72; 102 <= 144
    assert memo == {}
    assert set(asked) <= {(1, 3), (2, 3)}


def test_a_deadline_is_met_by_the_gpus_it_needs() -> None:
    # A 1B model holds on one GPU; 20B tokens in 2 days needs more.
    s = _full(_brief("PRETRAINING", tokens=20.0, days=2.0, batch=1), SHAPE)
    assert s.memory_count == 1
    assert s.compute_count > 1
    assert s.count == s.compute_count
    assert s.train_hours <= 48.0
    assert s.fits is True
    # One GPU fewer misses it.
    rate, _ = t.full_rate(s, _brief("PRETRAINING", tokens=20.0, days=2.0, batch=1), SHAPE, T,
                          lambda n, q=1: _full_need(SHAPE, n, q), 72.0)
    assert t.all_in_hours(20.0, s.count, rate(s.count), T) == s.train_hours
    assert t.all_in_hours(20.0, s.count - 1, rate(s.count - 1), T) > 48.0


def test_more_tokens_never_need_fewer_gpus_and_a_longer_deadline_never_more() -> None:
    counts = [_full(_brief("PRETRAINING", tokens=tok, days=3.0, batch=1), SHAPE).count for tok in (1, 10, 40, 160)]
    assert counts == sorted(counts)
    assert counts[0] < counts[-1]
    counts = [_full(_brief("PRETRAINING", tokens=40.0, days=d, batch=1), SHAPE).count for d in (1, 2, 5, 30)]
    assert counts == sorted(counts, reverse=True)
    assert counts[0] > counts[-1]


def test_memory_beyond_the_deadline_s_need_sets_the_count() -> None:
    s = _full(_brief("FULL_FINETUNE", tokens=0.001, days=30.0, batch=1))
    assert s.compute_count <= s.memory_count == s.count == 2


def test_a_deadline_no_cluster_meets_is_refused() -> None:
    s = _full(_brief("PRETRAINING", tokens=1.0, days=0.5 / 24, batch=1), SHAPE)  # inside the start-up hour
    assert s.compute_count == MAX_GPUS
    assert s.count == MAX_GPUS
    assert s.fits is False


def test_no_deadline_no_compute_count() -> None:
    s = _full(_brief("PRETRAINING", tokens=20.0, batch=1), SHAPE)
    assert (s.compute_count, s.count) == (0, 1)
    assert s.train_hours > 0
    # A deadline with no tokens to train: nothing to size for it either.
    s = _full(_brief("PRETRAINING", days=2.0, batch=1), SHAPE)
    assert (s.compute_count, s.count, s.train_hours) == (0, 1, 0.0)


def test_an_adapter_deadline_with_no_tokens_sizes_nothing_for_it() -> None:
    s = _adapter(_brief("ADAPTER_FINETUNE", days=2.0))
    assert (s.compute_count, s.count, s.train_hours) == (0, 1, 0.0)


def test_pretraining_without_a_micro_batch_fills_memory_from_the_global_batch() -> None:
    s = _full(_brief("PRETRAINING", tokens=1.0, global_tokens=64_000), SHAPE)
    need = _full_need(SHAPE, s.count, 1)
    per_seq = _full_need(SHAPE, s.count, 2).total_gb - need.total_gb
    fit = 1 + int((s.count * 72.0 - need.total_gb) / (per_seq * s.count))
    assert s.micro_tokens == min(64_000 // s.count, fit * 1000)
    assert s.micro_tokens > 1000
    # Fine-tuning without one keeps one sequence a GPU.
    assert _full(_brief("FULL_FINETUNE", tokens=1.0), SHAPE).micro_tokens == 1000


def test_the_rate_by_gpu_count_is_the_run_speed_at_that_width() -> None:
    s = _full(_brief("FULL_FINETUNE", batch=2))  # 2 GPUs hold a copy
    need = lambda n, q=2: _full_need(BIG_SHAPE, n, q)  # noqa: E731
    # A fine-tune's step is the brief's global batch over the GPUs, at least one micro-batch.
    rate, micro_at = t.full_rate(s, _brief("FULL_FINETUNE", batch=2, global_tokens=64_000), BIG_SHAPE, T, need, 72.0)
    for k in (1, 2, 4, 64):
        assert micro_at(k) == 2000
        assert rate(k) == t.run_speed(GPU, BIG_SHAPE, T, "full", k, min(k, 2), 2000, max(2000.0, 64_000 / k),
                                      1000.0)
    rate, _ = t.full_rate(s, _brief("FULL_FINETUNE", batch=2), BIG_SHAPE, T, need, 72.0)
    assert rate(4) == t.run_speed(GPU, BIG_SHAPE, T, "full", 4, 2, 2000, 2000.0, 1000.0)
    # Pretraining without a global batch takes the rules' (1M tokens), and without a micro-batch fills memory.
    rate, micro_at = t.full_rate(s, _brief("PRETRAINING"), BIG_SHAPE, T, need, 72.0)
    for k in (2, 8):
        mt = t.tokens_per_micro_batch(k, 1_000_000, BIG_SHAPE, need, 72.0)
        assert micro_at(k) == mt
        assert rate(k) == t.run_speed(GPU, BIG_SHAPE, T, "full", k, 2, mt, max(float(mt), 1_000_000 / k), 1000.0)
    # A pretraining brief that gives its micro-batch keeps it, one sequence included.
    _, micro_at = t.full_rate(s, _brief("PRETRAINING", batch=3), BIG_SHAPE, T, need, 72.0)
    assert micro_at(8) == 3000
    _, micro_at = t.full_rate(s, _brief("PRETRAINING", batch=1), BIG_SHAPE, T, need, 72.0)
    assert micro_at(8) == 1000
    # Sequences of one token (or none given) are one token each.
    for seq in (0, 1):
        _, micro_at = t.full_rate(s, _brief("FULL_FINETUNE", batch=2), replace(BIG_SHAPE, tokens_per_sequence=seq), T,
                                  need, 72.0)
        assert micro_at(4) == 2


def _toy_need(n: int, sequences: int) -> mem.MemoryBreakdown:
    """40 GB of states for the whole run and 10 GB a sequence on each GPU."""
    return mem.MemoryBreakdown((("states", 40.0), ("activations", 10.0 * sequences * n)))


@pytest.mark.parametrize(("count", "global_tokens", "usable", "tokens"), [
    (2, 1_000_000, 50.0, 2000),  # 100 - 60 = 40 GB free over 2 GPUs x 10 GB a sequence: 1 + 2 sequences
    (2, 3000, 50.0, 1500),  # the global batch's share is smaller
    (1, 1_000_000, 45.0, 1000),  # free 45 - 50 < 0: one sequence
    (1, 1_000_000, 50.0, 1000),  # nothing free: one sequence
    (1, 1_000_000, 75.0, 3000),  # 25 GB free: 1 + 2
    (4, 100, 50.0, 25),  # a share under one sequence is kept, in tokens
    (4, 2, 50.0, 1),  # never under one token
    (0, 1000, 50.0, 1000),
    (2, 1001, 50.0, 500),  # whole tokens of the share
])
def test_a_micro_batch_is_the_gpu_s_share_of_the_batch_no_more_than_fits(count: int, global_tokens: int,
                                                                          usable: float, tokens: int) -> None:
    assert t.tokens_per_micro_batch(count, global_tokens, SHAPE, _toy_need, usable) == tokens


def test_under_a_gigabyte_free_still_holds_small_sequences() -> None:
    small = lambda n, q: mem.MemoryBreakdown((("states", 40.0), ("activations", 0.125 * q * n)))  # noqa: E731
    # 40.625 - 40.125 = 0.5 GB free, 0.125 GB a sequence: 1 + 4 sequences.
    assert t.tokens_per_micro_batch(1, 1_000_000, SHAPE, small, 40.625) == 5000


def test_a_micro_batch_with_no_memory_per_sequence_is_one_sequence() -> None:
    flat = lambda n, q: mem.MemoryBreakdown((("states", 10.0),))  # noqa: E731
    assert t.tokens_per_micro_batch(2, 1_000_000, SHAPE, flat, 50.0) == 1000
    assert t.tokens_per_micro_batch(2, 1_000_000, replace(SHAPE, tokens_per_sequence=0), _toy_need, 50.0) == 2


# -- memory: adapters ---------------------------------------------------------------------------------------------


def test_the_adapter_breakdown_is_the_physics_at_the_rules_constants() -> None:
    got = t.adapter_breakdown(BIG_SHAPE, T, 3)
    assert got == mem.adapter_training_memory(8.0, 2.0, ARCH, 1000, 3, 8, 4, "none", 1.0)
    a = _rules(lora_rank=16.0, lora_targets_per_layer=7.0, recompute_adapter="full", engine_overhead_gb=3.0)
    assert t.adapter_breakdown(BIG_SHAPE, a, 1) == mem.adapter_training_memory(8.0, 2.0, ARCH, 1000, 1, 16, 7, "full",
                                                                               3.0)


def test_every_rank_holds_its_own_activations_logits_and_engine() -> None:
    one = mem.MemoryBreakdown((("weights", 16.0), ("adapter_states", 1.0), ("activations", 2.0), ("logits", 0.5),
                               ("engine", 1.0)))
    assert t.ranks_memory(one, 4).components == (("weights", 16.0), ("adapter_states", 1.0), ("activations", 8.0),
                                                 ("logits", 2.0), ("engine", 4.0))
    assert t.ranks_memory(one, 1) == one
    assert t.ranks_memory(one, 0) == one


def _adapter(brief: Brief, shape: Shape = BIG_SHAPE, gpu: Gpu = GPU, a: Assumptions = T) -> Sizing:
    s = Sizing(gpu=gpu, tflops=gpu.tflops_bf16)
    t.size_adapter(s, brief, shape, a)
    return s


def test_an_adapter_run_takes_the_first_group_its_ranks_fit_on() -> None:
    one = t.adapter_breakdown(BIG_SHAPE, T, 1)
    s = _adapter(_brief("ADAPTER_FINETUNE"))
    assert one.total_gb <= 72.0
    assert (s.memory_count, s.count, s.per_replica, s.fits) == (1, 1, 1, True)
    assert s.memory == one
    assert s.micro_tokens == 1000
    # A 40B base at 16 bits: 80 GB of weights; groups of 1, 2, 4, 8...: the first whose ranks fit.
    shape = replace(BIG_SHAPE, params_billion=40.0, active_params_billion=40.0)
    s = _adapter(_brief("ADAPTER_FINETUNE", batch=2), shape)
    one = t.adapter_breakdown(shape, T, 2)
    want = next(k for k in (1, 2, 4, 8, 16, 24, 32) if t.ranks_memory(one, k).total_gb <= k * 72.0)
    assert want == 2
    assert (s.memory_count, s.count, s.fits) == (want, want, True)
    assert s.memory == t.ranks_memory(one, want)
    assert s.micro_tokens == 2000


def test_an_adapter_run_too_big_for_any_group_is_refused_at_the_widest() -> None:
    shape = replace(BIG_SHAPE, params_billion=5000.0, active_params_billion=5000.0)
    s = _adapter(_brief("ADAPTER_FINETUNE"), shape)
    assert s.fits is False
    assert s.memory_count == s.count == 32  # 4 nodes of 8


def test_an_adapter_run_widens_for_its_deadline() -> None:
    s = _adapter(_brief("ADAPTER_FINETUNE", tokens=2.0, days=1.0))
    assert s.memory_count == 1
    assert s.compute_count == s.count > 1
    assert s.train_hours <= 24.0
    assert s.fits is True
    assert s.memory == t.ranks_memory(t.adapter_breakdown(BIG_SHAPE, T, 1), s.count)
    counts = [_adapter(_brief("ADAPTER_FINETUNE", tokens=2.0, days=d)).count for d in (0.5, 1.0, 3.0, 30.0)]
    assert counts == sorted(counts, reverse=True)
    assert counts[0] > counts[-1]


def test_under_a_billion_tokens_is_sized_for_its_deadline() -> None:
    s = _adapter(_brief("ADAPTER_FINETUNE", tokens=0.5, days=0.1))
    assert s.compute_count == s.count > 1
    assert s.train_hours <= 2.4


def test_an_adapter_on_one_token_sequences_runs_micro_batches_of_its_sequences() -> None:
    for seq in (0, 1):
        s = _adapter(_brief("ADAPTER_FINETUNE", batch=3), replace(BIG_SHAPE, tokens_per_sequence=seq))
        assert s.micro_tokens == 3


def test_an_adapter_deadline_no_cluster_meets_is_refused() -> None:
    s = _adapter(_brief("ADAPTER_FINETUNE", tokens=2.0, days=0.5 / 24))
    assert (s.compute_count, s.count, s.fits) == (MAX_GPUS, MAX_GPUS, False)


def test_the_adapter_rate_is_the_run_speed_over_every_rank() -> None:
    s = _adapter(_brief("ADAPTER_FINETUNE"))
    rate = t.adapter_rate(s, _brief("ADAPTER_FINETUNE", batch=2, global_tokens=64_000), BIG_SHAPE, T)
    for k in (1, 4, 64):
        assert rate(k) == t.run_speed(GPU, BIG_SHAPE, T, "lora", k, k, 2000, max(2000.0, 64_000 / k), 1000.0)
    rate = t.adapter_rate(s, _brief("ADAPTER_FINETUNE"), replace(BIG_SHAPE, precision="INT4"), T)
    assert rate(4) == t.run_speed(GPU, replace(BIG_SHAPE, precision="INT4"), T, "qlora", 4, 4, 1000, 1000.0, 1000.0)
    # A part with no 16-bit figure runs its adapters at the compute the sizing gives.
    fp8_only = Sizing(gpu=_gpu(bf16=0.0), tflops=2000.0, memory_count=1)
    assert t.adapter_rate(fp8_only, _brief("ADAPTER_FINETUNE"), BIG_SHAPE, T)(1).model_tflops == pytest.approx(1000.0)
    rate = t.adapter_rate(s, _brief("ADAPTER_FINETUNE"), replace(BIG_SHAPE, tokens_per_sequence=0), T)
    assert rate(2) == t.run_speed(GPU, replace(BIG_SHAPE, tokens_per_sequence=0), T, "lora", 2, 2, 1, 1.0, 1000.0)
