"""decide/sizing/inference.py: memory per model copy, the width and copies a brief pins, replicas for the offered
load, and the prefill-only speeds (embeddings, media), each called directly on small frozen inputs."""

from __future__ import annotations

import pytest

from service.decide.sizing import inference as inf
from service.domain.brief import Parallelism
from tests.sizing_kit import brief


@pytest.mark.parametrize(("tp", "pp", "width"), [(0, 0, 0), (-1, 0, 0), (0, -2, 0), (4, 0, 4), (0, 3, 3), (2, 3, 6),
                                                 (1, 1, 1), (-1, 2, 2), (3, -1, 3)])
def test_the_width_a_brief_pins(tp, pp, width) -> None:  # noqa: ANN001
    assert inf.pinned_width(brief(parallelism=Parallelism(tensor_parallel=tp, pipeline_parallel=pp))) == width


def test_a_diffusion_pipeline_spans_one_gpu_and_text_every_width() -> None:
    assert inf.pipeline_sizes(brief("MEDIA_GENERATION"), (1, 2, 4, 8)) == (1,)
    assert inf.pipeline_sizes(brief("EMBEDDING"), (1, 2, 4, 8)) == (1, 2, 4, 8)
    assert inf.pipeline_sizes(brief("REALTIME_INFERENCE"), (2, 4)) == (2, 4)


# --- memory of one model copy -------------------------------------------------------------------------------------

import dataclasses  # noqa: E402
import math  # noqa: E402

from service.decide.sizing.common import MAX_GPUS, Sizing, compute_tflops, parallel_efficiency  # noqa: E402
from service.decide.sizing.media import media_need, outputs_per_second  # noqa: E402
from service.decide.sizing.shape import shape_of  # noqa: E402
from service.domain.brief import Latency  # noqa: E402
from service.physics import encoder  # noqa: E402
from service.physics import memory as mem  # noqa: E402
from tests.sizing_kit import gpu, rules  # noqa: E402

R = rules(serving_max_batched_tokens=5000, activation_bytes_per_token_hidden=30.0, sampler_bytes_per_vocab_entry=12.0,
          engine_overhead_gb=1.7, default_prefill_batch_tokens=6000)


def chat(workload: str = "REALTIME_INFERENCE", r=R, sessions: int = 4, inp: int = 1000, out: int = 200,  # noqa: ANN001
         ctx: int = 2000, params: float = 8, rps: float = 0.0, **kw):  # noqa: ANN003, ANN201
    b = brief(workload, model={"params_billion": params, "precision": "BF16", "context_tokens": ctx},
              traffic={"concurrent_sessions": sessions, "batch_size": sessions, "avg_input_tokens": inp,
                       "avg_output_tokens": out, "requests_per_second": rps}, **kw)
    s = shape_of(b, r)
    assert s is not None
    return b, s


def _activation(shape, tp: int, step: int) -> float:  # noqa: ANN001
    return mem.serving_activation_gb(step, shape.sequences, shape.arch.hidden_size, shape.arch.vocab_size, 30.0, 12.0,
                                     tp)


@pytest.mark.parametrize(("sessions", "ctx", "step"), [(2, 2000, 4000), (3, 2000, 5000), (5, 1000, 5000),
                                                       (1, 5000, 5000), (1, 4999, 4999)])
def test_the_workspace_holds_one_step_of_at_most_the_token_budget(sessions, ctx, step) -> None:  # noqa: ANN001
    _, s = chat(sessions=sessions, ctx=ctx, inp=100, out=10)
    assert s.tokens_per_sequence == ctx
    for tp in (1, 2, 8):
        assert inf.activation_per_gpu_gb(s, R, tp) == _activation(s, tp, step)


@pytest.mark.parametrize(("gid", "n", "tp"), [("h100-sxm", 1, 1), ("h100-sxm", 2, 2), ("h100-sxm", 8, 8),
                                              ("h100-sxm", 16, 8), ("h100-pcie", 4, 4), ("l40s", 16, 8),
                                              ("gb200", 16, 8), ("rtx-4090", 2, 1)])
