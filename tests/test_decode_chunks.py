"""Issue 36, eighteenth and nineteenth passes (docs/calibration.md): prompt tokens that ride in the decode steps as
whole chunks in a share of the steps (`calibrate --decode-chunks`), the least time of each kernel of a decode step
(serving_engines `decode_kernel_us`, which calibrate fits), and 4-bit weights on a GPU without FP4 tensor cores."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from service.accuracy.harness import _at_width
from service.decide.models import resolve
from service.decide.sizing import width
from service.decide.sizing.shape import shape_of
from service.domain.brief import Brief, Model, Traffic
from service.physics import serving

from .conftest import TODAY


def test_a_prompt_shorter_than_the_budget_rides_whole_in_a_share_of_the_steps():
    # 3 other sessions' 1,024-token prompts over 1,024 output tokens, all mixed in: 2.55 prompt tokens a step on
    # average, as one 1,024-token chunk in one step of 401.
    tokens, share = serving.riding_chunk(2.55, 1024, 8192, 4)
    assert tokens == 1024 and share == pytest.approx(2.55 / 1024)


def test_a_prompt_longer_than_the_budget_rides_in_chunks_of_what_the_decodes_leave():
    tokens, share = serving.riding_chunk(20.4, 8192, 8192, 4)
    assert tokens == 8188 and share == pytest.approx(20.4 / 8188)


def test_prompts_faster_than_a_chunk_a_step_ride_in_every_step():
    # 63 sessions' 8k prompts over 1k outputs: 428 tokens a step, more than a 128-token budget's room holds.
    assert serving.riding_chunk(428.0, 8192, 128, 64) == (428.0, 1.0)
    assert serving.riding_chunk(428.0, 8192, 64, 64) == (428.0, 1.0)  # no room: spread, as before
    assert serving.riding_chunk(0.0, 8192, 8192, 4) == (0.0, 0.0)


def test_the_mean_step_weighs_the_mixed_steps_by_their_share():
    assert serving.blend_steps(0.004, 0.060, 0.0) == 0.004
    assert serving.blend_steps(0.004, 0.060, 0.25) == pytest.approx(0.018)
    with pytest.raises(ValueError, match="share"):
        serving.blend_steps(0.004, 0.060, 1.5)


def _gpt_oss(prompt: int) -> Brief:
    return Brief(workload="REALTIME_INFERENCE",
                 model=Model(116.8, 5.1, precision="INT4", context_tokens=16384, layers=36, kv_heads=8, head_dim=64,
                             hidden_size=2880, experts=128, experts_per_token=4),
                 traffic=Traffic(concurrent_sessions=4, avg_input_tokens=prompt, avg_output_tokens=1024),
                 toolchain=("vllm",))


def _shape(bundle: Any, brief: Brief) -> Any:  # noqa: ANN401
    shape = shape_of(resolve(brief, bundle.book.models), bundle.book.assumptions)
    assert shape is not None
    return shape


def _itl(bundle: Any, brief: Brief) -> float:  # noqa: ANN401
    """ITL on one B200, sized afresh (the answers keep what they sized per brief)."""
    gpu = next(g for g in bundle.book.catalog if g.id == "b200")
    return _at_width(bundle, resolve(brief, bundle.book.models), gpu, 1, TODAY)["itl"]


def test_chunks_touch_the_experts_once_where_spread_tokens_touch_them_every_step(catalog_bundle: Any,  # noqa: ANN401
                                                                                monkeypatch: pytest.MonkeyPatch):
    # gpt-oss-120b at 4 sessions of 8k prompts on vLLM: spread, the ~20 prompt tokens each step carries touch about
    # half the experts every step; as one chunk in one step of 400 they read them once. InferenceX measured 3.7 ms on
    # one B200 at 8k prompts and 3.5 ms at 1k (docs/calibration.md): the prompt's length hardly moves the step.
    spread_8k, spread_1k = _itl(catalog_bundle, _gpt_oss(8192)), _itl(catalog_bundle, _gpt_oss(1024))
    monkeypatch.setattr(width, "PROMPTS_AS_CHUNKS", True)
    chunks_8k, chunks_1k = _itl(catalog_bundle, _gpt_oss(8192)), _itl(catalog_bundle, _gpt_oss(1024))
    assert chunks_8k < spread_8k and chunks_1k <= spread_1k
    assert chunks_8k / chunks_1k < spread_8k / spread_1k


def test_a_kernel_floor_is_paid_by_small_kernels_and_hidden_by_big_ones():
    # 10 layers, 4 GEMMs and 5 other kernels a layer, a 5 us floor. A decode step whose GEMMs take 40 us in all
    # (1 us each) and attention 20 us (2 us a layer) pays 4 x 4 + 3 + 5 x 5 = 44 us a layer beyond them.
    assert serving.kernel_floors_s(40e-6, 20e-6, 10, 4.0, 5.0, 5e-6) == pytest.approx(10 * 44e-6)
    # A high-batch step's GEMMs (400 us a layer) and attention (100 us) hide theirs: only the other kernels' floors.
    assert serving.kernel_floors_s(4e-3, 1e-3, 10, 4.0, 5.0, 5e-6) == pytest.approx(10 * 25e-6)
    assert serving.kernel_floors_s(4e-3, 1e-3, 10, 4.0, 5.0, 0.0) == 0.0
    # The floors only add: a step is never shorter than its bytes and FLOPs say.
    plain = serving.step_seconds(1.0, 1e9, 0.1, 1e6, 0.0, 8.0, 0.75, 2000.0, 0.5)
    floored = serving.step_seconds(1.0, 1e9, 0.1, 1e6, 0.0, 8.0, 0.75, 2000.0, 0.5, floors=(36, 4.0, 5.0, 3e-6))
    assert floored > plain


def test_four_bit_weights_read_slower_without_fp4_tensor_cores(catalog_bundle: Any):  # noqa: ANN401
    # gpt-oss-120b's MXFP4 experts: dequantized on an H200 (no FP4 tensor cores), native on a B200.
    # No rule row states the share (the nineteenth pass tried 0.5, `calibrate --fp4-read-share`): 1, unchanged.
    shipped = catalog_bundle.book.assumptions
    gpus = {g.id: g for g in catalog_bundle.book.catalog}
    shape = _shape(catalog_bundle, _gpt_oss(1024))
    assert width.fp4_read_share(shape, gpus["h200"], shipped) == 1.0
    a = dataclasses.replace(shipped, values={**shipped.values, "fp4_decode_read_share": 0.5})
    assert width.fp4_read_share(shape, gpus["h200"], a) == 0.5
    assert width.fp4_read_share(shape, gpus["b200"], a) == 1.0
