"""The model registry's documents (`kind: models`) → ModelEntry values, and what rules-check says about them.

The schema has already checked each entry's shape; this adds what a schema cannot see: an id or alias defined
twice (in one file or across files, named with both places), and figures that contradict each other (more active
than total parameters, more experts per token than experts, more windowed layers than layers).
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from ..domain.models import Denoiser, ModelEntry, PublishedRun
from ..engine.load import Doc, Problem, pos

_INTS = ("layers", "kv_heads", "head_dim", "hidden_size", "kv_lora_rank", "rope_head_dim", "context_window_tokens",
         "sliding_window_tokens", "sliding_window_layers", "experts", "experts_per_token", "vocab_size")
_FLOATS = ("params_billion", "active_params_billion", "shared_params_billion")
# (smaller, larger, what the message calls the larger): the first may not exceed the second.
_ORDERED = (
    ("active_params_billion", "params_billion", "params_billion"),
    ("shared_params_billion", "params_billion", "params_billion"),
    ("experts_per_token", "experts", "experts"),
    ("sliding_window_layers", "layers", "layers"),
)


def _text(v: Any) -> str:
    if isinstance(v, datetime):
        return v.date().isoformat()
    if isinstance(v, date):
        return v.isoformat()
    return str(v)


def _entry(doc: Doc, item: Any, line: int) -> ModelEntry:
    return ModelEntry(
        id=str(item["id"]),
        name=str(item["name"]),
        kind=str(item["kind"]),
        source=str(item["source"]),
        as_of=_text(item["as_of"]),
        aliases=tuple(str(a) for a in item.get("aliases", []) or []),
        attention=str(item.get("attention", "UNSPECIFIED")),
        native_precision=str(item.get("native_precision", "") or ""),
        notes=" ".join(str(item.get("notes", "") or "").split()),
        location=f"{doc.path}:{line}",
        tie_word_embeddings=bool(item.get("tie_word_embeddings", False)),
        denoiser=Denoiser(**item["denoiser"]) if item.get("denoiser") else None,
        published=tuple(PublishedRun(**{k: _text(v) if k == "source" else v for k, v in run.items()})
                        for run in item.get("published", []) or []),
        **{k: int(item[k]) for k in _INTS if item.get(k) is not None},
        **{k: float(item[k]) for k in _FLOATS if item.get(k) is not None},
    )


def model_entries(docs: list[Doc]) -> tuple[list[ModelEntry], list[Problem]]:
    """Every entry of every `models` document, in file order, and the problems between them."""
    entries: list[ModelEntry] = []
    problems: list[Problem] = []
    seen: dict[str, tuple[str, str]] = {}  # lower-cased name → (entry id, path:line of the name)
    for doc in docs:
        items = doc.data.get("models", []) or []
        for i, item in enumerate(items):
            line, _ = pos(items, i)
            entry = _entry(doc, item, line)
            entries.append(entry)
            problems += _contradictions(doc, item, entry.id)
            aliases = item.get("aliases", []) or []
            named = [(entry.id, pos(item, "id"))] + [(str(a), pos(aliases, j)) for j, a in enumerate(aliases)]
            for name, (nl, nc) in named:
                key = name.lower()
                if key in seen and seen[key][0] == entry.id and name != entry.id:
                    continue  # an alias that repeats the entry's own id (in another case) names nothing new
                here = f"{doc.path}:{nl}"
                if key in seen:
                    other_id, where = seen[key]
                    problems.append(Problem(doc.path, nl, nc, entry.id,
                                            f"model name '{name}' is already used by '{other_id}' at {where}"))
                else:
                    seen[key] = (entry.id, here)
    return entries, problems


def _contradictions(doc: Doc, item: Any, rid: str) -> list[Problem]:
    out = []
    for small, big, label in _ORDERED:
        a, b = item.get(small), item.get(big)
        if a is not None and b is not None and float(a) > float(b):
            line, col = pos(item, small)
            out.append(Problem(doc.path, line, col, rid, f"{small} ({a}) cannot exceed {label} ({b})"))
    return out
