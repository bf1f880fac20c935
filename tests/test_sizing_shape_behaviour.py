"""decide/sizing/shape.py: what a brief implies about the model and the traffic, each default it had to assume
named, and no default named that the workload never reads. Worked by hand against rules with numbers no two
fields share (a 3,000-token default context, a 700-token embedding record)."""

from __future__ import annotations

import pytest

from service.decide.sizing.shape import INFERENCE_WORKLOADS, shape_of, weight_bytes_per_param
from service.domain.brief import Brief, Model, Traffic, Training
from service.physics import compute, serving
from service.physics import memory as mem
from tests.sizing_kit import A, brief, rules

R = rules(default_context_tokens=3000, embedding_default_input_tokens=700, kv_cache_bytes=2.5,
          kv_cache_bytes_by_precision={"BF16": 2.0, "FP8": 1.0, "FP16": 1.75, "INT4": 0.5},
          kv_cache_precision_by_engine={"tensorrt-llm": {"FP8": "FP8", "INT4": "FP8"}, "none": {"INT8": "FP16"}},
          qlora_bytes_per_param=0.52)
TRAFFIC = ("traffic.avg_input_tokens", "traffic.avg_output_tokens")


def shape(workload: str = "REALTIME_INFERENCE", r=R, arch=None, toolchain=(), **model):  # noqa: ANN001, ANN003, ANN201
    traffic = model.pop("traffic", {})
    model.setdefault("params_billion", 8)
    model.setdefault("precision", "BF16")
    s = shape_of(brief(workload, toolchain=toolchain, model=model, traffic=traffic), r, arch)
    assert s is not None
    return s


@pytest.mark.parametrize("params", [0.0, -1.0])
def test_no_model_size_no_shape(params) -> None:  # noqa: ANN001
    assert shape_of(brief(model={"params_billion": params}), R) is None


def test_a_tiny_model_has_a_shape() -> None:
    assert shape(params_billion=0.001).params_billion == 0.001


def test_an_unset_precision_is_bf16_and_named() -> None:
    s = shape(precision="UNSPECIFIED", context_tokens=2000, traffic={"avg_input_tokens": 10, "avg_output_tokens": 5,
                                                                     "concurrent_sessions": 3})
    assert (s.precision, s.defaults_used) == ("BF16", ("model.precision",))
    assert s.bytes_per_param == A.bytes_per_param("BF16")
    given = shape(precision="FP16", context_tokens=2000, traffic={"avg_input_tokens": 10, "avg_output_tokens": 5,
                                                                  "concurrent_sessions": 3})
    assert (given.precision, given.defaults_used, given.bytes_per_param) == ("FP16", (), A.bytes_per_param("FP16"))


def test_an_architecture_given_is_used_as_it_is() -> None:
    arch = mem.Architecture(layers=3, kv_heads=1, head_dim=4, hidden_size=5, attention_heads=6, vocab_size=7,
                            exact=True)
    assert shape(arch=arch).arch is arch


def test_the_architecture_is_resolved_from_the_model_and_the_bands() -> None:
    s = shape(params_billion=8, layers=30, kv_heads=4, head_dim=128, hidden_size=4096, sliding_window_tokens=1024,
              sliding_window_layers=1)
    assert (s.arch.layers, s.arch.kv_heads, s.arch.head_dim, s.arch.window, s.arch.window_layers) == (
        30, 4, 128, 1024, 1)
    assert not s.window_layers_unknown
    # a window without the layers that use it: sized as though no layer used it, and said
    s = shape(params_billion=8, sliding_window_tokens=1024)
    assert (s.arch.window, s.arch.window_layers, s.window_layers_unknown) == (1024, 0, True)
    assert s.arch.windowed_layers == 0
    assert not shape(params_billion=8).window_layers_unknown