def test_a_copy_splits_its_layers_up_to_the_scale_up_domain_and_holds_workspace_on_every_gpu(gid, n, tp) -> None:  # noqa: ANN001
    b, s = chat(sessions=3, ctx=2000, inp=100, out=10)
    g = gpu(gid, gpus_per_node=1) if gid == "rtx-4090" else gpu(gid)
    got = inf.inference_need(g, b, s, R, n)
    one = mem.inference_memory(s.params_billion, s.bytes_per_param, s.arch, s.tokens_per_sequence, s.sequences,
                               s.kv_bytes, _activation(s, tp, 5000), 1.7, tensor_parallel=tp)
    scale = n / tp
    assert [c for c, _ in got.components] == [c for c, _ in one.components]
    for (c, v), (_, w) in zip(got.components, one.components, strict=True):
        assert v == pytest.approx(w * scale if c in ("activations", "engine") else w), c
    assert dict(got.components)["engine"] == pytest.approx(1.7 * n)


def test_a_diffusion_pipeline_needs_what_media_says() -> None:
    b = brief("MEDIA_GENERATION", model={"params_billion": 12, "precision": "BF16"})
    s = shape_of(b, R)
    assert s is not None
    assert inf.inference_need(gpu(), b, s, R, 1) == media_need(b, s, R, 1)


# --- replicas for the offered load --------------------------------------------------------------------------------

def _sized(rate: float, fits: bool = True) -> Sizing:
    s = Sizing(gpu=gpu())
    s.tokens_per_second, s.fits = rate, fits
    return s


ONE = mem.MemoryBreakdown((("weights", 10.0), ("kv_cache", 2.0)))


@pytest.mark.parametrize(("workload", "rate", "offered", "replicas"), [
    ("REALTIME_INFERENCE", 1000.0, 5.0, 1),  # 200 output tokens a request: 5 requests/s a replica
    ("REALTIME_INFERENCE", 1000.0, 5.01, 2),
    ("REALTIME_INFERENCE", 1000.0, 25.0, 5),
    ("REALTIME_INFERENCE", 1000.0, 0.0, 1),  # no load given: one
    ("REALTIME_INFERENCE", 0.0, 25.0, 1),  # no speed known: one
    ("EMBEDDING", 3000.0, 3.0, 1),  # 1000 input tokens a request: 3 requests/s a replica
    ("EMBEDDING", 3000.0, 3.5, 2),
    ("MEDIA_GENERATION", 0.5, 1.0, 2),  # one output a request
    ("MEDIA_GENERATION", 0.5, 0.5, 1),
])
def test_replicas_for_the_offered_requests(workload, rate, offered, replicas) -> None:  # noqa: ANN001
    _, shape = chat(workload if workload != "MEDIA_GENERATION" else "BATCH_INFERENCE", inp=1000, out=200)
    s = _sized(rate)
    inf.replicate_for_load(s, 2, workload, shape, offered, ONE)
    assert (s.per_replica, s.replicas, s.count, s.fits) == (2, replicas, 2 * replicas, True)
    assert s.memory == (ONE if replicas == 1 else mem.MemoryBreakdown((("weights", 10.0 * replicas),
                                                                        ("kv_cache", 2.0 * replicas))))


def test_a_one_token_request_is_one_token() -> None:
    _, shape = chat(inp=1000, out=1)
    s = _sized(10.0)
    inf.replicate_for_load(s, 1, "REALTIME_INFERENCE", shape, 25.0, ONE)
    assert s.replicas == 3
    _, shape = chat(inp=1000, out=2)
    s = _sized(10.0)
    inf.replicate_for_load(s, 1, "REALTIME_INFERENCE", shape, 25.0, ONE)
    assert s.replicas == 5


