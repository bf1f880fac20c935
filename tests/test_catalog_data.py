"""The data in rules/catalog/gpus.yaml and rules/assumptions.yaml: schema-valid, complete, dense-not-sparse, and
consistent with the seed documents (seed 000: cost per TFLOP table, power table, H100 break-even)."""

from __future__ import annotations

import copy
import json
from datetime import date, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from ruamel.yaml import YAML

RULES = Path(__file__).parents[1] / "rules"
GPU_IDS = [
    "b200",
    "gb200",
    "h200",
    "h100-sxm",
    "h100-pcie",
    "a100-80gb",
    "a100-40gb",
    "l40s",
    "l4",
    "rtx-4090",
    "rtx-5090",
    "mi300x",
    "mi325x",
    "mi355x",
    "b300",
    "gb300",
    "rtx-pro-6000",
    "h20",
]
# GPUs whose prices the seeds do not give: their rows must say they are estimates.
UNPRICED_BY_SEED = ["h100-pcie", "gb200", "rtx-5090", "mi300x", "mi325x", "mi355x", "b300", "gb300", "rtx-pro-6000",
                    "h20"]
DAY = date(2026, 12, 1)


def _iso(v: Any) -> Any:
    """YAML dates → ISO strings, as the service does before validating."""
    if isinstance(v, dict):
        return {k: _iso(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_iso(x) for x in v]
    if isinstance(v, date | datetime):
        return v.isoformat()
    return v


def _load(rel: str) -> Any:
    return _iso(YAML(typ="safe").load((RULES / rel).read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def catalog() -> dict[str, Any]:
    return _load("catalog/gpus.yaml")


@pytest.fixture(scope="module")
def gpus(catalog: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["id"]: g for g in catalog["gpus"]}


@pytest.fixture(scope="module")
def assumptions() -> dict[str, Any]:
    return _load("assumptions.yaml")


@pytest.fixture(scope="module")
def values(assumptions: dict[str, Any]) -> dict[str, Any]:
    return {k: v["value"] for k, v in assumptions["values"].items()}


def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((RULES / "schema" / f"{name}.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(name: str, doc: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in _validator(name).iter_errors(doc)]


def _valid_on(p: dict[str, Any], day: date) -> bool:
    start = date.fromisoformat(p["valid_from"]) if p.get("valid_from") else date.min
    end = date.fromisoformat(p["valid_until"]) if p.get("valid_until") else date.max
    return start <= day <= end


def _current(g: dict[str, Any], kind: str, day: date = DAY) -> dict[str, Any]:
    rows = [p for p in g["prices"] if p["kind"] == kind and _valid_on(p, day)]
    assert len(rows) == 1, (g["id"], kind, day, rows)
    return rows[0]


# --- schemas ------------------------------------------------------------------------------------------------


def test_catalog_validates_against_its_schema(catalog):
    assert _errors("catalog", catalog) == []


def test_assumptions_validate_against_their_schema(assumptions):
    assert _errors("assumptions", assumptions) == []


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda g: g["prices"][0].pop("as_of"), "'as_of' is a required property"),
        (lambda g: g["prices"][0].pop("source"), "'source' is a required property"),
        (lambda g: g["prices"][0].update(as_of="1 Dec 2025"), "does not match"),
        (lambda g: g["prices"][0].update(kind="lease"), "is not one of"),
        (lambda g: g.update(tflops_sparse=1979), "Additional properties"),
        (lambda g: g["interconnect"].update(kind="infiniband"), "is not one of"),
        (lambda g: g.update(matmul_efficiency=1.5), "greater than the maximum"),
        (lambda g: g.pop("tdp_w"), "'tdp_w' is a required property"),
    ],
    ids=["no-as_of", "no-source", "bad-date", "bad-kind", "unknown-key", "bad-link", "efficiency>1", "no-tdp"],
)
def test_catalog_schema_rejects_broken_rows(catalog, mutate, expected):
    broken = copy.deepcopy(catalog)
    mutate(broken["gpus"][0])
    errors = _errors("catalog", broken)
    assert any(expected in e for e in errors), errors


def test_purchase_rows_need_usd_and_rent_rows_usd_per_hour(catalog):
    broken = copy.deepcopy(catalog)
    rent = next(p for p in broken["gpus"][0]["prices"] if p["kind"] == "rent")
    rent["usd"] = rent.pop("usd_per_hour")
    assert any("'usd_per_hour' is a required property" in e for e in _errors("catalog", broken))


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("default_utilization", 1.5, "greater than the maximum"),
        ("recompute_adapter", "sometimes", "is not one of"),
        ("pue", 0.9, "less than the minimum"),
    ],
)
def test_assumptions_schema_rejects_bad_values(assumptions, key, value, expected):
    broken = copy.deepcopy(assumptions)
    broken["values"][key]["value"] = value
    assert any(expected in e for e in _errors("assumptions", broken))


