"""Fleet sizing: the traffic-mix rate, rounding to whole replicas and instances, SLO filtering,
the closest point of a platform that misses, and savings against the current platform."""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pytest
from helpers_synthetic import make_result
from helpers_synthetic import results_frame as frame

from tpubench.budget import current, fleet
from tpubench.budget import tokens as budget
from tpubench.errors import UserError
from tpubench.money import pricing
from tpubench.scenarios.generate import cost as generate_cost

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
    assert fleet.instances_needed(replicas, per_replica, per_instance) == expected


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
    assert current.parse_platform("aws/us-east-1/p5.48xlarge") == {
        "cloud": "aws", "region": "us-east-1", "instance_type": "p5.48xlarge"}
    assert current.parse_platform("GCP/tpu-v6e-8") == {"cloud": "gcp", "instance_type": "tpu-v6e-8"}
    assert current.parse_platform("trn1.32xlarge") == {"instance_type": "trn1.32xlarge"}


# ----------------------------------------------------------------------------- how to buy (money/buying.py)

def commitment_prices(tmp_path):
    # tpu-v6e-8 in us-central1: 21.6 $/h on demand (shipped), a 1-year commitment at 13.6 $/h and
    # spot at 4.74132 $/h preempted 0.05 times an hour.
    path = tmp_path / "commit.csv"
    path.write_text("cloud,region,instance_type,spot,commit_1y,preemption_rate_per_h,source,as_of\n"
                    "gcp,us-central1,tpu-v6e-8,4.74132,13.6,0.05,test commitment,2026-11-01\n")
    return pricing.load_prices([path], today=TODAY)


def v6e_point():
    # 2500 tokens/s/chip at its own 20% output mix (test_mix_rate_matches_tokens_per_e2e...): a
    # tpu-v6e-8 slice serves 20,000 tokens/s.
    return make_result(accelerator="TPU v6 lite", device="tpu", batch_size=10, input_length=1000,
                       output_length=250, ttft_s=1.0, e2e_s=5.0)


def mix_row(result, instance, region="us-central1"):
    m = result.mixes
    rows = m[(m.instance_type == instance) & (m.region == region)]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def test_a_flat_load_buys_the_commitment(tmp_path):
    # 8.64e9 tokens/day = 1e5 tokens/s all day: 40 replicas of 1 chip = 5 slices, busy every hour.
    # 12 months: committed 5 * 13.6 * 730 = 49,640 $/month against 5 * 21.6 * 730 = 78,840 on demand.
    result = budget.plan_budget(frame(v6e_point()), commitment_prices(tmp_path), tokens_per_day=8.64e9,
                                output_share=0.2, months=12, today=TODAY)
    row = mix_row(result, "tpu-v6e-8")
    assert (row.base_instances, row.peak_instances) == (5, 5)
    assert (row.base_plan, row.peak_plan) == ("commit_1y", None)
    assert row.monthly_usd == pytest.approx(49_640)
    assert row.on_demand_monthly_usd == pytest.approx(78_840)
    assert row.saving_vs_on_demand_usd_per_month == pytest.approx(29_200)
    assert row.monthly_usd_ci95_low <= row.monthly_usd <= row.monthly_usd_ci95_high
    c = result.commitments
    be = c[(c.instance_type == "tpu-v6e-8") & (c.region == "us-central1")].iloc[0]
    assert be.plan == "commit_1y" and be.bought_for == "base"
    assert be.break_even_utilisation == pytest.approx(13.6 / 21.6)              # 63.0%


