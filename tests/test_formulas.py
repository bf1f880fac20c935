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


# --- Issue 6: physics round 2 ----------------------------------------------------------------------------------

LLAMA3_405B_FLOPS = compute.training_flops(405, 15_600)  # 6 x 405e9 x 15.6e12 ≈ 3.79e25


def test_a_count_sized_for_a_deadline_meets_it_at_the_same_mfu():
    # Llama 3 paper (Grattafiori et al. 2024, Table 4): 38-43% BF16 MFU on 8k-16k H100, communication included;
    # Llama 3.1 model card: 30.84M H100 GPU-hours for 405B. At 40% MFU, 90 days need 12,324 H100 (12,328 in
    # whole nodes of 8) and the run takes the 90 days it was sized for, not 1/0.85 of them.
    n = compute.gpus_for_deadline(LLAMA3_405B_FLOPS, 989, 0.40, 90)
    assert n == 12_324
    nodes = math.ceil(n / 8) * 8
    assert nodes == 12_328
    days = compute.training_seconds(LLAMA3_405B_FLOPS, nodes, 989, 0.40) / 86_400
    assert 89 <= days <= 90
    gpu_hours = nodes * days * 24
    assert 26.3e6 <= gpu_hours <= 30.84e6
    assert 83e6 <= gpu_hours * 3.15 <= 97e6  # at the catalog's $3.15/h H100


def test_mla_kv_cache_is_the_compressed_latent():
    # DeepSeek-V3/R1 config.json: 61 layers, kv_lora_rank 512, qk_rope_head_dim 64 → (512 + 64) x 61 x 2 B =
    # 70,272 B (~70 KB) per token in BF16 (DeepSeek-V2 paper section 2.1; llm-d KVCacheDetail), 57x less than
    # 2 x 61 layers x 128 heads x 128 x 2 B if it were MHA.
    r1 = mem.resolve_architecture(671, 61, 0, 0, 7168, BANDS, kind="MLA", kv_lora_rank=512, rope_head_dim=64)
    assert r1.exact and r1.kind == "MLA"
    assert mem.kv_bytes_per_token(r1, 2.0) == 70_272
    assert 2 * 61 * 128 * 128 * 2 / mem.kv_bytes_per_token(r1, 2.0) == pytest.approx(57, abs=0.5)
    # Served with data-parallel attention (vLLM/SGLang for MLA), the latent is not replicated under TP.
    assert mem.kv_cache_gb(r1, 4096, 8, tensor_parallel=8) == pytest.approx(mem.kv_cache_gb(r1, 4096, 8))
    # DeepSeek-V2 (config.json: 60 layers, same ranks): 69,120 B per token.
    v2 = mem.resolve_architecture(236, 60, 0, 0, 5120, BANDS, kind="MLA", kv_lora_rank=512, rope_head_dim=64)
    assert mem.kv_bytes_per_token(v2, 2.0) == 69_120


def test_an_mla_guess_is_not_exact():
    guess = mem.resolve_architecture(671, 0, 0, 0, 0, BANDS, kind="MLA")
    assert not guess.exact and guess.kind == "MLA" and guess.kv_latent == 512 + 64


def test_gqa_and_mha_kv_follow_the_named_attention():
    # A GQA model is unchanged by naming it: Llama-3.3-70B stays 327,680 B per token.
    gqa = mem.resolve_architecture(70, 80, 8, 128, 8192, BANDS, kind="GQA")
    assert gqa.exact and mem.kv_bytes_per_token(gqa, 2.0) == 327_680
    # Llama-2-13B is MHA (40 layers, hidden 5120): 2 x 40 x 5120 x 2 B = 819,200 B (~0.8 MB) per token.
    mha = mem.resolve_architecture(13, 40, 0, 128, 5120, BANDS, kind="MHA")
    assert mha.exact and mem.kv_bytes_per_token(mha, 2.0) == 819_200
    # MQA keeps one KV head (Falcon-7B: 32 layers, head_dim 64): 2 x 32 x 64 x 2 B = 8,192 B per token.
    mqa = mem.resolve_architecture(7, 32, 0, 64, 4544, BANDS, kind="MQA")
    assert mqa.exact and mem.kv_bytes_per_token(mqa, 2.0) == 8_192


