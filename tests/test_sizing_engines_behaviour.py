"""decide/sizing/engines.py: which engine a toolchain names and the figures a serving engine reaches on a GPU.
The figures are held against hand-set tables (numbers no two fields share), so each lands in its own field."""

from __future__ import annotations

import pytest

from service.decide.sizing.engines import ENGINE_ALIASES, Efficiency, efficiency, engine_of
from tests.sizing_kit import gpu, rules

ROW = {"decode_bandwidth_use": 0.71, "prefill_mfu": 0.53, "step_floor_ms": 1.5, "token_budget": 4096.7,
       "request_ms": 40.0, "prefill_first": 0.25}
LLAMA = {"decode_bandwidth_use": 0.83, "prefill_mfu": 0.47, "step_floor_ms": 0.2, "token_budget": 2048,
         "request_ms": 0.0, "prefill_first": 0.0}
GENERAL = {"mbu_decode": 0.66, "mfu_prefill": 0.44, "decode_step_floor_ms": 2.5, "serving_max_batched_tokens": 3000,
           "prefill_first": 0.35, "mbu_decode_consumer": 0.52, "reference_matmul_efficiency": 0.8}


def table(**extra):  # noqa: ANN001, ANN201
    return rules(serving_engines={"vllm": ROW, "llama.cpp": LLAMA}, decode_bandwidth_use_by_gpu={"mi300x": 0.44},
                 **{**GENERAL, **extra})


@pytest.mark.parametrize(("toolchain", "engine"), [
    ((), ""),
    (("pytorch",), ""),
    (("vllm",), "vllm"),
    ((" VLLM ",), "vllm"),  # stripped and lowercased
    (("TRT-LLM",), "tensorrt-llm"),
    (("nim",), "tensorrt-llm"),
    (("ollama",), "llama.cpp"),
    (("pytorch", "sglang", "vllm"), "sglang"),  # the first engine named wins; tools that are no engine skipped
    (("vllm", "sglang"), "vllm"),
])
def test_the_engine_a_toolchain_names(toolchain, engine) -> None:  # noqa: ANN001
    assert engine_of(toolchain) == engine


def test_every_alias_names_a_known_engine() -> None:
    for alias, name in ENGINE_ALIASES.items():
        assert engine_of((alias.upper(),)) == name


def test_a_named_engine_gets_its_row() -> None:
    e = efficiency(gpu("h100-sxm", matmul_efficiency=0.8), ("vllm",), table())
    assert e == Efficiency(engine="vllm", named=True, mbu=0.71, mfu=0.53, floor_s=0.0015, budget_tokens=4096,
                           request_s=0.04, prefill_first=0.25)


def test_no_engine_named_gets_the_general_figures_and_no_front_end_time() -> None:
    e = efficiency(gpu("h100-sxm", matmul_efficiency=0.8), ("pytorch",), table())
    assert e == Efficiency(engine="general", named=False, mbu=0.66, mfu=0.44, floor_s=0.0025, budget_tokens=3000,
                           request_s=0.0, prefill_first=0.35)


def test_an_engine_the_table_lacks_gets_the_general_figures() -> None:
    e = efficiency(gpu("h100-sxm", matmul_efficiency=0.8), ("sglang",), table())
    assert (e.engine, e.named, e.mbu, e.request_s) == ("general", False, 0.66, 0.0)


def test_rules_without_an_engine_table_get_the_general_figures() -> None:
    a = rules(table(), serving_engines=None, decode_bandwidth_use_by_gpu=None)
    e = efficiency(gpu("mi300x", matmul_efficiency=0.8), ("vllm",), a)
    assert (e.engine, e.named, e.mbu, e.mfu) == ("general", False, 0.66, 0.44)


def test_a_gpu_measured_for_its_family_beats_the_engine_figure() -> None:
    a = table()
    assert efficiency(gpu("mi300x", matmul_efficiency=0.8), ("vllm",), a).mbu == 0.44
    assert efficiency(gpu("mi300x", matmul_efficiency=0.8), (), a).mbu == 0.44
    # ... also on a consumer card, whose own figure it beats
    assert efficiency(gpu("mi300x", gpu_class="consumer", matmul_efficiency=0.8), ("vllm",), a).mbu == 0.44


