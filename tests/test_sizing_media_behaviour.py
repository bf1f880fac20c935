"""Image and video sizing (decide/sizing/media.py and media_latency.py) on small frozen inputs: the p95 of a job
queue in front of the copies against the brief's target (copies added while that meets it, never past the cap,
the target called unmet when it cannot be), the denoising work of one output from the brief's media fields and
the rules' defaults, and one pipeline copy's memory. The queue's own formula is physics/queueing's; here it is
read as the oracle, and the fewest copies meeting a target is found by counting up from one."""

from __future__ import annotations

import pytest

from service.decide.sizing import media
from service.decide.sizing.common import MAX_GPUS, Sizing
from service.decide.sizing.media_latency import EXTRA_COPIES, check_latency, media_latency
from service.decide.sizing.shape import Shape
from service.domain.assumptions import Assumptions
from service.domain.brief import Brief, Latency, Media, Traffic
from service.domain.catalog import Gpu
from service.domain.models import Denoiser
from service.physics.memory import Architecture, MemoryBreakdown
from service.physics.queueing import latency_quantile_s

GPU = Gpu("g", "g", "nvidia", "datacenter", 80, "HBM3", 3.35, 989, 1979, 0, 700, "nvlink", 900, 8, 8, 7, 0.7, "cuda",
          "", "", "")
ONE_COPY = MemoryBreakdown((("weights", 10.0), ("activations", 2.5), ("engine", 1.0)))


def _brief(rps: float, p95_ms: float = 0.0, workload: str = "MEDIA_GENERATION") -> Brief:
    return Brief(workload=workload, traffic=Traffic(requests_per_second=rps), latency=Latency(p95_ms=p95_ms))


def _s(rate: float, replicas: int = 1, per_replica: int = 1, *, target: bool = True) -> Sizing:
    """A copy making `rate` outputs a second, sized for the load at `replicas` copies; the figures media_latency
    must set start at values it never gives, so a figure left alone shows."""
    return Sizing(gpu=GPU, tokens_per_second=rate, replicas=replicas, per_replica=per_replica,
                  count=replicas * per_replica, memory=ONE_COPY, latency_target=target, est_latency_ms=-1.0,
                  est_ttft_ms=-1.0, meets_latency=False)


def _fewest(service_s: float, rps: float, target_s: float) -> int:
    c = 1
    while latency_quantile_s(service_s, rps, c) > target_s:
        c += 1
    return c


def test_a_copy_that_makes_nothing_is_left_unsized() -> None:
    for rate in (0.0, -1.0):
        s = _s(rate)
        media_latency(s, _brief(1.0, 500.0), ONE_COPY)
        assert (s.est_latency_ms, s.est_ttft_ms, s.meets_latency, s.replicas) == (-1.0, -1.0, False, 1)


def test_no_target_reports_the_p95_at_the_copies_sized() -> None:
    # One copy at 1 output/s, 0.5 requests/s: M/D/1 p95 = 1 + (1 / 0.5) x 0.5 x ln(0.5 / 0.05) = 1 + ln 10 s.
    s = _s(1.0)
    media_latency(s, _brief(0.5), ONE_COPY)
    assert s.est_latency_ms == pytest.approx((1 + 2.302585092994046) * 1000)
    assert s.est_ttft_ms == 0.0
    assert s.meets_latency is True
    assert (s.replicas, s.count, s.memory) == (1, 1, ONE_COPY)


def test_a_target_already_met_keeps_the_copies() -> None:
    s = _s(1.0, replicas=3)
    media_latency(s, _brief(0.5, 1000.0), ONE_COPY)
    assert s.est_latency_ms == pytest.approx(1000.0)  # three copies: nobody waits at the 95th percentile
    assert s.meets_latency is True
    assert (s.replicas, s.count, s.memory) == (3, 3, ONE_COPY)


def test_a_target_under_one_output_is_unmet_at_any_count() -> None:
    # 1 s an output, a 0.9 s target: no copies are added and the p95 at the copies sized is reported.
    s = _s(1.0)
    media_latency(s, _brief(0.5, 900.0), ONE_COPY)
    assert (s.replicas, s.count, s.memory) == (1, 1, ONE_COPY)
    assert s.est_latency_ms == pytest.approx(3302.585092994046)
    assert s.meets_latency is False
    assert s.est_ttft_ms == 0.0


