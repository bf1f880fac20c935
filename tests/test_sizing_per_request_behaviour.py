"""decide/sizing/per_request.py: RequestSizer, `size`'s fast path, gives every field `size` (per_gpu.py, the plain
reference) gives, on briefs of every workload kind, GPUs of each kind, quotes and economics; and what it keeps
between GPUs and requests (a GPU's speeds, memory breakdowns) is never read for another."""

from __future__ import annotations

import dataclasses
import math
from datetime import date

import pytest

from service.decide import tables as tb
from service.decide.sizing.per_gpu import size
from service.decide.sizing.per_request import SPEED_BRIEFS, RequestSizer
from service.decide.sizing.shape import shape_of
from service.domain.brief import Brief, Economics, Latency, Media, Model, Quote, Traffic, Training
from service.domain.catalog import Price
from tests.sizing_kit import A, gpu, rules

DAY = date(2026, 11, 15)


def _brief(workload: str, **kw) -> Brief:  # noqa: ANN003
    model = kw.pop("model", {})
    traffic = kw.pop("traffic", {})
    return Brief(workload=workload, model=Model(**{"params_billion": 8, "precision": "BF16", "context_tokens": 8192,
                                                   **model}),
                 traffic=Traffic(**traffic), **kw)


CHAT = {"concurrent_sessions": 16, "avg_input_tokens": 1000, "avg_output_tokens": 200, "requests_per_second": 3.0}
BRIEFS = {
    "chat": _brief("REALTIME_INFERENCE", traffic=CHAT, latency=Latency(p95_ms=8000)),
    "chat, responses, accepted half": _brief("REALTIME_INFERENCE", traffic=CHAT, success_unit="RESPONSE",
                                             economics=Economics(acceptance_rate=0.5, utilization=0.4)),
    "chat, no load": _brief("REALTIME_INFERENCE", traffic={**CHAT, "requests_per_second": 0.0},
                            economics=Economics(utilization=0.3, electricity_usd_per_kwh=0.2)),
    "batch, tasks": _brief("BATCH_INFERENCE", traffic={"batch_size": 64, "avg_input_tokens": 2000,
                                                       "avg_output_tokens": 500}, success_unit="TASK",
                           model={"params_billion": 70}),
    "evaluation suite": _brief("EVALUATION", traffic={"batch_size": 8}, success_unit="EVAL_SUITE"),
    "embedding records": _brief("EMBEDDING", traffic={"batch_size": 32, "avg_input_tokens": 400,
                                                      "requests_per_second": 50.0}, success_unit="RECORD",
                                model={"params_billion": 0.5}),
    "embedding, no batch": _brief("EMBEDDING", model={"params_billion": 0.5}, economics=Economics(acceptance_rate=1.0)),
    "images": _brief("MEDIA_GENERATION", success_unit="IMAGE", model={"params_billion": 12},
                     traffic={"requests_per_second": 0.5}),
    "images, no load": _brief("MEDIA_GENERATION", success_unit="IMAGE", model={"params_billion": 12},
                              economics=Economics(utilization=0.5)),
    "video": _brief("MEDIA_GENERATION", success_unit="IMAGE", model={"params_billion": 12},
                    media=Media(frames=49, width_px=640, height_px=480)),
    "pretraining": _brief("PRETRAINING", model={"params_billion": 7}, training=Training(tokens_billion=50,
                                                                                       target_days=20)),
    "fine-tuning, checkpoints": _brief("FULL_FINETUNE", training=Training(tokens_billion=1), success_unit="CHECKPOINT",
                                       traffic={"batch_size": 8}),
    "fine-tuning, responses": _brief("FULL_FINETUNE", training=Training(tokens_billion=1), success_unit="RESPONSE"),
    "adapter": _brief("ADAPTER_FINETUNE", training=Training(tokens_billion=0.2), model={"precision": "INT4"}),
    "too big to fit": _brief("REALTIME_INFERENCE", traffic=CHAT, model={"params_billion": 4000}),
}
GPU_IDS = ("h100-sxm", "gb200", "a100-80gb", "rtx-4090", "mi300x")