def test_a_spiky_load_commits_the_base_and_rents_the_peak(tmp_path):
    # Average 1e5 tokens/s, x2 for 4 h a day: peak 2e5 tokens/s = 80 replicas = 10 slices; base
    # 1e5 * (24 - 8) / 20 = 8e4 tokens/s = 32 replicas = 4 slices. The 6 peak slices are busy 1/6 of the time.
    prices = commitment_prices(tmp_path)
    result = budget.plan_budget(frame(v6e_point()), prices, tokens_per_day=8.64e9, output_share=0.2,
                                peak_factor=2.0, months=12, peak_hours=4, plans=["on_demand", "commit_1y"],
                                today=TODAY)
    row = mix_row(result, "tpu-v6e-8")
    assert (row.base_instances, row.peak_instances) == (4, 10)
    assert (row.base_plan, row.peak_plan) == ("commit_1y", "on_demand")
    assert row.base_usd == pytest.approx(4 * 13.6 * 8760)                       # 476,544 $
    assert row.peak_usd == pytest.approx(6 * 21.6 / 6 * 8760)                   # 189,216 $
    assert row.monthly_usd == pytest.approx((476_544 + 189_216) / 12)           # 55,480 $/month
    # The budget's sizing at the peak, all on demand: 10 * 21.6 * 730 = 157,680 $/month.
    assert row.saving_vs_on_demand_usd_per_month == pytest.approx(157_680 - 55_480)
    # Spot with its preemption rate takes the peak: 4.74132 / (1 - 0.05 * 0.25) per useful hour.
    result = budget.plan_budget(frame(v6e_point()), prices, tokens_per_day=8.64e9, output_share=0.2,
                                peak_factor=2.0, months=12, peak_hours=4, current="gcp/us-central1/tpu-v6e-1",
                                today=TODAY)
    row = mix_row(result, "tpu-v6e-8")
    assert (row.base_plan, row.peak_plan) == ("commit_1y", "spot")
    spot_peak = 6 * 4.74132 / (1 - 0.05 * 0.25) / 6 * 8760
    assert row.peak_usd == pytest.approx(spot_peak)
    # The current platform, tpu-v6e-1 (2.7 $/h on demand, spot without a preemption rate so not
    # bought): 32 instances on demand all day and 48 more for 4 h: (756,864 + 189,216) / 12 = 78,840.
    current = mix_row(result, "tpu-v6e-1")
    assert (current.base_plan, current.peak_plan) == ("on_demand", "on_demand")
    assert current.monthly_usd == pytest.approx(78_840) and current.is_current
    assert row.saving_vs_current_usd_per_month == pytest.approx(78_840 - (476_544 + spot_peak) / 12)
    assert row.vs_current == "cheaper"
    assert any("spot left out" in n for n in result.notes)


@pytest.mark.parametrize("kwargs,flag", [
    (dict(peak_factor=2.0, months=12), "--peak-hours"),
    (dict(months=0), "--months"),
    (dict(peak_hours=4), "--peak-hours"),
    (dict(months=12, spot_lost_hours=-1), "--spot-lost-hours"),
])
def test_bad_buying_inputs_are_user_errors(tmp_path, kwargs, flag):
    with pytest.raises(UserError) as info:
        budget.plan_budget(frame(v6e_point()), commitment_prices(tmp_path), tokens_per_day=8.64e9,
                           output_share=0.2, today=TODAY, **kwargs)
    assert info.value.field == flag


def test_a_throughput_ci_reaching_zero_leaves_the_mix_unbounded_above(tmp_path):
    # The point's E2E CI is unbounded above: its throughput's low bound is 0, so the fleet at that
    # bound (and the mix's high cost) is unbounded, as the options table's cost is; not a crash.
    results = frame(v6e_point()).assign(e2e_ci95_high_s=np.inf, output_tokens_per_s_ci95_low=0.0)
    result = budget.plan_budget(results, commitment_prices(tmp_path), tokens_per_day=8.64e9, output_share=0.2,
                                months=12, today=TODAY)
    row = mix_row(result, "tpu-v6e-8")
    assert row.monthly_usd == pytest.approx(49_640) and row.monthly_usd_ci95_high == np.inf
    assert option(result, "tpu-v6e-8", "us-central1").monthly_usd_ci95_high == np.inf


def test_a_platform_priced_only_on_spot_has_no_base_plan(tmp_path):
    result = budget.plan_budget(frame(v6e_point()), commitment_prices(tmp_path), tokens_per_day=8.64e9,
                                output_share=0.2, months=12, plans=["spot"], today=TODAY)
    row = mix_row(result, "tpu-v6e-8")
    assert row.base_plan is None and np.isnan(row.monthly_usd)
    assert any("tpu-v6e-8 (us-central1) has no plan for the base load" in n for n in result.notes)


