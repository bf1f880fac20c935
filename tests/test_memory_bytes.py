"""Issue 15 item 2: memory in bytes as the hardware reports it, reserves that scale with the work, no serving
headroom on a training card, and QLoRA's NF4 at 4.127 bits.

Published figures:
- nvidia-smi reports an "80 GB" H100 at 81,559 MiB = 85,520,809,984 bytes (modal-labs/modal-client PR #2797,
  which also lists A100 80GB 81,920 MiB, A100 40GB 40,960, L40S 46,068, L4 23,034).
- gpt-oss model card (OpenAI, 2025): gpt-oss-120b "runs on a single 80 GB GPU"; gpt-oss-20b "within 16 GB".
  config.json: 36 layers, 8 KV heads, head_dim 64, hidden 2,880; 116.8B total, 5.1B active; 24 layers / 20.9B
  total / 3.6B active for 20b. MoE weights in MXFP4 (4.25 bits), which INT4's 4.5 bits over-counts.
- Unsloth (unsloth.ai blog, Llama 3.3 release): QLoRA of Llama-3.3-70B fits "in under 48 GB of VRAM"
  (max_seq_length 2,048 in their notebooks); QLoRA paper (Dettmers et al. 2023): NF4 + double quantization
  = 4.127 bits per parameter.
"""

from __future__ import annotations

from typing import Any

import pytest

from service.domain.brief import AdviceRequest, Brief, Model, Traffic, Training
from service.physics import memory as mem

from .conftest import TODAY


@pytest.fixture(scope="module")
def bundle(catalog_bundle: Any) -> Any:  # noqa: ANN401
    """The figures as sized, on catalog prices: placement on offers rounds counts up to whole instances
    (tests/test_placement.py), which would hide the GPUs the physics asks for."""
    return catalog_bundle


def _candidates(bundle, brief: Brief) -> dict[str, object]:  # noqa: ANN001
    advice = bundle.advise(AdviceRequest(brief=brief, max_candidates=50, as_of=TODAY))
    return {c.gpu: c for c in advice.candidates}


def test_the_catalog_counts_memory_as_the_driver_reports_it(bundle):
    gpus = {g.id: g for g in bundle.book.catalog}
    assert gpus["h100-sxm"].memory_gb == 80  # the name it is sold by ...
    assert gpus["h100-sxm"].capacity_gb == pytest.approx(81_559 * 2**20 / 1e9, abs=0.01)  # ... and what it holds
    for gid, mib in (("a100-80gb", 81_920), ("a100-40gb", 40_960), ("l40s", 46_068), ("l4", 23_034)):
        assert gpus[gid].capacity_gb == pytest.approx(mib * 2**20 / 1e9, abs=0.01), gid
    for g in gpus.values():  # a GiB-named part holds more decimal GB than its name, never less
        assert g.memory_gb <= g.capacity_gb <= g.memory_gb * 2**30 / 1e9 * 1.001, g.id


def _gpt_oss(params: float, active: float, layers: int, sessions: int = 1) -> Brief:
    return Brief(workload="REALTIME_INFERENCE",
                 model=Model(params, active, precision="INT4", context_tokens=8192, layers=layers, kv_heads=8,
                             head_dim=64, hidden_size=2880),
                 traffic=Traffic(concurrent_sessions=sessions, avg_input_tokens=2000, avg_output_tokens=1000))


def test_gpt_oss_120b_runs_on_one_80gb_h100_as_its_model_card_says(bundle):
    c = _candidates(bundle, _gpt_oss(116.8, 5.1, 36))
    assert c["h100-sxm"].count == 1 and c["a100-80gb"].count == 1
    assert c["h100-sxm"].memory.capacity_gb == pytest.approx(85.52, abs=0.01)


def test_gpt_oss_20b_fits_one_24gb_card_and_more_sessions_need_more_memory(bundle):
    small = _candidates(bundle, _gpt_oss(20.9, 3.6, 24))
    assert small["l4"].count == 1 and small["rtx-4090"].count == 1
    many = _candidates(bundle, _gpt_oss(116.8, 5.1, 36, sessions=64))
    assert many["h100-sxm"].memory.need_gb > _candidates(bundle, _gpt_oss(116.8, 5.1, 36))["h100-sxm"].memory.need_gb


def _qlora(params: float, layers: int, hidden: int, context: int = 2048) -> Brief:
    return Brief(workload="ADAPTER_FINETUNE",
                 model=Model(params, precision="INT4", context_tokens=context, layers=layers, kv_heads=8,
                             head_dim=128, hidden_size=hidden),
                 training=Training(tokens_billion=0.01))


def test_qlora_of_llama_33_70b_fits_one_48gb_card_as_unsloth_measured(bundle):
    c = _candidates(bundle, _qlora(70.6, 80, 8192))
    assert c["l40s"].count == 1
    weights = dict(c["l40s"].memory.breakdown)["weights"]
    assert weights == pytest.approx(70.6 * 4.127 / 8, rel=0.01)  # NF4 + double quantization, not 4.5 bits
    assert c["rtx-4090"].count == 2  # 36 GB of frozen base alone is beyond a 24 GB card; 44 GB in all fits two


def test_qlora_of_an_8b_model_fits_a_24gb_card_and_4bit_serving_keeps_its_group_scales(bundle):
    assert _candidates(bundle, _qlora(8.03, 32, 4096))["l4"].count == 1
    serving = _candidates(bundle, Brief(workload="BATCH_INFERENCE", model=Model(70.6, precision="INT4",
                                                                                context_tokens=2048)))
    weights = dict(serving["h100-sxm"].memory.breakdown)["weights"]
    assert weights == pytest.approx(70.6 * 4.5 / 8, rel=0.01)  # GPTQ/AWQ/GGUF serving formats: 4.5 bits


def test_the_activation_reserve_scales_with_the_work():
    args = dict(hidden=8192, vocab_size=128_256, bytes_per_token_hidden=30, sampler_bytes_per_vocab_entry=12)
    one = mem.serving_activation_gb(step_tokens=600, sequences=1, **args)
    full = mem.serving_activation_gb(step_tokens=8192, sequences=256, **args)
    assert one < 0.2 < 2 < full < 5.6  # llm-d measured 4.8-5.6 GiB at vLLM's full 8k-token, 1,024-sequence profile
    assert mem.serving_activation_gb(step_tokens=8192, sequences=256, tensor_parallel=4, **args) < full


def test_a_training_card_keeps_no_serving_headroom(bundle):
    a = bundle.book.assumptions
    assert a.num("training_safety_headroom") < a.num("safety_headroom")
    c = _candidates(bundle, _qlora(70.6, 80, 8192, context=4096))["l40s"]
    assert c.count == 1  # 4k tokens: over the line a serving engine keeps free, under the card's bytes
    assert c.memory.capacity_gb * (1 - a.num("safety_headroom")) < c.memory.need_gb <= c.memory.capacity_gb


def test_gpt_oss_120b_by_name_runs_on_one_h100(bundle):
    # The model card: "fits into a single 80GB GPU" (MXFP4 weights). By name, the registry fills the shape, the
    # experts and the FP4 precision (rules/models/gpt-oss.yaml).
    c = _candidates(bundle, Brief(workload="REALTIME_INFERENCE", model=Model(name="gpt-oss-120b", context_tokens=8192),
                                  traffic=Traffic(concurrent_sessions=1)))
    assert c["h100-sxm"].count == 1
