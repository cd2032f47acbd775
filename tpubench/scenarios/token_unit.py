"""The unit of scenarios `generate` and `serve`: a token of inference, priced per million tokens
(docs/definitions.md#cost). Both scenarios import it from here, so neither imports the other."""

from __future__ import annotations

from tpubench.scenarios.output_units import CI_BOUNDS, OutputUnit

TOKENS = OutputUnit(
    key="token", singular="token", plural="tokens", title="Inference",
    figures=("input", "output", "blended"), chip_s_suffix="_chip_s_per_token",
    price_scale=1e6, priced_suffix="_usd_per_mtok", price_words="$/Mtok",
    headline="blended_usd_per_mtok", headline_words="blended $/Mtok",
    throughput="output_tokens_per_s", throughput_words="output tok/s per chip", throughput_format=",.1f",
    performance=(
        "output_tokens_per_s", "output_tokens_per_s_per_chip", "output_tokens_per_s_per_chip_ci95_low",
        "output_tokens_per_s_per_chip_ci95_high", "interactivity_tokens_per_s_per_user",
        "ttft_mean_s", "ttft_p50_s", "ttft_p90_s", "ttft_p95_s", "ttft_p99_s", "ttft_min_s", "ttft_max_s",
        "tpot_mean_s", "tpot_p50_s", "tpot_p90_s", "tpot_p95_s", "tpot_p99_s", "tpot_min_s", "tpot_max_s",
        "e2e_mean_s", "e2e_p50_s", "e2e_p99_s", "prefill_mfu", "decode_mbu",
        "input_tokens_per_s", "requests_per_s", "goodput_requests_per_s", "failure_rate",
        # A server's share of input tokens served from its prefix cache (scenarios/serve/cost.py) and
        # its engine's peak KV-cache usage (serving/engine_metrics.py).
        "cached_input_share", "engine_kv_cache_usage_peak",
    ),
    # The whole chip-hour charged to output tokens, as published tables do, and tokens per dollar
    # (money/token_costs.py).
    extra_cost_columns=tuple(f"inferencex_usd_per_mtok{b}" for b in CI_BOUNDS)
    + ("tokens_per_usd", "output_tokens_per_usd_inferencex"),
    basis_labels=("split_method", "split_note"),   # how input and output were told apart
    energy_suffix="_j_per_token", carbon_figure="blended", per_kwh_column="tokens_per_kwh",
    basis_words="inference",
)
