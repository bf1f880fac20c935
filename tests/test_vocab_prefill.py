"""Issue 36, round 5: a prompt's prefill FLOPs leave out the embedding and output matrices (its tokens are looked
up, and only its last token's logits are taken); decode, which takes logits for every token, keeps its count.
The registry's `vocab_size` and `tie_word_embeddings` (config.json) give their size. docs/calibration.md."""

from __future__ import annotations

import dataclasses

import pytest

from service.accuracy.harness import _at_width
from service.decide.models import resolve, vocab_params_billion
from service.decide.sizing.shape import shape_of
from service.domain.brief import Brief, Model, Traffic
from service.domain.models import ModelEntry, find

from .conftest import TODAY


def _brief(model: Model, prompt: int, sessions: int = 1) -> Brief:
    return Brief(workload="REALTIME_INFERENCE", model=model,
                 traffic=Traffic(concurrent_sessions=sessions, avg_input_tokens=prompt, avg_output_tokens=64),
                 toolchain=("vllm",))


def _speed(bundle, brief: Brief, gpu: str = "h100-sxm") -> dict[str, float]:
    g = next(x for x in bundle.book.catalog if x.id == gpu)
    return _at_width(bundle, brief, g, 1, TODAY)


def test_the_registry_reads_config_json_vocabulary_and_resolve_counts_both_matrices_unless_tied(bundle):
    models = bundle.book.models
    oss = find(models, "gpt-oss-20b")
    assert oss is not None and oss.vocab_size == 201088 and not oss.tie_word_embeddings
    brief = resolve(_brief(Model(name="gpt-oss-20b", context_tokens=20064), 20000), models)
    # 201,088 x 2,880 twice: 1.158B of its 3.6B active (the gpt-oss model card's embedding + unembedding 1.16B).
    assert brief.model.vocab_params_billion == pytest.approx(201088 * 2880 * 2 / 1e9)
    tied = dataclasses.replace(oss, tie_word_embeddings=True)
    assert vocab_params_billion(Model(), tied, {"hidden_size": 2880, "active_params_billion": 3.6}) == pytest.approx(
        201088 * 2880 / 1e9)
    # Unknown vocabulary, no hidden size, or matrices that would not fit in the active parameters: none left out.
    bare = ModelEntry(id="x", name="x", kind="llm", source="s", as_of="2026-12-07", hidden_size=4096)
    assert vocab_params_billion(Model(params_billion=8), bare, {}) == 0.0
    assert vocab_params_billion(Model(params_billion=8), dataclasses.replace(oss, hidden_size=0), {}) == 0.0
    assert vocab_params_billion(Model(params_billion=0.5), oss, {"hidden_size": 2880}) == 0.0
    # A brief that gives only sizes (no name) keeps every parameter in its prefill.
    unnamed = _brief(Model(params_billion=8.0, precision="BF16"), 2000)
    assert resolve(unnamed, models).model.vocab_params_billion == 0.0
    shape = shape_of(resolve(unnamed, models), bundle.book.assumptions)
    assert shape is not None and shape.vocab_params_billion == 0.0


@pytest.mark.parametrize("model", ["llama-3.1-8b-instruct", "gpt-oss-20b"])
def test_prefill_leaves_the_vocabulary_out_and_decode_keeps_it(bundle, model):
    named = resolve(_brief(Model(name=model, precision="BF16", context_tokens=16064), 16000), bundle.book.models)
    vocab = named.model.vocab_params_billion
    assert vocab > 0
    counted = dataclasses.replace(named, model=dataclasses.replace(named.model, vocab_params_billion=0.0))
    without, with_vocab = _speed(bundle, named), _speed(bundle, counted)
    # The decode step reads and computes exactly as before (its logits are every token's).
    assert without["itl"] == with_vocab["itl"]
    # A 16k prompt on one H100 is compute-bound: its TTFT falls by no more than the vocabulary's share of the
    # active parameters (attention's FLOPs and the launch floor stay), and by a visible part of it.
    share = vocab / named.model.active_params_billion if named.model.active_params_billion else vocab / (
        named.model.params_billion)
    ratio = without["ttft"] / with_vocab["ttft"]
    assert 1 - share <= ratio < 1 - share / 4
