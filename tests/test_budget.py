"""Fleet sizing: the traffic-mix rate, rounding to whole replicas and instances, SLO filtering,
the closest point of a platform that misses, and savings against the current platform."""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pytest

from helpers_synthetic import make_result
from helpers_synthetic import results_frame as frame
from tpubench.money import budget, pricing
from tpubench.scenarios.generate import cost as generate_cost
from tpubench.errors import UserError

TODAY = date(2026, 12, 2)


@pytest.fixture(scope="module")
def prices():
    return pricing.load_prices(today=TODAY)



def option(result: budget.BudgetResult, instance: str, region: str, plan: str = "on_demand") -> pd.Series:
    o = result.options
    rows = o[(o.instance_type == instance) & (o.region == region) & (o.plan == plan)]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def test_mix_rate_matches_tokens_per_e2e_when_the_mix_is_the_points():
    # B=10, I=1000, O=250 on 1 chip, TTFT 1 s, E2E 5 s.
    # c_in = 1*1/(10*1000) = 1e-4 chip-s/token, c_out = 4*1/(10*250) = 1.6e-3 chip-s/token.
    # Output share 0.2 (= 250/1250): 1 / (0.8e-4 + 0.2*1.6e-3) = 1 / 4e-4 = 2500 = 10*1250/5.
    rate = generate_cost.mix_tokens_per_s_per_chip(1.0, 5.0, 1, 10, 1000, 250, 0.2)
    assert rate == pytest.approx(2500)
    # A decode-heavier mix: 1 / (0.5e-4 + 0.5*1.6e-3) = 1 / 8.5e-4 = 1176.47 tokens/s/chip.
    assert generate_cost.mix_tokens_per_s_per_chip(1.0, 5.0, 1, 10, 1000, 250, 0.5) == pytest.approx(1 / 8.5e-4)
    # A single output token has no measured decode time: it cannot serve a mix with output.
    assert np.isnan(generate_cost.mix_tokens_per_s_per_chip(1.0, 1.0, 1, 10, 1000, 1, 0.5))


@pytest.mark.parametrize("replicas,per_replica,per_instance,expected", [
    (9, 1, 8, 2),     # nine 1-chip replicas fill two 8-chip slices
    (8, 8, 8, 8),     # an 8-GPU tensor-parallel replica per p5
    (3, 3, 8, 2),     # two 3-chip replicas fit an 8-chip instance (2 chips idle)
    (3, 16, 16, 3),   # one 16-chip replica per trn1.32xlarge
    (5, 16, 8, 10),   # a 16-chip replica spans two 8-chip instances
])
def test_instances_needed_rounds_to_what_can_be_rented(replicas, per_replica, per_instance, expected):
    assert budget.instances_needed(replicas, per_replica, per_instance) == expected


def test_rounding_to_replicas_and_whole_slices(prices):
    # The point serves 2500 tokens/s/chip for a 20% output mix (test above).
    # 8.64e8 tokens/day = 1e4 tokens/s; peak x2 = 2e4 tokens/s: exactly 8 replicas of 1 chip.
    point = make_result(accelerator="TPU v6 lite", device="tpu", batch_size=10, input_length=1000,
                        output_length=250, ttft_s=1.0, e2e_s=5.0)
    exact = budget.plan_budget(frame(point), prices, tokens_per_day=8.64e8, output_share=0.2,
                               peak_factor=2.0, plans=["on_demand"], today=TODAY)
    slice8 = option(exact, "tpu-v6e-8", "us-central1")
    assert (slice8.replicas, slice8.required_chips, slice8.instances, slice8.rented_chips) == (8, 8, 1, 8)
    assert slice8.monthly_usd == pytest.approx(21.6 * 730)             # 15,768 $/month
    single = option(exact, "tpu-v6e-1", "us-central1")
    assert single.instances == 8 and single.monthly_usd == pytest.approx(8 * 2.7 * 730)
    # Peak x2.1 = 2.1e4 tokens/s: 8.4 -> 9 replicas; nine chips need two 8-chip slices (16 rented).
    more = budget.plan_budget(frame(point), prices, tokens_per_day=8.64e8, output_share=0.2,
                              peak_factor=2.1, plans=["on_demand"], today=TODAY)
    slice8 = option(more, "tpu-v6e-8", "us-central1")
    assert (slice8.replicas, slice8.instances, slice8.rented_chips) == (9, 2, 16)
    assert slice8.monthly_usd == pytest.approx(2 * 21.6 * 730)          # 31,536 $/month
    assert slice8.fleet_utilisation == pytest.approx(2.1e4 / (2500 * 16))
    single = option(more, "tpu-v6e-1", "us-central1")
    assert single.instances == 9 and single.monthly_usd == pytest.approx(9 * 2.7 * 730)
    # Cheapest first: 9 single-chip VMs (17,739 $) beat two 8-chip slices (31,536 $) here.
    assert single["rank_in_plan"] < slice8["rank_in_plan"]