def test_buying_a_point_without_a_scale(tmp_path):
    # A server's result has no scale (NaN): the mix, its saving against the current platform and the
    # CSV's buy_ columns still find their platform.
    point = make_result(accelerator="TPU v6 lite", device="tpu", batch_size=10, input_length=1000,
                        output_length=250, ttft_s=1.0, e2e_s=5.0, scale=None)
    result = budget.plan_budget(frame(point), commitment_prices(tmp_path), tokens_per_day=8.64e9, output_share=0.2,
                                months=12, current="gcp/us-central1/tpu-v6e-1", today=TODAY)
    row = mix_row(result, "tpu-v6e-8")
    assert row.monthly_usd == pytest.approx(49_640)                            # 5 slices committed
    assert row.saving_vs_current_usd_per_month == pytest.approx(40 * 2.7 * 730 - 49_640)
    assert result.options["buy_monthly_usd"].notna().all()


# ----------------------------------------------------------------------------- images per day (issue 22)

def _image_prices(tmp_path):
    from test_diffuse import PRICE_CSV  # testcloud h100x4: 4 H100s at 32 $/h on demand, 16 $/h spot

    path = tmp_path / "prices.csv"
    path.write_text(PRICE_CSV, encoding="utf-8")
    return pricing.load_prices([path], shipped=False, today=TODAY)


def _image_results(energy: bool = False):
    from test_diffuse import make_image_result

    # Calls of 4 images; p99 0.24 s per image is a p99 call of 0.96 s (a user's wait for an image).
    # A: 4 chips, 0.2 s/image -> 0.8 chip-s/image (CI 0.72..0.88), 1.25 images/s/chip, call p99 0.96 s.
    # B: 1 chip, 0.5 s/image -> 0.5 chip-s/image, 2 images/s/chip, call p99 2.4 s.
    # C: faster still, but invalid.
    a = make_image_result(chips=4, image_s=0.2, file_seed=1)
    b = make_image_result(chips=1, image_s=0.5, file_seed=2)
    c = make_image_result(chips=1, image_s=0.1, file_seed=3, valid=False)
    if energy:   # A drew 100 W per chip over a 10 s window: 100 J per chip-second, 80 J per image
        a.metrics.update(energy_j=4 * 100.0 * 10, energy_window_s=10.0)
        a.energy = {"method": "modelled", "valid": True}
    return frame(a, b, c)


def test_images_per_day_sized_under_a_latency_limit_by_hand(tmp_path):
    from tpubench.budget.images import plan_images

    prices = _image_prices(tmp_path)
    # 864,000 images/day = 10 images/s. Limit 1 s: only A (call p99 0.96 s) qualifies; at 0.3 s,
    # which A's p99 per image (0.24 s) would meet, none does.
    # A: replicas = ceil(10 / (1.25 * 4)) = 2 of 4 chips; one replica per h100x4 -> 2 instances:
    # 2 * 32 * 730 = 46,720 $/month. CI: the fast bound 1/0.72 = 1.389/chip -> ceil(1.8) = 2 replicas
    # (46,720); the slow bound 1/0.88 = 1.136/chip -> ceil(2.2) = 3 replicas (70,080).
    result = plan_images(_image_results(), prices, images_per_day=864_000, max_image_latency_s=1.0, today=TODAY)
    on_demand = result.options[result.options["plan"] == "on_demand"].iloc[0]
    assert on_demand["file"] == "r0.json" and on_demand["images_per_s_per_chip"] == pytest.approx(1.25)
    assert (on_demand["replicas"], on_demand["instances"], on_demand["rented_chips"]) == (2, 2, 8)
    assert on_demand["monthly_usd"] == pytest.approx(46_720)
    assert on_demand["monthly_usd_ci95_low"] == pytest.approx(46_720)
    assert on_demand["monthly_usd_ci95_high"] == pytest.approx(70_080)
    assert on_demand["fleet_utilisation"] == pytest.approx(1.0)
    spot = result.options[result.options["plan"] == "spot"].iloc[0]
    assert spot["monthly_usd"] == pytest.approx(2 * 16 * 730)
    assert any("invalid" in n for n in result.notes)          # C never competes
    # No limit: B makes the most images per chip: ceil(10 / 2) = 5 replicas of 1 chip, 4 to an
    # instance -> 2 instances.
    free = plan_images(_image_results(), prices, images_per_day=864_000, today=TODAY)
    best = free.options[free.options["plan"] == "on_demand"].iloc[0]
    assert best["file"] == "r1.json" and (best["replicas"], best["instances"]) == (5, 2)
    # A limit no point meets: the platform is listed with the point that came closest (A).
    none = plan_images(_image_results(), prices, images_per_day=864_000, max_image_latency_s=0.3, today=TODAY)
    assert none.options.empty and none.infeasible["closest_file"].tolist() == ["r0.json"]
    assert "p99 0.96 s per call > 0.3 s" in none.infeasible["misses"].iloc[0]