def test_copies_are_added_until_the_target_is_met() -> None:
    # 0.5 requests/s at 1 s each: one copy's p95 is 3.3 s; three copies meet 1.2 s (two give 1.35 s).
    s = _s(1.0, per_replica=2)
    media_latency(s, _brief(0.5, 1200.0), ONE_COPY)
    assert _fewest(1.0, 0.5, 1.2) == 3
    assert latency_quantile_s(1.0, 0.5, 2) > 1.2
    assert (s.replicas, s.count) == (3, 6)
    assert s.memory == MemoryBreakdown((("weights", 30.0), ("activations", 7.5), ("engine", 3.0)))
    assert s.est_latency_ms == pytest.approx(latency_quantile_s(1.0, 0.5, 3) * 1000)
    assert s.est_latency_ms <= 1200.0
    assert s.meets_latency is True


def test_a_target_equal_to_one_output_is_met_when_nobody_waits() -> None:
    # Both sides of service <= target and p95 <= target: at three copies the p95 is the service time itself.
    s = _s(1.0)
    media_latency(s, _brief(0.5, 1000.0), ONE_COPY)
    assert (s.replicas, s.count) == (3, 3)
    assert s.est_latency_ms == 1000.0
    assert s.meets_latency is True


@pytest.mark.parametrize(("rps", "target_ms", "replicas"), [
    (8.0, 1200.0, 1), (9.0, 1200.0, 1),  # one copy: at most 1 x 4 + 8 = 12
    (9.5, 1000.0, 2), (10.0, 1000.0, 2),  # two: at most 16
])
def test_copies_stop_at_extra_copies_times_the_load_plus_eight(rps: float, target_ms: float, replicas: int) -> None:
    most = replicas * EXTRA_COPIES + 8
    need = _fewest(1.0, rps, target_ms / 1000)
    assert need in (most, most + 1)  # the cases sit on both sides of the cap
    s = _s(1.0, replicas=replicas)
    media_latency(s, _brief(rps, target_ms), ONE_COPY)
    if need <= most:
        assert (s.replicas, s.count, s.meets_latency) == (need, need, True)
        assert s.memory.total_gb == pytest.approx(ONE_COPY.total_gb * need)
    else:
        # Unmet: the copies sized for the load stay, with their own p95 (here the queue grows without end).
        assert (s.replicas, s.count, s.memory, s.meets_latency) == (replicas, replicas, ONE_COPY, False)
        assert s.est_latency_ms == float(MAX_GPUS) * 1000


def test_copies_stop_at_the_largest_cluster_sized() -> None:
    # 100,000 GPUs a copy: at most 1,000,000 // 100,000 = 10 copies, whatever the load.
    s = _s(1.0, replicas=9, per_replica=100_000)
    media_latency(s, _brief(8.5, 1000.0), ONE_COPY)
    assert _fewest(1.0, 8.5, 1.0) > 10
    assert (s.replicas, s.count, s.memory, s.meets_latency) == (9, 900_000, ONE_COPY, False)
    assert s.est_latency_ms == pytest.approx(latency_quantile_s(1.0, 8.5, 9) * 1000)
    # At 10 copies the target is still missed, but the p95 reported is the one of the 9 sized.
    assert latency_quantile_s(1.0, 8.5, 10) < latency_quantile_s(1.0, 8.5, 9)


def test_the_largest_cluster_is_whole_copies() -> None:
    # 300,000 GPUs a copy: 3 whole copies fit under 1,000,000 GPUs (not 3.33); the target needs 4.
    s = _s(1.0, replicas=1, per_replica=300_000)
    media_latency(s, _brief(1.0, 1000.0), ONE_COPY)
    assert _fewest(1.0, 1.0, 1.0) == 4
    assert (s.replicas, s.count, s.meets_latency) == (1, 300_000, False)


def test_a_copy_of_zero_gpus_is_capped_as_a_copy_of_one() -> None:
    s = _s(1.0, replicas=1, per_replica=0)
    media_latency(s, _brief(0.5, 1200.0), ONE_COPY)
    assert (s.replicas, s.count, s.meets_latency) == (3, 0, True)


def test_an_overloaded_copy_reports_the_largest_latency_not_infinity() -> None:
    s = _s(1.0)
    media_latency(s, _brief(2.0), ONE_COPY)  # 2 requests/s on one copy of 1/s: the queue never empties
    assert s.est_latency_ms == float(MAX_GPUS) * 1000
    assert s.meets_latency is True  # no target


