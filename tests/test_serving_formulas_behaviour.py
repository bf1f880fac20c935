"""physics/serving.py's formulas at their boundaries, worked by hand, and width's decode-worker steps held against
what they stand for (make mutate: docs/testing.md, "physics/serving.py and round 5's width lines"). Each
assertion says the physical reason it holds; none snapshots a figure the rules set today."""

from __future__ import annotations

import dataclasses

import pytest

from service.decide.sizing import width as wd
from service.decide.sizing.common import Sizing
from service.decide.sizing.engines import efficiency
from service.decide.sizing.shape import shape_of
from service.domain.brief import Parallelism
from service.physics import serving
from tests.sizing_kit import brief, gpu, rules

# --- grouped GEMM tiles ---------------------------------------------------------------------------------------


def test_no_routed_rows_waste_no_tile() -> None:
    # No experts, no expert per token, no tile or no token: no grouped GEMM runs, so none of it is wasted
    for args in ((1024, 0, 8, 128), (1024, 256, 0, 128), (1024, 256, 8, 0), (0, 256, 8, 128)):
        assert serving.grouped_gemm_tile_use(*args) == 1.0, args


def test_one_token_fills_one_row_of_each_of_its_experts_tiles() -> None:
    # one token routed top-8: 8 experts each get exactly one row of a 128-row tile
    assert serving.grouped_gemm_tile_use(1, 256, 8, 128) == pytest.approx(1 / 128, rel=1e-12)
    # one expert takes every row: 32 rows of a 128-row tile
    assert serving.grouped_gemm_tile_use(32, 1, 1, 128) == pytest.approx(32 / 128, rel=1e-12)


def test_few_tokens_spread_over_the_experts_they_touch() -> None:
    # 10 tokens x top-8 over 256 experts: 80 rows land on 256 x (1 - (248/256)^10) experts (the expected number
    # touched), each of those with 80 / that many rows, in 128-row tiles
    touched = 256 * (1 - (248 / 256) ** 10)
    rows = 80 / touched
    assert 1 < rows < 2
    assert serving.grouped_gemm_tile_use(10, 256, 8, 128) == pytest.approx(rows / 128, rel=1e-12)
    # a tile of one row wastes only the rounding of an expert's rows up to a whole row
    assert serving.grouped_gemm_tile_use(10, 256, 8, 1) == pytest.approx(rows / 2, rel=1e-12)
    # one expert per token: each expert touched gets about 4 rows
    touched1 = 256 * (1 - (255 / 256) ** 1024)
    assert serving.grouped_gemm_tile_use(1024, 256, 1, 128) == pytest.approx(1024 / touched1 / 128, rel=1e-12)


def test_an_moe_of_unknown_experts_reads_its_active_share_a_token() -> None:
    # no active count, or none beyond the whole model: every weight is read
    assert serving.moe_read_fraction_unknown_experts(0.0, 671.0, 4) == 1.0
    assert serving.moe_read_fraction_unknown_experts(671.0, 671.0, 4) == 1.0
    assert serving.moe_read_fraction_unknown_experts(37.0, 0.0, 4) == 1.0
    # one token reads its active parameters; two read 1 - (1 - A/P)^2 of them
    assert serving.moe_read_fraction_unknown_experts(37.0, 671.0, 1) == pytest.approx(37 / 671, rel=1e-12)
    assert serving.moe_read_fraction_unknown_experts(37.0, 671.0, 2) == pytest.approx(1 - (634 / 671) ** 2,
                                                                                      rel=1e-12)
    # a model of 1B parameters or under, half of them active: the same share, whatever its size
    assert serving.moe_read_fraction_unknown_experts(0.5, 1.0, 1) == pytest.approx(0.5, rel=1e-12)


# --- MLA attention ---------------------------------------------------------------------------------------------