def test_an_mla_model_without_its_widths_takes_the_rules_defaults() -> None:
    r = rules(R, mla_kv_lora_rank=300, mla_rope_head_dim=30)
    s = shape(r=r, params_billion=8, attention="MLA", layers=10)
    assert (s.arch.kind, s.arch.kv_latent) == ("MLA", 330)


def test_no_context_takes_the_rules_default_and_says_so() -> None:
    s = shape(traffic={"avg_input_tokens": 100, "avg_output_tokens": 50, "concurrent_sessions": 2})
    assert s.tokens_per_sequence == 3000
    assert s.defaults_used == ("model.context_tokens",)


def test_memory_is_sized_at_the_p95_prompt_and_the_output_within_the_context() -> None:
    t = {"avg_input_tokens": 100, "avg_output_tokens": 50, "concurrent_sessions": 2}
    assert shape(context_tokens=2000, traffic={**t, "p95_input_tokens": 900}).tokens_per_sequence == 950
    assert shape(context_tokens=2000, traffic={**t, "p95_input_tokens": 1950}).tokens_per_sequence == 2000
    assert shape(context_tokens=2000, traffic={**t, "p95_input_tokens": 1951}).tokens_per_sequence == 2000
    assert shape(context_tokens=2000, traffic={**t, "p95_input_tokens": 1949}).tokens_per_sequence == 1999
    # no context given: the p95 prompt and output, past the default context
    assert shape(traffic={**t, "p95_input_tokens": 3500}).tokens_per_sequence == 3550
    assert shape(context_tokens=2000, traffic=t).tokens_per_sequence == 2000  # no p95: the whole context


def test_the_p95_prompt_with_no_output_given_adds_the_default_output() -> None:
    s = shape(context_tokens=4000, traffic={"avg_input_tokens": 100, "p95_input_tokens": 900, "concurrent_sessions": 2})
    assert s.output_tokens == 512 and s.tokens_per_sequence == 900  # the brief's output (none) is what is added
    assert s.defaults_used == ("traffic.avg_output_tokens",)


def test_default_prompt_and_output_lengths_worked_by_hand() -> None:
    s = shape(context_tokens=3001, traffic={"concurrent_sessions": 2})
    # output: a quarter of the context, at most 512; prompt: half the context
    assert (s.input_tokens, s.output_tokens) == (1500, 512)
    assert s.defaults_used == TRAFFIC
    s = shape(context_tokens=1003, traffic={"concurrent_sessions": 2})
    assert (s.input_tokens, s.output_tokens) == (501, 250)
    s = shape(context_tokens=2048, traffic={"concurrent_sessions": 2})
    assert (s.input_tokens, s.output_tokens) == (1024, 512)
    s = shape(context_tokens=2052, traffic={"concurrent_sessions": 2})
    assert s.output_tokens == 512
    s = shape(context_tokens=2, traffic={"concurrent_sessions": 2})  # never below one token each
    assert (s.input_tokens, s.output_tokens) == (1, 1)
    s = shape(context_tokens=3, traffic={"concurrent_sessions": 2})
    assert (s.input_tokens, s.output_tokens) == (1, 1)


def test_a_default_prompt_leaves_room_for_the_output_given() -> None:
    t = {"avg_output_tokens": 700, "concurrent_sessions": 2}
    s = shape(context_tokens=1001, traffic=t)
    assert (s.input_tokens, s.output_tokens, s.defaults_used) == (301, 700, ("traffic.avg_input_tokens",))
    assert shape(context_tokens=4001, traffic=t).input_tokens == 2000  # half the context when that leaves room
    assert shape(context_tokens=700, traffic=t).input_tokens == 1  # no room: one token
    assert shape(context_tokens=1400, traffic=t).input_tokens == 700