def h100_points():
    # Tensor-parallel over 8 H100s; output share 0.2 matches I=1000, O=250, so the rate per chip is
    # B * 1250 / (E2E * 8).
    return [
        # 64 * 1250 / (8 * 8) = 1250 tokens/s/chip, but TPOT p99 60 ms misses the 50 ms SLO.
        make_result(accelerator="NVIDIA H100 80GB HBM3", chips=8, batch_size=64, input_length=1000,
                    output_length=250, ttft_s=0.6, e2e_s=8.0, ttft_p99_s=0.45, tpot_p99_s=0.06),
        # 32 * 1250 / (5 * 8) = 1000 tokens/s/chip, meets both SLOs: the one to pick.
        make_result(accelerator="NVIDIA H100 80GB HBM3", chips=8, batch_size=32, input_length=1000,
                    output_length=250, ttft_s=0.3, e2e_s=5.0, ttft_p99_s=0.4, tpot_p99_s=0.04),
        # 8 * 1250 / (3 * 8) = 416.7 tokens/s/chip, meets both but serves less.
        make_result(accelerator="NVIDIA H100 80GB HBM3", chips=8, batch_size=8, input_length=1000,
                    output_length=250, ttft_s=0.1, e2e_s=3.0, ttft_p99_s=0.12, tpot_p99_s=0.015),
        # Fastest of all, but invalid: never used.
        make_result(accelerator="NVIDIA H100 80GB HBM3", chips=8, batch_size=128, input_length=1000,
                    output_length=250, ttft_s=0.2, e2e_s=4.0, ttft_p99_s=0.3, tpot_p99_s=0.02,
                    valid=False, invalid_reasons=["recompiled during timing"]),
        # Trainium2 misses the TTFT SLO at every point: listed with its closest point.
        make_result(accelerator="Trainium2", device="neuron", chips=16, batch_size=64, input_length=1000,
                    output_length=250, ttft_s=1.5, e2e_s=6.0, ttft_p99_s=2.0, tpot_p99_s=0.03),
        make_result(accelerator="Trainium2", device="neuron", chips=16, batch_size=16, input_length=1000,
                    output_length=250, ttft_s=0.6, e2e_s=3.0, ttft_p99_s=0.8, tpot_p99_s=0.02),
    ]


