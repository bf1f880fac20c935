"""Each memory term from first principles, and the model-size bands on both sides of every boundary (issue 42):
what rules/accuracy/results.yaml's byte-for-byte comparison alone used to catch (a term dropped or scaled, a
band boundary moved) fails here with the term named. GB = 1e9 bytes, as physics/memory.py says."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.decide import tables
from service.decide.sizing.per_gpu import size_all
from service.decide.sizing.shape import shape_of
from service.domain.brief import Brief, Model, Traffic
from service.physics import memory as mem
from service.rulebook.version import Bundle
from tests.conftest import TODAY as DAY
from tests.test_formulas import BANDS

_ARCH = mem.Architecture(layers=32, kv_heads=8, head_dim=128, hidden_size=4096, attention_heads=32,
                         vocab_size=128256, exact=True)


def test_full_recompute_keeps_each_layers_input_and_one_layers_working_set():
    # Korthikanti et al. 2022: full recompute saves 2 bytes x s x b x h per layer (the 16-bit layer input) and
    # holds one layer's 34 x s x b x h while it is recomputed. s 2048, b 1, h 4096, 32 layers:
    # 32 x 2 x 8,388,608 = 536,870,912 B saved + 34 x 8,388,608 = 285,212,672 B working = 0.822083584 GB.
    assert mem.activation_gb(2048, 1, 4096, 32, 32, "full") == pytest.approx(0.822083584, rel=1e-12)
    # One more layer adds only its saved input; the working set is one layer's whatever the depth.
    sbh = 2048 * 1 * 4096
    assert (mem.activation_gb(2048, 1, 4096, 33, 32, "full") - mem.activation_gb(2048, 1, 4096, 32, 32, "full")
            ) == pytest.approx(2 * sbh / 1e9, rel=1e-9)
    assert mem.activation_gb(2048, 1, 4096, 0, 32, "full") == pytest.approx(34 * sbh / 1e9, rel=1e-12)


def test_selective_and_no_recompute_are_per_layer_and_split_by_tensor_parallelism():
    s, b, h, a, layers = 1024, 2, 4096, 32, 10
    sbh = s * b * h
    assert mem.activation_gb(s, b, h, layers, a, "selective") == pytest.approx(layers * sbh * 34 / 1e9, rel=1e-12)
    assert mem.activation_gb(s, b, h, layers, a, "none") == pytest.approx(
        layers * sbh * (34 + 5 * a * s / h) / 1e9, rel=1e-12)
    for recompute in ("none", "selective", "full"):
        one = mem.activation_gb(s, b, h, layers, a, recompute)
        assert mem.activation_gb(s, b, h, layers, a, recompute, tensor_parallel=4) == pytest.approx(one / 4)


def test_logits_are_four_bytes_per_vocabulary_entry_per_token():
    # fp32 logits for the loss: 4 x 2 sequences x 1,024 tokens x 128,256 entries = 1,050,673,152 B.
    assert mem.logits_gb(1024, 2, 128256) == pytest.approx(1.050673152, rel=1e-12)


def test_the_sampler_holds_its_bytes_per_vocabulary_entry_for_every_running_sequence_unsplit():
    # No step tokens: only the sampler's copies, 64 sequences x 128,256 entries x 12 B = 98,500,608 B on each GPU
    # (each tensor-parallel rank samples the whole vocabulary).
    for tp in (1, 2, 8):
        assert mem.serving_activation_gb(0, 64, 4096, 128256, 40.0, 12.0, tp) == pytest.approx(0.098500608)
    # The forward's share is split: 8,192 tokens x 4,096 hidden x 40 B = 1,342,177,280 B, over TP 4.
    forward = mem.serving_activation_gb(8192, 0, 4096, 128256, 40.0, 12.0, 4)
    assert forward == pytest.approx(1.34217728 / 4)
    both = mem.serving_activation_gb(8192, 64, 4096, 128256, 40.0, 12.0, 4)
    assert both == pytest.approx(forward + 0.098500608)


def test_a_copy_over_tp_gpus_holds_the_per_gpu_workspace_and_engine_on_each():
    one = mem.inference_memory(8, 2.0, _ARCH, 4096, 4, 2.0, activation_peak_gb=1.5, engine_overhead_gb=2.0)
    four = mem.inference_memory(8, 2.0, _ARCH, 4096, 4, 2.0, activation_peak_gb=1.5, engine_overhead_gb=2.0,
                                tensor_parallel=4)
    assert dict(one.components)["activations"] == 1.5 and dict(four.components)["activations"] == 6.0
    assert dict(one.components)["engine"] == 2.0 and dict(four.components)["engine"] == 8.0
    assert dict(four.components)["weights"] == dict(one.components)["weights"] == 16.0  # sharded, summed
    # KV: 2 x 32 layers x 8 heads x 128 x 2 B = 131,072 B per token; x 4,096 tokens x 4 sequences.
    assert dict(one.components)["kv_cache"] == pytest.approx(131072 * 4096 * 4 / 1e9)


def test_lora_adapter_states_are_sixteen_bytes_per_trainable_parameter():
    # r x 2h per targeted h x h projection: 32 layers x 4 targets x 16 x 2 x 4,096 = 16,777,216 parameters,
    # AdamW mixed precision 16 B each (2 weights + 2 gradients + 12 fp32 master and moments) = 268,435,456 B.
    assert mem.lora_trainable_params_billion(_ARCH, 16, 4) == pytest.approx(0.016777216)
    got = dict(mem.adapter_training_memory(8, 0.5, _ARCH, 1024, 1, 16, 4, "full", 1.0).components)
    assert got["adapter_states"] == pytest.approx(0.268435456, rel=1e-12)
    assert got["weights"] == pytest.approx(4.0)  # the frozen base at 0.5 B/param
    assert got["logits"] == pytest.approx(mem.logits_gb(1024, 1, 128256))
    assert got["activations"] == pytest.approx(mem.activation_gb(1024, 1, 4096, 32, 32, "full"))
    assert got["engine"] == 1.0


def test_full_training_states_are_sixteen_bytes_per_parameter_with_adamw():
    got = dict(mem.full_training_memory(1.0, _ARCH, 2048, 1, 16.0, "full", 1.5, gpus=4).components)
    assert (got["weights"], got["gradients"], got["optimizer"]) == (2.0, 2.0, 12.0)
    assert got["engine"] == 6.0  # per GPU
    assert got["logits"] == pytest.approx(4 * 2048 * 128256 / 1e9)


def test_full_recompute_scales_with_the_batch_in_both_terms():
    # b = 3: 32 x 2 x (2048 x 3 x 4096) saved + 34 x (2048 x 3 x 4096) working = 3 x 0.822083584 GB
    assert mem.activation_gb(2048, 3, 4096, 32, 32, "full") == pytest.approx(3 * 0.822083584, rel=1e-12)


def test_no_attention_heads_counts_as_one_in_the_attention_term():
    # a = max(1, heads): the 5 x a x s / h term with a = 1 (s 1024, h 4096: 34 + 1.25 per s x b x h)
    s, b, h = 1024, 1, 4096
    want = 2 * s * b * h * (34 + 5 * 1 * s / h) / 1e9
    assert mem.activation_gb(s, b, h, 2, 0, "none") == mem.activation_gb(s, b, h, 2, 1, "none") == pytest.approx(want)


def test_an_unknown_recompute_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^recompute must be none, selective or full, got 'partial'$"):
        mem.activation_gb(1024, 1, 4096, 2, 32, "partial")


@pytest.mark.parametrize("bad", [-1, float("nan")])
@pytest.mark.parametrize(("name", "call"), [
    ("seq_len", lambda v: mem.activation_gb(v, 1, 4096, 2, 32, "full")),
    ("batch", lambda v: mem.activation_gb(1024, v, 4096, 2, 32, "full")),
    ("hidden", lambda v: mem.activation_gb(1024, 1, v, 2, 32, "full")),
    ("layers", lambda v: mem.activation_gb(1024, 1, 4096, v, 32, "full")),
    ("seq_len", lambda v: mem.logits_gb(v, 1, 1000)),
    ("batch", lambda v: mem.logits_gb(1024, v, 1000)),
    ("vocab_size", lambda v: mem.logits_gb(1024, 1, v)),
    ("step_tokens", lambda v: mem.serving_activation_gb(v, 1, 4096, 1000, 40.0, 12.0)),
    ("sequences", lambda v: mem.serving_activation_gb(1, v, 4096, 1000, 40.0, 12.0)),
    ("hidden", lambda v: mem.serving_activation_gb(1, 1, v, 1000, 40.0, 12.0)),
    ("vocab_size", lambda v: mem.serving_activation_gb(1, 1, 4096, v, 40.0, 12.0)),
    ("params_billion", lambda v: mem.weights_gb(v, 2.0)),
    ("bytes_per_param", lambda v: mem.weights_gb(8, v)),
    ("tokens_per_sequence", lambda v: mem.kv_cache_gb(_ARCH, v, 1)),
    ("sequences", lambda v: mem.kv_cache_gb(_ARCH, 1024, v)),
    ("kv_bytes", lambda v: mem.kv_cache_gb(_ARCH, 1024, 1, v)),
])
def test_a_negative_or_missing_size_is_refused_by_name(name: str, call, bad: float):  # noqa: ANN001
    with pytest.raises(ValueError, match=rf"^{name} must be a non-negative number, got {re.escape(repr(bad))}$"):
        call(bad)


def test_a_layer_with_a_window_keeps_at_most_the_window_and_the_others_every_token():
    # Gemma 3 27B: 62 layers, 52 at a 1,024-token window. 8,192 tokens: 10 x 8,192 + 52 x 1,024 = 135,168
    # layer-tokens; 512 tokens (inside the window): 62 x 512 = 31,744.
    gemma = mem.Architecture(62, 16, 128, 5376, 32, 262144, True, window=1024, window_layers=52)
    assert mem.cached_layer_tokens(gemma, 8192) == 135_168
    assert mem.cached_layer_tokens(gemma, 512) == 31_744


def test_one_kv_head_is_not_split_and_not_doubled_by_default():
    # MQA (Falcon-7B): 2 x 32 layers x 1 head x 64 x 2 B = 8,192 B per token, x 1,000 tokens = 8,192,000 B on
    # one GPU (no TP given); over TP 2 each GPU keeps the one head: twice that in all.
    falcon = mem.Architecture(32, 1, 64, 4544, 71, 65024, True, kind="MQA")
    assert mem.kv_cache_gb(falcon, 1000, 1) == pytest.approx(0.008192, rel=1e-12)
    assert mem.kv_cache_gb(falcon, 1000, 1, tensor_parallel=1) == pytest.approx(0.008192, rel=1e-12)
    assert mem.kv_cache_gb(falcon, 1000, 1, tensor_parallel=2) == pytest.approx(0.016384, rel=1e-12)


def test_an_mla_cache_is_one_latent_per_layer_and_token():
    # DeepSeek-V3: 61 layers x (512 + 64) latent x 2 B = 70,272 B per token; 4,096 tokens x 8 sequences =
    # 2,302,672,896 B; at 1 B per element, half.
    v3 = mem.Architecture(61, 1, 128, 7168, 128, 129280, True, kind="MLA", kv_latent=576)
    assert mem.kv_cache_gb(v3, 4096, 8) == pytest.approx(2.302672896, rel=1e-12)
    assert mem.kv_cache_gb(v3, 4096, 8, kv_bytes=1.0) == pytest.approx(2.302672896 / 2, rel=1e-12)


def test_no_size_and_no_bands_are_refused_by_name():
    with pytest.raises(ValueError, match=r"^params_billion must be a non-negative number, got None$"):
        mem.weights_gb(None, 2.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^no architecture bands to estimate from$"):
        mem.estimate_architecture(8.0, [])


def test_an_estimated_architecture_has_no_window_unless_one_is_given():
    # Nothing said: a full-attention estimate, so twice the tokens keep twice the cache.
    est = mem.resolve_architecture(70, 0, 0, 0, 0, BANDS)
    assert est.window == 0 and not est.exact
    assert mem.kv_cache_gb(est, 8192, 1) == pytest.approx(2 * mem.kv_cache_gb(est, 4096, 1))


def test_the_layers_a_window_applies_to_are_the_ones_given():
    # Gemma 3 27B as a caller gives it: 52 of 62 layers at 1,024 (135,168 layer-tokens at 8k); none of them
    # windowed (0 layers): every layer keeps every token, 62 x 8,192 = 507,904; not said: all 62 windowed.
    def gemma(window_layers: int) -> mem.Architecture:
        return mem.resolve_architecture(27, 62, 16, 128, 5376, BANDS, window=1024, window_layers=window_layers)

    assert mem.cached_layer_tokens(gemma(52), 8192) == 135_168
    assert mem.cached_layer_tokens(gemma(0), 8192) == 507_904
    assert mem.cached_layer_tokens(gemma(-1), 8192) == 62 * 1024


@pytest.mark.parametrize(("layers", "rank", "rope", "exact"), [
    (61, 512, 64, True), (1, 1, 1, True),  # every part given, however small
    (0, 512, 64, False), (61, 0, 64, False), (61, 512, 0, False),  # one missing: filled, so an estimate
])
def test_an_mla_architecture_is_exact_only_with_layers_rank_and_rope_given(layers, rank, rope, exact):  # noqa: ANN001
    arch = mem.resolve_architecture(671, layers, 0, 0, 7168, BANDS, kind="MLA", kv_lora_rank=rank,
                                    rope_head_dim=rope)
    assert arch.exact is exact and arch.kind == "MLA"
    assert arch.kv_heads == 1  # one latent per layer and token, shown as one KV head
    assert arch.kv_latent == (rank or 512) + (rope or 64)


A = mem.Architecture


def test_what_the_caller_says_of_the_attention_is_kept_and_the_rest_comes_from_the_band():
    # BANDS: up to 10B 32 layers, 8 KV heads, head 128, hidden 4,096, 32 heads; up to 90B 80 layers, 8 KV heads,
    # head 128, hidden 8,192, 64 heads; both a 128,256 vocabulary.
    def arch(params: float, layers: int, hd: int, hidden: int, kind: str, **kw: int) -> mem.Architecture:
        return mem.resolve_architecture(params, layers, 0, hd, hidden, BANDS, kind=kind, **kw)

    # MLA (DeepSeek-V3 shape on the 90B band): one latent of rank + rope; head size and heads from the band
    assert arch(70, 61, 0, 7168, "MLA", kv_lora_rank=512, rope_head_dim=64, window=4096) == A(
        61, 1, 128, 7168, 64, 128256, True, "MLA", 576, 4096)
    assert arch(70, 61, 192, 7168, "MLA", kv_lora_rank=512, rope_head_dim=64).head_dim == 192
    # MHA (Llama-2-13B: 40 layers, hidden 5,120, head 128): one KV head per query head, 5,120 // 128 = 40
    assert arch(7, 40, 128, 5120, "MHA") == A(40, 40, 128, 5120, 40, 128256, True, "MHA", 0, 0)
    assert arch(7, 40, 96, 4000, "MHA", window=512) == A(40, 41, 96, 4000, 41, 128256, True, "MHA", 0, 512)
    assert arch(7, 40, 128, 64, "MHA").kv_heads == 1  # a hidden size under one head is still one head
    assert arch(7, 1, 0, 1, "MHA").exact and not arch(7, 40, 0, 0, "MHA").exact
    assert arch(7, 40, 0, 0, "MHA") == A(40, 32, 128, 4096, 32, 128256, False, "MHA", 0, 0)
    # MQA (Falcon-7B-like): one KV head; the head size from hidden / heads (4,545 // 32 = 142) when a hidden
    # size is given, else the band's
    assert arch(7, 32, 0, 4545, "MQA") == A(32, 1, 142, 4545, 32, 128256, True, "MQA", 0, 0)
    assert arch(7, 32, 0, 16, "MQA").head_dim == 1  # 16 // 32 = 0: at least 1
    assert arch(7, 32, 0, 0, "MQA") == A(32, 1, 128, 4096, 32, 128256, False, "MQA", 0, 0)


def test_a_grouped_query_architecture_is_pinned_by_layers_kv_heads_and_a_head_size_else_estimated():
    def arch(layers: int, kv: int, hd: int, hidden: int, window: int = 0) -> mem.Architecture:
        return mem.resolve_architecture(8, layers, kv, hd, hidden, BANDS, window=window)

    # pinned: the head size from hidden // heads (4,100 // 32 = 128) when not given; at least 1
    assert arch(32, 8, 0, 4100) == A(32, 8, 128, 4100, 32, 128256, True, "GQA", 0, 0)
    assert arch(32, 8, 64, 0, window=4096) == A(32, 8, 64, 4096, 32, 128256, True, "GQA", 0, 4096)
    assert arch(1, 1, 1, 0) == A(1, 1, 1, 4096, 32, 128256, True, "GQA", 0, 0)
    assert arch(32, 8, 0, 16).head_dim == 1
    # a part of it: what was said is kept, the rest from the band, not exact
    assert arch(40, 0, 0, 0) == A(40, 8, 128, 4096, 32, 128256, False, "GQA", 0, 0)
    assert arch(1, 0, 0, 0).layers == 1
    assert arch(0, 4, 0, 0) == A(32, 4, 128, 4096, 32, 128256, False, "GQA", 0, 0)
    assert arch(0, 1, 0, 0).kv_heads == 1
    assert arch(40, 0, 64, 0) == A(40, 8, 64, 4096, 32, 128256, False, "GQA", 0, 0)  # no KV heads: not pinned
    assert arch(40, 4, 0, 0) == A(40, 4, 128, 4096, 32, 128256, False, "GQA", 0, 0)  # no head size: not pinned
    assert arch(32, 8, 0, 1).exact  # a hidden size of 1 is a hidden size
    assert arch(0, 0, 0, 0, window=1) == A(32, 8, 128, 4096, 32, 128256, False, "GQA", 0, 1)
    # a hidden size alone pins nothing: the band's estimate
    assert arch(0, 0, 0, 4096) == arch(0, 0, 0, 0) == A(32, 8, 128, 4096, 32, 128256, False, "GQA", 0, 0)
    # MQA is exact with layers and a head size or a hidden size, and keeps its window
    mqa = mem.resolve_architecture(7, 1, 1, 1, 0, BANDS, kind="MQA", window=512)
    assert mqa.exact and (mqa.kv_latent, mqa.window) == (0, 512)
    assert mem.resolve_architecture(7, 1, 0, 0, 1, BANDS, kind="MQA").exact
    assert not mem.resolve_architecture(7, 0, 0, 64, 4544, BANDS, kind="MQA").exact


def test_the_kv_cache_of_a_copy_over_more_gpus_than_kv_heads_counts_the_replicated_heads():
    # 8 KV heads over TP 16: each GPU holds one head (8 / 16 < 1), so 16 heads' worth: twice the TP-1 cache.
    one = dict(mem.inference_memory(8, 2.0, _ARCH, 4096, 4, 2.0, 1.5, 2.0).components)["kv_cache"]
    wide = dict(mem.inference_memory(8, 2.0, _ARCH, 4096, 4, 2.0, 1.5, 2.0, tensor_parallel=16).components)
    assert wide["kv_cache"] == pytest.approx(2 * one)


def test_training_memory_names_its_terms_and_counts_the_engine_once_per_gpu():
    got = mem.full_training_memory(1.0, _ARCH, 2048, 1, 16.0, "full", 1.5)
    assert [name for name, _ in got.components] == [
        "weights", "gradients", "optimizer", "activations", "logits", "engine"]
    assert dict(got.components)["engine"] == 1.5  # one GPU unless told
    assert dict(mem.full_training_memory(1.0, _ARCH, 2048, 1, 16.0, "full", 1.5, gpus=0).components)["engine"] == 1.5
    # states of 4 B per parameter (weights and gradients alone): no optimizer memory, never a negative one
    for state in (4.0, 3.0):
        assert dict(mem.full_training_memory(1.0, _ARCH, 2048, 1, state, "full", 1.5).components)["optimizer"] == 0


# -- model-size bands ----------------------------------------------------------------------------------------


def test_every_band_covers_its_upper_bound_and_the_next_one_starts_just_above(bundle: Bundle):
    bands = tables.bands(bundle.book.assumptions)
    assert len(bands) >= 2
    for band, above in zip(bands, bands[1:], strict=False):
        at = mem.estimate_architecture(band.max_params_billion, bands)
        over = mem.estimate_architecture(band.max_params_billion * 1.0001, bands)
        assert (at.layers, at.hidden_size, at.vocab_size) == (band.layers, band.hidden_size, band.vocab_size)
        assert (over.layers, over.hidden_size, over.vocab_size) == (above.layers, above.hidden_size,
                                                                    above.vocab_size)
    beyond = mem.estimate_architecture(bands[-1].max_params_billion * 10, bands)
    assert beyond.layers == bands[-1].layers and not beyond.exact


@settings(max_examples=200, deadline=None)
@given(params=st.floats(0.01, 1e6, allow_nan=False))
def test_the_band_is_the_smallest_that_covers_the_model(params: float):
    bands = [mem.ArchitectureBand(m, layers, 8, 128, 4096, 32, 1000) for m, layers in
             ((2.0, 16), (20.0, 40), (40.0, 64), (1e5, 126))]
    got = mem.estimate_architecture(params, list(reversed(bands))).layers  # given in any order
    covering = [b for b in bands if b.max_params_billion >= params]
    assert got == (covering[0].layers if covering else 126)


def test_a_20b_model_with_no_shape_given_is_sized_with_the_20b_bands_layers(bundle: Bundle):
    a = bundle.book.assumptions
    bands = {b.max_params_billion: b for b in tables.bands(a)}
    assert 20.0 in bands and bands[20.0].layers == 40  # rules/assumptions.yaml: the Llama-2-13B shape, GQA 8
    at = shape_of(Brief(workload="REALTIME_INFERENCE", model=Model(params_billion=20.0, precision="BF16",
                                                                      context_tokens=8192)), a)
    over = shape_of(Brief(workload="REALTIME_INFERENCE", model=Model(params_billion=20.5, precision="BF16",
                                                                        context_tokens=8192)), a)
    assert at is not None and over is not None
    assert at.arch.layers == 40 and not at.arch.exact
    assert over.arch.layers == next(b for m, b in sorted(bands.items()) if m > 20.0).layers == 64
    # KV per token follows the band: 2 x 40 x 8 x 128 x 2 B = 163,840 B at 20B; 64 layers would be 60% more.
    assert mem.kv_bytes_per_token(at.arch) == 163840.0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(params=st.sampled_from((1.0, 8.0, 20.0, 32.0, 70.0, 120.0)), workload=st.sampled_from(
    ("REALTIME_INFERENCE", "BATCH_INFERENCE")), sessions=st.integers(1, 128), more=st.integers(2, 8),
    context=st.sampled_from((2048, 8192, 32768)))
def test_more_load_never_needs_fewer_gpus(bundle: Bundle, params, workload, sessions, more, context):  # noqa: ANN001
    a = bundle.book.assumptions

    def counts(n: int) -> dict[str, int]:
        brief = Brief(workload=workload, model=Model(params_billion=params, precision="BF16", context_tokens=context),
                      traffic=Traffic(concurrent_sessions=n, batch_size=n, avg_input_tokens=min(1000, context // 2),
                                      avg_output_tokens=300))
        shape = shape_of(brief, a)
        assert shape is not None
        return {s.gpu.id: s.count for s in size_all(bundle.book.catalog, brief, shape, a, (), DAY) if s.fits}

    less, load = counts(sessions), counts(sessions * more)
    assert set(load) <= set(less)  # what holds more load holds less
    assert all(load[g] >= less[g] for g in load), {g: (less[g], load[g]) for g in load if load[g] < less[g]}