def _fields(s) -> dict:  # noqa: ANN001
    return dict(vars(s))


def _both(b: Brief, g, a=None, quotes=(), speeds=None):  # noqa: ANN001, ANN202
    a = a or rules()
    shape = shape_of(b, a)
    assert shape is not None
    t = tb.Tables(a)
    fast = RequestSizer(b, shape, a, t.constants, quotes, DAY, speeds=speeds).size(tb.gpu_table(g, t.constants))
    return fast, size(g, b, shape, a, quotes, DAY)


@pytest.mark.parametrize("case", list(BRIEFS))
def test_every_field_as_size_sizes_it(case) -> None:  # noqa: ANN001
    b = BRIEFS[case]
    a = rules()
    for gid in GPU_IDS:
        fast, plain = _both(b, gpu(gid), a)
        assert _fields(fast) == _fields(plain), gid


def test_the_cases_cover_each_kind_of_figure() -> None:
    a = rules()
    got = {case: _both(b, gpu("h100-sxm"), a)[0] for case, b in BRIEFS.items()}
    assert got["chat"].usd_per_unit > 0 and got["chat"].unit == "TOKEN"
    assert got["chat, responses, accepted half"].unit == "RESPONSE" and got["chat, no load"].units_per_hour > 0
    assert got["batch, tasks"].count > 1
    assert got["evaluation suite"].units_per_hour == 0.0  # a suite is not counted per token
    assert got["embedding records"].unit == "RECORD" and got["embedding records"].usd_per_unit > 0
    assert got["images"].units_per_hour == 0.5 * 3600 and got["images, no load"].units_per_hour > 0
    assert got["video"].units_per_hour == 0.0
    assert got["pretraining"].unit == "TRAINING_RUN" and got["pretraining"].units_per_hour > 0
    assert got["fine-tuning, checkpoints"].units_per_hour > 0 and got["fine-tuning, responses"].units_per_hour == 0
    assert got["adapter"].train_hours > 0
    assert not got["too big to fit"].fits
    assert got["chat"].break_even_months > 0 and got["chat"].owned_usd_per_hour > 0
    rack = _both(BRIEFS["chat"], gpu("gb200"), a)[0]
    assert rack.count % 72 == 0 and rack.racks >= 1


@pytest.mark.parametrize("quotes", [
    (Quote(gpu="h100-sxm", usd_per_hour=1.25),),
    (Quote(gpu="h100-sxm", usd_per_hour=1.25, tier="SPOT"), Quote(gpu="h100-sxm", usd_per_hour=9.0)),  # first wins
    (Quote(gpu="a100-80gb", usd_per_hour=0.5), Quote(gpu="h100-sxm", usd_per_hour=0.0)),
    (Quote(gpu="h100-sxm", usd_per_hour=500.0),),  # rent past running: break-even
])
def test_a_callers_quote_prices_as_size_prices_it(quotes) -> None:  # noqa: ANN001
    for case in ("chat", "pretraining", "images"):
        fast, plain = _both(BRIEFS[case], gpu("h100-sxm"), quotes=quotes)
        assert _fields(fast) == _fields(plain)
        assert fast.quote is quotes[-1 if quotes[0].gpu != "h100-sxm" else 0]


@pytest.mark.parametrize("economics", [
    Economics(price_tier="MARKETPLACE"), Economics(price_tier="RESERVED"), Economics(utilization=1.0),
    Economics(utilization=0.01), Economics(electricity_usd_per_kwh=5.0), Economics(acceptance_rate=0.01),
])
def test_economics_price_as_size_prices_them(economics) -> None:  # noqa: ANN001
    b = dataclasses.replace(BRIEFS["chat"], economics=economics)
    for gid in ("h100-sxm", "a100-80gb"):
        fast, plain = _both(b, gpu(gid))
        assert _fields(fast) == _fields(plain)