def test_an_embedding_without_a_length_is_one_record_of_the_rules_length() -> None:
    s = shape("EMBEDDING", context_tokens=2000, traffic={"batch_size": 4})
    assert (s.input_tokens, s.defaults_used) == (700, ("traffic.avg_input_tokens",))  # no output default named
    assert shape("EMBEDDING", context_tokens=500, traffic={"batch_size": 4}).input_tokens == 500
    assert shape("EMBEDDING", r=rules(R, embedding_default_input_tokens=0), context_tokens=500,
                 traffic={"batch_size": 4}).input_tokens == 1
    assert shape("EMBEDDING", context_tokens=500, traffic={"batch_size": 4, "avg_input_tokens": 9}).input_tokens == 9


def test_the_average_context_read_per_step() -> None:
    t = {"avg_input_tokens": 1000, "avg_output_tokens": 301, "concurrent_sessions": 2}
    assert shape(context_tokens=4000, traffic=t).avg_tokens_per_sequence == 1150  # prompt + half the output
    assert shape(context_tokens=1100, traffic=t).avg_tokens_per_sequence == 1100  # never past the sized context


@pytest.mark.parametrize(("workload", "sessions", "batch", "seqs", "named"), [
    ("REALTIME_INFERENCE", 5, 7, 5, ()),
    ("REALTIME_INFERENCE", 0, 7, 7, ()),
    ("REALTIME_INFERENCE", 0, 0, 1, ("traffic.concurrent_sessions",)),
    ("BATCH_INFERENCE", 5, 7, 7, ()),
    ("BATCH_INFERENCE", 5, 0, 5, ()),
    ("BATCH_INFERENCE", 0, 0, 1, ("traffic.batch_size",)),
    ("EVALUATION", 0, 0, 1, ("traffic.batch_size",)),
    ("BATCH_INFERENCE", -3, 0, 1, ("traffic.batch_size",)),
])
def test_sequences_per_replica(workload, sessions, batch, seqs, named) -> None:  # noqa: ANN001
    s = shape(workload, context_tokens=2000, traffic={"avg_input_tokens": 10, "avg_output_tokens": 5,
                                                      "concurrent_sessions": sessions, "batch_size": batch})
    assert (s.sequences, s.defaults_used) == (seqs, named)


def _training(workload: str, r=R, **training) -> Brief:  # noqa: ANN001, ANN003
    return Brief(workload=workload, model=Model(params_billion=8, precision="BF16"), training=Training(**training),
                 traffic=Traffic(batch_size=training.pop("batch", 0)) if "batch" in training else Traffic())


def test_pretraining_without_a_batch_names_the_global_batch() -> None:
    b = Brief(workload="PRETRAINING", model=Model(params_billion=8, precision="BF16", context_tokens=2000))
    s = shape_of(b, R)
    assert s is not None and s.defaults_used == ("training.global_batch_tokens",)
    for given in (Brief(workload="PRETRAINING", model=b.model, training=Training(global_batch_tokens=1)),
                  Brief(workload="PRETRAINING", model=b.model, traffic=Traffic(batch_size=1))):
        s = shape_of(given, R)
        assert s is not None and s.defaults_used == ()
    s = shape_of(Brief(workload="FULL_FINETUNE", model=b.model), R)
    assert s is not None and s.defaults_used == ("traffic.batch_size",)  # fine-tuning's batch is the traffic's


@pytest.mark.parametrize(("workload", "named"), [
    ("PRETRAINING", ("model.precision", "model.context_tokens", "training.global_batch_tokens")),
    ("FULL_FINETUNE", ("model.precision", "model.context_tokens", "traffic.batch_size")),
    ("ADAPTER_FINETUNE", ("model.precision", "model.context_tokens", "traffic.batch_size")),
    ("EMBEDDING", ("model.precision", "model.context_tokens", "traffic.avg_input_tokens", "traffic.batch_size")),
    ("MEDIA_GENERATION", ("model.precision",)),
    ("BATCH_INFERENCE", ("model.precision", "model.context_tokens", *TRAFFIC, "traffic.batch_size")),
    ("REALTIME_INFERENCE", ("model.precision", "model.context_tokens", *TRAFFIC, "traffic.concurrent_sessions")),
])
def test_defaults_the_workload_never_reads_are_not_named(workload, named) -> None:  # noqa: ANN001
    s = shape_of(Brief(workload=workload, model=Model(params_billion=8)), R)
    assert s is not None and s.defaults_used == named
    # narrow weights with no engine named: work that keeps a KV cache names its type too
    s = shape_of(Brief(workload=workload, model=Model(params_billion=8, precision="INT8")), R)
    assert s is not None
    kv = ("model.kv_cache_precision",) if workload in ("BATCH_INFERENCE", "REALTIME_INFERENCE") else ()
    assert s.defaults_used == (*named[1:], *kv)