def test_more_load_never_needs_fewer_copies() -> None:
    counts = []
    for rps in (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0):
        s = _s(1.0)
        media_latency(s, _brief(rps, 1500.0), ONE_COPY)
        assert s.meets_latency
        counts.append(s.replicas)
    assert counts == sorted(counts)
    assert counts[0] < counts[-1]


def test_a_looser_target_never_needs_more_copies() -> None:
    counts = []
    for target_ms in (1000.0, 1100.0, 1500.0, 2500.0, 5000.0):
        s = _s(1.0)
        media_latency(s, _brief(2.0, target_ms), ONE_COPY)
        assert s.meets_latency
        counts.append(s.replicas)
    assert counts == sorted(counts, reverse=True)
    assert counts[0] > counts[-1]


def test_a_faster_copy_is_timed_by_its_own_rate() -> None:
    # 4 outputs/s: 0.25 s each; at 0.125 requests/s one copy's p95 is 0.25 s (the chance of waiting 3% < 5%).
    s = _s(4.0)
    media_latency(s, _brief(0.125, 300.0), ONE_COPY)
    assert s.est_latency_ms == pytest.approx(250.0)
    assert (s.replicas, s.meets_latency) == (1, True)


# -- check_latency --------------------------------------------------------------------------------------------


def test_a_media_target_is_checked_against_the_queue() -> None:
    s = _s(1.0)
    check_latency(s, _brief(0.5, 1200.0), ONE_COPY)
    assert (s.replicas, s.meets_latency, s.latency_target) == (3, True, True)


def test_a_media_brief_without_a_target_is_not_timed_here() -> None:
    s = _s(1.0, target=False)
    check_latency(s, _brief(0.5, 1200.0), ONE_COPY)
    assert (s.est_latency_ms, s.replicas, s.latency_target) == (-1.0, 1, False)


def test_a_target_on_other_work_is_kept_only_with_an_estimate() -> None:
    s = _s(1.0)
    s.est_latency_ms = 0.0
    check_latency(s, _brief(0.5, 1200.0, workload="EMBEDDING"), ONE_COPY)
    assert (s.latency_target, s.replicas, s.meets_latency) == (False, 1, False)
    s = _s(1.0)
    s.est_latency_ms = 0.5  # under a millisecond is an estimate all the same
    check_latency(s, _brief(0.5, 1200.0, workload="EMBEDDING"), ONE_COPY)
    assert s.latency_target is True
    s = _s(1.0)
    s.est_latency_ms = 40.0
    check_latency(s, _brief(0.5, 1200.0, workload="EMBEDDING"), ONE_COPY)
    assert (s.latency_target, s.est_latency_ms, s.replicas) == (True, 40.0, 1)


# -- media.py: the work and memory of one output ------------------------------------------------------------------

MEDIA_RULES = Assumptions(values={
    "media_default_steps": 20, "media_default_width_px": 1024, "media_default_height_px": 512,
    "media_default_guidance_scale": 5.0, "activation_bytes_per_token_hidden": 30, "media_activation_peak_gb": 8.0,
    "vae_decode_bytes_per_output_pixel": 100, "engine_overhead_gb": 1.5,
    "media_default_denoiser": {"architecture": "DiT", "vae_spatial": 8, "vae_temporal": 4, "patch": 2},
    "media_default_image_denoiser": {"architecture": "UNet", "vae_spatial": 8, "vae_temporal": 1, "patch": 4,
                                     "denoiser_share": 0.5},
}, sources={})
ARCH = Architecture(layers=10, kv_heads=8, head_dim=128, hidden_size=1000, attention_heads=8, vocab_size=1000,
                    exact=False)


def _shape(params: float = 4.0, active: float = 2.0, denoiser: Denoiser | None = None, bpp: float = 2.0) -> Shape:
    return Shape(params, active, "BF16", bpp, ARCH, 0, 0, 1, 0, 0, (), denoiser=denoiser)


def _media(steps: int = 0, width: int = 0, height: int = 0, guidance: float = 0.0, frames: int = 0,
           batch: int = 0) -> Brief:
    return Brief(workload="MEDIA_GENERATION", traffic=Traffic(batch_size=batch),
                 media=Media(denoising_steps=steps, width_px=width, height_px=height, guidance_scale=guidance,
                             frames=frames))


def _rules(**change: object) -> Assumptions:
    return Assumptions(values={**MEDIA_RULES.values, **change}, sources={})