def test_mla_decode_attention_of_nothing_is_nothing_and_never_negative() -> None:
    at = serving.mla_decode_attention_flops
    # no layer, head, cached width or context: no FLOPs; a count below 0 (bad input) gives none, never negative ones
    for args in ((0, 128, 576, 64, 1024), (61, 0, 576, 64, 1024), (61, 128, 0, 64, 1024), (61, 128, 576, 64, 0),
                 (-1, 128, 576, 64, 1024), (61, -1, 576, 64, 1024), (61, 128, 576, 64, -5)):
        assert at(*args) == 0.0, args
    # one of each: a head's dot product over the (latent + rope)-wide key and its sum over the latent-wide value
    assert at(1, 1, 1, 0, 1) == 2.0 * (1 + 1)
    assert at(1, 1, 576, 64, 1) == 2.0 * (576 + 512)
    # no rotary part: the value is the whole latent
    assert at(1, 1, 576, 0, 1) == 2.0 * (576 + 576)


def test_mla_prefill_attention_is_the_decompressed_heads() -> None:
    w = serving.mla_prefill_attention_width
    # DeepSeek-V3: 128 heads x (128 nope + 64 rope + 128 v) / 2
    assert w(128, 128, 64, 128) == 20_480.0
    # every head counts, the first one included; no rotary part, or no unrotated part, adds nothing of its own
    assert w(1, 128, 64, 128) == 160.0
    assert w(128, 128, 0, 128) == 128 * 256 / 2
    assert w(128, 0, 64, 128) == 128 * 192 / 2
    # no head, no query/key width or no value width: no attention to run
    for args in ((0, 128, 64, 128), (128, 0, 0, 128), (128, 128, 64, 0), (128, 64, -64, 128), (-1, 128, 64, 128)):
        assert w(*args) == 0.0, args
    # a value of one element still attends
    assert w(2, 1, 0, 1) == 2.0


# --- expert all-to-all and attention data parallel -------------------------------------------------------------


def test_an_all_to_all_of_no_element_is_not_run() -> None:
    at = serving.expert_all_to_all_seconds
    assert at(128, 0, 7168, 22e-6, 630.0) == 0.0  # no expert per token: nothing dispatched
    assert at(128, 8, 0, 22e-6, 630.0) == 0.0  # no hidden width: no element to send
    # one token, one expert, one element: two latencies and 3 bytes (1 out in FP8, 2 back in 16-bit) at 1 GB/s
    assert at(1, 1, 1, 1e-6, 1.0) == pytest.approx(2e-6 + 3 / 1e9, rel=1e-12)
    # a rate under 1 GB/s is a rate (a slow link), not refused; its bytes take longer
    assert at(128, 8, 7168, 0.0, 0.5) == pytest.approx(128 * 8 * 7168 * 3 / 0.5e9, rel=1e-12)


ADP = dict(shared_gb=10.0, experts_gb=80.0, linear_flops=4e13, kv_gb=16.0, attn_flops=2e13, bandwidth_tbs=8.0,
           mbu=0.7, tflops=2250.0, mfu=0.5, attn_tflops=2250.0, floor_s=1e-3, overlap=0.5, moe_layers=61,
           sequences=1024, experts_per_token=8, hidden=7168, a2a_latency_s=22e-6, a2a_gbs=630.0)


def test_attention_dp_carries_no_prompt_and_keeps_the_overlap() -> None:
    # one GPU: the plain decode step, with no prefill attention (the worker's prompts are prefilled elsewhere) and
    # the memory-compute overlap it is given (the same calls: the same float)
    one = serving.attention_dp_decode_step_s(1, **ADP)
    assert one == serving.step_seconds(90.0, 4e13, 16.0, 2e13, 0.0, 8.0, 0.7, 2250.0, 0.5, 2250.0, 1e-3, 0.5)
    # no MoE layer: no dispatch or combine, the shares of the step alone
    none = serving.attention_dp_decode_step_s(8, **{**ADP, "moe_layers": 0})
    assert none == serving.step_seconds(10.0 + 10.0, 5e12, 2.0, 2.5e12, 0.0, 8.0, 0.7, 2250.0, 0.5, 2250.0, 1e-3,
                                        0.5)
    with pytest.raises(ValueError, match="gpus must be at least 1, got 0"):
        serving.attention_dp_decode_step_s(0, **ADP)


# --- width: the decode workers --------------------------------------------------------------------------------

