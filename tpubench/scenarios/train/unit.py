"""The unit of scenario `train`: a training token, priced per million training tokens
(docs/definitions.md#training)."""

from __future__ import annotations

from tpubench.scenarios.output_units import OutputUnit

TRAINING_TOKENS = OutputUnit(
    key="training_token", singular="training token", plural="training tokens", title="Training",
    figures=("train",), chip_s_suffix="_chip_s_per_token",
    price_scale=1e6, priced_suffix="_usd_per_mtok", price_words="$/M training tokens",
    headline="train_usd_per_mtok", headline_words="$ per million training tokens",
    throughput="train_tokens_per_s", throughput_words="train tok/s per chip", throughput_format=",.1f",
    performance=(
        "train_tokens_per_s", "train_tokens_per_s_per_chip", "train_tokens_per_s_per_chip_ci95_low",
        "train_tokens_per_s_per_chip_ci95_high", "step_mean_s", "step_p50_s", "step_ci95_low_s",
        "step_ci95_high_s", "mfu", "loss_first", "loss_last",
    ),
    energy_suffix="_j_per_token", carbon_figure="train",
    basis_words="training",
)