def test_a_sliding_window_caps_the_cached_tokens():
    # Mistral-7B-v0.1 config.json: 32 layers, 8 KV heads, head_dim 128, sliding_window 4096: a 32k sequence
    # keeps 4,096 tokens of KV.
    mistral = mem.resolve_architecture(7.2, 32, 8, 128, 4096, BANDS, window=4096)
    assert mem.kv_cache_gb(mistral, 32_768, 1) == pytest.approx(mem.kv_cache_gb(mistral, 4096, 1))
    assert compute.attention_flops(32, 32_768, 4096, 4096) == pytest.approx(2 * 32 * 32_768 * 4096 * 4096)


def test_attention_flops_make_long_prompts_about_three_times_slower():
    # Causal prefill attention 2·L·S²·d (Kaplan et al.: 2·n_layer·n_ctx·d_attn per token). For Llama-3.3-70B
    # (80 layers, d 8192) in FP8 on 2 H100, a 126k-token prompt: linear 2·N·S at FP8 plus attention at the BF16
    # rate (16-bit KV) is ~3x the linear-only estimate; at 5k tokens attention adds under 10%.
    def ttft(tokens: int, with_attention: bool) -> float:
        attn = compute.attention_flops(80, tokens, 8192) if with_attention else 0.0
        return compute.prefill_seconds(70.6, tokens, 2 * 1979, 0.5, attn, 2 * 989)

    assert 2.7 <= ttft(126_000, True) / ttft(126_000, False) <= 3.6
    assert ttft(5000, True) / ttft(5000, False) < 1.1


def test_a_decode_step_has_a_floor_and_grows_with_the_batch():
    # Weights 35.3 GB per H100 at 3.35 TB/s x 0.75 = 14.1 ms; a 4 ms floor (launches, 160 all-reduces) stays
    # whatever the batch; linear FLOPs hide under the weight read until the batch is large.
    def step(batch: int, overhead: float) -> float:
        return compute.step_seconds(70.6, batch * 5250 * 327_680 / 1e9, 2 * 3.35, 0.75,
                                    2 * 70.6e9 * batch, 2 * 1979, 0.5, overhead_s=overhead)

    assert step(1, 0.004) == pytest.approx(step(1, 0.0) + 0.004)
    assert step(1, 0.0) == pytest.approx((70.6e9 + 5250 * 327_680) / (2 * 3.35e12 * 0.75))
    assert step(1, 0.004) < step(8, 0.004) < step(64, 0.004) < step(512, 0.004)
    # Past the point where compute exceeds the weight read, the step grows linearly with the batch.
    assert step(4096, 0.0) > 2 * step(512, 0.0)


def test_tensor_parallel_does_not_scale_linearly():
    # Doubling the GPUs halves the bytes each reads but not the per-step floor and all-reduces (2 per layer).
    def step(tp: int) -> float:
        overhead = 0.001 + (2 * 80 * 20e-6 if tp > 1 else 0.0)
        return compute.step_seconds(70.6, 1.7, tp * 3.35, 0.75, 2 * 70.6e9, tp * 1979, 0.5, overhead_s=overhead)

    assert step(2) / step(4) < 2
    assert step(4) / step(8) < step(2) / step(4)


def test_ttft_under_load_shares_prefill_with_the_other_sequences():
    alone = compute.time_to_first_token(0.39, 0.02, 0, 0.39, 500)
    assert alone == pytest.approx(0.39 + 0.02)
    loaded = compute.time_to_first_token(0.39, 0.035, 24, 0.39, 500)
    assert alone < loaded < 0.39 / (1 - 0.95) + 0.035


@given(layers=st.integers(0, 10_000), heads=st.integers(0, 10_000), hd=st.integers(0, 100_000),
       hidden=st.integers(0, 1_000_000), rank=st.integers(0, 1_000_000), rope=st.integers(0, 100_000),
       window=st.integers(0, 10_000_000), kind=st.sampled_from(["UNSPECIFIED", "MHA", "GQA", "MQA", "MLA"]))
def test_any_valid_architecture_gives_a_positive_finite_kv_cache(layers, heads, hd, hidden, rank, rope, window, kind):
    arch = mem.resolve_architecture(70, layers, heads, hd, hidden, BANDS, kind=kind, kv_lora_rank=rank,
                                    rope_head_dim=rope, window=window)
    per_token = mem.kv_bytes_per_token(arch, 2.0)
    assert 0 < per_token < math.inf
    assert not arch.exact or layers > 0  # nothing is exact without the layer count
