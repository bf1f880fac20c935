"""The physics and the money against published figures; each test names its source."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.money import cost, ownership
from service.physics import compute
from service.physics import memory as mem

LLAMA31_8B = mem.Architecture(layers=32, kv_heads=8, head_dim=128, hidden_size=4096, attention_heads=32,
                              vocab_size=128256, exact=True)
LLAMA33_70B = mem.Architecture(layers=80, kv_heads=8, head_dim=128, hidden_size=8192, attention_heads=64,
                               vocab_size=128256, exact=True)
BANDS = (
    mem.ArchitectureBand(10, 32, 8, 128, 4096, 32, 128256),
    mem.ArchitectureBand(90, 80, 8, 128, 8192, 64, 128256),
)


def test_llama31_8b_kv_cache_is_0131_mb_per_token_in_bf16():
    # Llama-3.1-8B config: 32 layers, 8 KV heads, head_dim 128 → 2·32·8·128·2 B = 131,072 B (≈0.131 MB);
    # the figure vLLM and llm-d report; gpu_poor's hidden-size formula overcounts it 4x (peers-and-physics.md).
    assert mem.kv_bytes_per_token(LLAMA31_8B, 2.0) == 131_072
    assert mem.kv_cache_gb(LLAMA31_8B, 1, 1) == pytest.approx(0.000131072)


def test_llama33_70b_kv_cache_is_0328_mb_per_token():
    # Llama-3.3-70B: 80 layers, 8 KV heads, 128 head_dim → 327,680 B per token in BF16.
    assert mem.kv_bytes_per_token(LLAMA33_70B, 2.0) == 327_680
    # 8k tokens x 32 sessions ≈ 85.9 GB: the KV cache outweighs FP8 weights at production concurrency.
    assert mem.kv_cache_gb(LLAMA33_70B, 8192, 32) == pytest.approx(85.9, abs=0.1)


def test_llama33_70b_fp8_does_not_fit_one_h100():
    # 70.6B params at 1 byte = 70.6 GB of weights, plus an 8k KV cache, the engine's ~5 GB activation peak and
    # ~1 GB CUDA context: more than an 80 GB H100 with 10% kept free (72 GB).
    need = mem.inference_memory(70.6, 1.0, LLAMA33_70B, 8192, 1, 2.0, 5.0, 1.0).total_gb
    assert need > 80 * 0.9
    assert mem.weights_gb(70.6, 1.0) == pytest.approx(70.6)


def test_tensor_parallel_beyond_kv_heads_replicates_heads():
    # llm-analysis get_memory_kv_cache_per_layer: each GPU holds max(kv_heads / TP, 1) heads.
    one = mem.kv_cache_gb(LLAMA31_8B, 4096, 4, tensor_parallel=1)
    assert mem.kv_cache_gb(LLAMA31_8B, 4096, 4, tensor_parallel=8) == pytest.approx(one)
    assert mem.kv_cache_gb(LLAMA31_8B, 4096, 4, tensor_parallel=16) == pytest.approx(2 * one)


def test_mixed_precision_adam_keeps_16_bytes_per_parameter():
    # ZeRO paper / EleutherAI cookbook: 2 (bf16 weights) + 2 (bf16 grads) + 12 (fp32 master, m, v) = 16;
    # stas00 counts 18 with fp32 gradients.
    assert mem.adamw_mixed_precision_bytes_per_param() == 16
    assert mem.adamw_mixed_precision_bytes_per_param(fp32_grads=True) == 18
    states = mem.full_training_memory(7, LLAMA31_8B, 1, 1, 16, "full", 0.0)
    model_states = sum(v for n, v in states.components if n in ("weights", "gradients", "optimizer"))
    assert model_states == pytest.approx(112.0)  # a 7B full fine-tune needs 112 GB before activations


def test_seed_rule_of_thumb_understates_full_fine_tuning():
    # Seed 000 says "about 4 x N GB to train"; the standard formula gives 16 x N GB of states alone.
    states = mem.full_training_memory(7, LLAMA31_8B, 1, 1, 16, "full", 0.0)
    assert states.total_gb > 4 * 7 * 3


def test_korthikanti_activation_formula():
    # Korthikanti et al. 2022, eq. 2: per layer s·b·h·(34 + 5·a·s/h) bytes without recomputation; 34·s·b·h with
    # selective recomputation; GPT-3 175B (h 12288, a 96) at s 2048, b 1 and 96 layers.
    s, b, h, a, layers = 2048, 1, 12288, 96, 96
    none = mem.activation_gb(s, b, h, layers, a, "none")
    assert none == pytest.approx(layers * s * b * h * (34 + 5 * a * s / h) / 1e9)
    selective = mem.activation_gb(s, b, h, layers, a, "selective")
    assert selective == pytest.approx(layers * 34 * s * b * h / 1e9)
    assert mem.activation_gb(s, b, h, layers, a, "full") < selective < none
    assert mem.activation_gb(s, b, h, layers, a, "selective", tensor_parallel=8) == pytest.approx(selective / 8)
    with pytest.raises(ValueError):
        mem.activation_gb(s, b, h, layers, a, "sometimes")


def test_lora_on_7b_lands_in_the_seeds_range():
    # Seed 000: LoRA on a 7B model needs about 14–20 GB. Weights 14 GB + rank-16 adapters on q,k,v,o + full
    # checkpointing at batch 1 x 2048 tokens stays inside it.
    b = mem.adapter_training_memory(7, 2.0, LLAMA31_8B, 2048, 1, 16, 4, "full", 1.0)
    assert 14 <= b.total_gb <= 20
    assert mem.lora_trainable_params_billion(LLAMA31_8B, 16, 4) == pytest.approx(0.0168, rel=0.01)


def test_qlora_base_is_about_a_quarter_of_bf16():
    # QLoRA paper: 4-bit NF4 base (+0.127 bit with double quantization) ≈ a quarter of 16-bit weights.
    bf16 = mem.adapter_training_memory(7, 2.0, LLAMA31_8B, 512, 1, 16, 4, "full", 0.0)
    nf4 = mem.adapter_training_memory(7, 0.5159, LLAMA31_8B, 512, 1, 16, 4, "full", 0.0)
    assert dict(nf4.components)["weights"] == pytest.approx(dict(bf16.components)["weights"] / 4, rel=0.04)


def test_architecture_is_exact_only_when_given():
    assert mem.resolve_architecture(8, 32, 8, 128, 0, BANDS).exact
    est = mem.resolve_architecture(70, 0, 0, 0, 0, BANDS)
    assert not est.exact and est.layers == 80
    assert mem.estimate_architecture(400, BANDS).layers == 80  # larger than every band: the largest


def test_training_flops_6nd():
    # EleutherAI Transformer Math: C ≈ 6·N·D. 70B on 1T tokens = 4.2e23 FLOPs.
    assert compute.training_flops(70, 1000) == pytest.approx(4.2e23)
    # At 989 dense TFLOPS x 40% MFU, 45 days needs ceil(4.2e23 / (989e12·0.4·45·86400)) = 274 H100s.
    assert compute.gpus_for_deadline(4.2e23, 989, 0.4, 45) == 274


def test_decode_is_memory_bound():
    # gpu_poor / kv-planner: a decode step reads the weights once: 16 GB at 3.35 TB/s x 0.75 → 6.4 ms.
    step = compute.decode_step_seconds(16, 0, 3.35, 0.75)
    assert step == pytest.approx(16e9 / (3.35e12 * 0.75))
    assert compute.decode_tokens_per_second(32, step) == pytest.approx(32 / step)
    # compute ceiling: 989 TFLOPS x 0.5 / (2 x 8e9) ≈ 30,900 tokens/s
    assert compute.compute_bound_tokens_per_second(8, 989, 0.5) == pytest.approx(30906, rel=1e-3)


def test_cost_per_tflop_hour_matches_the_seed_table():
    # Seed 000: H100 $3.15 / ~1,000 TFLOPS ≈ $0.0032; RTX 4090 $0.60 / 330 ≈ $0.0018; L40S $1.50 / 366 ≈ $0.0041.
    assert cost.usd_per_tflop_hour(3.15, 989) == pytest.approx(0.0032, abs=5e-5)
    assert cost.usd_per_tflop_hour(0.60, 330) == pytest.approx(0.0018, abs=5e-5)
    assert cost.usd_per_tflop_hour(1.50, 366) == pytest.approx(0.0041, abs=5e-5)


def test_cost_per_accepted_unit_divides_by_acceptance():
    # Seed 003: effective unit cost = all-in cost / accepted outputs.
    assert cost.usd_per_accepted_unit(10, 100, 0.5) == pytest.approx(0.2)
    assert cost.usd_per_accepted_unit(10, 100, 0) == pytest.approx(0.1)  # unknown acceptance counts all
    assert cost.usd_per_million_tokens(3.6, 1000) == pytest.approx(1.0)


def test_seed_h100_break_even():
    # Seed 000: $25,000 / $3.15 per hour ≈ 7,937 h; ~11 months at 24/7, ~18 months at 60%.
    hours = ownership.break_even_hours(25_000, 3.15, 0.0)
    assert hours == pytest.approx(7937, abs=1)
    assert ownership.break_even_months(hours, 1.0) == pytest.approx(10.9, abs=0.1)
    assert ownership.break_even_months(hours, 0.6) == pytest.approx(18.1, abs=0.1)
    assert math.isinf(ownership.break_even_hours(25_000, 0.05, 0.09))


def test_seed_power_and_three_year_cost():
    # Seed 000: 700 W at 60% and $0.10/kWh ≈ $368/year; 3-year effective ownership ≈ $1.05/h with power
    # ($0.07/h) and cooling ($0.02/h), which the seed's figure matches at full utilization.
    assert ownership.annual_power_usd(700, 0.6, 0.10) == pytest.approx(367.9, abs=0.1)
    running = ownership.running_usd_per_busy_hour(700, 0.10, 0.09 / 0.07, 0.0, 1.0)
    assert running == pytest.approx(0.09)
    assert ownership.owned_usd_per_hour(25_000, 3, 0.0, running, 1.0) == pytest.approx(1.04, abs=0.01)
    # at 50% utilization the purchase costs twice as much per delivered hour
    assert ownership.owned_usd_per_hour(25_000, 3, 0.0, 0.0, 0.5) == pytest.approx(2 * 25_000 / (3 * 8760))


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError):
        mem.weights_gb(-1, 2)
    with pytest.raises(ValueError):
        ownership.annual_power_usd(700, 1.5, 0.1)
    with pytest.raises(ValueError):
        compute.gpus_for_deadline(1e20, 989, 0.4, 0)
    with pytest.raises(ValueError):
        cost.usd_per_accepted_unit(1, 0, 0.5)


@given(tokens=st.integers(1, 200_000), seqs=st.integers(1, 512), k=st.integers(2, 5))
def test_kv_cache_is_linear_in_tokens_and_sequences(tokens, seqs, k):
    base = mem.kv_cache_gb(LLAMA31_8B, tokens, seqs)
    assert mem.kv_cache_gb(LLAMA31_8B, tokens * k, seqs) == pytest.approx(base * k)
    assert mem.kv_cache_gb(LLAMA31_8B, tokens, seqs * k) == pytest.approx(base * k)


@given(purchase=st.floats(1_000, 100_000), rent=st.floats(0.5, 20), running=st.floats(0, 0.4), bump=st.floats(0.01, 5))
def test_break_even_comes_sooner_as_rent_rises(purchase, rent, running, bump):
    assert ownership.break_even_hours(purchase, rent + bump, running) < ownership.break_even_hours(
        purchase, rent, running
    )


@given(params=st.floats(0.1, 1000), more=st.floats(1.01, 3))
def test_memory_totals_are_sums_and_grow_with_size(params, more):
    small = mem.inference_memory(params, 2.0, LLAMA31_8B, 2048, 4, 2.0, 5.0, 1.0)
    big = mem.inference_memory(params * more, 2.0, LLAMA31_8B, 2048, 4, 2.0, 5.0, 1.0)
    assert small.total_gb == pytest.approx(sum(v for _, v in small.components))
    assert big.total_gb > small.total_gb