def test_the_kv_cache_follows_the_engines_default_for_the_weights() -> None:
    t = {"avg_input_tokens": 10, "avg_output_tokens": 5, "concurrent_sessions": 2}
    s = shape(precision="FP8", toolchain=("trtllm",), context_tokens=100, traffic=t)
    assert (s.kv_precision, s.kv_bytes, s.kv_engine, s.kv_precision_open, s.kv_precision_default) == (
        "FP8", 1.0, "tensorrt-llm", False, True)
    # an engine that keeps the activations' type: 16-bit weights keep theirs, narrower ones BF16
    s = shape(precision="FP16", toolchain=("vllm",), context_tokens=100, traffic=t)
    assert (s.kv_precision, s.kv_bytes, s.kv_engine, s.kv_precision_open) == ("FP16", 1.75, "vllm", False)
    s = shape(precision="INT4", toolchain=("vllm",), context_tokens=100, traffic=t)
    assert (s.kv_precision, s.kv_bytes, s.kv_precision_open, s.defaults_used) == ("BF16", 2.0, False, ())
    s = shape(precision="INT4", toolchain=("tensorrt-llm",), context_tokens=100, traffic=t)
    assert (s.kv_precision, s.kv_bytes) == ("FP8", 1.0)


def test_no_engine_named_reads_the_none_row_and_asks_when_the_weights_are_narrow() -> None:
    t = {"avg_input_tokens": 10, "avg_output_tokens": 5, "concurrent_sessions": 2}
    s = shape(precision="INT8", context_tokens=100, traffic=t)
    assert (s.kv_precision, s.kv_bytes, s.kv_engine, s.kv_precision_open) == ("FP16", 1.75, "", True)
    assert s.defaults_used == ("model.kv_cache_precision",)
    s = shape(precision="FP8", context_tokens=100, traffic=t)
    assert (s.kv_precision, s.kv_bytes, s.kv_precision_open, s.defaults_used) == (
        "BF16", 2.0, True, ("model.kv_cache_precision",))
    for wide in ("BF16", "FP16", "FP32"):  # 16-bit or wider weights: their own type, nothing to ask
        s = shape(precision=wide, context_tokens=100, traffic=t)
        assert (s.kv_precision, s.kv_precision_open, s.defaults_used) == (wide, False, ())
    # unset weights are taken as BF16 and the KV cache as theirs, but the weights are not known: asked, not noted
    s = shape(precision="UNSPECIFIED", context_tokens=100, traffic=t)
    assert (s.kv_precision, s.kv_precision_open, s.defaults_used) == ("BF16", True, ("model.precision",))
    s = shape("EMBEDDING", precision="FP8", context_tokens=100, traffic=t)
    assert not s.kv_precision_open


def test_rules_without_an_engine_table_keep_the_activations_type() -> None:
    r = rules(R, kv_cache_precision_by_engine=None)
    t = {"avg_input_tokens": 10, "avg_output_tokens": 5, "concurrent_sessions": 2}
    s = shape(r=r, precision="FP8", toolchain=("tensorrt-llm",), context_tokens=100, traffic=t)
    assert s.kv_precision == "BF16"
    assert shape(r=r, precision="FP16", context_tokens=100, traffic=t).kv_precision == "FP16"
    r = rules(R, kv_cache_precision_by_engine={"none": None})
    assert shape(r=r, precision="FP8", context_tokens=100, traffic=t).kv_precision == "BF16"