def test_assumptions_schema_requires_unit_and_source(assumptions):
    broken = copy.deepcopy(assumptions)
    del broken["values"]["pue"]["source"]
    broken["values"]["new_constant"] = {"value": 1, "description": "x"}
    errors = _errors("assumptions", broken)
    assert any("values/pue: 'source' is a required property" in e for e in errors), errors
    assert any("values/new_constant: 'unit' is a required property" in e for e in errors), errors


# --- catalog contents ---------------------------------------------------------------------------------------


def test_all_fourteen_ids_exactly_once(catalog):
    ids = [g["id"] for g in catalog["gpus"]]
    assert sorted(ids) == sorted(GPU_IDS) and len(ids) == len(set(ids))


def test_every_price_is_dated_and_sourced(gpus):
    for g in gpus.values():
        assert {p["kind"] for p in g["prices"]} == {"rent", "purchase"}, g["id"]
        for p in g["prices"]:
            assert p["source"].strip() and date.fromisoformat(p["as_of"]) <= date.today(), (g["id"], p)
            assert (p["usd_per_hour"] if p["kind"] == "rent" else p["usd"]) > 0, (g["id"], p)


def test_one_current_rent_and_purchase_per_gpu(gpus):
    for g in gpus.values():
        _current(g, "rent")
        _current(g, "purchase")


def test_h100_has_an_ended_historical_rent_row_for_replays(gpus):
    rents = [p for p in gpus["h100-sxm"]["prices"] if p["kind"] == "rent"]
    ended = [p for p in rents if p.get("valid_until")]
    assert len(ended) == 1 and ended[0]["usd_per_hour"] == 4.00 and "not a quote" in ended[0]["source"]
    assert _current(gpus["h100-sxm"], "rent", date(2025, 1, 15))["usd_per_hour"] == 4.00
    assert _current(gpus["h100-sxm"], "rent")["usd_per_hour"] == 3.15
    # Rent rows of one GPU never overlap, so a replay day picks exactly one.
    for g in gpus.values():
        rows = sorted((p for p in g["prices"] if p["kind"] == "rent"), key=lambda p: p.get("valid_from") or "")
        for a, b in zip(rows, rows[1:], strict=False):
            assert a.get("valid_until") and a["valid_until"] < b["valid_from"], g["id"]


def test_seed_prices(gpus):
    # seed 000_02169683c836b5ac.txt: cost-per-TFLOP table, H100 break-even, fine-tuning and low-latency sections.
    rent = {
        "b200": 4.70,
        "h200": 3.80,
        "h100-sxm": 3.15,
        "a100-80gb": 0.72,
        "a100-40gb": 0.72,
        "l40s": 1.50,
        "rtx-4090": 0.60,
    }
    buy = {"b200": 47500, "h200": 35000, "h100-sxm": 25000, "a100-80gb": 15000, "l40s": 8000, "rtx-4090": 1600}
    for gid, usd in rent.items():
        row = _current(gpus[gid], "rent")
        assert row["usd_per_hour"] == pytest.approx(usd) and "cost-per-TFLOP guide" in row["source"], gid
    for gid, usd in buy.items():
        row = _current(gpus[gid], "purchase")
        assert row["usd"] == pytest.approx(usd) and "cost-per-TFLOP guide" in row["source"], gid
    l4 = _current(gpus["l4"], "rent")
    assert 0.30 <= l4["usd_per_hour"] <= 1.00 and "midpoint" in l4["source"]


