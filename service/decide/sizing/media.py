"""Image and video generation: the denoising work of one output from the brief's media fields (defaults from
the rules, stated), the memory of one pipeline copy, and outputs per second against the offered load."""

from __future__ import annotations

from dataclasses import dataclass

from ...domain.assumptions import Assumptions
from ...domain.brief import Brief
from ...physics import compute
from ...physics import memory as mem
from .shape import Shape

MEGAPIXEL_1024 = 1024 * 1024  # the resolution media_activation_peak_gb is given at


@dataclass(frozen=True)
class MediaShape:
    steps: int
    width: int
    height: int
    guidance: float
    passes: int  # denoiser passes per step: 2 with classifier-free guidance
    frames: int
    pixels_per_token: float
    flops_per_output: float
    defaults_used: tuple[str, ...]

    @property
    def pixels(self) -> int:
        return self.width * self.height


def pixels_per_token(params_billion: float, a: Assumptions) -> float:
    """The first denoiser band (by size) that covers the model, the largest band for anything bigger."""
    rows = sorted(a.values["media_denoiser_bands"], key=lambda r: float(r["max_params_billion"]))
    row = next((r for r in rows if float(r["max_params_billion"]) >= params_billion), rows[-1])
    return float(row["pixels_per_token"])


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
    passes = 2 if guidance > 1 else 1
    ppt = pixels_per_token(shape.params_billion, a)
    flops = compute.denoising_flops(shape.active_params_billion, width * height, ppt, steps, passes, m.frames)
    return MediaShape(steps, width, height, guidance, passes, max(0, m.frames), ppt, flops, tuple(defaults))


def media_need(brief: Brief, shape: Shape, a: Assumptions, n: int) -> mem.MemoryBreakdown:
    """One pipeline copy: its weights, the activations of the outputs it denoises at once (given at 1024 x 1024
    per image, scaled by pixels and frames) and the engine overhead per GPU."""
    ms = media_shape(brief, shape, a)
    per_output = a.num("media_activation_peak_gb") * ms.pixels / MEGAPIXEL_1024 * max(1, ms.frames)
    return mem.MemoryBreakdown((
        ("weights", mem.weights_gb(shape.params_billion, shape.bytes_per_param)),
        ("activations", per_output * max(1, brief.traffic.batch_size or 1)),
        ("engine", a.num("engine_overhead_gb") * n),
    ))


def outputs_per_second(tflops: float, mfu: float, brief: Brief, shape: Shape, a: Assumptions) -> float:
    """Images (or videos) per second of one GPU: compute-bound denoising at the prefill utilization."""
    ms = media_shape(brief, shape, a)
    return tflops * 1e12 * mfu / ms.flops_per_output if ms.flops_per_output > 0 else 0.0