def _price(usd: float, kind: str = "rent", tier: str = "ON_DEMAND") -> Price:
    return dataclasses.replace(gpu("h100-sxm").prices[0], kind=kind, usd=usd, tier=tier, valid_from=None,
                               valid_until=None)


@pytest.mark.parametrize("g", [
    gpu("h100-sxm", tflops_bf16=0.0),  # no 16-bit figure: no cost per TFLOP
    gpu("h100-sxm", prices=()),  # unpriced
    gpu("h100-sxm", prices=(_price(2.0),)),  # never for sale
    gpu("h100-sxm", prices=(_price(0.0), _price(30000.0, "purchase", "LIST_PURCHASE"))),  # free to rent
    gpu("h100-sxm", prices=(_price(0.5), _price(30000.0, "purchase", "LIST_PURCHASE"))),  # rent under running
    gpu("h100-sxm", tdp_w=0.0),
    gpu("h100-sxm", gpus_per_node=0),
    gpu("h100-sxm", gpus_per_node=2),
])
def test_odd_gpus_are_sized_as_size_sizes_them(g) -> None:  # noqa: ANN001
    fp8 = _brief("REALTIME_INFERENCE", traffic=CHAT, model={"precision": "FP8"})
    for b in (fp8, *((BRIEFS[c] for c in ("chat", "pretraining", "embedding records", "chat, no load"))
                     if g.tflops_bf16 else ())):
        fast, plain = _both(b, g)
        assert _fields(fast) == _fields(plain), b


def _outcome(b: Brief, g, a, fast: bool) -> object:  # noqa: ANN001
    shape = shape_of(b, a)
    assert shape is not None
    try:
        if fast:
            t = tb.Tables(a)
            return _fields(RequestSizer(b, shape, a, t.constants, (), DAY).size(tb.gpu_table(g, t.constants)))
        return _fields(size(g, b, shape, a, (), DAY))
    except ValueError as e:
        return repr(e)


@pytest.mark.parametrize("values", [
    {"default_utilization": 0.0}, {"default_utilization": 1.5}, {"pue": -1.0}, {"ownership_years": 0.0},
    {"hours_per_month": 0.0}, {"electricity_usd_per_kwh": -0.1}, {"maintenance_fraction_per_year": -0.5},
    {"kv_cache_bytes": -1.0},
])
def test_rules_the_ownership_functions_refuse_are_refused_as_size_refuses_them(values) -> None:  # noqa: ANN001
    a = rules(**values)
    for case in ("chat, no load", "chat"):
        b = BRIEFS[case]
        assert _outcome(b, gpu("h100-sxm"), a, True) == _outcome(b, gpu("h100-sxm"), a, False)


def test_some_rules_are_refused() -> None:
    assert isinstance(_outcome(BRIEFS["chat"], gpu("h100-sxm"), rules(pue=-1.0), False), str)


@pytest.mark.parametrize("usd", [-1.0, -0.0])
def test_a_negative_rent_is_refused_as_size_refuses_it(usd) -> None:  # noqa: ANN001
    g = gpu("h100-sxm", prices=(_price(usd), _price(30000.0, "purchase", "LIST_PURCHASE")))
    for case in ("chat", "pretraining"):
        assert _outcome(BRIEFS[case], g, rules(), True) == _outcome(BRIEFS[case], g, rules(), False)
    assert isinstance(_outcome(BRIEFS["chat"], gpu("h100-sxm", prices=(_price(-1.0),)), rules(), False), str)


def test_the_unit_defaults_by_workload() -> None:
    a = rules()
    for case, unit in (("chat", "TOKEN"), ("pretraining", "TRAINING_RUN"), ("adapter", "TRAINING_RUN"),
                       ("embedding, no batch", "TOKEN")):
        b = BRIEFS[case]
        shape = shape_of(b, a)
        assert RequestSizer(b, shape, a, tb.Tables(a).constants, (), DAY).unit == unit


# --- what is kept between GPUs and requests ------------------------------------------------------------------------