def test_prices_the_seeds_do_not_give_say_they_are_estimates(gpus):
    for gid in UNPRICED_BY_SEED:
        for kind in ("rent", "purchase"):
            src = _current(gpus[gid], kind)["source"]
            assert "team estimate" in src and "replace with a quote" in src, (gid, kind, src)


def test_dense_not_sparse(gpus):
    dense_bf16 = {
        "h100-sxm": 989,
        "h200": 989,
        "h100-pcie": 756,
        "b200": 2250,
        "gb200": 2500,
        "a100-80gb": 312,
        "a100-40gb": 312,
        "l40s": 362,
        "l4": 121,
        "rtx-4090": 165,
        "mi300x": 1307,
        "mi325x": 1307,
        "mi355x": 2500,
    }
    for gid, tf in dense_bf16.items():
        assert gpus[gid]["tflops_bf16"] == tf, gid
    assert gpus["h100-sxm"]["tflops_fp8"] == 1979 and gpus["b200"]["tflops_fp4"] == 9000
    assert gpus["b200"]["memory_gb"] == 180 and gpus["gb200"]["memory_gb"] == 186
    assert gpus["mi325x"]["memory_gb"] == 256 and gpus["mi300x"]["memory_gb"] == 192
    assert gpus["b200"]["bandwidth_tbs"] == 7.7 and gpus["a100-80gb"]["bandwidth_tbs"] == 2.039
    assert gpus["a100-40gb"]["bandwidth_tbs"] == 1.555 and gpus["gb200"]["tdp_w"] == 1200
    assert 205 <= gpus["rtx-5090"]["tflops_bf16"] <= 212 and "third-part" in gpus["rtx-5090"]["notes"].lower()


def test_lower_precision_is_never_slower(gpus):
    for g in gpus.values():
        if g["tflops_fp8"]:
            assert g["tflops_fp8"] >= g["tflops_bf16"], g["id"]
        if g["tflops_fp4"]:
            assert g["tflops_fp8"] and g["tflops_fp4"] >= g["tflops_fp8"], g["id"]
    assert gpus["a100-80gb"]["tflops_fp8"] == 0 and gpus["a100-40gb"]["tflops_fp8"] == 0


def test_geforce_cards_note_the_fp16_accumulate_rate(gpus):
    for g in gpus.values():
        if g["class"] == "consumer":
            assert "fp16" in g["notes"].lower() and "accumulate" in g["notes"].lower(), g["id"]
            assert g["interconnect"]["kind"] == "pcie" and g["mig"] == 0 and g["nvlink_domain"] == 1, g["id"]
    assert "330" in gpus["rtx-4090"]["notes"]


def test_topology_is_consistent(gpus):
    for g in gpus.values():
        fast = g["interconnect"]["kind"] in ("nvlink", "xgmi")
        assert fast or g["nvlink_domain"] == 1, g["id"]
        assert g["software"] == ("rocm" if g["vendor"] == "amd" else "cuda"), g["id"]
        assert g.get("matmul_efficiency_source"), g["id"]
    assert gpus["gb200"]["nvlink_domain"] == 72 and gpus["h100-sxm"]["nvlink_domain"] == 8
    assert gpus["h100-sxm"]["interconnect"] == {"kind": "nvlink", "gbs": 900}
    measured = {"h100-sxm": 0.80, "b200": 0.78, "mi300x": 0.51}  # stas00 MAMF
    for gid, eff in measured.items():
        assert gpus[gid]["matmul_efficiency"] == eff and "MAMF" in gpus[gid]["matmul_efficiency_source"]


