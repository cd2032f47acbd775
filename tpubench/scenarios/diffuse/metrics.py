"""The figures of a diffusion point from its timed calls (pure functions, docs/definitions.md#diffusion).

A call makes `images` images. Seconds per image = call seconds / images (p50, p99, mean and its
95% CI over the calls); a call's p50 and p99 (`call_p99_s`: what a user waits for an image, which
arrives with its whole call); images/s = images / mean call seconds, CI from the call time's; per
chip = / chips. Each stage's seconds per image is its mean over the calls / images, so the stages sum to
the mean seconds per image. MFU per step = FLOPs per step / median step seconds / peak FLOP/s.
"""

from __future__ import annotations

import math

from tpubench.measure.stats import summarize
from tpubench.scenarios.diffuse.stages import STAGES

NAN = float("nan")


def _inv(images: int, seconds) -> float:
    return images / seconds if seconds and math.isfinite(seconds) and seconds > 0 else NAN


def call_metrics(calls: list, images: int, *, chips: float, flops_per_step: float | None = None,
                 peak_flops: float | None = None, peak_tolerance: float = math.inf) -> tuple[dict, bool]:
    """(metrics, exceeds_peak) of the timed calls (stages.CallTimes)."""
    out: dict = {"images_per_call": images, "calls": len(calls)}
    per_image = summarize([c.whole_s / images for c in calls])
    for stat in ("mean", "p50", "p90", "p99", "min", "max", "ci95_low", "ci95_high"):
        out[f"image_{stat}_s"] = per_image[stat]
    out["image_cv"] = per_image["cv"]
    call = summarize([c.whole_s for c in calls])
    out["call_p50_s"], out["call_p99_s"], out["call_mean_s"] = call["p50"], call["p99"], call["mean"]
    out["images_per_s"] = _inv(1, out["image_mean_s"])
    out["images_per_s_ci95_low"] = _inv(1, out["image_ci95_high_s"])
    out["images_per_s_ci95_high"] = _inv(1, out["image_ci95_low_s"])
    for name in ("images_per_s", "images_per_s_ci95_low", "images_per_s_ci95_high"):
        out[name.replace("images_per_s", "images_per_s_per_chip")] = out[name] / chips
    # The cost basis reads seconds per image with its CI (scenarios/diffuse/cost.py).
    out["image_s_per_image"] = out["image_mean_s"]
    out["image_s_per_image_ci95_low"], out["image_s_per_image_ci95_high"] = out["image_ci95_low_s"], out["image_ci95_high_s"]
    n = len(calls) or 1
    for stage in STAGES:
        out[f"{stage}_s_per_image"] = sum(getattr(c, f"{stage}_s") for c in calls) / n / images if calls else NAN
    steps = summarize([s for c in calls for s in c.step_s])
    for stat in ("mean", "p50", "p99"):
        out[f"denoise_step_{stat}_s"] = steps[stat]
    out["flops_per_denoise_step"] = flops_per_step
    exceeds = False
    if flops_per_step and peak_flops and steps["p50"] > 0:
        achieved = flops_per_step / steps["p50"]
        out["denoise_achieved_flops_per_s"] = achieved
        out["denoise_mfu"] = achieved / peak_flops
        exceeds = out["denoise_mfu"] > peak_tolerance
    else:
        out["denoise_mfu"] = None
    return out, exceeds


def stage_samples(calls: list, images: int) -> dict[str, list[float]]:
    """Raw samples of the timed calls: per call the whole and each stage (seconds for all its
    images), every denoising step in order, and seconds per image."""
    out = {"call_s": [c.whole_s for c in calls], "image_s": [c.whole_s / images for c in calls]}
    for stage in STAGES:
        out[f"{stage}_s"] = [getattr(c, f"{stage}_s") for c in calls]
    out["denoise_step_s"] = [s for c in calls for s in c.step_s]
    return out


def placement_warnings(placement: dict[str, str], device: str) -> list[str]:
    """A component on the CPU while the rest is on an accelerator charges host time to the chip:
    said on the result (and in the report, which shows the result's warnings)."""
    if device == "cpu":
        return []
    on_cpu = sorted(name for name, where in placement.items() if "cpu" in where)
    if not on_cpu or len(on_cpu) == len(placement):
        return []
    text = [n for n in on_cpu if n.startswith("text_encoder")]
    what = "text encoders" if text and len(text) == len(on_cpu) else ", ".join(on_cpu)
    return [f"{what} on CPU: cost per image includes host time ({', '.join(on_cpu)} ran on the host, "
            f"the rest on {device})"]