def test_a_gpus_speeds_are_kept_per_brief_and_read_back_whole() -> None:
    a = rules()
    t = tb.Tables(a)
    b = BRIEFS["chat"]
    shape = shape_of(b, a)
    speeds: dict = {}
    g = gpu("h100-sxm")
    table = tb.gpu_table(g, t.constants)
    first = RequestSizer(b, shape, a, t.constants, (), DAY, speeds=speeds).size(table)
    assert len(speeds) == 1
    other = dataclasses.replace(b, economics=Economics(utilization=0.2))  # the speed does not read the economics
    again = RequestSizer(other, shape, a, t.constants, (), DAY, speeds=speeds).size(table)
    assert len(speeds) == 1
    assert _fields(again) == _fields(size(g, other, shape, a, (), DAY))
    assert again.tokens_per_second == first.tokens_per_second
    # another GPU of the same id is not read from the table
    slow = gpu("h100-sxm", bandwidth_tbs=1.0)
    third = RequestSizer(b, shape, a, t.constants, (), DAY, speeds=speeds).size(tb.gpu_table(slow, t.constants))
    assert third.tokens_per_second < first.tokens_per_second
    assert _fields(third) == _fields(size(slow, b, shape, a, (), DAY))
    # a Sizing read back owns its lists
    first.formulas.append("x")
    fourth = RequestSizer(b, shape, a, t.constants, (), DAY, speeds=speeds).size(table)
    assert "x" not in fourth.formulas


def test_training_and_prefill_only_briefs_keep_no_speeds() -> None:
    a = rules()
    t = tb.Tables(a)
    speeds: dict = {}
    for case in ("pretraining", "embedding records", "images"):
        b = BRIEFS[case]
        RequestSizer(b, shape_of(b, a), a, t.constants, (), DAY, speeds=speeds).size(tb.gpu_table(gpu(), t.constants))
    assert speeds == {}


def test_the_speeds_table_is_emptied_past_its_size() -> None:
    a = rules()
    t = tb.Tables(a)
    b = BRIEFS["chat"]
    shape = shape_of(b, a)
    speeds: dict = {i: {} for i in range(SPEED_BRIEFS)}
    RequestSizer(b, shape, a, t.constants, (), DAY, speeds=speeds)
    assert len(speeds) == SPEED_BRIEFS + 1
    RequestSizer(dataclasses.replace(b, toolchain=("vllm",)), shape, a, t.constants, (), DAY, speeds=speeds)
    assert len(speeds) == 1


@pytest.mark.parametrize("case", ["chat", "chat, no load", "batch, tasks", "embedding records", "images",
                                  "pretraining", "adapter", "too big to fit"])
def test_fit_and_latency_are_sizes(case) -> None:  # noqa: ANN001
    a = rules()
    t = tb.Tables(a)
    b = BRIEFS[case]
    shape = shape_of(b, a)
    for gid in ("h100-sxm", "l40s"):
        g = gpu(gid)
        plain = size(g, b, shape, a, (), DAY)
        got = RequestSizer(b, shape, a, t.constants, (), DAY).fit_and_latency(tb.gpu_table(g, t.constants))
        assert got == (plain.fits, plain.est_latency_ms)


def test_memory_kept_for_one_output_length_serves_another() -> None:
    a = rules()
    t = tb.Tables(a)
    needs: dict = {}
    g = gpu("h100-sxm")
    for out in (200, 50):
        b = dataclasses.replace(BRIEFS["chat"], traffic=dataclasses.replace(CHAT_T, avg_output_tokens=out))
        shape = shape_of(b, a)
        got = RequestSizer(b, shape, a, t.constants, (), DAY, needs).size(tb.gpu_table(g, t.constants))
        assert _fields(got) == _fields(size(g, b, shape, a, (), DAY))
    assert needs
    for (n, tp), need in needs.items():
        assert tp == min(n, 8) and need.total_gb > 0


CHAT_T = Traffic(**CHAT)