def test_images_per_day_energy_and_owned_power_by_hand(tmp_path):
    from tpubench.budget.images import plan_images
    from tpubench.budget.request import Power

    # A: 80 J per image; 864,000 images/day * 730/24 days * PUE 1.5 * 80 J / 3.6e6 = 876 kWh a
    # month, at 0.2 $/kWh 175.2 $, added to owned capacity's 46,720 $.
    result = plan_images(_image_results(energy=True), _image_prices(tmp_path), images_per_day=864_000,
                         max_image_latency_s=1.0, today=TODAY, power=Power(0.2, 1.5, owned=True))
    row = result.options[result.options["plan"] == "on_demand"].iloc[0]
    assert row["image_j_per_image"] == pytest.approx(80.0)
    assert row["monthly_kwh"] == pytest.approx(876.0)
    assert row["monthly_usd"] == pytest.approx(46_720 + 175.2)


@pytest.mark.parametrize("kwargs, flag", [
    (dict(images_per_day=0), "--images-per-day"),
    (dict(images_per_day=1e5, max_image_latency_s=-1), "--max-image-latency-s"),
    (dict(images_per_day=1e5, peak_factor=0.5), "--peak-factor"),
])
def test_bad_image_traffic_is_a_user_error(tmp_path, kwargs, flag):
    from tpubench.budget.images import plan_images

    with pytest.raises(UserError) as err:
        plan_images(_image_results(), _image_prices(tmp_path), today=TODAY, **kwargs)
    assert err.value.field == flag


def test_budget_images_per_day_through_the_cli(tmp_path, monkeypatch, capsys):
    from helpers_cli import run_cli
    from test_diffuse import PRICE_CSV, make_image_result

    from tpubench.records.result import write_result

    for seed, (chips, image_s) in enumerate([(4, 0.2), (1, 0.5)]):
        result = make_image_result(chips=chips, image_s=image_s, file_seed=seed)
        if seed == 0:   # 100 W per chip: 80 J per image (as in the energy test above)
            result.metrics.update(energy_j=4 * 100.0 * 10, energy_window_s=10.0)
            result.energy = {"method": "modelled", "valid": True}
        write_result(result, tmp_path / "results")
    (tmp_path / "prices.csv").write_text(PRICE_CSV, encoding="utf-8")
    args = ["budget", "images", str(tmp_path / "results"), "--prices", str(tmp_path / "prices.csv"), "--images-per-day",
            "864000", "--max-image-latency-s", "1", "--plan", "on_demand"]
    code, out, err = run_cli(monkeypatch, capsys, *args)
    assert code == 0, err
    assert "# tpubench budget: images" in out and "864,000 images/day" in out and "$46,720" in out
    # J/image, and 864,000 * 730/24 * 80 J / 3.6e6 = 584 kWh a month (876 at PUE 1.5)
    assert "80.0 (72.0–88.0) (modelled)" in out and "584 kWh (modelled)" in out
    code, out, _ = run_cli(monkeypatch, capsys, *args, "--pue", "1.5")
    assert code == 0 and "876 kWh (modelled)" in out
    code, _, err = run_cli(monkeypatch, capsys, *args, "--slo-ttft-ms", "100")
    assert code == 2 and "--slo-ttft-ms" in err
    code, _, err = run_cli(monkeypatch, capsys, "budget", "tokens", *args[2:5], "--tokens-per-day", "1e9",
                           "--max-image-latency-s", "1")
    assert code == 2 and err.startswith("error: --max-image-latency-s: applies to `tpubench budget images`")