def test_seed_cost_per_tflop_ordering(gpus):
    # Seed 000 divides the hourly rent by FP16 TFLOPS, quoting GeForce at FP16 accumulate (2x the FP32-accumulate
    # rate we store): RTX 4090 cheapest, then B200, A100, H100, H200, and L40S the dearest of its six.
    def per_tflop(gid: str) -> float:
        g = gpus[gid]
        tflops = g["tflops_bf16"] * (2 if g["class"] == "consumer" else 1)
        return _current(g, "rent")["usd_per_hour"] / tflops

    seed_order = ["rtx-4090", "b200", "a100-80gb", "h100-sxm", "h200", "l40s"]
    assert sorted(seed_order, key=per_tflop) == seed_order
    assert per_tflop("rtx-4090") == pytest.approx(0.0018, abs=1e-4)
    assert per_tflop("l40s") == pytest.approx(0.0041, abs=1e-4)


# --- assumptions --------------------------------------------------------------------------------------------


def test_assumptions_have_the_required_keys_with_seed_values(values):
    assert values["electricity_usd_per_kwh"] == 0.10 and values["ownership_years"] == 3
    assert values["default_utilization"] == 0.6 and values["hours_per_month"] == 730
    assert values["mbu_decode"] == 0.75 and values["mbu_decode_consumer"] == 0.59
    assert values["adam_state_bytes_per_param"] == 16 and values["kv_cache_bytes"] == 2
    assert values["safety_headroom"] < values["thin_headroom"] < 1
    assert values["default_gpus_per_node"] == 8


def test_pue_matches_the_seed_cooling_figure(gpus, values):
    # Seed 000: a 700 W H100 costs ~$0.07/h in power and ~$0.02/h in cooling.
    power = gpus["h100-sxm"]["tdp_w"] / 1000 * values["electricity_usd_per_kwh"]
    assert power == pytest.approx(0.07)
    assert power * values["pue"] == pytest.approx(0.09, abs=0.001)


def test_seed_power_table(gpus, values):
    # Seed 000: yearly power at 60% utilization and $0.10/kWh (IT power only): B200 ~$526, H100 ~$368.
    def yearly(gid: str) -> float:
        return gpus[gid]["tdp_w"] / 1000 * 8760 * values["default_utilization"] * values["electricity_usd_per_kwh"]

    assert yearly("b200") == pytest.approx(526, abs=1) and yearly("h100-sxm") == pytest.approx(368, abs=1)


def test_seed_h100_break_even(gpus):
    hours = _current(gpus["h100-sxm"], "purchase")["usd"] / _current(gpus["h100-sxm"], "rent")["usd_per_hour"]
    assert hours == pytest.approx(7937, abs=1)


def test_bytes_per_param(values):
    b = values["bytes_per_param"]
    assert (b["FP32"], b["BF16"], b["FP16"], b["FP8"]) == (4, 2, 2, 1)
    assert b["FP8"] < b["INT8"] < 1.1 and 0.5 < b["INT4"] <= 0.5625


def test_architecture_bands_follow_public_configs(values):
    bands = values["architecture_bands"]
    sizes = [r["max_params_billion"] for r in bands]
    assert sizes == sorted(sizes) and sizes[-1] >= 1000
    for r in bands:
        # GQA with 8 KV heads, but for the encoder-sized bands (BERT shapes, MHA) under 0.4B
        assert r["source"] and (r["kv_heads"] == 8 or r["max_params_billion"] <= 0.4)
        assert r["hidden_size"] == r["attention_heads"] * r["head_dim"], r
    llama8b = next(r for r in bands if r["max_params_billion"] == 10)
    assert (llama8b["layers"], llama8b["hidden_size"], llama8b["vocab_size"]) == (32, 4096, 128256)
    llama405b = bands[-1]
    assert (llama405b["layers"], llama405b["hidden_size"], llama405b["attention_heads"]) == (126, 16384, 128)
