"""The model registry: rules/models loads clean with a source per entry; model.name fills the brief (explicit
fields win) in-process and over a real server; unknown names are INVALID_ARGUMENT with the nearest names;
ListModels and `gpu-advisor models`; rules-check on a broken registry; the config.json importer."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import pytest

from service.decide.models import resolve
from service.domain.brief import AdviceRequest, Brief, Economics, Model, Traffic
from service.domain.models import find
from service.frontends.cli import main as cli
from service.rulebook.folder import load_rulebook
from service.rulebook.model_import import entry_from_config, parameter_counts
from service.wire import api
from service.wire.api import pb
from service.wire.validate import validate
from tests.conftest import call
from tests.test_rules_check import TODAY, assert_reported, edit, line_of, problems, rules  # noqa: F401

ROOT = Path(__file__).parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "models"
REQUIRED = (
    "llama-3.1-8b-instruct", "llama-3.1-70b-instruct", "llama-3.1-405b-instruct", "llama-3.3-70b-instruct",
    "llama-4-scout-17b-16e-instruct", "llama-4-maverick-17b-128e-instruct", "qwen2.5-7b-instruct",
    "qwen2.5-14b-instruct", "qwen2.5-32b-instruct", "qwen2.5-72b-instruct", "qwen3-8b", "qwen3-32b",
    "qwen3-235b-a22b", "deepseek-v3", "deepseek-r1", "mixtral-8x7b-instruct", "mixtral-8x22b-instruct",
    "gemma-3-4b", "gemma-3-12b", "gemma-3-27b", "gpt-oss-20b", "gpt-oss-120b", "mistral-small-3.1-24b-instruct",
    "phi-4", "bge-large-en-v1.5", "bge-m3", "e5-large-v2", "multilingual-e5-large", "whisper-large-v3",
    "sdxl-base-1.0", "flux.1-dev",
)


@pytest.fixture(scope="module")
def registry() -> Any:
    book, found = load_rulebook(ROOT / "rules", today=TODAY)
    assert book is not None and [p for p in found if p.severity == "error"] == []
    return book.models


def test_registry_loads_every_required_model_with_a_source(registry: Any) -> None:
    assert set(REQUIRED) <= set(registry)
    for e in registry.values():
        assert e.source.startswith("https://"), e.id
        assert e.as_of and e.params_billion > 0, e.id
        assert e.location.startswith("rules/models/"), e.id


def test_published_shapes_that_sizing_depends_on(registry: Any) -> None:
    # Gemma 3 27B: 5 local (1,024 tokens) to 1 global over 62 layers (technical report) -> 52 windowed.
    g = registry["gemma-3-27b"]
    assert (g.layers, g.kv_heads, g.head_dim, g.sliding_window_tokens, g.sliding_window_layers) == (62, 16, 128,
                                                                                                    1024, 52)
    # gpt-oss: alternating 128-token window, half the layers; 128 experts, top-4 (config.json, model card).
    o = registry["gpt-oss-120b"]
    assert (o.sliding_window_layers * 2, o.experts, o.experts_per_token, o.native_precision) == (36, 128, 4, "FP4")
    d = registry["deepseek-r1"]
    assert (d.attention, d.kv_lora_rank, d.rope_head_dim, d.experts, d.experts_per_token) == ("MLA", 512, 64, 256, 8)


def test_names_match_ids_and_aliases_in_any_case(registry: Any) -> None:
    assert find(registry, "Google/Gemma-3-27B-IT").id == "gemma-3-27b"
    assert find(registry, "LLAMA-3.3-70B-INSTRUCT").id == "llama-3.3-70b-instruct"
    assert find(registry, "gemma-3-28b") is None


def test_name_fills_unset_fields_and_explicit_fields_win(registry: Any) -> None:
    brief = Brief(workload="REALTIME_INFERENCE", model=Model(name="gemma-3-27b", layers=40, precision="FP8"))
    m = resolve(brief, registry).model
    assert (m.layers, m.precision) == (40, "FP8")  # given: kept
    assert (m.params_billion, m.kv_heads, m.head_dim, m.sliding_window_tokens) == (27.4, 16, 128, 1024)
    # The registry's 52 windowed layers would exceed the brief's own 40 layers: left out, not contradicted.
    assert m.sliding_window_layers == 0
    assert m.context_tokens == 0  # the model's window is not the workload's context
    assert resolve(Brief(model=Model(name="no-such-model")), registry) == Brief(model=Model(name="no-such-model"))


def test_a_brief_by_name_sizes_like_the_same_brief_spelled_out(bundle: Any, registry: Any) -> None:
    # Hardware control required: a named model can route to its cheaper hosted API (issue 35), which the same model
    # spelled out cannot, and a rent route orders the candidates it can place first; both rent here.
    named = Brief(workload="REALTIME_INFERENCE", model=Model(name="llama-3.3-70b-instruct", context_tokens=8192),
                  traffic=Traffic(concurrent_sessions=16), economics=Economics(needs_hardware_control=True))
    e = registry["llama-3.3-70b-instruct"]
    spelled = replace(named, model=Model(params_billion=e.params_billion, precision="BF16", layers=e.layers,
                                         kv_heads=e.kv_heads, head_dim=e.head_dim, hidden_size=e.hidden_size,
                                         attention="GQA", context_tokens=8192))
    a, b = bundle.advise(AdviceRequest(brief=named)), bundle.advise(AdviceRequest(brief=spelled))
    assert [(c.gpu, c.count, c.memory.need_gb) for c in a.candidates] == \
        [(c.gpu, c.count, c.memory.need_gb) for c in b.candidates]
    said = [n for n in a.notes if n.rule_id == "models.registry"]
    assert len(said) == 1 and "Llama 3.3 70B Instruct" in said[0].text and e.source in said[0].text
    assert not [n for n in b.notes if n.rule_id == "models.registry"]
    zh = bundle.advise(AdviceRequest(brief=named, locale="zh-CN"))
    assert any("模型注册表" in n.text for n in zh.notes if n.rule_id == "models.registry")


def test_every_price_tier_keeps_the_registry_note(bundle: Any) -> None:
    # A steady all-month serving brief, its tier left open, asked for reserved, and asked for on demand: each
    # answer (one decision pass since issue 34) says the architecture came from the registry. A reserve route
    # once answered a second time at reserved prices and lost the note there.
    from service.bench.loadgen import distinct_briefs

    request = pb.RecommendRequest.FromString(distinct_briefs(1)[0][5:])
    request.brief.model.name = "llama-3.3-70b-instruct"
    request.brief.model.params_billion = 0
    routed = []
    for tier in (pb.PRICE_TIER_UNSPECIFIED, pb.PRICE_TIER_RESERVED, pb.PRICE_TIER_ON_DEMAND):
        request.brief.economics.price_tier = tier
        a = bundle.advise(api.request_from_proto(request))
        said = [n for n in a.notes if n.rule_id == "models.registry"]
        assert len(said) == 1 and "Llama 3.3 70B Instruct" in said[0].text, (tier, a.notes)
        routed.append(a.price_tier)
    assert routed[1] == "RESERVED", routed  # the tier asked for is the tier compared


def test_unknown_name_is_invalid_with_the_nearest_names(stub: Any) -> None:
    request = pb.RecommendRequest(brief=pb.WorkloadBrief(model=pb.Model(name="gemma-3-72b")))
    out = call(stub.Recommend, request)
    assert out.code == grpc.StatusCode.INVALID_ARGUMENT and out.fields == ("brief.model.name",)
    assert "gemma-3-27b" in out.details or "gemma-3-12b" in out.details, out.details
    ok = call(stub.Recommend, pb.RecommendRequest(brief=pb.WorkloadBrief(
        workload=pb.WORKLOAD_TYPE_REALTIME_INFERENCE, model=pb.Model(name="Qwen/Qwen3-235B-A22B"))))
    assert ok.code == grpc.StatusCode.OK
    assert any(r.rule_id == "models.registry" and "Qwen3 235B-A22B" in r.text for r in ok.response.notes)


def test_validate_without_known_models_leaves_names_alone() -> None:
    request = pb.RecommendRequest(brief=pb.WorkloadBrief(model=pb.Model(name="anything")))
    assert validate(request) == []
    assert validate(request, (), ()) == [("brief.model.name",
                                          "unknown model 'anything' (ListModels lists the registry)")]


def test_list_models_filters(stub: Any) -> None:
    every = stub.ListModels(pb.ListModelsRequest(), timeout=30).models
    assert len(every) >= len(REQUIRED) and all(m.source for m in every)
    image = stub.ListModels(pb.ListModelsRequest(kind=pb.MODEL_KIND_IMAGE), timeout=30).models
    assert {m.id for m in image} == {"sdxl-base-1.0", "flux.1-dev", "hunyuanvideo", "wan2.1-t2v-1.3b",
                                     "wan2.1-t2v-14b", "cogvideox-2b", "cogvideox-5b", "cogvideox1.5-5b"}
    qwen = stub.ListModels(pb.ListModelsRequest(query="QWEN3"), timeout=30).models
    assert {m.id for m in qwen} == {"qwen3-8b", "qwen3-32b", "qwen3-235b-a22b", "qwen3.5-397b-a17b"}
    by_alias = stub.ListModels(pb.ListModelsRequest(query="openai/gpt-oss"), timeout=30).models
    assert {m.id for m in by_alias} == {"gpt-oss-20b", "gpt-oss-120b"}
    mla = next(m for m in every if m.id == "deepseek-v3")
    assert (mla.attention, mla.kv_lora_rank, mla.precision) == (pb.ATTENTION_KIND_MLA, 512, pb.PRECISION_FP8)
    bad = call(stub.ListModels, pb.ListModelsRequest(kind=99))
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT and bad.fields == ("kind",)


def test_cli_models_table(server: Any, capsys: Any) -> None:
    assert cli(["models", "--addr", server.addr, "--kind", "llm", "--query", "gemma"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["id", "name", "kind"]
    assert [ln.split()[0] for ln in lines[2:5]] == ["gemma-3-4b", "gemma-3-12b", "gemma-3-27b"]
    assert "1,024 on 52/62" in out and "bge-m3" not in out


def _config(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.config.json").read_text(encoding="utf-8"))


# Published totals (and active, for MoE): model cards and papers, as the registry cites them.
@pytest.mark.parametrize(("name", "total", "active"), [
    ("Llama-3.1-8B-Instruct", 8.03, None),  # hub: 8.03B
    ("Mixtral-8x7B-Instruct-v0.1", 46.7, 12.9),  # Mistral: 46.7B total, 12.9B active
    ("gemma-3-27b-it", 27.0, None),  # the text decoder of the 27B model
    ("DeepSeek-V3", 671.0, 37.0),  # technical report: 671B total, 37B activated
    ("gpt-oss-120b", 116.83, None),  # model card: 116.83B (its 5.13B active leaves the unembedding out)
])
def test_computed_parameters_within_2_percent_of_published(name: str, total: float, active: float | None) -> None:
    counted = parameter_counts(_config(name))
    assert counted is not None
    assert counted[0] == pytest.approx(total, rel=0.02)
    if active is not None:
        assert counted[1] == pytest.approx(active, rel=0.02)


def test_import_maps_shapes_window_and_experts(registry: Any) -> None:
    gemma = entry_from_config(_config("gemma-3-27b-it"), "gemma-3-27b", as_of="2026-12-03")
    shipped = registry["gemma-3-27b"]
    for f in ("layers", "kv_heads", "head_dim", "hidden_size", "sliding_window_tokens", "sliding_window_layers",
              "context_window_tokens"):
        assert gemma[f] == getattr(shipped, f), f
    assert "computed" in gemma["notes"]
    oss = entry_from_config(_config("gpt-oss-120b"), "gpt-oss-120b")
    assert (oss["sliding_window_layers"], oss["experts"], oss["experts_per_token"], oss["native_precision"]) == \
        (18, 128, 4, "FP4")
    ds = entry_from_config(_config("DeepSeek-V3"), "deepseek-v3")
    assert (ds["attention"], ds["kv_lora_rank"], ds["rope_head_dim"], ds["native_precision"]) == ("MLA", 512, 64, "FP8")
    assert "head_dim" not in ds
    mixtral = entry_from_config(_config("Mixtral-8x7B-Instruct-v0.1"), params_billion=46.7)
    assert mixtral["params_billion"] == 46.7 and "sliding_window_tokens" not in mixtral  # sliding_window: null


def test_imported_entry_is_a_registry_file_rules_check_accepts(rules: Path, tmp_path: Path) -> None:  # noqa: F811
    out = rules / "models" / "imported.yaml"
    src = tmp_path / "Llama-3.1-8B-Instruct" / "config.json"
    src.parent.mkdir()
    src.write_text((FIXTURES / "Llama-3.1-8B-Instruct.config.json").read_text(encoding="utf-8"), encoding="utf-8")
    assert cli(["models", "import", str(src), "--out", str(out), "--source", "https://example.org/config.json"]) == 0
    text = out.read_text(encoding="utf-8")
    assert "id: llama-3.1-8b-instruct\n" in text
    # The shipped registry already has that id: rules-check names both places.
    found = problems(rules)
    shipped = f"rules/models/llama.yaml:{line_of(rules / 'models' / 'llama.yaml', 'id: llama-3.1-8b-instruct')}"
    imported = f"rules/models/imported.yaml:{line_of(out, 'id: llama')}"
    # Reported at the later of the two (files load in name order), naming the other.
    assert_reported(found, shipped, "'llama-3.1-8b-instruct' is already used", imported)
    # Under an id of its own it loads, and a brief can name it.
    out.write_text(text.replace("id: llama-3.1-8b-instruct", "id: my-llama"), encoding="utf-8")
    book, found = load_rulebook(rules, today=TODAY)
    assert book is not None, [str(p) for p in found]
    assert book.models["my-llama"].params_billion == pytest.approx(8.03, rel=0.01)


def test_rules_check_reports_a_bad_entry_at_its_line(rules: Path) -> None:  # noqa: F811
    path = rules / "models" / "gpt-oss.yaml"
    edit(path, "    experts_per_token: 4\n    shared_params_billion: 2.1", "    experts_per_token: 400\n"
         "    shared_params_billion: 2.1")
    edit(path, "    params_billion: 20.9\n    active_params_billion: 3.6",
         "    params_billion: 20.9\n    active_params_billion: 36")
    edit(path, "    sliding_window_layers: 12", "    sliding_window_layers: 30")
    found = problems(rules)
    shown = "rules/models/gpt-oss.yaml"
    assert_reported(found, f"{shown}:{line_of(path, 'experts_per_token: 400')}", "cannot exceed experts")
    assert_reported(found, f"{shown}:{line_of(path, 'active_params_billion: 36')}", "cannot exceed params_billion")
    assert_reported(found, f"{shown}:{line_of(path, 'sliding_window_layers: 30')}", "cannot exceed layers")


def test_rules_check_reports_a_schema_error_in_an_entry(rules: Path) -> None:  # noqa: F811
    path = rules / "models" / "gpt-oss.yaml"
    edit(path, "    kind: llm\n    aliases: [openai/gpt-oss-20b", "    kind: chatbot\n    aliases: [openai/gpt-oss-20b")
    edit(path, "    source: https://huggingface.co/openai/gpt-oss-20b/blob/main/config.json\n", "")
    found = problems(rules)
    assert_reported(found, f"rules/models/gpt-oss.yaml:{line_of(path, 'kind: chatbot')}", "'chatbot' is not one of")
    assert_reported(found, "rules/models/gpt-oss.yaml:", "'source' is a required property")


def test_duplicate_alias_across_files_names_both_places(rules: Path) -> None:  # noqa: F811
    path = rules / "models" / "phi.yaml"
    edit(path, "aliases: [microsoft/phi-4, phi4]", "aliases: [microsoft/phi-4, phi4, Qwen/Qwen3-8B]")
    found = problems(rules)
    # phi.yaml loads first: the problem is at Qwen's own alias, naming phi.yaml's line.
    assert_reported(found, f"rules/models/qwen.yaml:{line_of(rules / 'models' / 'qwen.yaml', 'Qwen/Qwen3-8B')}",
                    "'Qwen/Qwen3-8B' is already used by 'phi-4'", f"rules/models/phi.yaml:{line_of(path, 'Qwen/')}")