def test_a_consumer_card_decodes_at_the_consumer_figure_unless_llama_cpp_runs_it() -> None:
    a = table()
    card = gpu("rtx-5090", matmul_efficiency=0.8)
    assert card.gpu_class == "consumer"
    assert efficiency(card, ("vllm",), a).mbu == 0.52
    assert efficiency(card, (), a).mbu == 0.52
    assert efficiency(card, ("llama.cpp",), a).mbu == 0.83
    assert efficiency(gpu("rtx-5090", gpu_class="workstation", matmul_efficiency=0.8), ("vllm",), a).mbu == 0.71


def test_prefill_compute_scales_with_the_gpus_matmul_efficiency_against_the_reference() -> None:
    a = table()
    assert efficiency(gpu("h100-sxm", matmul_efficiency=0.6), ("vllm",), a).mfu == pytest.approx(0.53 * 0.6 / 0.8)
    assert efficiency(gpu("h100-sxm", matmul_efficiency=0.9), (), a).mfu == pytest.approx(0.44 * 0.9 / 0.8)
    # a GPU with no measured matmul efficiency is taken at the reference's
    assert efficiency(gpu("h100-sxm", matmul_efficiency=0.0), ("vllm",), a).mfu == pytest.approx(0.53)


def test_the_step_budget_is_whole_tokens_and_at_least_one() -> None:
    a = table(serving_max_batched_tokens=0.4)
    assert efficiency(gpu(), (), a).budget_tokens == 1
    assert efficiency(gpu(), (), table(serving_max_batched_tokens=2.9)).budget_tokens == 2
    assert efficiency(gpu(), (), table(serving_max_batched_tokens=1)).budget_tokens == 1


@pytest.mark.parametrize(("first", "kept"), [(-0.5, 0.0), (0.0, 0.0), (0.4, 0.4), (1.0, 1.0), (1.7, 1.0)])
def test_the_share_of_prefill_run_first_is_a_fraction(first, kept) -> None:  # noqa: ANN001
    assert efficiency(gpu(), (), table(prefill_first=first)).prefill_first == kept
    row = dict(ROW, prefill_first=first)
    a = rules(table(), serving_engines={"vllm": row})
    assert efficiency(gpu(), ("vllm",), a).prefill_first == kept


def test_a_rows_prefill_launch_time_per_layer_is_read_in_seconds() -> None:
    e = efficiency(gpu("h100-sxm", matmul_efficiency=0.8), ("vllm",),
                   rules(serving_engines={"vllm": {**ROW, "prefill_layer_ms": 0.7}}, **GENERAL))
    assert e.prefill_layer_s == pytest.approx(0.0007, rel=1e-12)
    # a row without it launches for free, as does an engine the table does not name
    assert efficiency(gpu("h100-sxm", matmul_efficiency=0.8), ("vllm",), table()).prefill_layer_s == 0.0
    assert efficiency(gpu("h100-sxm", matmul_efficiency=0.8), ("pytorch",), table()).prefill_layer_s == 0.0


def test_a_measured_matmul_share_for_a_gpu_beats_the_catalogs() -> None:
    measured = {"prefill_matmul_efficiency_by_gpu": {"a100-80gb": 0.9}}
    # the A100's measured 0.9 against the reference 0.8 scales the row's 0.53 by 9/8, whatever the catalog says
    e = efficiency(gpu("a100-80gb", matmul_efficiency=0.6), ("vllm",), table(**measured))
    assert e.mfu == pytest.approx(0.53 * 0.9 / 0.8, rel=1e-12)
    # another GPU keeps its catalog share (0.6 / 0.8), and a table without the key changes nothing
    other = efficiency(gpu("h100-sxm", matmul_efficiency=0.6), ("vllm",), table(**measured))
    assert other.mfu == pytest.approx(0.53 * 0.6 / 0.8, rel=1e-12)
    plain = efficiency(gpu("a100-80gb", matmul_efficiency=0.6), ("vllm",), table(prefill_matmul_efficiency_by_gpu=None))
    assert plain.mfu == pytest.approx(0.53 * 0.6 / 0.8, rel=1e-12)