def test_copies_that_split_the_sessions_are_the_fewest_replicas() -> None:
    _, shape = chat(out=200)
    s = _sized(1000.0)
    inf.replicate_for_load(s, 2, "REALTIME_INFERENCE", shape, 5.0, ONE, copies=3)
    assert (s.replicas, s.count) == (3, 6)
    s = _sized(1000.0)
    inf.replicate_for_load(s, 2, "REALTIME_INFERENCE", shape, 25.0, ONE, copies=3)
    assert s.replicas == 5


def test_more_load_never_needs_fewer_gpus() -> None:
    _, shape = chat(out=200)
    last = 0
    for offered in (0.0, 0.5, 4.9, 5.0, 5.1, 9.99, 10.0, 10.01, 100.0, 1e4):
        s = _sized(1000.0)
        inf.replicate_for_load(s, 4, "REALTIME_INFERENCE", shape, offered, ONE)
        assert s.count >= last
        last = s.count


def test_past_any_cluster_the_load_is_infeasible() -> None:
    _, shape = chat(out=200)
    n = 8
    most = MAX_GPUS // n
    s = _sized(1000.0)
    inf.replicate_for_load(s, n, "REALTIME_INFERENCE", shape, 5.0 * most, ONE)  # exactly the most: feasible
    assert (s.replicas, s.fits, s.count) == (most, True, n * most)
    s = _sized(1000.0)
    inf.replicate_for_load(s, n, "REALTIME_INFERENCE", shape, 5.0 * most + 1, ONE)
    assert (s.replicas, s.fits, s.count) == (most, False, n * most)
    s = _sized(1000.0)  # a copy wider than any cluster: still one replica, infeasible under load
    inf.replicate_for_load(s, MAX_GPUS * 2, "REALTIME_INFERENCE", shape, 10.0, ONE)
    assert (s.replicas, s.fits) == (1, False)
    s = _sized(1000.0)
    inf.replicate_for_load(s, MAX_GPUS // 2, "REALTIME_INFERENCE", shape, 10.0, ONE)  # two fit the cluster
    assert (s.replicas, s.fits) == (2, True)
    s = _sized(1000.0)
    inf.replicate_for_load(s, MAX_GPUS // 2, "REALTIME_INFERENCE", shape, 10.01, ONE)
    assert (s.replicas, s.fits) == (2, False)


# --- prefill-only work --------------------------------------------------------------------------------------------

def test_an_embedding_pass_is_the_brief_batch_or_the_servers_token_budget() -> None:
    b, s = chat("EMBEDDING", sessions=1, inp=700)
    assert inf.prefill_only_tokens(b, s, R) == 700  # a batch of one record
    b, s = chat("EMBEDDING", sessions=3, inp=700)
    assert inf.prefill_only_tokens(b, s, R) == 2100
    assert inf.prefill_batch_sequences(b, s, R) == 3
    b, s = chat("EMBEDDING", sessions=0, inp=700)
    assert inf.prefill_only_tokens(b, s, R) == 6000  # the server's budget
    assert inf.prefill_batch_sequences(b, s, R) == 8  # 6000 // 700
    b, s = chat("EMBEDDING", sessions=0, inp=7000, ctx=8000)
    assert inf.prefill_only_tokens(b, s, R) == 7000  # one record past the budget: the record
    assert inf.prefill_batch_sequences(b, s, R) == 1
    b, s = chat("EMBEDDING", sessions=0, inp=6000, ctx=8000)
    assert inf.prefill_only_tokens(b, s, R) == 6000
    b, s = chat("EMBEDDING", sessions=0, inp=700)
    s0 = dataclasses.replace(s, input_tokens=0)  # a record is at least one token
    assert inf.prefill_only_tokens(b, s0, R) == 6000
    assert inf.prefill_batch_sequences(b, s0, R) == 6000
    assert inf.prefill_batch_sequences(b, s0, rules(R, default_prefill_batch_tokens=0)) == 1


@pytest.mark.parametrize(("gid", "n"), [("h100-sxm", 1), ("h100-sxm", 4), ("h100-pcie", 2)])
def test_embedding_speed_worked_from_one_encoder_pass(gid, n) -> None:  # noqa: ANN001
    r = rules(R, mfu_prefill=0.45, encoder_activation_traffic_bytes_per_token_hidden=20.0,
              encoder_layer_overhead_us=40.0, parallel_efficiency_fast_link=0.9, parallel_efficiency_pcie=0.7)
    b, s = chat("EMBEDDING", r=r, sessions=3, inp=700, params=0.5)
    g = gpu(gid)
    z = Sizing(gpu=g)
    z.tflops = compute_tflops(g, "BF16")
    z.step_ms = z.itl_ms = z.est_ttft_ms = z.est_latency_ms = 9.0
    inf.inference_speed(z, b, s, r, n, {})
    from service.decide.sizing.common import decode_mbu
    sec = encoder.encoder_pass_seconds(s.active_params_billion, s.bytes_per_param, 2100, 700, s.arch.layers,
                                       s.arch.hidden_size, z.tflops, 0.45, g.bandwidth_tbs, decode_mbu(g, r), 20.0,
                                       40e-6)
    per_gpu = 2100 / sec
    assert z.effective_tflops == pytest.approx(per_gpu * 2 * s.active_params_billion * 1e9 / 1e12, rel=1e-12)
    assert z.tokens_per_second == pytest.approx(per_gpu * n * parallel_efficiency(g, n, r), rel=1e-12)
    assert (z.step_ms, z.itl_ms, z.est_ttft_ms, z.est_latency_ms) == (0.0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize("n", [1, 3])
def test_media_speed_is_denoising_outputs_per_gpu(n) -> None:  # noqa: ANN001
    r = rules(R, mfu_denoising=0.37, mfu_prefill=0.9, parallel_efficiency_fast_link=0.8)
    b = brief("MEDIA_GENERATION", model={"params_billion": 12, "precision": "BF16"})
    s = shape_of(b, r)
    assert s is not None
    g = gpu()
    z = Sizing(gpu=g)
    z.tflops = 500.0
    z.step_ms = z.itl_ms = z.est_ttft_ms = z.est_latency_ms = 9.0
    inf.inference_speed(z, b, s, r, n, {})
    assert z.effective_tflops == pytest.approx(500.0 * 0.37, rel=1e-12)
    assert z.tokens_per_second == pytest.approx(outputs_per_second(500.0, 0.37, b, s, r) * n
                                                * parallel_efficiency(g, n, r), rel=1e-12)
    assert (z.step_ms, z.itl_ms, z.est_ttft_ms, z.est_latency_ms) == (0.0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize("synchrony", [None, 0.0, 1.0])
def test_generation_speed_is_the_serving_speed(synchrony) -> None:  # noqa: ANN001
    from service.decide.sizing.width import serving_speed
    b, s = chat(sessions=32, inp=3000, toolchain=("vllm",))
    got, want = Sizing(gpu=gpu()), Sizing(gpu=gpu())
    got.tflops = want.tflops = compute_tflops(got.gpu, "BF16")
    inf.inference_speed(got, b, s, R, 2, {}, synchrony)
    serving_speed(want, b, s, R, 2, {}, synchrony)
    assert vars(got) == vars(want) and got.tokens_per_second > 0
    if synchrony is not None:  # how the prompts arrive is passed on: the engine's own share waits otherwise
        engine = Sizing(gpu=gpu())
        engine.tflops = got.tflops
        serving_speed(engine, b, s, R, 2, {})
        assert engine.est_ttft_ms != got.est_ttft_ms


# --- the fewest copies of a pinned shape that hold the sessions ---------------------------------------------------

def _fits(g, b, shape, n: int, usable: float, seqs: int) -> bool:  # noqa: ANN001
    return inf.inference_need(g, b, dataclasses.replace(shape, sequences=seqs), R, n).total_gb <= n * usable


@pytest.mark.parametrize("sessions", [1, 2, 40, 300, 301, 1000])
@pytest.mark.parametrize("usable", [17.0, 20.0, 40.0])
def test_split_sessions_is_the_fewest_copies_one_of_which_holds_its_share(sessions, usable) -> None:  # noqa: ANN001
    b, shape = chat(sessions=sessions, ctx=8000, inp=4000, out=500)
    g = gpu()
    n = 1
    copies, share = inf.split_sessions(g, b, shape, R, n, usable)
    if _fits(g, b, shape, n, usable, sessions):
        return  # asked only of a copy that does not hold every session
    fewest = next((k for k in range(2, sessions + 1) if _fits(g, b, shape, n, usable, math.ceil(sessions / k))), 1)
    assert copies == fewest
    assert share == (shape if copies == 1 else dataclasses.replace(shape, sequences=math.ceil(sessions / copies)))


def test_split_sessions_cases_the_search_is_asked() -> None:
    asked = 0
    for sessions in (2, 40, 300, 301, 1000):
        b, shape = chat(sessions=sessions, ctx=8000, inp=4000, out=500)
        for usable in (17.0, 20.0, 40.0):
            asked += not _fits(gpu(), b, shape, 1, usable, sessions)
    assert asked >= 10


def test_split_sessions_stops_at_the_largest_cluster() -> None:
    b, shape = chat(sessions=1000, ctx=8000, inp=4000, out=500)
    assert inf.split_sessions(gpu(), b, shape, R, MAX_GPUS, 17.0) == (1, shape)  # room for one copy only
    copies, share = inf.split_sessions(gpu(), b, shape, R, MAX_GPUS // 2, 17.0)  # room for two
    assert (copies, share.sequences) == (2, 500)


def test_split_sessions_room_for_a_whole_number_of_copies() -> None:
    b, shape = chat(sessions=1000, ctx=8000, inp=4000, out=500)
    copies, share = inf.split_sessions(gpu(), b, shape, R, 400_000, 17.0)  # room for 2.5: two
    assert (copies, share.sequences) == (2, 500)
    assert isinstance(copies, int) and isinstance(share.sequences, int)


def test_split_sessions_up_to_the_largest_cluster_of_one_gpu_copies() -> None:
    b, shape = chat(sessions=750_000, ctx=8000, inp=4000, out=500)
    g = gpu()
    one = inf.inference_need(g, b, dataclasses.replace(shape, sequences=1), R, 1).total_gb
    two = inf.inference_need(g, b, dataclasses.replace(shape, sequences=2), R, 1).total_gb
    copies, share = inf.split_sessions(g, b, shape, R, 1, (one + two) / 2)  # one session a GPU
    assert (copies, share.sequences) == (750_000, 1)


def test_split_sessions_is_at_least_two_copies_when_it_splits() -> None:
    b, shape = chat(sessions=2, ctx=8000, inp=4000, out=500)
    g = gpu()
    one = inf.inference_need(g, b, dataclasses.replace(shape, sequences=1), R, 1).total_gb
    two = inf.inference_need(g, b, shape, R, 1).total_gb
    usable = (one + two) / 2
    copies, share = inf.split_sessions(g, b, shape, R, 1, usable)
    assert (copies, share.sequences) == (2, 1)
    assert inf.split_sessions(g, b, shape, R, 1, one * 0.99) == (1, shape)
    assert inf.split_sessions(g, b, shape, R, 1, one)[0] == 2


# --- size_inference -----------------------------------------------------------------------------------------------

def _need_by(per_copy_gb: float):  # noqa: ANN202
    """A need that does not shrink with width: the copy's memory split over its GPUs."""
    return lambda n: mem.MemoryBreakdown((("weights", per_copy_gb),))


def _size(b, shape, r=R, need=None, least: float = -math.inf, lean: bool = False, fit=None, g=None) -> Sizing:  # noqa: ANN001
    g = g or gpu()
    s = Sizing.blank(g, "ON_DEMAND")
    s.tflops = compute_tflops(g, shape.precision)
    inf.size_inference(s, b, shape, r, {}, need, least, lean, fit)
    return s


@pytest.mark.parametrize(("per_copy", "count", "fits"), [(70.0, 1, True), (70.01, 2, True), (140.0, 2, True),
                                                         (279.0, 4, True), (281.0, 8, True), (561.0, 8, False)])
def test_the_smallest_width_that_holds_the_copy(per_copy, count, fits) -> None:  # noqa: ANN001
    b, shape = chat("BATCH_INFERENCE")
    s = _size(b, shape, need=_need_by(per_copy), fit=((1, 2, 4, 8), 70.0))
    assert (s.memory_count, s.fits, s.per_replica) == (count, fits, count)


def test_a_width_below_the_least_need_is_passed_over() -> None:
    b, shape = chat("BATCH_INFERENCE")
    asked: list[int] = []

    def need(n: int) -> mem.MemoryBreakdown:
        asked.append(n)
        return mem.MemoryBreakdown((("weights", 10.0),))

    s = _size(b, shape, need=need, least=150.0, fit=((1, 2, 4, 8), 70.0))
    assert s.memory_count == 4 and asked[0] == 4
    s = _size(b, shape, need=need, least=140.0, fit=((1, 2, 4, 8), 70.0))
    assert s.memory_count == 2


def test_without_a_fit_the_gpu_and_rules_give_the_widths_and_memory() -> None:
    b, shape = chat("BATCH_INFERENCE", params=70)
    s = _size(b, shape)
    # 70B at 16 bits: 140 GB of weights, more than one 80 GB H100 holds after headroom
    assert s.fits and s.memory_count == 2
    s = _size(b, shape, g=gpu("h200"))
    assert s.fits and s.memory_count == 2
    b, shape = chat("BATCH_INFERENCE", params=8)
    assert _size(b, shape).memory_count == 1


def test_the_latency_target_is_p95_or_first_token() -> None:
    b, shape = chat("BATCH_INFERENCE")
    assert not _size(b, shape).latency_target
    for lat in (Latency(p95_ms=1e6), Latency(ttft_ms=1e6)):
        b, shape = chat("BATCH_INFERENCE", latency=lat)
        s = _size(b, shape)
        assert s.latency_target and s.meets_latency  # only realtime is held to it
    b, shape = chat(latency=Latency(p95_ms=1.0))
    s = _size(b, shape)
    assert s.latency_target and not s.meets_latency
    b, shape = chat(latency=Latency(ttft_ms=1.0))
    assert not _size(b, shape).meets_latency
    b, shape = chat(latency=Latency(p95_ms=1e7))
    assert _size(b, shape).meets_latency


def test_a_pinned_width_is_sized_whether_or_not_it_is_the_one_we_would_pick() -> None:
    b, shape = chat("BATCH_INFERENCE", parallelism=Parallelism(tensor_parallel=4))
    s = _size(b, shape, need=_need_by(10.0), fit=((1, 2, 4, 8), 70.0))
    assert (s.memory_count, s.per_replica, s.fits) == (1, 4, True)
    b, shape = chat("BATCH_INFERENCE", sessions=1, parallelism=Parallelism(tensor_parallel=4))  # nothing to split
    s = _size(b, shape, need=_need_by(281.0), fit=((1, 2, 4, 8), 70.0))
    assert (s.per_replica, s.fits, s.split_copies) == (4, False, 0)
    s = _size(b, shape, need=_need_by(280.0), fit=((1, 2, 4, 8), 70.0))
    assert (s.per_replica, s.fits) == (4, True)
    # an embedding's width is never pinned
    b, shape = chat("EMBEDDING", parallelism=Parallelism(tensor_parallel=4))
    s = _size(b, shape, need=_need_by(10.0), fit=((1, 2, 4, 8), 70.0))
    assert s.per_replica == 1


def test_a_pinned_width_that_does_not_hold_the_sessions_is_copied() -> None:
    b, shape = chat(sessions=64, ctx=32000, inp=16000, out=500, params=8, parallelism=Parallelism(tensor_parallel=1))
    g = gpu()
    usable = 70.0
    assert not _fits(g, b, shape, 1, usable, 64)
    s = _size(b, shape, fit=((1, 2, 4, 8), usable), g=g)
    copies, share = inf.split_sessions(g, b, shape, R, 1, usable)
    assert copies > 1
    assert (s.fits, s.split_copies, s.sessions_per_copy, s.per_replica) == (True, copies, share.sequences, 1)
    assert s.replicas >= copies
    assert s.memory == mem.MemoryBreakdown(tuple(
        (c, v * s.replicas) for c, v in inf.inference_need(g, b, share, R, 1).components))
    # the speed is each copy's, at its share of the sessions
    one = _size(chat(sessions=share.sequences, ctx=32000, inp=16000, out=500, params=8,
                     parallelism=Parallelism(tensor_parallel=1))[0], share, fit=((1, 2, 4, 8), usable), g=g)
    assert s.tokens_per_second == one.tokens_per_second
    # not generation: an evaluation is generation too, a batch is; an embedding never pins
    b2, shape2 = chat("BATCH_INFERENCE", sessions=64, ctx=32000, inp=16000, out=500,
                      parallelism=Parallelism(tensor_parallel=1))
    assert _size(b2, shape2, fit=((1, 2, 4, 8), usable), g=g).split_copies > 1


def test_a_pinned_width_no_copy_can_hold_stays_unfit() -> None:
    b, shape = chat(sessions=64, ctx=32000, inp=16000, out=500, params=200,
                    parallelism=Parallelism(tensor_parallel=1))
    s = _size(b, shape, fit=((1, 2, 4, 8), 70.0))
    assert (s.fits, s.split_copies, s.per_replica) == (False, 0, 1)


def test_generation_is_served_at_the_width_search_pick_and_memory_width_latency_said() -> None:
    from service.decide.sizing.width import pick_width
    b, shape = chat(latency=Latency(p95_ms=5000.0), sessions=32, params=8)
    s = _size(b, shape)
    ref = Sizing.blank(gpu(), "ON_DEMAND")
    ref.tflops = s.tflops
    tried: dict = {}
    n = pick_width(ref, b, shape, R, s.memory_count, (1, 2, 4, 8, 16, 24, 32), gpu(), {}, tried)
    assert (s.per_replica, s.tokens_per_second, s.est_latency_ms) == (n, ref.tokens_per_second, ref.est_latency_ms)
    assert s.memory_count_latency_ms == tried[s.memory_count][5]


def _widened() -> tuple:
    # a tight p95 on a small model: the search widens past memory's width
    b, shape = chat(latency=Latency(p95_ms=1.0), sessions=64, params=8, inp=2000, out=100, ctx=4000)
    return b, shape


def test_memory_widths_latency_when_the_count_is_raised() -> None:
    b, shape = _widened()
    s = _size(b, shape)
    assert s.per_replica > s.memory_count == 1
    probe = Sizing.blank(gpu(), "ON_DEMAND")
    probe.tflops = s.tflops
    inf.inference_speed(probe, b, shape, R, 1, {})
    assert s.memory_count_latency_ms == probe.est_latency_ms > s.est_latency_ms
    lean = _size(b, shape, lean=True)
    assert lean.memory_count_latency_ms == 0.0
    assert (lean.per_replica, lean.est_latency_ms) == (s.per_replica, s.est_latency_ms)


def test_memory_widths_latency_without_a_target_is_the_latency() -> None:
    b, shape = chat(sessions=64, params=8)
    s = _size(b, shape, lean=True)
    assert s.memory_count_latency_ms == s.est_latency_ms > 0
    assert not s.latency_target


def test_a_pipeline_stage_count_of_one_pins_one_gpu() -> None:
    assert inf.pinned_width(brief(parallelism=Parallelism(tensor_parallel=0, pipeline_parallel=1))) == 1


def test_a_diffusion_pipelines_width_is_never_pinned() -> None:
    b = brief("MEDIA_GENERATION", model={"params_billion": 12, "precision": "BF16"},
              parallelism=Parallelism(tensor_parallel=4))
    s = shape_of(b, R)
    assert s is not None
    z = _size(b, s)
    assert (z.per_replica, z.memory_count) == (1, 1)


def test_two_copies_of_a_pinned_width_split_the_sessions() -> None:
    b, shape = chat(sessions=2, ctx=8000, inp=4000, out=500, parallelism=Parallelism(tensor_parallel=1))
    g = gpu()
    one = inf.inference_need(g, b, dataclasses.replace(shape, sequences=1), R, 1).total_gb
    two = inf.inference_need(g, b, shape, R, 1).total_gb
    s = _size(b, shape, fit=((1, 2, 4, 8), (one + two) / 2), g=g)
    assert (s.fits, s.split_copies, s.sessions_per_copy, s.replicas) == (True, 2, 1, 2)


def test_a_memo_shared_across_gpus_keeps_each_widths_memory_by_its_tensor_parallel_split() -> None:
    b, shape = chat("BATCH_INFERENCE", sessions=1, params=70, ctx=2000, inp=100, out=10)
    wide, single = gpu("h100-sxm"), gpu("h100-sxm", gpus_per_node=1, interconnect_kind="pcie", nvlink_domain=1)
    memo: dict = {}
    for g in (wide, single):
        s = Sizing.blank(g, "ON_DEMAND")
        s.tflops = compute_tflops(g, "BF16")
        inf.size_inference(s, b, shape, R, memo)
        assert s.memory_count == 2
        assert s.memory == inf.inference_need(g, b, shape, R, 2)
    assert inf.inference_need(wide, b, shape, R, 2) != inf.inference_need(single, b, shape, R, 2)


def test_memory_widths_latency_at_a_pinned_width_is_worked_out() -> None:
    b, shape = chat(latency=Latency(p95_ms=1e6), sessions=8, params=8, parallelism=Parallelism(tensor_parallel=4))
    s = _size(b, shape)
    assert (s.memory_count, s.per_replica) == (1, 4)
    probe = Sizing.blank(gpu(), "ON_DEMAND")
    probe.tflops = s.tflops
    inf.inference_speed(probe, b, shape, R, 1, {})
    assert s.memory_count_latency_ms == probe.est_latency_ms != s.est_latency_ms
    assert s.formulas == []


def test_memory_widths_latency_when_memorys_width_is_the_one_served() -> None:
    b, shape = chat(latency=Latency(p95_ms=1e6), sessions=8, params=8)
    for lean in (True, False):
        s = _size(b, shape, lean=lean)
        assert s.per_replica == s.memory_count == 1
        assert s.memory_count_latency_ms == s.est_latency_ms > 0


def test_a_batch_is_never_held_to_a_latency_target() -> None:
    b, shape = chat("BATCH_INFERENCE", latency=Latency(p95_ms=1.0))
    s = _size(b, shape)
    assert s.latency_target and s.meets_latency


def test_a_diffusion_pipeline_raised_for_its_target_holds_each_copys_memory() -> None:
    r = rules(R, mfu_denoising=0.4)
    b = brief("MEDIA_GENERATION", model={"params_billion": 12, "precision": "BF16"},
              traffic={"requests_per_second": 1.0}, latency=Latency(p95_ms=3000))
    shape = shape_of(b, r)
    assert shape is not None
    g = gpu()
    s = _size(b, shape, r=r, g=g)
    ref = Sizing.blank(g, "ON_DEMAND")
    ref.tflops = s.tflops
    inf.inference_speed(ref, b, shape, r, 1, {})
    plain = math.ceil(1.0 / ref.tokens_per_second)
    assert s.replicas > plain  # raised past what the load alone asks, for the p95
    assert s.memory == mem.MemoryBreakdown(tuple(
        (c, v * s.replicas) for c, v in inf.inference_need(g, b, shape, r, 1).components))
