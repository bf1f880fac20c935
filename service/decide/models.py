"""Stage 0 of the decision: a brief that names a model (`model.name`) gets the registry's architecture for every
field it left at 0 or unspecified. Fields the brief gives win, so facts, sizing and the rules all read one brief.

A filled figure that contradicts one the brief gave (more active than the brief's total parameters, more windowed
layers than the brief's layers...) is left out rather than kept: the brief describes a variant the registry does
not know, and its own figures are the ones to trust.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..domain.brief import ATTENTION_KINDS, PRECISIONS, UNSPECIFIED, Brief, Model
from ..domain.models import FILLABLE, ModelEntry, Registry, find

# (smaller, larger): the validator's pairs; a filled smaller above a given larger (or the reverse) is dropped.
_ORDERED = (
    ("active_params_billion", "params_billion"),
    ("shared_params_billion", "params_billion"),
    ("experts_per_token", "experts"),
    ("sliding_window_layers", "layers"),
)


def _registry_value(entry: ModelEntry, name: str) -> Any:  # noqa: ANN401
    if name == "precision":
        # Only a precision the API has (FP4 arrives with PRECISION_FP4); otherwise the brief's default applies.
        return entry.native_precision if entry.native_precision in PRECISIONS else UNSPECIFIED
    if name == "attention":
        return entry.attention if entry.attention in ATTENTION_KINDS else UNSPECIFIED
    return getattr(entry, name)


def _unset(value: Any) -> bool:  # noqa: ANN401
    return value in (0, 0.0, UNSPECIFIED, "")


def filled_fields(model: Model, entry: ModelEntry) -> dict[str, Any]:
    """The registry's value for each field the brief leaves unset, less those that contradict what it gives."""
    filled = {f: _registry_value(entry, f) for f in FILLABLE
              if _unset(getattr(model, f)) and not _unset(_registry_value(entry, f))}
    for small, big in _ORDERED:
        a = filled.get(small, getattr(model, small))
        b = filled.get(big, getattr(model, big))
        if a and b and a > b:
            # One of the two came from the brief (the registry itself is checked): drop the one that did not.
            filled.pop(small if small in filled else big, None)
    return filled


def resolve(brief: Brief, registry: Registry) -> Brief:
    """The brief with the named model's registry fields filled in; unchanged without a (known) name."""
    entry = find(registry, brief.model.name)
    if entry is None:
        return brief
    filled = filled_fields(brief.model, entry)
    vocab = vocab_params_billion(brief.model, entry, filled)
    if vocab:
        filled["vocab_params_billion"] = vocab
    if not filled:
        return brief
    return dataclasses.replace(brief, model=dataclasses.replace(brief.model, **filled))


def vocab_params_billion(model: Model, entry: ModelEntry, filled: dict[str, Any]) -> float:
    """The named model's embedding and output matrices in billions (vocab_size x hidden_size, once when tied), or
    0 when the registry has no vocab_size, the brief already says, or they would not fit in the brief's active
    parameters (a variant the registry does not know). Not a noted fill: no API field carries it."""
    hidden = filled.get("hidden_size", model.hidden_size)
    if entry.vocab_size <= 0 or hidden <= 0 or model.vocab_params_billion > 0:
        return 0.0
    vocab = entry.vocab_size * hidden * (1 if entry.tie_word_embeddings else 2) / 1e9
    active = filled.get("active_params_billion", model.active_params_billion) or filled.get(
        "params_billion", model.params_billion)
    return vocab if 0 < vocab < active else 0.0
