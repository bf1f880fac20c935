"""LiteLLM's price table (`model_prices_and_context_window.json`, MIT licence) → `rules/api_offers` rows.

Each entry is keyed by the provider's model id and carries `litellm_provider`, `mode`, USD per token for input,
output and cached input, `max_input_tokens`, and for some providers where the model runs (`supported_regions`,
a region in the key as Bedrock writes it, or a data zone prefix: `us.`, `eu.`, `azure/eu/`). A row is written
when its model id (or the id's last path segment) is a registry id or alias (rules/models); every other entry is
dropped with its reason, so read = written + dropped.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any

from ...domain.api_offers import ApiOffer
from ...domain.models import ModelEntry, Registry, find, registry_of
from ...engine.load import Doc, load_yaml
from ...rulebook.model_files import model_entries
from .common import ImportReport
from .regions import country_of

TEXT_MODES = ("chat", "completion", "responses")
EMBED_MODES = ("embedding",)
# A data zone written as a key prefix (Bedrock's cross-region profiles, Azure's data zones): where requests are
# processed. "EU" stands for the member states, as a brief's placement.countries spells it.
_ZONES = {"us": "US", "eu": "EU", "jp": "JP", "au": "AU", "apac": "", "global": ""}
_AWS_REGION = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d$")
_GCP_REGION = re.compile(r"^[a-z]+-[a-z]+\d+$")


def read_table(path: Path) -> dict[str, Any]:
    """The JSON as shipped (or gzipped: `.gz`)."""
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object keyed by model id")
    return data


def registry_from(rules: Path) -> Registry:
    """The model registry of a rules folder (rules/models/*.yaml), without loading the whole rules version."""
    docs: list[Doc] = []
    for p in sorted((rules / "models").glob("*.yaml")):
        doc, _ = load_yaml(p.read_bytes(), p.as_posix())
        if doc is not None:
            docs.append(doc)
    entries, _ = model_entries(docs)
    return registry_of(entries)


def _provider(raw: str) -> str:
    # vertex_ai-llama_models, vertex_ai-anthropic_models: the provider is vertex_ai; bedrock_converse is bedrock
    p = raw.split("-")[0]
    return "bedrock" if p.startswith("bedrock") else p


def _split_key(key: str, raw_provider: str) -> tuple[str, str, str]:
    """(model id as the provider spells it, region, country) from the entry's key."""
    parts = key.split("/")
    if parts[0] in (raw_provider, _provider(raw_provider), raw_provider.split("-")[0]) and len(parts) > 1:
        parts = parts[1:]
    region = country = ""
    if len(parts) > 1 and (_AWS_REGION.match(parts[0]) or parts[0] in _ZONES):
        region = parts[0]
        parts = parts[1:]
    model = "/".join(parts)
    head = model.split(".")[0]
    if not region and "." in model and head in _ZONES and not model.startswith(head + ".0"):
        region, model = head, model[len(head) + 1:]
    if region in _ZONES:
        country = _ZONES[region]
    elif region:
        country = country_of("aws", region.replace("-gov", "")) if not region.startswith("us-gov") else "US"
    return model, region, country


def _regions(entry: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(region, country) per region the entry lists; Google's regions map through its own names."""
    out = []
    for r in entry.get("supported_regions") or ():
        r = str(r)
        if r == "global":
            out.append((r, ""))
        elif _GCP_REGION.match(r):
            out.append((r, country_of("gcp", r)))
        else:
            out.append((r, country_of("aws", r)))
    return out


def _entry_for(model: str, registry: Registry) -> ModelEntry | None:
    names = [model, model.split("/")[-1], re.sub(r"^(models/|accounts/[^/]+/models/)", "", model)]
    for n in names:
        hit = find(registry, n)
        if hit is not None:
            return hit
    return None


def _per_million(entry: Mapping[str, Any], field: str) -> float | None:
    x = entry.get(field)
    if isinstance(x, bool) or not isinstance(x, (int, float)) or x != x or x < 0:
        return None
    return round(float(x) * 1e6, 6)  # float noise off: 9.864e-07 is $0.9864, not 0.98639999


def import_litellm(data: Mapping[str, Any], registry: Registry, as_of: date,
                   source: str) -> tuple[list[ApiOffer], ImportReport]:
    """Every entry read, each written as one offer per region it names (one row with no region when it names
    none) or dropped with its reason."""
    report = ImportReport(source)
    rows: list[ApiOffer] = []
    seen: set[tuple[str, str, str]] = set()
    for key, entry in data.items():
        if key == "sample_spec":
            report.read("")
            report.drop("the table's sample_spec (its schema, not a model)", key)
            continue
        if not isinstance(entry, dict) or not entry.get("litellm_provider"):
            report.read("")
            why = "an alias of another entry (alias_of), read there" if isinstance(entry, dict) and \
                entry.get("alias_of") else "no litellm_provider: not priced for a provider"
            report.drop(why, key)
            continue
        raw_provider = str(entry["litellm_provider"])
        provider = _provider(raw_provider)
        report.read(provider)
        mode = str(entry.get("mode") or "")
        if mode not in TEXT_MODES + EMBED_MODES:
            report.drop(f"mode {mode or '(none)'}: not priced per text token", key, provider=provider)
            continue
        model, region, country = _split_key(key, raw_provider)
        hit = _entry_for(model, registry)
        if hit is None:
            report.drop("model not in the registry (no rules/models id or alias names it)", key, provider=provider)
            continue
        if (mode in EMBED_MODES) != (hit.kind == "embedding"):
            report.drop("mode does not match the registry model's kind (an embedding price for a generation "
                        "model or the reverse)", f"{key} → {hit.id}", provider=provider)
            continue
        p_in, p_out = _per_million(entry, "input_cost_per_token"), _per_million(entry, "output_cost_per_token")
        if p_in is None or (p_out is None and mode not in EMBED_MODES):
            report.drop("no input or output price per token", key, provider=provider)
            continue
        if p_in == 0 and not p_out:
            report.drop("priced at 0 (a free tier or a placeholder, not a price)", key, provider=provider)
            continue
        places = [(region, country)] if region else (_regions(entry) or [("", "")])
        fresh = [(r, c) for r, c in places if (provider, model, r) not in seen]
        if not fresh:
            report.drop("repeats an entry already written (same provider, model id and region)", key,
                        provider=provider)
            continue
        cached = _per_million(entry, "cache_read_input_token_cost") or 0.0
        context = entry.get("max_input_tokens")
        here = f"{source} [{key}]" + (f"; {entry['source']}" if isinstance(entry.get("source"), str) else "")
        for r, c in fresh:
            seen.add((provider, model, r))
            report.offer(provider, "api")
            rows.append(ApiOffer(provider, model, hit.id, p_in, p_out or 0.0, cached,
                                 context if isinstance(context, int) and context > 0 else 0, r, c, as_of, here))
        report.written(provider)
    return rows, report
