"""Image and video generation: the latent a VAE makes, the tokens a denoiser runs over, and their FLOPs.

Pure functions over numbers. A video VAE compresses time and space: a causal 3D VAE keeps the first frame and
folds each further `temporal` frames into one latent frame (HunyuanVideo, Wan2.1, CogVideoX: 4x; 129 frames are
33 latent frames), and each side by `spatial` (8x). A DiT cuts the latent into patches (2 x 2: one token per
16 x 16 pixels) and attends over all of them at once (full 3D attention), so a clip's attention grows with the
square of its tokens.
"""

from __future__ import annotations

import math


def latent_frames(frames: int, temporal: int) -> int:
    """Latent frames of `frames` output frames: 1 for an image, else 1 + ceil((frames - 1) / temporal)."""
    if frames <= 1:
        return 1
    return 1 + math.ceil((frames - 1) / max(1, temporal))


def latent_tokens(width_px: int, height_px: int, frames: int, spatial: int, temporal: int, patch: int,
                  patch_temporal: int = 1) -> int:
    """Tokens one denoiser pass runs over: latent frames / temporal patch x (height / (spatial x patch)) x
    (width / (spatial x patch)), each rounded up (a partial patch is padded)."""
    if width_px <= 0 or height_px <= 0 or spatial <= 0 or patch <= 0:
        raise ValueError("resolution, VAE compression and patch must be positive")
    side = spatial * patch
    t = math.ceil(latent_frames(frames, temporal) / max(1, patch_temporal))
    return t * math.ceil(height_px / side) * math.ceil(width_px / side)


def denoiser_pass_flops(params_billion: float, tokens: int, layers: int = 0, hidden: int = 0) -> float:
    """One forward pass over `tokens` tokens: 2·N per token in the linear layers, plus full (non-causal)
    self-attention, QK^T and scores x V at 2·S²·d each per layer: 4·L·S²·d (0 without a transformer shape)."""
    if params_billion < 0 or tokens < 0:
        raise ValueError("parameters and tokens must be non-negative")
    s = float(tokens)
    return 2.0 * params_billion * 1e9 * s + 4.0 * max(0, layers) * s * s * max(0, hidden)