def test_the_weights_alone_rule_a_width_out_only_when_every_other_part_is_not_negative() -> None:
    a = rules(media_activation_peak_gb=-1.0)
    b = BRIEFS["embedding records"]
    shape = shape_of(b, a)
    t = tb.Tables(a)
    req = RequestSizer(b, shape, a, t.constants, (), DAY)
    assert not req.weights_bound
    assert RequestSizer(b, shape, rules(), tb.Tables(rules()).constants, (), DAY).weights_bound
    for case in ("embedding records", "chat"):
        fast, plain = _both(BRIEFS[case], gpu("l4"), rules(engine_overhead_gb=-0.5))
        assert _fields(fast) == _fields(plain)
    big = _brief("EMBEDDING", model={"params_billion": 70}, traffic={"batch_size": 4})
    fast, plain = _both(big, gpu("l4"))
    assert _fields(fast) == _fields(plain) and fast.memory_count > 1
    big = _brief("EMBEDDING", model={"params_billion": 700}, traffic={"batch_size": 4})
    fast, plain = _both(big, gpu("l4"))
    assert _fields(fast) == _fields(plain) and not fast.fits


def test_training_memory_per_width_as_size_sizes_it() -> None:
    b = _brief("PRETRAINING", model={"params_billion": 70}, training=Training(tokens_billion=100, target_days=5))
    for gid in ("h100-sxm", "l40s"):
        fast, plain = _both(b, gpu(gid))
        assert _fields(fast) == _fields(plain)
        assert fast.count > 8 and math.isfinite(fast.train_hours)
    assert A is not None


def test_fit_and_latency_at_the_briefs_precision() -> None:
    a = rules()
    t = tb.Tables(a)
    b = _brief("REALTIME_INFERENCE", traffic=CHAT, model={"precision": "FP8"}, latency=Latency(p95_ms=8000))
    shape = shape_of(b, a)
    g = gpu("h100-sxm")
    plain = size(g, b, shape, a, (), DAY)
    got = RequestSizer(b, shape, a, t.constants, (), DAY).fit_and_latency(tb.gpu_table(g, t.constants))
    assert got == (plain.fits, plain.est_latency_ms)


def test_a_copy_that_fills_the_usable_memory_exactly_fits() -> None:
    a = rules(safety_headroom=0.0)
    b = BRIEFS["embedding records"]
    shape = shape_of(b, a)
    t = tb.Tables(a)
    probe = RequestSizer(b, shape, a, t.constants, (), DAY)
    need = probe._need(tb.gpu_table(gpu("l4"), t.constants), 1).total_gb
    exact = gpu("l4", memory_gb=need, memory_reported_gb=need)
    fast, plain = _both(b, exact, a)
    assert _fields(fast) == _fields(plain)
    assert (fast.fits, fast.memory_count) == (True, 1)


def test_a_negative_part_lets_weights_past_the_usable_memory_fit() -> None:
    # weights alone are no lower bound when another part is negative: the width is not passed over
    a = rules(engine_overhead_gb=-20.0)
    for workload in ("REALTIME_INFERENCE", "EMBEDDING"):
        b = _brief(workload, traffic={"concurrent_sessions": 1, "batch_size": 1, "avg_input_tokens": 100,
                                      "avg_output_tokens": 10}, model={"params_billion": 12.5, "context_tokens": 512})
        fast, plain = _both(b, gpu("l4"), a)
        assert _fields(fast) == _fields(plain)
        assert fast.memory_count == 1


def test_speeds_kept_for_a_widened_copy_say_memorys_width_latency() -> None:
    a = rules()
    t = tb.Tables(a)
    b = _brief("REALTIME_INFERENCE", traffic={"concurrent_sessions": 64, "avg_input_tokens": 2000,
                                              "avg_output_tokens": 100}, latency=Latency(p95_ms=1.0),
               model={"context_tokens": 4000})
    shape = shape_of(b, a)
    g = gpu("h100-sxm")
    fast = RequestSizer(b, shape, a, t.constants, (), DAY, speeds={}).size(tb.gpu_table(g, t.constants))
    plain = size(g, b, shape, a, (), DAY)
    assert _fields(fast) == _fields(plain)
    assert fast.per_replica > fast.memory_count and fast.memory_count_latency_ms > 0