MOE = {"params": 100, "active_params_billion": 10, "experts": 64, "experts_per_token": 4, "shared_params_billion": 5}
# A small MoE whose routed experts read under 1 GB a step at one session (0.2B routed parameters active, FP8)
TINY = {"params": 2, "active_params_billion": 0.5, "experts": 64, "experts_per_token": 4, "shared_params_billion": 0.3}


def _gen(sessions: int, toolchain: tuple[str, ...] = ("vllm",), precision: str = "BF16", **model):  # noqa: ANN001, ANN003, ANN202
    b = brief(toolchain=toolchain, parallelism=Parallelism(),
              model={"params_billion": model.pop("params", 8), "precision": precision, "context_tokens": 4000,
                     **model},
              traffic={"concurrent_sessions": sessions, "avg_input_tokens": 2000, "avg_output_tokens": 500})
    a = rules()
    shape = shape_of(b, a)
    assert shape is not None
    return b, shape, a


def _sizing(g):  # noqa: ANN001, ANN202
    s = Sizing(gpu=g)
    s.tflops = g.tflops_bf16
    return s


def _step(g, b, shape, a, n: int, synchrony=None) -> float:  # noqa: ANN001
    s = _sizing(g)
    wd.serving_speed(s, b, shape, a, n, {}, synchrony)
    return s.step_ms / 1000


def test_a_decode_worker_s_step_is_the_step_with_every_prompt_prefilled_apart() -> None:
    b, shape, a = _gen(64)
    g = gpu("h100-sxm")
    worker = wd.decode_only_step_s(_sizing(g), b, shape, a, 2, {})
    # every prompt prefilled apart (synchrony 1): none of them rides in the decode steps
    assert worker == pytest.approx(_step(g, b, shape, a, 2, 1.0), rel=1e-12)
    # vLLM prefills 15% of the others' prompts first and mixes the rest into the steps: those steps are longer
    assert efficiency(g, ("vllm",), a).prefill_first < 1
    assert worker < _step(g, b, shape, a, 2) * (1 - 1e-6)


def _adp(g, b, shape, a, n: int) -> float:  # noqa: ANN001
    return wd.attention_dp_decode_step_s(_sizing(g), b, shape, a, n, {})


def test_an_all_to_all_not_measured_runs_at_the_link_it_crosses() -> None:
    b, shape, _ = _gen(128, **MOE)
    link = 900.0
    nv8 = gpu("h100-sxm", interconnect_gbs=link, nvlink_domain=8)
    fast_us, slow_us = 9.0, 31.0
    base = dict(tp_allreduce_latency_us_fast_link=fast_us, tp_allreduce_latency_us_slow_link=slow_us)
    unmeasured = rules(**base, expert_all_to_all_by_gpu={})

    def measured(latency_us: float, gbs: float):  # noqa: ANN202
        return rules(**base, expert_all_to_all_by_gpu={"h100-sxm": {"latency_us": latency_us, "gbs": gbs}})

    # inside the NVLink domain: the fast link's all-reduce latency, and the link's one-way rate (half of its
    # bidirectional GB/s)
    assert _adp(nv8, b, shape, unmeasured, 8) == _adp(nv8, b, shape, measured(fast_us, link / 2), 8)
    # no table of measured figures at all reads as none measured
    assert _adp(nv8, b, shape, rules(**base, expert_all_to_all_by_gpu=None), 8) == _adp(
        nv8, b, shape, unmeasured, 8)
    # past the NVLink domain (8 GPUs over domains of 4): the slow link's latency
    nv4 = gpu("h100-sxm", interconnect_gbs=link, nvlink_domain=4)
    assert _adp(nv4, b, shape, unmeasured, 8) == _adp(nv4, b, shape, measured(slow_us, link / 2), 8)
    # an NVLink domain of one GPU: two GPUs already talk over the slow link
    nv1 = gpu("h100-sxm", interconnect_gbs=link, nvlink_domain=1)
    assert _adp(nv1, b, shape, unmeasured, 2) == _adp(nv1, b, shape, measured(slow_us, link / 2), 2)
    # a link of 1 GB/s both ways is 0.5 one way
    slow = gpu("h100-sxm", interconnect_gbs=1.0, nvlink_domain=8)
    assert _adp(slow, b, shape, unmeasured, 8) == _adp(slow, b, shape, measured(fast_us, 0.5), 8)
    # no link bandwidth known: 1 GB/s one way
    nolink = gpu("h100-sxm", interconnect_gbs=0.0, nvlink_domain=8)
    assert _adp(nolink, b, shape, unmeasured, 8) == _adp(nolink, b, shape, measured(fast_us, 1.0), 8)
    # each layer dispatches and combines once a step: 10 us more latency is 2 x layers x 10 us more a step
    extra = _adp(nv8, b, shape, measured(23.0, 258.0), 8) - _adp(nv8, b, shape, measured(13.0, 258.0), 8)
    assert extra == pytest.approx(2 * shape.arch.layers * 10e-6, rel=1e-9)