def test_a_named_denoiser_is_used_as_given() -> None:
    d = Denoiser("DiT", 12.0, vae_spatial=16, patch=1)
    assert media.denoiser_of(_shape(denoiser=d), MEDIA_RULES) is d
    assert media.denoiser_of(_shape(denoiser=d), MEDIA_RULES, video=True) is d


def test_an_image_without_a_named_denoiser_gets_the_rules_image_default() -> None:
    # The share of the ACTIVE parameters (2B x 0.5), the transformer shape from the size bands.
    d = media.denoiser_of(_shape(params=4.0, active=2.0), MEDIA_RULES)
    assert d == Denoiser("UNet", 1.0, vae_spatial=8, vae_temporal=1, patch=4, patch_temporal=1, layers=10,
                         hidden_size=1000)


def test_a_video_without_a_named_denoiser_gets_the_rules_video_default() -> None:
    # No denoiser_share: the whole active size; no patch_temporal: 1.
    d = media.denoiser_of(_shape(params=4.0, active=2.0), MEDIA_RULES, video=True)
    assert d == Denoiser("DiT", 2.0, vae_spatial=8, vae_temporal=4, patch=2, patch_temporal=1, layers=10,
                         hidden_size=1000)
    rules = _rules(media_default_denoiser={**MEDIA_RULES.values["media_default_denoiser"], "patch_temporal": 2,
                                           "denoiser_share": 0.25, "vae_spatial": 16})
    d = media.denoiser_of(_shape(active=2.0), rules, video=True)
    assert (d.patch_temporal, d.params_billion, d.vae_spatial) == (2, 0.5, 16)


def test_the_brief_s_media_fields_are_used_when_given() -> None:
    ms = media.media_shape(_media(steps=30, width=512, height=256, guidance=3.0), _shape(), MEDIA_RULES)
    assert (ms.steps, ms.width, ms.height, ms.guidance, ms.frames) == (30, 512, 256, 3.0, 0)
    assert ms.pixels == 512 * 256
    assert ms.defaults_used == ()
    assert ms.denoiser.architecture == "UNet"
    # UNet: 8 x 4 = 32 pixels a token side: 16 x 8 tokens; 2 passes (guidance above 1); no attention term.
    assert ms.tokens == 128
    assert ms.passes == 2
    assert ms.flops_per_output == pytest.approx(2 * 1.0e9 * 128 * 30 * 2)


def test_the_rules_defaults_fill_what_the_brief_leaves_out_and_are_named() -> None:
    ms = media.media_shape(_media(), _shape(), MEDIA_RULES)
    assert (ms.steps, ms.width, ms.height, ms.guidance) == (20, 1024, 512, 5.0)
    assert ms.defaults_used == ("media.denoising_steps", "media.width_px", "media.height_px",
                                "media.guidance_scale")
    ms = media.media_shape(_media(steps=10, height=64), _shape(), MEDIA_RULES)
    assert (ms.steps, ms.width, ms.height) == (10, 1024, 64)
    assert ms.defaults_used == ("media.width_px", "media.guidance_scale")


@pytest.mark.parametrize(("guidance", "distilled", "passes"), [
    (1.0, False, 1), (1.5, False, 2), (7.0, False, 2), (7.0, True, 1), (1.0, True, 1),
])
def test_classifier_free_guidance_doubles_the_passes(guidance: float, distilled: bool, passes: int) -> None:
    d = Denoiser("UNet", 1.0, patch=4, guidance_distilled=distilled)
    ms = media.media_shape(_media(steps=10, width=256, height=256, guidance=guidance), _shape(denoiser=d),
                           MEDIA_RULES)
    assert ms.passes == passes
    assert ms.flops_per_output == pytest.approx(2 * 1e9 * 64 * 10 * passes)


def test_a_video_s_tokens_and_attention_flops_worked_by_hand() -> None:
    # 17 frames at 256 x 128 over the DiT default (8x spatial, 4x temporal, patch 2): 1 + ceil(16 / 4) = 5
    # latent frames of 8 x 16 tokens = 640 tokens; a pass = 2 x 2B x 640 + 4 x 10 layers x 640^2 x 1000.
    ms = media.media_shape(_media(steps=4, width=256, height=128, guidance=1.0, frames=17), _shape(active=2.0),
                           MEDIA_RULES)
    assert ms.denoiser.architecture == "DiT"
    assert (ms.frames, ms.tokens, ms.passes) == (17, 640, 1)
    per_pass = 2 * 2.0e9 * 640 + 4 * 10 * 640 ** 2 * 1000
    assert ms.flops_per_output == pytest.approx(per_pass * 4)


