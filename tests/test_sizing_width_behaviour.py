"""decide/sizing/width.py: the serving speed of one model copy at a width and the width a generation brief is
served at, on small frozen inputs (hand-set GPUs and rules), worked by hand where the formula is short."""

from __future__ import annotations

import dataclasses

import pytest

from service.decide.sizing import width as wd
from tests.sizing_kit import gpu


def test_one_gpu_has_no_communication() -> None:
    g = gpu("h100-sxm")
    assert wd.parallel_overhead_s(g, 1, 1, 1, 80, 10.0, 30.0) == 0.0
    assert wd.parallel_overhead_s(g, 0, 1, 1, 80, 10.0, 30.0) == 0.0


def test_tensor_parallel_all_reduces_twice_a_layer_and_stages_hand_off_once_a_boundary() -> None:
    nv = gpu("h100-sxm", interconnect_kind="nvlink", nvlink_domain=8)
    assert wd.parallel_overhead_s(nv, 2, 2, 1, 80, 10.0, 30.0) == pytest.approx(2 * 80 * 10e-6)
    assert wd.parallel_overhead_s(nv, 16, 8, 2, 80, 10.0, 30.0) == pytest.approx(2 * 80 * 10e-6 + 30e-6)
    assert wd.parallel_overhead_s(nv, 3, 1, 3, 80, 10.0, 30.0) == pytest.approx(2 * 30e-6)  # stages only


# --- the serving speed at one width, against the model written out plainly ---------------------------------------

import math  # noqa: E402

from service.decide.sizing.common import Sizing, meets_latency, saturation  # noqa: E402
from service.decide.sizing.engines import efficiency  # noqa: E402
from service.decide.sizing.shape import shape_of  # noqa: E402
from service.decide.tables import scale_up  # noqa: E402
from service.domain.brief import Latency, Parallelism  # noqa: E402
from service.physics import compute, serving  # noqa: E402
from service.physics import memory as mem  # noqa: E402
from tests.sizing_kit import brief, rules  # noqa: E402

R = rules(tp_allreduce_latency_us_fast_link=9.0, tp_allreduce_latency_us_slow_link=31.0, moe_gemm_tile_rows=96,
          memory_compute_overlap=0.9, kernel_saturation_ms=0.05, moe_gemm_efficiency=0.55, mla_qk_nope_head_dim=100,
          mla_v_head_dim=120)


