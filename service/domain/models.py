"""The model registry's nouns: one published architecture per entry (`rules/models/*.yaml`, kind `models`).

A brief names a model (`model.name`); the registry fills what the brief leaves at 0. Names match ids and aliases
without regard to case. The registry is an immutable mapping id -> entry, built once per rules version.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

MODEL_KINDS = ("llm", "embedding", "speech", "image")

# Brief `model.*` fields an entry can fill, in the order a note lists them. `context_tokens` is not among them: a
# model's window (`context_window_tokens`) is what it can take, not what the workload uses.
FILLABLE = (
    "params_billion", "active_params_billion", "precision", "layers", "kv_heads", "head_dim", "hidden_size",
    "attention", "kv_lora_rank", "rope_head_dim", "sliding_window_tokens", "sliding_window_layers", "experts",
    "experts_per_token", "shared_params_billion",
)


@dataclass(frozen=True)
class Denoiser:
    """What one denoising pass of an image or video model runs over (rules/models `denoiser:`): the latent its VAE
    makes (`vae_spatial` pixels per latent position a side, `vae_temporal` frames per latent frame after the
    first) cut into tokens of `patch` x `patch` positions (`patch_temporal` latent frames). A UNet's `patch` is
    the further downsampling where most of its parameters run (SDXL: 4). Attention FLOPs are counted for a DiT."""

    architecture: str  # DiT | UNet
    params_billion: float  # the denoiser alone: what runs every step (the entry's params_billion is the pipeline)
    vae_spatial: int = 8
    vae_temporal: int = 1
    patch: int = 2
    patch_temporal: int = 1
    layers: int = 0  # transformer blocks (DiT attention FLOPs)
    hidden_size: int = 0
    text_encoder_params_billion: float = 0.0  # part of the pipeline's weights; offloadable between prompts
    guidance_distilled: bool = False  # guidance embedded in the model: one pass a step whatever the scale


@dataclass(frozen=True)
class PublishedRun:
    """A figure the model's authors published for one output on one GPU (rules/models `published:`)."""

    gpu: str  # catalog id
    width_px: int
    height_px: int
    frames: int
    steps: int
    source: str
    guidance_scale: float = 0.0
    seconds: float = 0.0  # per output on one GPU; 0 = not published
    peak_memory_gb: float = 0.0  # 0 = not published
    text_encoder_offloaded: bool = False  # measured with the text encoder in CPU memory


@dataclass(frozen=True)
class ModelEntry:
    id: str
    name: str
    kind: str  # one of MODEL_KINDS
    source: str  # where the figures come from (config.json on the hub, paper, model card)
    as_of: str  # when the source was read, YYYY-MM-DD
    aliases: tuple[str, ...] = ()
    params_billion: float = 0.0
    active_params_billion: float = 0.0  # MoE; 0 = dense
    layers: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    hidden_size: int = 0
    attention: str = "UNSPECIFIED"  # MHA, GQA, MQA, MLA
    kv_lora_rank: int = 0
    rope_head_dim: int = 0
    context_window_tokens: int = 0  # max_position_embeddings
    sliding_window_tokens: int = 0
    sliding_window_layers: int = 0
    experts: int = 0
    experts_per_token: int = 0
    shared_params_billion: float = 0.0
    vocab_size: int = 0  # config.json; 0 = not recorded
    tie_word_embeddings: bool = False  # one matrix embeds and unembeds
    native_precision: str = ""  # as the source states it (BF16, FP8, FP4...), mapped to a brief precision if known
    notes: str = ""
    location: str = ""  # path:line of the entry
    denoiser: Denoiser | None = None  # image and video generation
    published: tuple[PublishedRun, ...] = ()

    def names(self) -> tuple[str, ...]:
        return (self.id, *self.aliases)


def split_shape(e: ModelEntry) -> tuple[int, int, int]:
    """(query heads, KV heads, layers) a parallel split of the model must respect; 0 = not known.

    The registry keeps config.json's `num_key_value_heads` and `head_dim`, not `num_attention_heads`. MHA has as
    many KV heads as query heads, and MLA models list their query heads as KV heads (DeepSeek-V3: 128 and 128). For
    GQA the query heads are hidden_size / head_dim when that is a whole multiple of the KV heads (Llama, Qwen,
    Mistral); where it is not (Gemma's heads are wider than hidden / heads), they are not known."""
    kv, layers = max(e.kv_heads, 0), max(e.layers, 0)
    if e.attention in ("MHA", "MLA"):
        return kv, kv, layers
    heads = 0
    if e.hidden_size > 0 and e.head_dim > 0 and e.hidden_size % e.head_dim == 0:
        guess = e.hidden_size // e.head_dim
        heads = guess if kv > 0 and guess % kv == 0 else 0
    return heads, kv, layers


Registry = Mapping[str, ModelEntry]
EMPTY: Registry = MappingProxyType({})


def registry_of(entries: Iterable[ModelEntry]) -> Registry:
    return MappingProxyType({e.id: e for e in entries})


def name_index(registry: Registry) -> Mapping[str, str]:
    """Lower-cased id or alias -> id."""
    out: dict[str, str] = {}
    for e in registry.values():
        for n in e.names():
            out.setdefault(n.lower(), e.id)
    return MappingProxyType(out)


def find(registry: Registry, name: str) -> ModelEntry | None:
    """The entry an id or alias names, case-insensitively; None when nothing does."""
    if not name:
        return None
    hit = registry.get(name)
    if hit is not None:
        return hit
    wanted = name.strip().lower()
    for e in registry.values():
        if any(n.lower() == wanted for n in e.names()):
            return e
    return None


def nearest(names: Iterable[str], name: str, n: int = 3) -> list[str]:
    """The known names closest to `name` (difflib, case-insensitive), in their own spelling."""
    by_lower: dict[str, str] = {}
    for k in names:
        by_lower.setdefault(k.lower(), k)
    return [by_lower[m] for m in difflib.get_close_matches(name.strip().lower(), list(by_lower), n=n, cutoff=0.5)]