def test_on_one_gpu_attention_dp_is_the_plain_decode_worker() -> None:
    # one GPU holds every expert and every sequence: attention data parallel and tensor parallel are the same GPU,
    # reading the same weights (a small MoE's routed ones under 1 GB included)
    for model, precision in ((MOE, "BF16"), (TINY, "FP8")):
        b, shape, a = _gen(4, precision=precision, **model)
        assert shape.routed
        g = gpu("h100-sxm")
        assert _adp(g, b, shape, a, 1) == pytest.approx(wd.decode_only_step_s(_sizing(g), b, shape, a, 1, {}),
                                                        rel=1e-12)


def test_a_dense_model_is_refused_attention_dp_by_name() -> None:
    b, shape, a = _gen(4)
    with pytest.raises(ValueError, match=r"^attention data parallel with expert parallelism needs a routed MoE$"):
        _adp(gpu("h100-sxm"), b, shape, a, 2)



# --- links and the first token ----------------------------------------------------------------------------------


def test_an_all_reduce_of_nothing_needs_no_link_and_one_byte_is_sent() -> None:
    assert serving.allreduce_transfer_seconds(0.0, 4, 0.0) == 0.0  # nothing to send: no link read
    # one byte over two GPUs: each sends and receives 2 x 1/2 of it, one way at half of 1 GB/s
    assert serving.allreduce_transfer_seconds(1.0, 2, 1.0) == pytest.approx(1 / 0.5e9, rel=1e-12)
    with pytest.raises(ValueError, match=r"link_gbs must be positive, got -1\.0"):
        serving.allreduce_transfer_seconds(1e6, 4, -1.0)


def test_a_ring_goes_at_its_slowest_hop_whatever_the_rates() -> None:
    # one GPU under each CPU: a ring of two already crosses the sockets
    assert serving.ring_link_gbs(64.0, 2, 1, 10.0) == 20.0
    # a sockets' link under 1 GB/s one way, and a PCIe link of 1 GB/s, still bound the ring
    assert serving.ring_link_gbs(64.0, 8, 4, 0.5) == 1.0
    assert serving.ring_link_gbs(1.0, 8, 4, 0.2) == pytest.approx(0.4)


def test_a_wave_s_first_token_waits_for_its_chunks_then_a_step() -> None:
    # 4 prompts of 1,000 tokens in chunks of 2,048: prompts 1-2 end in chunk 1, prompts 3-4 in chunk 2 (1.5 chunks
    # on average), then one decode step emits the token, after the front end's own time
    ttft = serving.time_to_first_token(0.2, 0.3, 4, 1000, 2048, 0.01, 0.005)
    assert ttft == pytest.approx(0.005 + 1.5 * 0.2 + 0.01, rel=1e-12)
    # all 4 in one step's budget: they finish together after the whole wave's prefill
    assert serving.time_to_first_token(0.2, 0.3, 2, 1000, 2048, 0.01, 0.005) == pytest.approx(0.005 + 0.3 + 0.01)