def plain_speed(g, tflops: float, b, shape, a, n: int, synchrony=None) -> dict[str, float]:  # noqa: ANN001
    """serving_speed's model, one formula after another, with nothing kept between calls."""
    eff = efficiency(g, b.toolchain, a)
    first = eff.prefill_first if synchrony is None else min(1.0, max(0.0, synchrony))
    arch = shape.arch
    link = g.interconnect_gbs if g.interconnect_gbs > 0 else 0.0
    fast_us, slow_us = a.num("tp_allreduce_latency_us_fast_link"), a.num("tp_allreduce_latency_us_slow_link")
    moe = shape.routed or shape.moe_estimated
    mfu = eff.mfu * (a.num("moe_gemm_efficiency") if moe else 1.0)
    attn_base = g.tflops_bf16 or tflops
    busy = saturation(tflops, shape.sequences * shape.tokens_per_sequence, arch.hidden_size,
                      a.num("kernel_saturation_ms"))
    c, s_in, s_out = shape.sequences, shape.input_tokens, shape.output_tokens
    p95 = b.traffic.p95_input_tokens or s_in
    pps = (c - 1) * s_in / max(1, s_out) * (1.0 - first)
    weights = mem.weights_gb(shape.params_read_billion(c + pps), shape.bytes_per_param)
    kv = mem.kv_cache_gb(arch, shape.avg_tokens_per_sequence, c, shape.kv_bytes)
    rope = max(0, arch.kv_latent - arch.kv_latent * 8 // 9)
    if arch.kind == "MLA":
        decode_attn = c * serving.mla_decode_attention_flops(arch.layers, arch.attention_heads, arch.kv_latent, rope,
                                                             shape.avg_tokens_per_sequence)
        width = serving.mla_prefill_attention_width(arch.attention_heads, 100, rope, 120) or arch.hidden_size
    else:
        decode_attn, width = 0.0, arch.hidden_size
    active = shape.active_params_billion * 1e9

    def attention(tokens: int) -> float:
        return compute.attention_flops(arch.layers, tokens, width, arch.window, arch.window_layers)

    ep = b.parallelism.expert_parallel
    ep_s = 0.0
    if ep > 1 and shape.routed:
        fast = g.fast_interconnect and ep <= max(g.nvlink_domain, 1)
        ep_s = 2 * arch.layers * (fast_us if fast else slow_us) / 1e6
    tp = min(n, scale_up(g), 8)
    cross = float(a.values["pcie_cross_socket_gbs"].get(g.gpu_class, 0.0))
    if tp > 1 and not g.fast_interconnect and tp > a.num("pcie_gpus_per_socket") and cross > 0:  # across sockets
        link = min(link, 2 * cross)
    stages = math.ceil(n / tp)
    overhead = eff.floor_s + ep_s
    if n > 1:
        fast = g.fast_interconnect and tp <= max(g.nvlink_domain, 1)
        overhead += (2 * arch.layers * (fast_us if fast else slow_us) / 1e6 if tp > 1 else 0.0)
        overhead += (stages - 1) * slow_us / 1e6
    bw, tfl, attn_tfl = g.bandwidth_tbs * n, tflops * n, attn_base * n

    def traffic(tokens: float) -> float:
        if tp <= 1 or link <= 0:
            return 0.0
        return 2 * arch.layers * serving.allreduce_transfer_seconds(tokens * arch.hidden_size * 2.0, tp, link)

    vocab = shape.vocab_params_billion * 1e9  # a prompt's embedding lookup and last-token logits: no prefill FLOPs

    def linear(tokens: float) -> float:
        if not shape.routed:
            return 2 * (active - vocab) * tokens
        shared = max(0.0, min(shape.shared_params_billion * 1e9 - vocab, active - vocab))
        use = serving.grouped_gemm_tile_use(tokens, shape.experts, shape.experts_per_token,
                                            int(a.num("moe_gemm_tile_rows")))
        return 2 * (shared + (active - vocab - shared) / use) * tokens

    overlap = a.num("memory_compute_overlap")
    step = serving.step_seconds(weights * stages, 2 * active * (c + pps), kv, decode_attn,
                                pps * attention(s_in) / max(1, s_in), bw, eff.mbu, tfl, mfu, attn_tfl,
                                overhead + traffic(c + pps), overlap)

    # the host's kernel launches per layer (an MoE layer launches moe_layer_launches times as many)
    host = arch.layers * eff.prefill_layer_s * (float(a.values.get("moe_layer_launches", 1.0)) if moe else 1.0)

    def prefill(tokens: int, prompt: int) -> float:
        read = mem.weights_gb(shape.params_read_billion(tokens), shape.bytes_per_param) * stages
        gpu_s = serving.step_seconds(read, linear(tokens), 0.0, 0.0, attention(prompt) * tokens / max(1, prompt), bw,
                                     eff.mbu, tfl, mfu, attn_tfl, overhead + traffic(tokens), overlap)
        return max(gpu_s, host + overhead)

    budget = eff.budget_tokens

    def chunked(prompt: int) -> float:  # whole chunks of the budget, then the last with what is left
        full, rest = divmod(prompt, budget)
        return full * prefill(budget, prompt) + (prefill(rest, prompt) if rest else 0.0)

    single = chunked(s_in)
    chunk = prefill(min(budget, max(1, c * s_in)), s_in)
    whole = chunk if c * s_in <= budget else 0.0
    alone = serving.lone_first_token(single, step, c - 1, s_out, eff.request_s)
    wave = alone if c <= 1 else serving.time_to_first_token(chunk, whole, c, s_in, budget, step, eff.request_s)
    ttft_avg = serving.blend_arrivals(alone, wave, first)
    ttft = ttft_avg
    if p95 > s_in:
        ttft += max(0.0, chunked(p95) - single)
    return {"effective_tflops": tflops * mfu * busy, "tokens_per_second": c * s_out / (ttft_avg + s_out * step),
            "step_ms": step * 1000, "itl_ms": step * 1000, "est_ttft_ms": ttft * 1000,
            "est_latency_ms": ttft * 1000 + s_out * step * 1000}


def gen(sessions: int = 16, inp: int = 1000, out: int = 200, p95: int = 0, toolchain=("vllm",), params: float = 8,  # noqa: ANN001
        r=R, ep: int = 0, latency=None, workload: str = "REALTIME_INFERENCE", **model):  # noqa: ANN001, ANN003, ANN201
    b = brief(workload, toolchain=toolchain, latency=latency, parallelism=Parallelism(expert_parallel=ep),
              model={"params_billion": params, "precision": "BF16", "context_tokens": 32000, **model},
              traffic={"concurrent_sessions": sessions, "avg_input_tokens": inp, "avg_output_tokens": out,
                       "p95_input_tokens": p95})
    s = shape_of(b, r)
    assert s is not None
    return b, s


def speed(g, b, shape, n: int, r=R, tflops: float | None = None, synchrony=None) -> dict[str, float]:  # noqa: ANN001
    s = Sizing(gpu=g)
    s.tflops = g.tflops_bf16 if tflops is None else tflops
    wd.serving_speed(s, b, shape, r, n, {}, synchrony)
    return {f: getattr(s, f) for f in wd.SPEED_FIELDS}


def _vocab(case, billion: float):  # noqa: ANN001, ANN202
    """A case whose model names its embedding and output matrices (vocab x hidden, both counted)."""
    b, shape = case
    return b, dataclasses.replace(shape, vocab_params_billion=billion)


MOE = {"params": 100, "active_params_billion": 10, "experts": 64, "experts_per_token": 4, "shared_params_billion": 5}
CASES = {
    "dense, one GPU": (gen(), "h100-sxm", 1),
    "dense, NVLink TP": (gen(), "h100-sxm", 2),
    "dense, two stages": (gen(params=70), "h100-sxm", 16),
    "dense, PCIe TP": (gen(params=70), "h100-pcie", 4),
    "no link bandwidth": (gen(params=70), "no-link", 2),
    "one session": (gen(sessions=1), "h100-sxm", 1),
    "a wave in one step": (gen(sessions=2, inp=900), "h100-sxm", 1),
    "a wave past the budget": (gen(sessions=64, inp=3000, toolchain=("sglang",)), "h100-sxm", 4),
    "long prompts chunked": (gen(sessions=8, inp=5000, p95=9000, toolchain=("llama.cpp",)), "h100-sxm", 1),
    "a p95 prompt in one chunk": (gen(sessions=8, inp=500, p95=1500), "h100-sxm", 2),
    "one output token": (gen(out=1), "h100-sxm", 1),
    "routed MoE, expert parallel": (gen(ep=4, **MOE), "h100-sxm", 4),
    "routed MoE, expert parallel past NVLink": (gen(ep=16, **MOE), "h100-sxm", 8),
    "routed MoE, PCIe expert parallel": (gen(ep=2, **MOE), "h100-pcie", 2),
    "routed MoE, one expert GPU": (gen(ep=1, **MOE), "h100-sxm", 2),
    "MoE, experts unknown": (gen(params=100, active_params_billion=10), "h100-sxm", 2),
    "MLA": (gen(params=100, attention="MLA", layers=40, sessions=200), "h200", 8),
    "windowed": (gen(sliding_window_tokens=512, sliding_window_layers=20, inp=4000), "h100-sxm", 1),
    "no engine named": (gen(toolchain=()), "l40s", 2),
    "consumer card": (gen(toolchain=("llama.cpp",), sessions=2), "rtx-4090", 1),
    "no 16-bit figure": (gen(), "no-bf16", 1),
    "an FP8 KV cache": (gen(kv_cache_precision="FP8"), "h100-sxm", 1),
    "two output tokens": (gen(out=2), "h100-sxm", 1),
    "one-token prompts": (gen(inp=1), "h100-sxm", 1),
    "two-token prompts": (gen(inp=2), "h100-sxm", 1),
    "a slow link": (gen(params=70), "slow-link", 2),
    "FP8 weights": (gen(precision="FP8"), "fp8", 2),
    "kernels not saturated": (gen(sessions=1, inp=50, out=20, context_tokens=100), "h100-sxm", 1),
    "nodes of one GPU": (gen(params=70), "one-gpu-node", 2),
    "past the tensor-parallel limit": (gen(params=400), "gb200", 16),
    "dense with its vocabulary matrices named": (_vocab(gen(), 1.0), "h100-sxm", 2),
    "routed MoE with its vocabulary matrices named": (_vocab(gen(ep=4, **MOE), 1.2), "h100-sxm", 4),
    "routed MoE whose vocabulary outweighs its shared part": (_vocab(gen(ep=4, **MOE), 6.0), "h100-sxm", 4),
    "MLA of given widths, longer p95 prompts": (gen(params=100, attention="MLA", layers=40, kv_lora_rank=200,
                                                    rope_head_dim=20, p95=6000, inp=2000), "h200", 8),
}


def _gpu(gid: str):  # noqa: ANN202
    if gid == "no-link":
        return gpu("h100-pcie", interconnect_gbs=0.0)
    if gid == "one-gpu-node":
        return gpu("rtx-4090", gpus_per_node=1)
    if gid == "no-bf16":
        return gpu("h100-sxm", tflops_bf16=0.0)
    if gid == "slow-link":
        return gpu("h100-pcie", interconnect_gbs=0.5)
    if gid == "fp8":
        return gpu("h100-sxm")
    return gpu(gid)


@pytest.mark.parametrize("case", list(CASES))
def test_the_serving_speed_is_the_model_written_out(case) -> None:  # noqa: ANN001
    (b, shape), gid, n = CASES[case]
    g = _gpu(gid)
    tflops = 500.0 if gid == "no-bf16" else g.tflops_fp8 if gid == "fp8" else g.tflops_bf16
    got, want = speed(g, b, shape, n, tflops=tflops), plain_speed(g, tflops, b, shape, R, n)
    assert got == pytest.approx(want, rel=1e-12)
    assert got["tokens_per_second"] > 0 and got["est_ttft_ms"] > 0


@pytest.mark.parametrize("synchrony", [-0.5, 0.0, 0.3, 1.0, 2.0])
def test_how_the_prompts_arrive_overrides_the_engines_share(synchrony) -> None:  # noqa: ANN001
    b, shape = gen(sessions=32, inp=3000)
    g = gpu()
    got = speed(g, b, shape, 2, synchrony=synchrony)
    assert got == pytest.approx(plain_speed(g, g.tflops_bf16, b, shape, R, 2, synchrony), rel=1e-12)


def test_the_wave_waits_longer_than_a_lone_prompt() -> None:
    b, shape = gen(sessions=32, inp=3000)
    g = gpu()
    alone, wave = speed(g, b, shape, 2, synchrony=0.0), speed(g, b, shape, 2, synchrony=1.0)
    assert wave["est_ttft_ms"] > alone["est_ttft_ms"]


def test_more_sessions_raise_throughput_and_the_step() -> None:
    g = gpu()
    last = None
    for sessions in (1, 2, 8, 32, 128):
        b, shape = gen(sessions=sessions)
        got = speed(g, b, shape, 1)
        if last:
            assert got["tokens_per_second"] > last["tokens_per_second"]
            assert got["step_ms"] > last["step_ms"]
        last = got


def test_a_longer_prompt_never_comes_sooner() -> None:
    g = gpu()
    last = 0.0
    for inp in (100, 1000, 8000, 8192, 8193, 20000):
        b, shape = gen(sessions=4, inp=inp)
        got = speed(g, b, shape, 1)["est_ttft_ms"]
        assert got > last
        last = got


def test_a_speed_kept_for_one_gpu_is_not_read_for_another() -> None:
    b, shape = gen()
    memo: dict = {}
    fast, slow = gpu("h200"), gpu("h200", bandwidth_tbs=1.0)
    s1, s2 = Sizing(gpu=fast), Sizing(gpu=slow)
    s1.tflops = s2.tflops = fast.tflops_bf16
    wd.serving_speed(s1, b, shape, R, 1, memo)
    wd.serving_speed(s2, b, shape, R, 1, memo)
    assert s2.step_ms > s1.step_ms
    assert s2.step_ms == pytest.approx(plain_speed(slow, fast.tflops_bf16, b, shape, R, 1)["step_ms"], rel=1e-12)
    s3 = Sizing(gpu=fast)  # the same GPU at another TFLOPS figure
    s3.tflops = fast.tflops_bf16 / 2
    wd.serving_speed(s3, b, shape, R, 1, memo)
    assert s3.effective_tflops == pytest.approx(plain_speed(fast, s3.tflops, b, shape, R, 1)["effective_tflops"])
    s4 = Sizing(gpu=fast)  # and under other rules
    s4.tflops = fast.tflops_bf16
    r2 = rules(R, kernel_saturation_ms=5.0)
    wd.serving_speed(s4, b, shape, r2, 1, memo)
    assert s4.effective_tflops == pytest.approx(plain_speed(fast, s4.tflops, b, shape, r2, 1)["effective_tflops"])
    s5 = Sizing(gpu=fast)  # and at another synchrony
    s5.tflops = fast.tflops_bf16
    wd.serving_speed(s5, b, shape, R, 1, memo, 1.0)
    assert s5.est_ttft_ms == pytest.approx(plain_speed(fast, s5.tflops, b, shape, R, 1, 1.0)["est_ttft_ms"])


def test_widths_kept_across_output_lengths_in_the_shared_prefill_table() -> None:
    g = gpu()
    prefills: dict = {}
    for out in (50, 400, 50):
        b, shape = gen(sessions=8, inp=2000, p95=4000, out=out)
        for n in (1, 2):
            s = Sizing(gpu=g)
            s.tflops = g.tflops_bf16
            wd.serving_speed(s, b, shape, R, n, {("prefill",): prefills})
            assert {f: getattr(s, f) for f in wd.SPEED_FIELDS} == pytest.approx(
                plain_speed(g, g.tflops_bf16, b, shape, R, n), rel=1e-12)
    for sessions in (8, 9):  # another concurrency at the same lengths
        b, shape = gen(sessions=sessions, inp=2000, p95=4000, out=50)
        s = Sizing(gpu=g)
        s.tflops = g.tflops_bf16
        wd.serving_speed(s, b, shape, R, 2, {("prefill",): prefills})
        assert s.est_ttft_ms == pytest.approx(plain_speed(g, g.tflops_bf16, b, shape, R, 2)["est_ttft_ms"], rel=1e-12)


# --- the pieces, worked by hand -----------------------------------------------------------------------------------

def test_communication_over_a_slow_link_or_past_the_nvlink_domain() -> None:
    pcie = gpu("h100-pcie")
    assert not pcie.fast_interconnect
    assert wd.parallel_overhead_s(pcie, 2, 2, 1, 80, 10.0, 30.0) == pytest.approx(2 * 80 * 30e-6)
    nv4 = gpu("h100-sxm", interconnect_kind="nvlink", nvlink_domain=4)
    assert wd.parallel_overhead_s(nv4, 4, 4, 1, 80, 10.0, 30.0) == pytest.approx(2 * 80 * 10e-6)
    assert wd.parallel_overhead_s(nv4, 8, 8, 1, 80, 10.0, 30.0) == pytest.approx(2 * 80 * 30e-6)
    nv0 = gpu("h100-sxm", interconnect_kind="nvlink", nvlink_domain=0)  # a domain of one
    assert wd.parallel_overhead_s(nv0, 2, 2, 1, 80, 10.0, 30.0) == pytest.approx(2 * 80 * 30e-6)
    assert wd.parallel_overhead_s(nv0, 2, 1, 2, 80, 10.0, 30.0) == pytest.approx(30e-6)


def test_a_pcie_ring_wider_than_a_socket_goes_at_the_sockets_link() -> None:
    # 8 PCIe GPUs, 4 under each CPU: the all-reduce ring crosses the sockets' link (10 GB/s one way here, where the
    # x16 link is 32 one way); 4 of them stay under one CPU; NVLink GPUs never cross a socket.
    a = rules(R, pcie_gpus_per_socket=4, pcie_cross_socket_gbs={"consumer": 10.0, "datacenter": 22.0})
    b, shape = gen(layers=8)
    pcie = gpu("rtx-4090", interconnect_kind="pcie", interconnect_gbs=64.0, gpus_per_node=8)
    nv = gpu("h100-sxm", interconnect_kind="nvlink", interconnect_gbs=900.0, nvlink_domain=8, gpus_per_node=8)

    def traffic_s(g, n: int) -> float:  # noqa: ANN001
        memo: dict = {}
        s = Sizing(gpu=g)
        s.tflops = g.tflops_bf16
        wd.serving_speed(s, b, shape, a, n, memo)
        gk = memo[("serving", id(g))]
        return wd._traffic(gk, wd._width(gk, n), 1000)

    per = 1000 * shape.arch.hidden_size * 2.0
    assert traffic_s(pcie, 8) == pytest.approx(2 * 8 * serving.allreduce_transfer_seconds(per, 8, 20.0))
    assert traffic_s(pcie, 4) == pytest.approx(2 * 8 * serving.allreduce_transfer_seconds(per, 4, 64.0))
    assert traffic_s(nv, 8) == pytest.approx(2 * 8 * serving.allreduce_transfer_seconds(per, 8, 900.0))
    # a datacenter card's host: the class's own figure (a Sapphire Rapids link: 22 GB/s one way)
    l40 = gpu("l40s", interconnect_kind="pcie", interconnect_gbs=64.0, gpus_per_node=8, gpu_class="datacenter")
    assert traffic_s(l40, 8) == pytest.approx(2 * 8 * serving.allreduce_transfer_seconds(per, 8, 44.0))
    slow = rules(a, pcie_cross_socket_gbs={"consumer": 100.0})  # a sockets' link faster than x16: the x16 binds
    s = Sizing(gpu=pcie)
    s.tflops = pcie.tflops_bf16
    memo: dict = {}
    wd.serving_speed(s, b, shape, slow, 8, memo)
    gk = memo[("serving", id(pcie))]
    assert wd._traffic(gk, wd._width(gk, 8), 1000) == pytest.approx(
        2 * 8 * serving.allreduce_transfer_seconds(per, 8, 64.0))


def test_expert_parallel_dispatch_and_combine() -> None:
    b, shape = gen(ep=4, **MOE)
    nv = gpu("h100-sxm")
    assert wd.expert_parallel_s(b, shape, nv, R) == pytest.approx(2 * shape.arch.layers * 9.0 / 1e6)
    assert wd.expert_parallel_s(b, shape, gpu("h100-pcie"), R) == pytest.approx(2 * shape.arch.layers * 31.0 / 1e6)
    b8, _ = gen(ep=8, **MOE)
    assert wd.expert_parallel_s(b8, shape, nv, R) == pytest.approx(2 * shape.arch.layers * 9.0 / 1e6)
    b9, _ = gen(ep=9, **MOE)
    assert wd.expert_parallel_s(b9, shape, nv, R) == pytest.approx(2 * shape.arch.layers * 31.0 / 1e6)
    one = gpu("h100-sxm", nvlink_domain=1)  # an NVLink domain of one GPU: two experts' GPUs talk over the slow link
    assert wd.expert_parallel_s(gen(ep=2, **MOE)[0], shape, one, R) == pytest.approx(2 * shape.arch.layers * 31.0 / 1e6)
    b1, _ = gen(ep=1, **MOE)
    assert wd.expert_parallel_s(b1, shape, nv, R) == 0.0
    b2, _ = gen(ep=2, **MOE)
    assert wd.expert_parallel_s(b2, shape, nv, R) > 0
    bd, dense = gen(ep=4)
    assert wd.expert_parallel_s(bd, dense, nv, R) == 0.0


def test_mla_attention_runs_at_its_decompressed_heads() -> None:
    _, shape = gen(params=100, attention="MLA", layers=40)
    arch = shape.arch
    assert arch.kind == "MLA" and arch.kv_latent > 0
    rope = arch.kv_latent - arch.kv_latent * 8 // 9
    assert wd.attention_width(shape, R) == serving.mla_prefill_attention_width(arch.attention_heads, 100, rope, 120)
    assert wd.decode_attention_flops(shape, 3) == 3 * serving.mla_decode_attention_flops(
        arch.layers, arch.attention_heads, arch.kv_latent, rope, shape.avg_tokens_per_sequence)
    _, dense = gen()
    assert wd.attention_width(dense, R) == float(dense.arch.hidden_size)
    assert wd.decode_attention_flops(dense, 3) == 0.0
    tiny = dataclasses.replace(shape, arch=dataclasses.replace(arch, kv_latent=0, attention_heads=0))
    assert wd.attention_width(tiny, R) == float(arch.hidden_size)  # no heads: the hidden size


def test_gpus_per_rate() -> None:
    assert wd._per_rate(4, 2.0) == 2.0
    assert wd._per_rate(4, 1e-12) == 4e12
    assert wd._per_rate(4, 0.0) == 4e12
    assert wd._per_rate(4, -3.0) == 4e12


# --- the width a copy is served at ----------------------------------------------------------------------------------

SIZES = (1, 2, 4, 8, 16, 24, 32)


def plain_pick(g, b, shape, n: int, sizes=SIZES) -> tuple[int, dict[int, dict[str, float]]]:  # noqa: ANN001
    """Every width from n to the node's tensor-parallel domain sized; the least (unmet, latency or GPUs per
    token/s, width) wins."""
    domain = min(scale_up(g), 8)
    widths = [n, *(k for k in sizes if n < k <= domain)]
    lat = b.latency
    target = (lat.p95_ms > 0 or lat.ttft_ms > 0) and b.workload == "REALTIME_INFERENCE"
    figures, keys = {}, []
    for k in widths:
        f = figures[k] = plain_speed(g, g.tflops_bf16, b, shape, R, k)
        probe = Sizing(gpu=g)
        probe.est_latency_ms, probe.est_ttft_ms = f["est_latency_ms"], f["est_ttft_ms"]
        ok = meets_latency(probe, lat) if target else True
        keys.append((False, k / max(f["tokens_per_second"], 1e-12), k) if ok else (True, f["est_latency_ms"], k))
    return min(keys)[2], figures


def pick(g, b, shape, n: int, prune: bool = True, smallest_first: bool = True, sizes=SIZES):  # noqa: ANN001, ANN201
    s = Sizing(gpu=g)
    s.tflops = g.tflops_bf16
    tried: dict = {}
    k = wd.pick_width(s, b, shape, R, n, sizes, g, {}, tried, prune, smallest_first)
    return k, {f: getattr(s, f) for f in wd.SPEED_FIELDS}, tried


PICKS = {
    "no target: the fewest GPUs per token/s": (gen(sessions=64, params=8), "h100-sxm", 1),
    "no target, from two": (gen(sessions=64, params=70), "h100-sxm", 2),
    "PCIe": (gen(sessions=64, params=70), "h100-pcie", 2),
    "a target every width meets": (gen(sessions=16, latency=Latency(p95_ms=1e6)), "h100-sxm", 1),
    "a target only wide widths meet": (gen(sessions=64, params=70, latency=Latency(p95_ms=7000)), "h100-sxm", 2),
    "a target only the widest meets": (gen(sessions=64, params=70, latency=Latency(p95_ms=4000)), "h100-sxm", 2),
    "a first-token target": (gen(sessions=256, inp=4000, latency=Latency(ttft_ms=900)), "h100-sxm", 1),
    "a 1 ms first-token target": (gen(sessions=64, params=8, latency=Latency(ttft_ms=1.0)), "h100-sxm", 1),
    "a target no width meets": (gen(sessions=64, params=70, latency=Latency(p95_ms=10)), "h100-sxm", 2),
    "a batch target is not held": (gen(sessions=64, workload="BATCH_INFERENCE", latency=Latency(p95_ms=10)),
                                   "h100-sxm", 1),
    "one GPU a node": (gen(sessions=8, latency=Latency(p95_ms=10)), "one-gpu-node", 1),
    "eight PCIe cards a node": (gen(sessions=8, latency=Latency(p95_ms=10)), "rtx-4090", 1),
}


@pytest.mark.parametrize("case", list(PICKS))
@pytest.mark.parametrize(("prune", "smallest_first"), [(True, True), (False, True), (True, False)])
def test_the_width_picked_is_the_best_of_every_width_sized(case, prune, smallest_first) -> None:  # noqa: ANN001
    (b, shape), gid, n = PICKS[case]
    g = _gpu(gid)
    want, figures = plain_pick(g, b, shape, n)
    k, got, tried = pick(g, b, shape, n, prune, smallest_first)
    assert k == want
    assert got == pytest.approx(figures[want], rel=1e-12)  # the figures on `s` are the chosen width's
    assert set(tried) <= set(figures) and want in tried
    for w, values in tried.items():
        assert dict(zip(wd.SPEED_FIELDS, values, strict=True)) == pytest.approx(figures[w], rel=1e-12)
    if not prune:
        assert set(tried) == set(figures)


def test_the_picks_cover_each_kind_of_answer() -> None:
    picked = {case: plain_pick(_gpu(gid), b, shape, n)[0] for case, ((b, shape), gid, n) in PICKS.items()}
    assert picked["no target: the fewest GPUs per token/s"] == 1
    assert picked["a target every width meets"] == 1
    assert picked["a target only wide widths meet"] == 4  # the cheaper of the two that meet it
    assert picked["a target only the widest meets"] == 8
    assert picked["no target, from two"] == 2
    assert picked["a target no width meets"] == 8  # the fastest
    assert picked["one GPU a node"] == 1
    # the fastest of eight PCIe cards is four under one CPU: eight all-reduce across the sockets' link (issue 36)
    assert picked["eight PCIe cards a node"] == 4


def test_widths_past_the_nodes_domain_are_not_tried() -> None:
    b, shape = gen(sessions=64, params=8, latency=Latency(p95_ms=10))
    k, _, tried = pick(gpu(), b, shape, 1, prune=False)
    assert set(tried) == {1, 2, 4, 8} and k == 8
    k, _, tried = pick(gpu(), b, shape, 16, prune=False)  # memory needs more than the domain: that width alone
    assert (k, set(tried)) == (16, {16})
    k, _, tried = pick(gpu(), b, shape, 2, prune=False, sizes=(2, 8))
    assert set(tried) == {2, 8}


def test_under_a_target_the_smallest_then_the_widest_are_sized_first() -> None:
    b, shape = gen(sessions=64, params=8, latency=Latency(p95_ms=1e6))
    _, _, tried = pick(gpu(), b, shape, 1, prune=False)
    assert list(tried) == [1, 8, 4, 2]
    _, _, tried = pick(gpu(), b, shape, 1, prune=False, smallest_first=False)
    assert list(tried) == [8, 4, 2, 1]
    b, shape = gen(sessions=64, params=8)
    _, _, tried = pick(gpu(), b, shape, 1, prune=False, smallest_first=False)
    assert list(tried) == [1, 2, 4, 8]  # no target: in width order


def test_equal_keys_go_to_the_narrower_width() -> None:
    # a figure that does not move with width: every width has the same latency, the narrowest is kept
    b, shape = gen(sessions=4, params=8, latency=Latency(p95_ms=1e-3))
    k, _, _ = pick(gpu(), b, shape, 1, prune=False)
    want, _ = plain_pick(gpu(), b, shape, 1)
    assert k == want


def test_a_width_search_without_a_record_of_what_it_tried() -> None:
    (b, shape), gid, n = PICKS["a target only wide widths meet"]
    g = _gpu(gid)
    s = Sizing(gpu=g)
    s.tflops = g.tflops_bf16
    assert wd.pick_width(s, b, shape, R, n, SIZES, g, {}) == plain_pick(g, b, shape, n)[0]


def test_a_1_ms_first_token_target_is_a_target() -> None:
    (b, shape), gid, n = PICKS["a 1 ms first-token target"]
    assert plain_pick(_gpu(gid), b, shape, n)[0] == 8  # unmet everywhere: the fastest, not the cheapest


def test_the_cases_reach_each_regime() -> None:
    (b, shape), gid, n = CASES["kernels not saturated"]
    g = _gpu(gid)
    busy = saturation(g.tflops_bf16, shape.sequences * shape.tokens_per_sequence, shape.arch.hidden_size, 0.05)
    assert busy < 1
    (b, shape), _, _ = CASES["an FP8 KV cache"]
    assert shape.kv_bytes != 2.0


def _kept_speed(first: dict, then: dict) -> tuple[dict[str, float], dict[str, float]]:
    """Sizes `first` then `then` (each: gpu, tflops, rules, synchrony) through one memo: `then`'s figures, and
    what they are with nothing kept."""
    b, shape = gen(sessions=16, inp=3000)
    memo: dict = {}
    for args in (first, then):
        s = Sizing(gpu=args["gpu"])
        s.tflops = args["tflops"]
        wd.serving_speed(s, b, shape, args["rules"], 1, memo, args["sync"])
    want = plain_speed(then["gpu"], then["tflops"], b, shape, then["rules"], 1, then["sync"])
    return {f: getattr(s, f) for f in wd.SPEED_FIELDS}, want


@pytest.mark.parametrize("change", ["gpu", "tflops", "rules", "sync"])
def test_what_is_kept_for_one_gpu_tflops_rules_or_arrival_is_not_read_for_another(change) -> None:  # noqa: ANN001
    g = gpu("h200")
    first = {"gpu": g, "tflops": g.tflops_bf16, "rules": R, "sync": None}
    other = {"gpu": gpu("h200", bandwidth_tbs=1.0, tflops_bf16=300.0), "tflops": g.tflops_bf16 / 2,
             "rules": rules(R, kernel_saturation_ms=50.0, serving_engines={
                 "vllm": {"decode_bandwidth_use": 0.3, "prefill_mfu": 0.2, "step_floor_ms": 5.0, "token_budget": 512,
                          "request_ms": 70.0, "prefill_first": 0.6}}),
             "sync": 1.0}
    got, want = _kept_speed(first, {**first, change: other[change]})
    if change in ("tflops", "rules"):
        # within a request (one memo) a GPU's TFLOPS and the rules are fixed, and the prompts' prefill times kept
        # by GPU and width are not asked again; the GPU's own figures are
        got, want = {"effective_tflops": got["effective_tflops"]}, {"effective_tflops": want["effective_tflops"]}
    assert got == pytest.approx(want, rel=1e-12)
    assert got != pytest.approx({k: _kept_speed(first, first)[1][k] for k in got}, rel=1e-6)


def test_figures_kept_under_a_gpus_id_are_read_only_for_that_gpu() -> None:
    b, shape = gen(sessions=16, inp=3000, p95=5000)
    a_gpu, b_gpu = gpu("h200"), gpu("h200", bandwidth_tbs=1.0, tflops_bf16=300.0, interconnect_gbs=100.0)
    memo: dict = {}
    s = Sizing(gpu=a_gpu)
    s.tflops = a_gpu.tflops_bf16
    for n in (1, 2):
        wd.serving_speed(s, b, shape, R, n, memo)
    # every figure kept for the first GPU moved under the second's id, as when a GPU object's id is reused
    old, new = id(a_gpu), id(b_gpu)

    def moved(key):  # noqa: ANN001, ANN202
        return tuple(new if k == old else k for k in key) if isinstance(key, tuple) else key

    prefills = memo[("prefill",)]
    for table in (memo, prefills):
        for key in list(table):
            if key != ("prefill",):
                table[moved(key)] = table.pop(key)
    t = Sizing(gpu=b_gpu)
    t.tflops = a_gpu.tflops_bf16
    for n in (1, 2):
        wd.serving_speed(t, b, shape, R, n, memo)
        assert {f: getattr(t, f) for f in wd.SPEED_FIELDS} == pytest.approx(
            plain_speed(b_gpu, a_gpu.tflops_bf16, b, shape, R, n), rel=1e-12)


@pytest.mark.parametrize("case", list(CASES))
def test_a_floor_is_never_above_what_the_width_is_sized_at(case) -> None:  # noqa: ANN001
    """serving_floor is what pick_width rules widths out with: a floor above the sized figures could rule out the
    width that wins. Held at the rules' own overlap (1: the roofline), where the floor is tightest, and against
    `_cannot_win` at the width's own key (a width never surely loses to itself)."""
    (b, shape), gid, n = CASES[case]
    g = _gpu(gid)
    tflops = 500.0 if gid == "no-bf16" else g.tflops_fp8 if gid == "fp8" else g.tflops_bf16
    a = rules(R, memory_compute_overlap=1.0)
    for k in sorted({n, 2 * n}):
        s = Sizing(gpu=g)
        s.tflops = tflops
        memo: dict = {}
        wd.serving_speed(s, b, shape, a, k, memo)
        kg = wd._serving_gpu(s, b, shape, a, memo, None)
        ttft_s, step_s = wd.serving_floor(kg, k)
        assert ttft_s * 1000 <= s.est_ttft_ms * (1 + 1e-12) and step_s * 1000 <= s.step_ms * (1 + 1e-12)
        lat = Latency(p95_ms=s.est_latency_ms, ttft_ms=s.est_ttft_ms)
        met = (False, wd._per_rate(k, s.tokens_per_second), k)
        unmet = (True, s.est_latency_ms, k)
        for target in (True, False):
            assert not wd._cannot_win(kg, k, met, lat, target)
            assert not wd._cannot_win(kg, k, unmet, Latency(p95_ms=s.est_latency_ms / 2), target)


FLOOR_CASES = {**{k: CASES[k] for k in ("dense, one GPU", "dense, NVLink TP", "long prompts chunked", "one session",
                                         "dense with its vocabulary matrices named")},
               "routed MoE, long prompts, vocabulary named": (_vocab(gen(ep=4, inp=6000, **MOE), 1.2), "h100-sxm", 4)}


@pytest.mark.parametrize("case", list(FLOOR_CASES))
def test_the_floors_first_token_is_its_chunks_floors_and_linear_flops(case) -> None:  # noqa: ANN001
    """The first-token floor written out: the front end's time, each chunk's step floor and the prompt's linear
    FLOPs without the vocabulary matrices at the width's math rate (the GPU's peak x width x the engine's share),
    or the front end's time and one decode step's floor when that is longer."""
    (b, shape), gid, n = FLOOR_CASES[case]
    g = _gpu(gid)
    s = Sizing(gpu=g)
    s.tflops = g.tflops_bf16
    memo: dict = {}
    wd.serving_speed(s, b, shape, R, n, memo)
    kg = wd._serving_gpu(s, b, shape, R, memo, None)
    ttft_s, step_s = wd.serving_floor(kg, n)
    w, eff = wd._width(kg, n), kg.eff
    math_rate = s.tflops * n * 1e12 * kg.mfu
    assert w.math_rate == pytest.approx(math_rate, rel=1e-12)
    linear = 2 * (shape.active_params_billion - shape.vocab_params_billion) * 1e9 * shape.input_tokens / math_rate
    head = eff.request_s + math.ceil(shape.input_tokens / eff.budget_tokens) * w.overhead + linear
    assert ttft_s == pytest.approx(max(head, eff.request_s + step_s), rel=1e-12)
    assert head > eff.request_s + step_s  # the prompt's floor, not the step's, is what these cases hold
