"""Published measurements, asked of a real server: each answer's numbers must land where the measurement is.

Sources (read through the project's search tool):
- Llama 3 paper (Grattafiori et al. 2024), Table 4: 38-43% BF16 MFU on 8,192-16,384 H100, 15.6T tokens; Llama 3.1
  model card: 30.84M H100 GPU-hours for 405B.
- Llama 2 paper (Touvron et al. 2023), Table 1 and section 2.2.1: 2T tokens, global batch 4M tokens; A100-80GB
  GPU-hours 184,320 (7B), 368,640 (13B), 1,720,320 (70B).
- DeepSeek-V3/R1 config.json: 61 layers, kv_lora_rank 512, qk_rope_head_dim 64; 671B total, 37B active. vLLM and
  SGLang serve DeepSeek-R1 FP8 on one 8xH200 node.
- NVIDIA NIM LLM benchmarking 1.0.0, performance page: Llama-3.3-70B-Instruct FP8, 2 x H100 80G TP2, 5000 input /
  500 output tokens: concurrency 1 TTFT 406.77 ms, ITL 18.58 ms, 51.67 tokens/s; concurrency 5 TTFT 546.7 ms,
  ITL 21.83 ms; concurrency 25 TTFT 688.69 ms, ITL 38.75 ms, 623.4 tokens/s.
- TensorRT-LLM docs/source/performance/perf-overview.md (v1.0, "Total Output Throughput"): the 2,909 tokens/s at
  ISL/OSL 1000/1000 on H200 TP1 FP8 is **Llama 3.3 70B** (nvidia/Llama-3.3-70B-Instruct-FP8), not an 8B model;
  the same column gives 566 tokens/s at 5000/500.

Tolerances are stated per figure; the model's constants were not fitted to these briefs (the per-step floor and
all-reduce latency account for the NIM concurrency-1 ITL only; every other figure is a check).
"""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.json_format import ParseDict

from service.wire.api import pb, response_to_dict


@pytest.fixture(scope="module")
def stub(catalog_stub: Any) -> Any:  # noqa: ANN401
    """Published figures are about the GPUs the work needs: sized counts, before placement rounds them up
    to whole instances (tests/test_placement.py), on the catalog's prices."""
    return catalog_stub


def _ask(stub: Any, brief: dict[str, Any], **kw: Any) -> dict[str, Any]:
    request = ParseDict({"brief": brief, "max_candidates": 20, **kw}, pb.RecommendRequest())
    return response_to_dict(stub.Recommend(request, timeout=60))


def _candidate(answer: dict[str, Any], gpu: str) -> dict[str, Any]:
    found = [c for c in answer.get("candidates", []) if c["gpu"] == gpu]
    assert found, f"{gpu} is not a candidate: {[c['gpu'] for c in answer.get('candidates', [])]}"
    return found[0]


def _within(value: float, published: float, rel: float) -> bool:
    return abs(value - published) <= rel * published


def _pretrain(params: float, tokens_billion: float, days: float, context: int = 4096) -> dict[str, Any]:
    return {"workload": "WORKLOAD_TYPE_PRETRAINING",
            "model": {"params_billion": params, "precision": "PRECISION_BF16", "context_tokens": context},
            "training": {"tokens_billion": tokens_billion, "target_days": days},
            "success_unit": "SUCCESS_UNIT_TRAINING_RUN"}


# --- item 1: a count sized for a deadline meets it ------------------------------------------------------------