def test_a_pcie_pair_under_two_cpus_crosses_the_sockets() -> None:
    b, shape, _ = _gen(8, layers=8)
    pcie = gpu("rtx-4090", interconnect_kind="pcie", interconnect_gbs=64.0, gpus_per_node=8, gpu_class="consumer")
    per = 1000 * shape.arch.hidden_size * 2.0

    def traffic_s(a, n: int) -> float:  # noqa: ANN001
        memo: dict = {}
        s = _sizing(pcie)
        wd.serving_speed(s, b, shape, a, n, memo)
        g = memo[("serving", id(pcie))]
        return wd._traffic(g, wd._width(g, n), 1000)

    # one GPU a socket: even a ring of two goes at the sockets' link (10 GB/s one way)
    one_each = rules(pcie_gpus_per_socket=1, pcie_cross_socket_gbs={"consumer": 10.0})
    assert traffic_s(one_each, 2) == pytest.approx(2 * 8 * serving.allreduce_transfer_seconds(per, 2, 20.0))
    # no figure for the card's class: no socket boundary to cross, the x16 link's rate
    other = rules(pcie_gpus_per_socket=4, pcie_cross_socket_gbs={"datacenter": 10.0})
    assert traffic_s(other, 8) == pytest.approx(2 * 8 * serving.allreduce_transfer_seconds(per, 8, 64.0))


def test_the_wave_guard_lets_zero_terms_through() -> None:
    # _wave_unread's bound needs no term below 0; a term of exactly 0 (no floor, no host time, no front-end time,
    # no layer, a one-token prompt, an MoE with no shared parameters) keeps it, so the wave is still not worked out
    b, shape, a = _gen(40, toolchain=(), **MOE)
    h100 = gpu("h100-sxm")
    memo: dict = {}
    wd.serving_speed(_sizing(h100), b, shape, a, 2, memo)
    g = memo[("serving", id(h100))]
    w = wd._width(g, 2)
    single, step = w.single, 0.02
    assert wd._wave_unread(g, w, single, step)
    w.overhead = 0.0
    g.host_s = 0.0
    g.s_in = 1
    g.layers = 0
    g.eff = dataclasses.replace(g.eff, request_s=0.0)
    g.shape = dataclasses.replace(g.shape, shared_params_billion=0.0)
    assert g.shape.routed
    assert wd._wave_unread(g, w, single, step)


def test_a_scheduler_polling_every_few_steps_holds_a_prompt_while_one_other_decodes() -> None:
    # SGLang polling every 10 decode steps: a prompt that arrives alone while the one other session decodes waits
    # (10 - 1) / 2 steps more on average; alone on an idle engine it is taken at once
    assert serving.receive_wait_s(0.01, 10, 1) == pytest.approx(0.045)
    assert serving.receive_wait_s(0.01, 2, 3) == pytest.approx(0.005)  # every other step: half a step
    h100 = gpu("h100-sxm")
    for sessions, steps in ((2, 4.5), (1, 0.0)):
        b, shape, _ = _gen(sessions, toolchain=("sglang",))
        polled, every = rules(scheduler_recv_interval={"sglang": 10}), rules(scheduler_recv_interval={})
        s, s1 = _sizing(h100), _sizing(h100)
        wd.serving_speed(s, b, shape, polled, 1, {}, 0.0)  # prompts arrive on their own
        wd.serving_speed(s1, b, shape, every, 1, {}, 0.0)
        assert s.step_ms == s1.step_ms
        assert s.est_ttft_ms - s1.est_ttft_ms == pytest.approx(steps * s.step_ms, rel=1e-9, abs=1e-9)


def test_a_kernel_s_bound_by_default_is_the_roofline_of_its_read_and_math() -> None:
    # 1 GB at 1 TB/s against 1e12 FLOPs at 1 PFLOPS: 1 ms each; no attention FLOPs, the longer of the two whole
    assert serving.bound_seconds(1.0, 1e12, 1.0, 1.0, 1000.0, 1.0) == 1e-3
    assert serving.bound_seconds(2.0, 1e12, 1.0, 1.0, 1000.0, 1.0) == 2e-3
    # attention FLOPs with no rate of their own run at the GEMMs' rate
    assert serving.bound_seconds(0.0, 1e12, 1.0, 1.0, 1000.0, 1.0, attn_flops=1e12) == pytest.approx(2e-3)
    # a rate of 0, or none at all, is refused by its name, whichever it is (not divided by)
    good = dict(bandwidth_tbs=1.0, mbu=1.0, tflops=1000.0, mfu=1.0)
    for name in good:
        for bad in (0, None):
            with pytest.raises(ValueError, match=f"^{name} must be positive, got {bad}"):
                serving.bound_seconds(1.0, 1e12, **{**good, name: bad})


