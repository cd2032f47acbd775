"""The unit of scenario `diffuse`: an image, priced per 1,000 images (docs/definitions.md#diffusion)."""

from __future__ import annotations

from tpubench.scenarios.output_units import CI_BOUNDS, OutputUnit

IMAGES = OutputUnit(
    key="image", singular="image", plural="images", title="Images",
    figures=("image",), chip_s_suffix="_chip_s_per_image",
    price_scale=1e3, priced_suffix="_usd_per_kimage", price_words="$/1k images",
    headline="image_usd_per_kimage", headline_words="$ per 1,000 images",
    throughput="images_per_s", throughput_words="images/s per chip", throughput_format=",.3g",
    performance=(
        "images_per_s", "images_per_s_per_chip", "images_per_s_per_chip_ci95_low", "images_per_s_per_chip_ci95_high",
        "image_mean_s", "image_p50_s", "image_p99_s", "image_ci95_low_s", "image_ci95_high_s", "call_p50_s",
        "call_p99_s", "text_encode_s_per_image", "prepare_s_per_image", "denoise_s_per_image", "vae_decode_s_per_image",
        "postprocess_s_per_image", "denoise_step_p50_s", "denoise_mfu", "resolution_px", "denoise_steps",
    ),
    energy_suffix="_j_per_image", energy_bounds=CI_BOUNDS,
    basis_words="images",
)