def test_llama3_405b_in_90_days_takes_90_days_and_the_papers_gpu_hours(stub):
    # Issue 41: the count is the fewest GPUs whose all-in time (interruptions included) meets the deadline, at any
    # data-parallel width (no longer a multiple of 8 before placement). The model card's 30.84M H100-hours over
    # 90 days is 14,278 GPUs; the sized count and its GPU-hours land within 20% of both (the class's target is 25%).
    answer = _ask(stub, _pretrain(405, 15_600, 90, 8192))
    h100 = _candidate(answer, "h100-sxm")
    perf = h100["performance"]
    assert _within(h100["count"], 30.84e6 / (90 * 24), 0.20)
    assert 85 <= perf["training_days"] <= 90  # the deadline it was sized for
    assert _within(perf["gpu_hours"], 30.84e6, 0.20)
    # Llama 3 lost under 10% of its time to 466 interruptions on 16,384 GPUs: the all-in days say so.
    assert 0.03 <= perf["restart_overhead_days"] / perf["training_days"] <= 0.12
    assert perf["cost_per_run_usd"] == pytest.approx(perf["gpu_hours"] * h100["cost"]["usd_per_hour"]
                                                     / h100["count"], rel=1e-3)
    assert perf["nodes"] == -(-h100["count"] // 8)
    assert perf.get("tensor_parallel", 0) == 0 and perf.get("replicas", 0) == 0  # no serving shape


# --- item 2: a realistic global batch, and the question for it -------------------------------------------------

# Issue 41: the speed model is fitted to the training runs of calibration/training.csv (2024-2025 stacks);
# Meta's 2023 Llama 2 runs reached about 42% MFU on A100, below what it gives an A100 at a 4M-token batch, so the
# 7B and 13B land about 37% under their published hours (the worst rows of `make accuracy`'s GPU-hours table).
@pytest.mark.parametrize(
    ("params", "published_a100_gpu_hours", "rel"),
    [(6.74, 184_320, 0.40), (13, 368_640, 0.40), (70, 1_720_320, 0.20)],
    ids=["llama2-7b", "llama2-13b", "llama2-70b"],
)
def test_llama2_pretraining_lands_on_the_papers_a100_hours(stub, params, published_a100_gpu_hours, rel):
    answer = _ask(stub, _pretrain(params, 2000, 30))
    a100 = _candidate(answer, "a100-80gb")
    assert _within(a100["performance"]["gpu_hours"], published_a100_gpu_hours, rel)
    # H100 at 30-70% MFU (dense BF16 989 TFLOPS): never the ~17% of one sequence per GPU.
    flops = 6 * params * 1e9 * 2000e9
    low, high = (flops / (989e12 * mfu * 30 * 86_400) for mfu in (0.70, 0.30))
    assert low <= _candidate(answer, "h100-sxm")["count"] <= high + 8
    assert "training.global_batch_tokens" in [q["field"] for q in answer["questions"]]


def test_llama2_7b_needs_45_to_105_h100_and_150_to_280_a100(stub):
    answer = _ask(stub, _pretrain(6.74, 2000, 30))
    assert 45 <= _candidate(answer, "h100-sxm")["count"] <= 105
    assert 150 <= _candidate(answer, "a100-80gb")["count"] <= 280  # 184,320 GPU-h / 720 h = 256


def test_a_stated_global_batch_is_not_asked_again(stub):
    brief = _pretrain(6.74, 2000, 30)
    brief["training"]["global_batch_tokens"] = 4 * 1024 * 1024
    answer = _ask(stub, brief)
    assert "training.global_batch_tokens" not in [q["field"] for q in answer.get("questions", [])]
    assert 45 <= _candidate(answer, "h100-sxm")["count"] <= 105


# --- item 3: MLA ----------------------------------------------------------------------------------------------

def _deepseek(layers: int, params: float, active: float) -> dict[str, Any]:
    return {"workload": "WORKLOAD_TYPE_REALTIME_INFERENCE",
            "model": {"params_billion": params, "active_params_billion": active, "precision": "PRECISION_FP8",
                      "context_tokens": 32_768, "attention": "ATTENTION_KIND_MLA", "layers": layers,
                      "kv_lora_rank": 512, "rope_head_dim": 64, "hidden_size": 7168},
            "traffic": {"concurrent_sessions": 64, "avg_input_tokens": 4000, "avg_output_tokens": 1000}}


@pytest.mark.parametrize("name", ["DeepSeek-R1", "DeepSeek-V3"])  # identical config.json shapes
def test_deepseek_fp8_is_served_on_one_8xh200_node(stub, name):
    # (512 + 64) x 61 x 1 B per token: TensorRT-LLM's FP8 checkpoints keep an FP8 KV cache (issue 36; issue 23
    # took it for every engine)
    answer = _ask(stub, {**_deepseek(61, 671, 37), "toolchain": ["tensorrt-llm"]})
    h200 = _candidate(answer, "h200")
    assert h200["count"] == 8 and h200["performance"]["nodes"] == 1
    kv = dict((m["component"], m["gb"]) for m in h200["memory"]["breakdown"])["kv_cache"]
    assert kv == pytest.approx(35_136 * 32_768 * 64 / 1e9, rel=0.01)
    # No engine named: 16-bit, x 2 B per token (vLLM's and SGLang's --kv-cache-dtype auto); still one node
    sixteen = _candidate(_ask(stub, _deepseek(61, 671, 37)), "h200")
    kv16 = dict((m["component"], m["gb"]) for m in sixteen["memory"]["breakdown"])
    assert kv16["kv_cache"] == pytest.approx(70_272 * 32_768 * 64 / 1e9, rel=0.01)
    assert sixteen["count"] == 8 and sixteen["performance"]["nodes"] == 1
    assert not any(n["rule_id"] == "sizing.architecture" for n in answer.get("notes", []))  # exact: no guess note


def test_an_mla_brief_without_its_shape_says_it_is_an_estimate(stub):
    brief = _deepseek(61, 671, 37)
    for k in ("layers", "kv_lora_rank", "rope_head_dim", "hidden_size"):
        del brief["model"][k]
    notes = [n["text"] for n in _ask(stub, brief).get("notes", []) if n["rule_id"] == "sizing.architecture"]
    assert notes and "not exact" in notes[0] and "MLA" in notes[0]


def test_a_gqa_model_is_unchanged_by_naming_its_attention(stub):
    base = {"workload": "WORKLOAD_TYPE_REALTIME_INFERENCE",
            "model": {"params_billion": 70.6, "precision": "PRECISION_FP8", "context_tokens": 8192, "layers": 80,
                      "kv_heads": 8, "head_dim": 128, "hidden_size": 8192},
            "traffic": {"concurrent_sessions": 8, "avg_input_tokens": 2000, "avg_output_tokens": 500}}
    named = {**base, "model": {**base["model"], "attention": "ATTENTION_KIND_GQA"}}
    a, b = _ask(stub, base), _ask(stub, named)
    assert [(c["gpu"], c["count"], c["memory"]["need_gb"]) for c in a["candidates"]] == [
        (c["gpu"], c["count"], c["memory"]["need_gb"]) for c in b["candidates"]]


# --- item 4: embeddings are throughput-bound by input tokens ---------------------------------------------------

def _embedding(params: float, rps: float) -> dict[str, Any]:
    return {"workload": "WORKLOAD_TYPE_EMBEDDING",
            "model": {"params_billion": params, "precision": "PRECISION_FP16", "context_tokens": 512},
            "traffic": {"avg_input_tokens": 512, "requests_per_second": rps},
            "success_unit": "SUCCESS_UNIT_RECORD"}


def test_bge_large_at_2000_requests_a_second_needs_9_to_15_l4_or_4_to_6_a100(stub):
    # 2,000 x 512 = 1.02M tokens/s x (2 x 0.335e9 + attention) FLOPs: L4 121 TFLOPS, A100 312 at ~50%.
    answer = _ask(stub, _embedding(0.335, 2000))
    assert 9 <= _candidate(answer, "l4")["count"] <= 15
    assert 4 <= _candidate(answer, "a100-80gb")["count"] <= 6
    l4 = _candidate(answer, "l4")
    # Capacity covers the offered load: replicas x input tokens/s per replica >= 2,000 x 512.
    assert l4["performance"]["replicas"] * l4["performance"]["tokens_per_second_per_replica"] >= 2000 * 512


def test_a_smaller_embedding_model_needs_proportionally_fewer_gpus(stub):
    # bge-base-en-v1.5: 0.109B parameters, a third of bge-large: the same load needs about a third of the L4s.
    large = _candidate(_ask(stub, _embedding(0.335, 2000)), "l4")["count"]
    base = _candidate(_ask(stub, _embedding(0.109, 2000)), "l4")["count"]
    assert 3 <= base <= 6 and base < large


def test_an_embedding_brief_states_the_batch_it_was_sized_at(stub):
    # Sized at a server-side batch of 16,384 tokens (text-embeddings-inference's default token budget, in
    # rules/assumptions.yaml): 32 requests of 512 tokens. Saying "batch size 1" would state a value not used.
    answer = _ask(stub, _embedding(0.335, 2000))
    assert answer["provisional"] and "traffic.batch_size" in answer.get("assumed", [])
    assert "batch size 32" in answer["summary"]
    brief = _embedding(0.335, 2000)
    stated = _ask(stub, {**brief, "traffic": {**brief["traffic"], "batch_size": 32}})
    assert _candidate(stated, "l4")["count"] == _candidate(answer, "l4")["count"]


# --- item 5: latency under load (NIM Llama-3.3-70B FP8, 2 x H100 TP2, 5000 in / 500 out) ----------------------

def _nim(concurrency: int, input_tokens: int = 5000, context: int = 5500, p95_ms: float = 0) -> dict[str, Any]:
    # NIM's page does not say its KV cache type; these figures were matched with a 16-bit cache before FP8 weights
    # defaulted to an FP8 cache (issue 23), and the brief now says so: at 25 sessions an FP8 cache reads 4 ms less
    # a step (ITL 30.5 ms against the measured 38.75).
    brief = {"workload": "WORKLOAD_TYPE_REALTIME_INFERENCE",
             "model": {"params_billion": 70.6, "precision": "PRECISION_FP8", "context_tokens": context,
                       "layers": 80, "kv_heads": 8, "head_dim": 128, "hidden_size": 8192,
                       "kv_cache_precision": "PRECISION_BF16"},
             "traffic": {"concurrent_sessions": concurrency, "avg_input_tokens": input_tokens,
                         "avg_output_tokens": 500}}
    if p95_ms:
        brief["latency"] = {"p95_ms": p95_ms}
    return brief


# With memory counted as nvidia-smi reports it (85.52e9 bytes per H100), 70.6 GB of FP8 weights and one 5.5k
# session fit ONE H100; NIM's concurrency-1 figure is its latency profile on TP2. A brief that asks for that
# latency (end to end 10.5 s, 8% above the measured 406.77 + 500 x 18.58 = 9,697 ms) gets TP2 and the figure.
NIM_LATENCY_P95_MS = 10_500


@pytest.mark.parametrize(
    ("concurrency", "itl_ms", "itl_rel", "ttft_ms", "ttft_rel"),
    [(1, 18.58, 0.05, 406.77, 0.10), (5, 21.83, 0.15, 546.7, 0.20), (25, 38.75, 0.20, 688.69, 0.30)],
)
def test_nim_llama33_70b_on_2xh100(stub, concurrency, itl_ms, itl_rel, ttft_ms, ttft_rel):
    brief = _nim(concurrency, p95_ms=NIM_LATENCY_P95_MS if concurrency == 1 else 0)
    perf = _candidate(_ask(stub, brief), "h100-sxm")["performance"]
    assert perf["tensor_parallel"] == 2
    assert _within(perf["itl_ms"], itl_ms, itl_rel), perf
    assert _within(perf["ttft_ms"], ttft_ms, ttft_rel), perf


def test_itl_grows_with_load_and_throughput_follows_the_measurement(stub):
    one, many = (_candidate(_ask(stub, b), "h100-sxm")["performance"]
                 for b in (_nim(1, p95_ms=NIM_LATENCY_P95_MS), _nim(25)))
    assert many["itl_ms"] > 1.5 * one["itl_ms"]  # measured 38.75 / 18.58 = 2.1x
    assert _within(one["tokens_per_second_per_replica"], 51.67, 0.10)
    assert _within(many["tokens_per_second_per_replica"], 623.4, 0.25)


def test_a_126k_prompt_costs_attention_time_beyond_its_linear_share(stub):
    # Both sized at the same 128k context, so on the same GPUs: only the prompt differs.
    short = _candidate(_ask(stub, _nim(1, 5000, 131_072)), "h100-sxm")["performance"]["ttft_ms"]
    long = _candidate(_ask(stub, _nim(1, 126_000, 131_072)), "h100-sxm")["performance"]["ttft_ms"]
    # Linear work alone would be 126k / 5k = 25x; attention (2·L·S²·d at the BF16 rate) makes it ~3x that.
    assert long / short > 2.5 * 126_000 / 5000


# --- item 6: batch throughput includes the input tokens' prefill (TensorRT-LLM, H200 TP1 FP8, Llama 3.3 70B) ----

def _batch(batch: int, input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {"workload": "WORKLOAD_TYPE_BATCH_INFERENCE",
            "model": {"params_billion": 70.6, "precision": "PRECISION_FP8",
                      "context_tokens": input_tokens + output_tokens, "layers": 80, "kv_heads": 8,
                      "head_dim": 128, "hidden_size": 8192},
            "traffic": {"batch_size": batch, "avg_input_tokens": input_tokens, "avg_output_tokens": output_tokens},
            "success_unit": "SUCCESS_UNIT_TOKEN"}


def test_trtllm_llama33_70b_h200_throughput_and_its_input_length_ratio(stub):
    short = _candidate(_ask(stub, _batch(64, 1000, 1000)), "h200")
    long = _candidate(_ask(stub, _batch(24, 5000, 500)), "h200")
    assert short["count"] == 1 and long["count"] == 1
    a, b = short["performance"]["tokens_per_second_per_replica"], long["performance"]["tokens_per_second_per_replica"]
    assert _within(a, 2909, 0.30) and _within(b, 566, 0.30), (a, b)
    # Five times the input per output token costs ~5x per output token (published 2,909 / 566 = 5.1).
    assert _within(a / b, 2909 / 566, 0.15)
    # ... and so does the cost per million output tokens.
    assert short["cost"]["usd_per_unit"] < long["cost"]["usd_per_unit"] / 3


def test_pipeline_stages_add_capacity_not_decode_speed(stub):
    # DeepSeek-R1 FP8 needs 2 nodes of H100 (pipeline stages) but 1 node of H200: a token still waits for all
    # 671 GB to be read at one 8-GPU stage's bandwidth (8 x 3.35 TB/s < 8 x 4.8 TB/s), so H100 is slower per token.
    answer = _ask(stub, _deepseek(61, 671, 37))
    h100, h200 = (_candidate(answer, g)["performance"] for g in ("h100-sxm", "h200"))
    assert h100["nodes"] == 2 and h200["nodes"] == 1
    assert h100["itl_ms"] > h200["itl_ms"]