@pytest.mark.parametrize(("frames", "video"), [(-3, False), (0, False), (1, False), (2, True)])
def test_two_frames_or_more_is_a_video(frames: int, video: bool) -> None:
    ms = media.media_shape(_media(steps=1, width=64, height=64, guidance=1.0, frames=frames), _shape(), MEDIA_RULES)
    assert ms.denoiser.architecture == ("DiT" if video else "UNet")
    assert ms.frames == max(0, frames)


def test_a_temporal_patch_folds_latent_frames() -> None:
    # 17 frames: 5 latent frames, 2 to a patch: 3 of 8 x 16 tokens.
    d = Denoiser("DiT", 2.0, vae_spatial=8, vae_temporal=4, patch=2, patch_temporal=2)
    ms = media.media_shape(_media(steps=1, width=256, height=128, guidance=1.0, frames=17), _shape(denoiser=d),
                           MEDIA_RULES)
    assert ms.tokens == 384


def test_a_unet_s_attention_is_not_counted_even_with_a_transformer_shape() -> None:
    d = Denoiser("UNet", 1.0, patch=4, layers=10, hidden_size=1000)
    ms = media.media_shape(_media(steps=1, width=256, height=256, guidance=1.0), _shape(denoiser=d), MEDIA_RULES)
    assert ms.flops_per_output == pytest.approx(2 * 1e9 * 64)


def test_a_dit_s_workspace_is_its_tokens_hidden_and_passes() -> None:
    # 640 tokens x 1000 hidden x 30 bytes x 2 passes = 38.4 MB.
    d = Denoiser("DiT", 2.0, vae_spatial=8, vae_temporal=4, patch=2, layers=10, hidden_size=1000)
    ms = media.media_shape(_media(steps=4, width=256, height=128, guidance=2.0, frames=17), _shape(denoiser=d),
                           MEDIA_RULES)
    assert media.media_activation_gb(ms, MEDIA_RULES) == pytest.approx(640 * 1000 * 30 * 2 / 1e9)


def test_a_dit_of_hidden_size_one_is_still_sized_per_token() -> None:
    d = Denoiser("DiT", 2.0, vae_spatial=8, vae_temporal=4, patch=2, hidden_size=1)
    ms = media.media_shape(_media(steps=4, width=256, height=128, guidance=1.0, frames=17), _shape(denoiser=d),
                           MEDIA_RULES)
    assert media.media_activation_gb(ms, MEDIA_RULES) == pytest.approx(640 * 1 * 30 / 1e9)


@pytest.mark.parametrize(("arch", "hidden", "frames", "gb"), [
    ("UNet", 1000, 0, 8.0 * 0.5), ("UNet", 0, 1, 8.0 * 0.5), ("DiT", 0, 0, 8.0 * 0.5), ("UNet", 1000, 3, 8.0 * 1.5),
])
def test_a_unet_s_workspace_scales_the_rules_peak_by_pixels_and_frames(arch: str, hidden: int, frames: int,
                                                                       gb: float) -> None:
    # media_activation_peak_gb (8) is for 1024 x 1024; 1024 x 512 is half of it, per frame.
    d = Denoiser(arch, 1.0, patch=4, hidden_size=hidden)
    ms = media.media_shape(_media(steps=1, width=1024, height=512, guidance=1.0, frames=frames), _shape(denoiser=d),
                           MEDIA_RULES)
    assert media.media_activation_gb(ms, MEDIA_RULES) == pytest.approx(gb)


@pytest.mark.parametrize(("frames", "gb"), [(0, 0.0), (1, 0.0), (2, 100 * 1024 * 512 * 2 / 1e9),
                                            (9, 100 * 1024 * 512 * 9 / 1e9)])
def test_only_a_video_has_a_vae_decode_workspace(frames: int, gb: float) -> None:
    ms = media.media_shape(_media(steps=1, width=1024, height=512, guidance=1.0, frames=frames), _shape(),
                           MEDIA_RULES)
    assert media.vae_decode_gb(ms, MEDIA_RULES) == pytest.approx(gb)