def test_a_kv_precision_given_is_kept_and_its_bytes_read() -> None:
    t = {"avg_input_tokens": 10, "avg_output_tokens": 5, "concurrent_sessions": 2}
    s = shape(precision="FP8", kv_cache_precision="INT4", toolchain=("tensorrt-llm",), context_tokens=100, traffic=t)
    assert (s.kv_precision, s.kv_bytes, s.kv_engine, s.kv_precision_default, s.kv_precision_open) == (
        "INT4", 0.5, "", False, False)
    # a precision the table lacks: the rules' plain figure
    s = shape(precision="FP8", kv_cache_precision="INT8", context_tokens=100, traffic=t)
    assert (s.kv_precision, s.kv_bytes) == ("INT8", 2.5)
    assert shape(r=rules(R, kv_cache_bytes_by_precision=None), precision="BF16", context_tokens=100,
                 traffic=t).kv_bytes == 2.5


def test_active_parameters_and_routing() -> None:
    assert shape(params_billion=8, active_params_billion=2).active_params_billion == 2
    assert shape(params_billion=8, active_params_billion=8).active_params_billion == 8
    assert shape(params_billion=8, active_params_billion=9).active_params_billion == 8  # more than total: ignored
    assert shape(params_billion=8, active_params_billion=0).active_params_billion == 8
    assert shape(params_billion=8, active_params_billion=-1).active_params_billion == 8
    s = shape(params_billion=100, active_params_billion=10, experts=64, experts_per_token=4)
    assert (s.experts, s.experts_per_token, s.routed, s.moe_estimated, s.shared_estimated) == (64, 4, True, False, True)
    assert s.shared_params_billion == compute.moe_shared_params_billion(100, 10, 64, 4)
    s = shape(params_billion=100, active_params_billion=10, experts=64, experts_per_token=64)
    assert (s.experts, s.experts_per_token) == (64, 64)
    s = shape(params_billion=100, active_params_billion=10, experts=64, experts_per_token=65)  # top-k past E
    assert (s.experts, s.experts_per_token, s.routed, s.moe_estimated) == (0, 0, False, True)
    s = shape(params_billion=100, active_params_billion=10, experts=64, experts_per_token=0)
    assert (s.experts, s.experts_per_token, s.moe_estimated) == (0, 0, True)
    s = shape(params_billion=100, experts=64, experts_per_token=4)  # no active count: routed, nothing estimated
    assert (s.moe_estimated, s.routed) == (False, True)
    assert not shape(params_billion=100).moe_estimated


@pytest.mark.parametrize(("given", "shared", "estimated"), [(5.0, 5.0, False), (100.0, 100.0, False),
                                                            (101.0, None, True), (0.0, None, True), (-1.0, None, True)])
def test_shared_parameters_given_or_estimated(given, shared, estimated) -> None:  # noqa: ANN001
    s = shape(params_billion=100, active_params_billion=10, experts=64, experts_per_token=4,
              shared_params_billion=given)
    want = compute.moe_shared_params_billion(100, 10, 64, 4) if shared is None else shared
    assert (s.shared_params_billion, s.shared_estimated) == (want, estimated)
    dense = shape(params_billion=100, shared_params_billion=given)
    assert (dense.shared_params_billion, dense.shared_estimated) == (0.0, False)


