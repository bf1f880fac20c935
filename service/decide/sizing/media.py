"""Image and video generation: the denoising work of one output from the brief's media fields (defaults from
the rules, stated) over the latent its model's VAE makes, the memory of one pipeline copy, and outputs per
second against the offered load.

The denoiser is the named model's (rules/models `denoiser:`: DiT or UNet by architecture, VAE compression,
patch); a brief that names none is sized as the rules' default denoiser with the brief's size: a video's
(`media_default_denoiser`: a DiT over a 4x-temporal, 8x-spatial latent, as the open video models of 2024-25 are),
an image's (`media_default_image_denoiser`: SDXL's UNet, whose pipeline the image defaults are)."""

from __future__ import annotations

from dataclasses import dataclass

from ...domain.assumptions import Assumptions
from ...domain.brief import Brief
from ...domain.models import Denoiser
from ...physics import media as phys
from ...physics import memory as mem
from .shape import Shape

MEGAPIXEL_1024 = 1024 * 1024  # the resolution media_activation_peak_gb is given at


@dataclass(frozen=True)
class MediaShape:
    steps: int
    width: int
    height: int
    guidance: float
    passes: int  # denoiser passes per step: 2 with classifier-free guidance, 1 when guidance is distilled
    frames: int
    tokens: int  # latent tokens of one pass over the whole output
    denoiser: Denoiser
    flops_per_output: float
    defaults_used: tuple[str, ...]

    @property
    def pixels(self) -> int:
        return self.width * self.height


def denoiser_of(shape: Shape, a: Assumptions, video: bool = False) -> Denoiser:
    """The named model's denoiser, else the rules' default shape at the brief's size (its transformer shape the
    size bands' estimate): a video's is `media_default_denoiser` (a DiT over a 3D VAE's latent), an image's
    `media_default_image_denoiser` (the default pipeline the image defaults come from: SDXL's UNet)."""
    if shape.denoiser is not None:
        return shape.denoiser
    d = a.values["media_default_denoiser" if video else "media_default_image_denoiser"]
    return Denoiser(
        architecture=str(d["architecture"]),
        params_billion=shape.active_params_billion * float(d.get("denoiser_share", 1.0)),
        vae_spatial=int(d["vae_spatial"]), vae_temporal=int(d["vae_temporal"]), patch=int(d["patch"]),
        patch_temporal=int(d.get("patch_temporal", 1)), layers=shape.arch.layers, hidden_size=shape.arch.hidden_size,
    )


def media_shape(brief: Brief, shape: Shape, a: Assumptions) -> MediaShape:
    m = brief.media
    defaults: list[str] = []

    def given(value: float, field: str, default: str) -> float:
        if value > 0:
            return value
        defaults.append(field)
        return a.num(default)

    steps = int(given(m.denoising_steps, "media.denoising_steps", "media_default_steps"))
    width = int(given(m.width_px, "media.width_px", "media_default_width_px"))
    height = int(given(m.height_px, "media.height_px", "media_default_height_px"))
    guidance = given(m.guidance_scale, "media.guidance_scale", "media_default_guidance_scale")
    d = denoiser_of(shape, a, video=m.frames > 1)
    passes = 2 if guidance > 1 and not d.guidance_distilled else 1
    frames = max(0, m.frames)
    tokens = phys.latent_tokens(width, height, frames, d.vae_spatial, d.vae_temporal, d.patch, d.patch_temporal)
    dit = d.architecture == "DiT"
    per_pass = phys.denoiser_pass_flops(d.params_billion, tokens, d.layers if dit else 0, d.hidden_size if dit else 0)
    return MediaShape(steps, width, height, guidance, passes, frames, tokens, d, per_pass * steps * passes,
                      tuple(defaults))


def media_activation_gb(ms: MediaShape, a: Assumptions) -> float:
    """One output's denoising workspace. A DiT holds one block's live tensors for every token of the passes it
    batches (activation_bytes_per_token_hidden x hidden per token, as a serving step); a UNet's is given per
    1024 x 1024 image (media_activation_peak_gb), scaled by pixels and frames."""
    d = ms.denoiser
    if d.architecture == "DiT" and d.hidden_size > 0:
        per_token = d.hidden_size * a.num("activation_bytes_per_token_hidden")
        return ms.tokens * per_token * ms.passes / mem.GB
    return a.num("media_activation_peak_gb") * ms.pixels / MEGAPIXEL_1024 * max(1, ms.frames)


def vae_decode_gb(ms: MediaShape, a: Assumptions) -> float:
    """A video's VAE decode workspace (frames above 1): every output pixel of every frame, after the loop."""
    if ms.frames <= 1:
        return 0.0
    return a.num("vae_decode_bytes_per_output_pixel") * ms.pixels * ms.frames / mem.GB


def media_need(brief: Brief, shape: Shape, a: Assumptions, n: int) -> mem.MemoryBreakdown:
    """One pipeline copy: its weights (denoiser, text encoders and VAE), the larger of the denoising workspace of
    the outputs it generates at once and a video's VAE decode after the loop (the peak is one or the other, with
    every weight loaded), and the engine overhead per GPU."""
    ms = media_shape(brief, shape, a)
    outputs = max(1, brief.traffic.batch_size or 1)
    denoise, decode = media_activation_gb(ms, a) * outputs, vae_decode_gb(ms, a) * outputs
    work = (("vae_decode", decode),) if decode > denoise else (("activations", denoise),)
    return mem.MemoryBreakdown((
        ("weights", mem.weights_gb(shape.params_billion, shape.bytes_per_param)),
        *work,
        ("engine", a.num("engine_overhead_gb") * n),
    ))


def outputs_per_second(tflops: float, mfu: float, brief: Brief, shape: Shape, a: Assumptions) -> float:
    """Images (or videos) per second of one GPU: compute-bound denoising at the utilization given."""
    ms = media_shape(brief, shape, a)
    return tflops * 1e12 * mfu / ms.flops_per_output if ms.flops_per_output > 0 else 0.0