def test_speeds_kept_under_a_gpus_id_are_read_only_for_that_gpu() -> None:
    a = rules()
    t = tb.Tables(a)
    b = BRIEFS["chat"]
    shape = shape_of(b, a)
    speeds: dict = {}
    fast_gpu, slow_gpu = gpu("h100-sxm"), gpu("h100-sxm", bandwidth_tbs=1.0)
    RequestSizer(b, shape, a, t.constants, (), DAY, speeds=speeds).size(tb.gpu_table(fast_gpu, t.constants))
    (kept,) = speeds.values()
    kept[id(slow_gpu)] = kept.pop(id(fast_gpu))  # another GPU's figures under this one's id (an id reused)
    got = RequestSizer(b, shape, a, t.constants, (), DAY, speeds=speeds).size(tb.gpu_table(slow_gpu, t.constants))
    assert _fields(got) == _fields(size(slow_gpu, b, shape, a, (), DAY))


@pytest.mark.parametrize("b", [
    _brief("PRETRAINING", model={"params_billion": 7}),  # no tokens: no run time, no runs per hour
    _brief("MEDIA_GENERATION", success_unit="IMAGE", model={"params_billion": 12}, media=Media(frames=1)),
    _brief("REALTIME_INFERENCE", traffic={**CHAT, "requests_per_second": 0.5}, economics=Economics(utilization=0.9)),
    _brief("REALTIME_INFERENCE", traffic={**CHAT, "requests_per_second": 1.0}, economics=Economics(utilization=0.9)),
    _brief("REALTIME_INFERENCE", traffic=CHAT, economics=Economics(acceptance_rate=1.5)),
    _brief("REALTIME_INFERENCE", traffic=CHAT, economics=Economics(acceptance_rate=-0.2)),
    _brief("REALTIME_INFERENCE", traffic=CHAT, economics=Economics(acceptance_rate=1.0)),
    _brief("REALTIME_INFERENCE", traffic=CHAT, model={"params_billion": 4000}, success_unit="RESPONSE"),
])
def test_unit_costs_at_their_boundaries_as_size_sizes_them(b) -> None:  # noqa: ANN001
    for gid in ("h100-sxm", "l4"):
        assert _outcome(b, gpu(gid), rules(), True) == _outcome(b, gpu(gid), rules(), False)


def test_an_acceptance_past_one_is_refused() -> None:
    b = _brief("REALTIME_INFERENCE", traffic=CHAT, economics=Economics(acceptance_rate=1.5))
    assert "acceptance" in str(_outcome(b, gpu("h100-sxm"), rules(), False))


def test_a_slow_copy_still_has_a_unit_cost() -> None:
    b = _brief("REALTIME_INFERENCE", traffic=CHAT, model={"params_billion": 4000}, success_unit="RESPONSE")
    fast, plain = _both(b, gpu("l4", bandwidth_tbs=0.001))
    assert 0 < fast.tokens_per_second < 1 and fast.units_per_hour > 0
    assert _fields(fast) == _fields(plain)


@pytest.mark.parametrize("usd", [-30000.0, -1.0])
def test_a_negative_purchase_price_is_refused_as_size_refuses_it(usd) -> None:  # noqa: ANN001
    g = gpu("h100-sxm", prices=(_price(2.0), _price(usd, "purchase", "LIST_PURCHASE")))
    for case in ("chat, no load", "pretraining"):
        got = _outcome(BRIEFS[case], g, rules(), True)
        assert got == _outcome(BRIEFS[case], g, rules(), False)
        assert isinstance(got, str)