def test_parameters_a_step_reads() -> None:
    dense = shape(params_billion=70)
    assert dense.params_read_billion(1) == dense.params_read_billion(1000) == 70
    routed = shape(params_billion=100, active_params_billion=10, experts=64, experts_per_token=4,
                   shared_params_billion=5)
    for tokens in (1, 3, 50):
        assert routed.params_read_billion(tokens) == compute.moe_params_read_billion(100, 5, 64, 4, tokens)
    assert routed.params_read_billion(1) < routed.params_read_billion(50) < 100
    unknown = shape(params_billion=100, active_params_billion=10)
    for tokens in (1, 3, 50):
        assert unknown.params_read_billion(tokens) == pytest.approx(
            100 * serving.moe_read_fraction_unknown_experts(10, 100, tokens))
    assert unknown.params_read_billion(1) == pytest.approx(10)


def test_qlora_reads_nf4_bytes_only_for_a_4_bit_adapter_base() -> None:
    assert weight_bytes_per_param("ADAPTER_FINETUNE", "INT4", R) == 0.52
    assert weight_bytes_per_param("ADAPTER_FINETUNE", "FP8", R) == A.bytes_per_param("FP8")
    assert weight_bytes_per_param("FULL_FINETUNE", "INT4", R) == A.bytes_per_param("INT4")
    s = shape_of(Brief(workload="ADAPTER_FINETUNE", model=Model(params_billion=8, precision="INT4")), R)
    assert s is not None and s.bytes_per_param == 0.52


def test_the_inference_workloads() -> None:
    assert set(INFERENCE_WORKLOADS) == {"BATCH_INFERENCE", "REALTIME_INFERENCE", "EMBEDDING", "EVALUATION", "NOTEBOOK"}


def test_a_shape_given_in_full_is_read_field_by_field() -> None:
    s = shape(params_billion=8, layers=30, kv_heads=4, head_dim=128, hidden_size=5000)
    assert (s.arch.layers, s.arch.kv_heads, s.arch.head_dim, s.arch.hidden_size) == (30, 4, 128, 5000)
    s = shape(params_billion=8, attention="MLA", layers=10, kv_lora_rank=200, rope_head_dim=20)
    assert (s.arch.kind, s.arch.kv_latent) == ("MLA", 220)


def test_a_negative_window_layer_count_windows_no_layer() -> None:
    s = shape(params_billion=8, sliding_window_tokens=1024, sliding_window_layers=-1)
    assert (s.arch.window_layers, s.window_layers_unknown) == (0, True)


def test_one_of_everything_is_one_not_a_default() -> None:
    # each length, count and size at 1: given, so kept and not named as assumed
    s = shape(context_tokens=1, traffic={"avg_input_tokens": 1, "avg_output_tokens": 1, "concurrent_sessions": 1})
    assert (s.tokens_per_sequence, s.input_tokens, s.output_tokens, s.sequences, s.defaults_used) == (1, 1, 1, 1, ())
    s = shape(context_tokens=1, traffic={"avg_input_tokens": 1, "avg_output_tokens": 1, "concurrent_sessions": 1,
                                         "p95_input_tokens": 5})
    assert s.tokens_per_sequence == 1  # within the context given
    s = shape(context_tokens=100, traffic={"avg_input_tokens": 1, "avg_output_tokens": 3, "concurrent_sessions": 1,
                                           "p95_input_tokens": 1})
    assert s.tokens_per_sequence == 4  # the p95 prompt of one token and the output
    s = shape("EMBEDDING", context_tokens=100, traffic={"avg_input_tokens": 1, "batch_size": 1})
    assert (s.input_tokens, s.defaults_used) == (1, ())
    assert shape(params_billion=8, active_params_billion=0.5).active_params_billion == 0.5
    s = shape(params_billion=8, experts=8, experts_per_token=1)
    assert (s.experts, s.experts_per_token, s.routed) == (8, 1, True)
    s = shape(params_billion=8, active_params_billion=2, experts=8, experts_per_token=2, shared_params_billion=0.5)
    assert (s.shared_params_billion, s.shared_estimated) == (0.5, False)
    assert shape(params_billion=8, sliding_window_tokens=1).window_layers_unknown