def test_slo_filtering_picks_the_fastest_point_that_meets_both(prices):
    result = budget.plan_budget(frame(*h100_points()), prices, tokens_per_day=8.64e8, output_share=0.2,
                                slo_ttft_s=0.5, slo_tpot_s=0.05, today=TODAY)
    p5 = option(result, "p5.48xlarge", "us-east-1")
    assert p5.batch_size == 32
    assert p5.tokens_per_s_per_chip == pytest.approx(1000)
    # 1e4 tokens/s / (1000 * 8 per replica) = 1.25 -> 2 replicas of 8 GPUs = 2 p5 instances.
    assert (p5.replicas, p5.instances) == (2, 2)
    assert p5.monthly_usd == pytest.approx(2 * 55.04 * 730)              # 80,358.40 $/month
    assert "1 invalid run(s) left out of the budget" in result.notes
    miss = result.infeasible.set_index("priced_accelerator").loc["Trainium2"]
    assert miss.batch_size == 16                                          # 0.8 s is closer to 0.5 s
    assert miss.misses == "TTFT p99 800 ms > 500 ms"
    assert "Trainium2" not in set(result.options.priced_accelerator)
    # Ranks run cheapest first within each plan.
    for _, group in result.options.groupby("plan"):
        assert list(group["rank_in_plan"]) == list(range(1, len(group) + 1))
        assert group["monthly_usd"].is_monotonic_increasing


def test_saving_or_loss_against_the_current_platform(prices):
    result = budget.plan_budget(frame(*h100_points()), prices, tokens_per_day=8.64e8, output_share=0.2,
                                slo_ttft_s=0.5, slo_tpot_s=0.05, current="aws/us-east-1/p5.48xlarge",
                                today=TODAY)
    current = option(result, "p5.48xlarge", "us-east-1")
    assert current.is_current and current.saving_vs_current_usd_per_month == 0
    # Moving to GCP us-east4 a3-highgpu-8g: 2 * 87.83247 * 730 = 128,234.41 $ against 80,358.40 $:
    # a loss of 47,876.01 $/month, -59.6%.
    gcp = option(result, "a3-highgpu-8g", "us-east4")
    assert gcp.saving_vs_current_usd_per_month == pytest.approx(2 * 55.04 * 730 - 2 * 87.83247 * 730)
    assert gcp.saving_vs_current_pct == pytest.approx(-59.5787, abs=1e-3)
    assert gcp.vs_current == "dearer"
    # Spot is compared with the current platform's spot price.
    spot = option(result, "p5.48xlarge", "eu-west-2", "spot")
    assert spot.current_monthly_usd == pytest.approx(2 * 17.2517 * 730)
    assert spot.vs_current == "cheaper"
    with pytest.raises(UserError, match="matches several platforms"):
        budget.plan_budget(frame(*h100_points()), prices, tokens_per_day=8.64e8, output_share=0.2,
                           slo_ttft_s=0.5, slo_tpot_s=0.05, current="p5.48xlarge", today=TODAY)


def test_no_slo_means_every_valid_point_qualifies(prices):
    result = budget.plan_budget(frame(*h100_points()), prices, tokens_per_day=8.64e8, output_share=0.2,
                                plans=["on_demand"], cloud="aws", today=TODAY)
    # Without SLOs the fastest valid H100 point (B=64, 1250 tokens/s/chip) wins.
    assert option(result, "p5.48xlarge", "us-east-1").batch_size == 64
    assert result.infeasible.empty


@pytest.mark.parametrize("kwargs,flag", [
    (dict(tokens_per_day=0, output_share=0.2), "--tokens-per-day"),
    (dict(tokens_per_day=1e9, output_share=1.5), "--output-share"),
    (dict(tokens_per_day=1e9, output_share=0.2, peak_factor=0.5), "--peak-factor"),
    (dict(tokens_per_day=1e9, output_share=0.2, slo_ttft_s=-1), "--slo-ttft-ms"),
])
def test_bad_traffic_and_slos_are_user_errors(prices, kwargs, flag):
    with pytest.raises(UserError) as info:
        budget.plan_budget(frame(*h100_points()), prices, today=TODAY, **kwargs)
    assert info.value.field == flag


def test_parse_platform():
    assert budget.parse_platform("aws/us-east-1/p5.48xlarge") == {
        "cloud": "aws", "region": "us-east-1", "instance_type": "p5.48xlarge"}
    assert budget.parse_platform("GCP/tpu-v6e-8") == {"cloud": "gcp", "instance_type": "tpu-v6e-8"}
    assert budget.parse_platform("trn1.32xlarge") == {"instance_type": "trn1.32xlarge"}