def test_a_rent_equal_to_the_running_cost_never_breaks_even() -> None:
    # no power, the purchase's maintenance alone: $8,760 x 1.0 a year over 8,760 busy hours = $1.00 an hour
    a = rules(maintenance_fraction_per_year=1.0)
    g = gpu("h100-sxm", tdp_w=0.0, prices=(_price(1.0), _price(8760.0, "purchase", "LIST_PURCHASE")))
    b = dataclasses.replace(BRIEFS["chat, no load"], economics=Economics(utilization=1.0))
    fast, plain = _both(b, g, a)
    assert fast.count == 1 and fast.running_usd_per_busy_hour == 1.0 == fast.usd_per_hour
    assert _fields(fast) == _fields(plain)
    assert fast.break_even_hours == math.inf and fast.break_even_months == math.inf


def test_the_compared_tier_picks_among_a_gpus_rents() -> None:
    g = gpu("h100-sxm", prices=(_price(3.0), _price(2.0, tier="MARKETPLACE"), _price(1.5, tier="SPOT")))
    for tier in ("MARKETPLACE", "SPOT", "ON_DEMAND", "RESERVED"):
        b = dataclasses.replace(BRIEFS["chat"], economics=Economics(price_tier=tier))
        fast, plain = _both(b, g)
        assert _fields(fast) == _fields(plain)
    b = dataclasses.replace(BRIEFS["chat"], economics=Economics(price_tier="MARKETPLACE"))
    assert _both(b, g)[0].usd_per_gpu_hour == 2.0


@pytest.mark.parametrize("case", ["fine-tuning, checkpoints", "adapter", "embedding, no batch", "video"])
def test_no_speeds_are_kept_for_work_that_does_not_decode(case) -> None:  # noqa: ANN001
    a = rules()
    t = tb.Tables(a)
    speeds: dict = {}
    b = BRIEFS[case]
    RequestSizer(b, shape_of(b, a), a, t.constants, (), DAY, speeds=speeds).size(tb.gpu_table(gpu(), t.constants))
    assert speeds == {}


@pytest.mark.parametrize("latency", [Latency(p95_ms=3000), Latency(p95_ms=1.0), Latency(ttft_ms=1.0),
                                     Latency(p95_ms=3000, ttft_ms=1.0)])
def test_a_diffusion_pipelines_latency_target_as_size_holds_it(latency) -> None:  # noqa: ANN001
    b = _brief("MEDIA_GENERATION", success_unit="IMAGE", model={"params_billion": 12},
               traffic={"requests_per_second": 1.0}, latency=latency)
    for gid in ("h100-sxm", "l40s"):
        fast, plain = _both(b, gpu(gid))
        assert _fields(fast) == _fields(plain)
        assert fast.latency_target and fast.est_latency_ms > 0


def test_records_per_hour_at_the_utilization_count_each_records_tokens() -> None:
    b = _brief("EMBEDDING", traffic={"batch_size": 32, "avg_input_tokens": 400}, success_unit="RECORD",
               model={"params_billion": 0.5}, economics=Economics(utilization=0.5))
    fast, plain = _both(b, gpu("l4"))
    assert _fields(fast) == _fields(plain)
    assert fast.units_per_hour == pytest.approx(fast.tokens_per_second * fast.replicas / 400 * 0.5 * 3600)


@pytest.mark.parametrize("values", [{"activation_bytes_per_token_hidden": -300.0},
                                    {"sampler_bytes_per_vocab_entry": -60000.0}])
def test_a_negative_workspace_figure_lets_weights_past_the_usable_memory_fit(values) -> None:  # noqa: ANN001
    a = rules(**values)
    for workload in ("REALTIME_INFERENCE", "EMBEDDING"):
        b = _brief(workload, traffic={"concurrent_sessions": 4, "batch_size": 4, "avg_input_tokens": 1000,
                                      "avg_output_tokens": 10}, model={"params_billion": 12.5, "context_tokens": 2048})
        fast, plain = _both(b, gpu("l4"), a)
        assert _fields(fast) == _fields(plain)
        assert fast.memory_count == 1