def test_one_image_copy_s_memory_worked_by_hand() -> None:
    # 4B pipeline at 2 bytes = 8 GB; UNet workspace 8 GB x half a megapixel-1024 = 4 GB; 1.5 GB engine on 1 GPU.
    got = media.media_need(_media(width=1024, height=512), _shape(params=4.0), MEDIA_RULES, 1)
    assert got.components == (("weights", 8.0), ("activations", 4.0), ("engine", 1.5))
    # Three outputs at once: three workspaces; two GPUs: two engines.
    got = media.media_need(_media(width=1024, height=512, batch=3), _shape(params=4.0, bpp=1.0), MEDIA_RULES, 2)
    assert got.components == (("weights", 4.0), ("activations", pytest.approx(12.0)), ("engine", 3.0))


def test_a_video_copy_holds_the_larger_of_denoising_and_decoding() -> None:
    # 17 frames of 1024 x 512: the decode is 100 B x 524,288 px x 17 = 0.89 GB; a DiT with no hidden size is
    # sized by the peak per pixel and frame: 8 x 0.5 x 17 = 68 GB, so the denoising is the peak.
    d = Denoiser("DiT", 2.0, vae_spatial=8, vae_temporal=4, patch=2)
    brief = _media(width=1024, height=512, frames=17, guidance=1.0)
    got = media.media_need(brief, _shape(params=4.0, denoiser=d), MEDIA_RULES, 1)
    assert got.components == (("weights", 8.0), ("activations", pytest.approx(68.0)), ("engine", 1.5))
    # With a hidden size the DiT's workspace is small (tokens x hidden x 30 B) and the decode is the peak.
    d = Denoiser("DiT", 2.0, vae_spatial=8, vae_temporal=4, patch=2, hidden_size=100)
    got = media.media_need(brief, _shape(params=4.0, denoiser=d), MEDIA_RULES, 1)
    decode = 100 * 1024 * 512 * 17 / 1e9
    assert got.components == (("weights", 8.0), ("vae_decode", pytest.approx(decode)), ("engine", 1.5))
    # Two clips at once: both workspaces double, the decode is still the peak.
    got = media.media_need(_media(width=1024, height=512, frames=17, guidance=1.0, batch=2),
                           _shape(params=4.0, denoiser=d), MEDIA_RULES, 1)
    assert got.components[1] == ("vae_decode", pytest.approx(2 * decode))


def test_a_workspace_equal_to_the_decode_is_named_the_denoising_s() -> None:
    # 9 frames of 256 x 128, DiT 8/4/2: 3 latent frames x 128 = 384 tokens x 2,560 hidden x 30 B = 29.4912 MB,
    # and the decode 100 B x 32,768 px x 9 = 29.4912 MB: a tie keeps the denoising workspace's name.
    d = Denoiser("DiT", 2.0, vae_spatial=8, vae_temporal=4, patch=2, hidden_size=2560)
    got = media.media_need(_media(width=256, height=128, frames=9, guidance=1.0), _shape(params=4.0, denoiser=d),
                           MEDIA_RULES, 1)
    assert got.components == (("weights", 8.0), ("activations", 0.0294912), ("engine", 1.5))


def test_outputs_per_second_is_the_compute_over_one_output_s_flops() -> None:
    # UNet 1B over 64 tokens, 10 steps, 1 pass: 1.28e12 FLOPs an image; 100 TFLOPS at 40% = 31.25 images/s
    # (exactly: every figure here is exact in binary but 0.4, and 1e14 x 0.4 rounds to 4e13).
    d = Denoiser("UNet", 1.0, patch=4)
    brief = _media(steps=10, width=256, height=256, guidance=1.0)
    assert media.outputs_per_second(100.0, 0.4, brief, _shape(denoiser=d), MEDIA_RULES) == 31.25
    assert media.outputs_per_second(200.0, 0.4, brief, _shape(denoiser=d), MEDIA_RULES) == pytest.approx(62.5)


def test_an_output_of_under_one_flop_is_still_divided() -> None:
    # A denoiser of 1e-12 billion parameters: 2 x 1e-3 x 64 = 0.128 FLOPs an image.
    d = Denoiser("UNet", 1e-12, patch=4)
    got = media.outputs_per_second(100.0, 0.4, _media(steps=1, width=256, height=256, guidance=1.0),
                                   _shape(denoiser=d), MEDIA_RULES)
    assert got == pytest.approx(100e12 * 0.4 / 0.128)


def test_an_output_of_no_work_makes_no_outputs_rather_than_dividing_by_zero() -> None:
    d = Denoiser("UNet", 0.0, patch=4)
    assert media.outputs_per_second(100.0, 0.4, _media(steps=10, width=256, height=256), _shape(denoiser=d),
                                    MEDIA_RULES) == 0.0