def test_a_share_of_prompts_arriving_together_is_a_share() -> None:
    # synchrony is the share of the wave's extra wait a prompt meets: between 0 and 1, refused by name past either
    assert serving.blend_arrivals(0.2, 0.6, 1.0) == pytest.approx(0.6)
    for bad in (1.5, -0.5):
        with pytest.raises(ValueError, match=rf"^synchrony must be in \[0, 1\], got {bad}$"):
            serving.blend_arrivals(0.2, 0.6, bad)



def test_a_saturated_engine_holds_a_lone_prompt_behind_a_prefill_95_percent_of_the_time() -> None:
    # 14 others each prefilling 0.1 s per cycle of about 1.15 s (0.15 s to the first token, 100 steps of 10 ms)
    # ask for 1.4 s of prefill a cycle, more than the engine has (rho about 1.2): the share of time a prefill is
    # in flight is capped at 0.95 (M/D/1's wait grows without bound as rho nears 1), so the prompt waits half a
    # step in flight, its own prefill and 0.95 x half a prefill
    assert serving.lone_first_token(0.1, 0.01, 14, 100) == pytest.approx(0.005 + 0.1 + 0.95 * 0.05, rel=1e-12)
    assert serving.lone_first_token(1.0, 0.01, 24, 10) == pytest.approx(0.005 + 1.0 + 0.95 * 0.5, rel=1e-12)


def test_a_step_is_its_kernels_one_after_another() -> None:
    st = serving.step_seconds
    # rates of 1 TB/s and 1 TFLOPS at full use: 1 GB takes 1 ms, 1e9 FLOPs 1 ms, one FLOP 1 ps
    assert st(1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0) == 1e-3  # by default no floor and no other kernel
    # the GEMMs overlap their read and math by the share given: 2 ms read, 1 ms math, half hidden
    assert st(2.0, 1e9, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, overlap=0.5) == pytest.approx(2.5e-3, rel=1e-12)
    # decode attention: the KV read against its FLOPs, at the attention rate given, or the GEMMs' by default
    assert st(0.0, 0.0, 0.0, 1e9, 0.0, 1.0, 1.0, 2.0, 1.0) == pytest.approx(0.5e-3, rel=1e-12)
    assert st(0.0, 0.0, 0.0, 1e9, 0.0, 1.0, 1.0, 1.0, 1.0, attn_tflops=2.0) == pytest.approx(0.5e-3, rel=1e-12)
    assert st(0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0) == 1e-12  # even one FLOP takes its time
    # the KV read has no FLOPs of its own: at half overlap, 1 GB is 1 ms and nothing more
    assert st(0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, overlap=0.5) == 1e-3
    # a prompt's attention is compute, at the attention rate, after the other kernels
    assert st(0.0, 0.0, 0.0, 0.0, 1e9, 1.0, 1.0, 1.0, 1.0, attn_tflops=2.0) == pytest.approx(0.5e-3, rel=1e-12)
    assert st(0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0) == 1e-12
    # every kernel and the floor add up
    assert st(1.0, 0.0, 1.0, 0.0, 1e9, 1.0, 1.0, 1.0, 1.0, overhead_s=1e-3) == pytest.approx(4e-3, rel=1e-12)


def test_the_overlap_is_a_share_and_attention_runs_at_its_own_rate() -> None:
    b = serving.bound_seconds
    # no overlap: the read and the math one after the other (1 ms each)
    assert b(1.0, 1e12, 1.0, 1.0, 1000.0, 1.0, overlap=0.0) == pytest.approx(2e-3, rel=1e-12)
    for bad in (1.5, -0.5):
        with pytest.raises(ValueError, match=rf"^overlap must be in \[0, 1\], got {bad}$"):
            b(1.0, 1e12, 1.0, 1.0, 1000.0, 1.0, overlap=bad)
    # attention FLOPs at their own rate: 1e12 at 500 TFLOPS is 2 ms, beside 1 ms of GEMM math
    assert b(0.0, 1e12, 1.0, 1.0, 1000.0, 1.0, attn_flops=1e12, attn_tflops=500.0) == pytest.approx(3e-3, rel=1e-12)
