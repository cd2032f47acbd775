"""Cost per token, checked against arithmetic done by hand (written out in the comments)."""

from __future__ import annotations

import math
from datetime import date

import pandas as pd
import pytest
from helpers_synthetic import make_result
from helpers_synthetic import results_frame as frame

from tpubench.errors import UserError
from tpubench.measure import stats
from tpubench.money import cost, pricing, token_costs
from tpubench.scenarios.generate import cost as generate_cost
from tpubench.scenarios.serve import cost as serve_cost

TODAY = date(2026, 12, 2)


@pytest.fixture(scope="module")
def prices():
    return pricing.load_prices(today=TODAY)



def priced_row(priced: pd.DataFrame, instance: str, region: str, plan: str = "on_demand") -> pd.Series:
    rows = priced[(priced.instance_type == instance) & (priced.region == region) & (priced.plan == plan)]
    assert len(rows) == 1, rows
    return rows.iloc[0]


# ----------------------------------------------------------------------------- pure functions


def test_price_per_chip_second():
    # p5.48xlarge: 55.04 $/h over 8 GPUs = 6.88 $/chip-h = 6.88 / 3600 $/chip-s.
    assert cost.usd_per_chip_second(55.04, 8) == pytest.approx(6.88 / 3600)


def test_time_attributed_split_on_one_batch():
    # 1 chip at 3.6 $/h = 0.001 $/chip-s; B=4, I=100, O=50; TTFT 2 s, E2E 7 s.
    # input   = 2 * 0.001 / (4*100) * 1e6 = 5      $/Mtok
    # output  = 5 * 0.001 / (4*50)  * 1e6 = 25     $/Mtok
    # blended = 7 * 0.001 / (4*150) * 1e6 = 11.667 $/Mtok
    c = generate_cost.time_attributed_costs(2.0, 7.0, 1, 4, 100, 50, 0.001)
    assert c.input_usd_per_mtok == pytest.approx(5)
    assert c.output_usd_per_mtok == pytest.approx(25)
    assert c.blended_usd_per_mtok == pytest.approx(7 / 600 * 1e3)


def test_inferencex_charges_the_whole_hour_to_output_tokens():
    # 3.6 $/chip-h, 100 output tokens/s on 1 chip: 3.6e6 / (3600 * 100) = 10 $/Mtok.
    assert token_costs.inferencex_usd_per_mtok(100.0, 1, 3.6) == pytest.approx(10)
    # The same throughput over 4 chips is 25 tokens/s per chip: 40 $/Mtok.
    assert token_costs.inferencex_usd_per_mtok(100.0, 4, 3.6) == pytest.approx(40)
    assert token_costs.tokens_per_usd(10.0) == pytest.approx(100_000)


def test_throughput_ci_becomes_a_cost_ci():
    # Cost 10 at 100 tok/s, throughput CI [90, 110]: cost CI [10*100/110, 10*100/90] = [9.09, 11.11].
    low, high = stats.cost_ci_from_throughput_ci(10.0, 100.0, 90.0, 110.0)
    assert low == pytest.approx(9.090909)
    assert high == pytest.approx(11.111111)
    # A throughput CI reaching zero leaves the cost unbounded above.
    assert stats.cost_ci_from_throughput_ci(10.0, 100.0, 0.0, 200.0) == (pytest.approx(5.0), math.inf)
    # A cost proportional to a time follows that time's bounds.
    assert stats.cost_ci_from_time_ci(10.0, 2.0, 1.8, 2.2) == (pytest.approx(9.0), pytest.approx(11.0))


def test_compare_costs_says_cheaper_dearer_or_tie():
    # 10 +- 0.5 vs 12 +- 0.5: ratio 0.833 +- 0.054, all below 1.
    assert cost.compare_costs(10, 0.5, 12, 0.5) == "cheaper"
    assert cost.compare_costs(12, 0.5, 10, 0.5) == "dearer"
    # 10 +- 2 vs 11 +- 2: ratio 0.909 +- 0.25 straddles 1.
    assert cost.compare_costs(10, 2, 11, 2) == "tie within noise"


# ----------------------------------------------------------------------------- priced results


def test_tpu_slice_is_priced_per_chip(prices):
    # Measured on one TPU v6e chip: B=8, I=1024, O=128, TTFT 0.5 s, E2E 3.04 s.
    # tpu-v6e-8 us-central1: 21.6 $/h for the 8-chip slice = 2.7 $/chip-h = 0.00075 $/chip-s.
    # input   = 0.5  * 1 * 0.00075 / (8*1024) * 1e6 = 0.0457764 $/Mtok
    # output  = 2.54 * 1 * 0.00075 / (8*128)  * 1e6 = 1.8603516 $/Mtok
    # blended = 3.04 * 1 * 0.00075 / (8*1152) * 1e6 = 0.2473958 $/Mtok
    # InferenceX: 2.7e6 / (3600 * (8*128/3.04)) = 2.2265625 $/Mtok
    result = make_result(accelerator="TPU v6 lite", device="tpu", batch_size=8, input_length=1024,
                         output_length=128, ttft_s=0.5, e2e_s=3.04)
    priced, unpriced = cost.price_results(frame(result), prices, today=TODAY)
    assert unpriced.empty
    row = priced_row(priced, "tpu-v6e-8", "us-central1")
    assert row.priced_accelerator == "TPU v6e"
    assert row.input_usd_per_mtok == pytest.approx(0.0457763671875)
    assert row.output_usd_per_mtok == pytest.approx(1.8603515625)
    assert row.blended_usd_per_mtok == pytest.approx(0.24739583333)
    assert row.inferencex_usd_per_mtok == pytest.approx(2.2265625)
    # The single-chip VM costs the same per chip-hour, so the same per token.
    single = priced_row(priced, "tpu-v6e-1", "us-central1")
    assert single.blended_usd_per_mtok == pytest.approx(row.blended_usd_per_mtok)


def test_sixteen_chip_trainium_instance(prices):
    # One replica over all 16 chips of a trn1.32xlarge: B=16, I=512, O=256, TTFT 0.8 s, E2E 6.4 s.
    # 21.5 $/h / 16 chips = 1.34375 $/chip-h; p = 1.34375/3600 $/chip-s.
    # input   = 0.8 * 16 * p / (16*512) * 1e6 = 1.075 / 1,843,200 * 1e6 = 0.5832248 $/Mtok
    # output  = 5.6 * 16 * p / (16*256) * 1e6 = 7.525 / 921,600   * 1e6 = 8.1651476 $/Mtok
    # blended = 6.4 * 16 * p / (16*768) * 1e6 = 8.6   / 2,764,800 * 1e6 = 3.1105324 $/Mtok
    result = make_result(accelerator="AWS Trainium", device="neuron", chips=16, batch_size=16,
                         input_length=512, output_length=256, ttft_s=0.8, e2e_s=6.4)
    priced, _ = cost.price_results(frame(result), prices, today=TODAY)
    row = priced_row(priced, "trn1.32xlarge", "us-east-1")
    assert row.usd_per_chip_hour == pytest.approx(1.34375)
    assert row.input_usd_per_mtok == pytest.approx(1.075 / 1_843_200 * 1e6)
    assert row.output_usd_per_mtok == pytest.approx(7.525 / 921_600 * 1e6)
    assert row.blended_usd_per_mtok == pytest.approx(8.6 / 2_764_800 * 1e6)
    assert row.output_tokens_per_s_per_chip == pytest.approx(16 * 256 / 6.4 / 16)


def test_eight_gpu_instance_spot_and_on_demand(prices):
    # Tensor-parallel over the 8 H100s of a p5.48xlarge: B=64, I=2048, O=256, TTFT 1.2 s, E2E 9.2 s.
    # On demand 55.04 $/h / 8 = 6.88 $/chip-h.
    # blended = 9.2 * 8 * 6.88/3600 / (64*2304) * 1e6 = 0.9538966 $/Mtok
    # input   = 1.2 * 8 * 6.88/3600 / (64*2048) * 1e6 = 0.1399740 $/Mtok
    # output  = 8.0 * 8 * 6.88/3600 / (64*256)  * 1e6 = 7.4652778 $/Mtok
    # InferenceX = 6.88e6 / (3600 * (64*256/9.2/8)) = 8.5850694 $/Mtok
    # Spot is 17.2517 $/h: every figure scales by 17.2517 / 55.04.
    result = make_result(accelerator="NVIDIA H100 80GB HBM3", device="cuda", chips=8, batch_size=64,
                         input_length=2048, output_length=256, ttft_s=1.2, e2e_s=9.2)
    priced, _ = cost.price_results(frame(result), prices, today=TODAY)
    od = priced_row(priced, "p5.48xlarge", "us-east-1", "on_demand")
    assert od.blended_usd_per_mtok == pytest.approx(0.9538966049)
    assert od.input_usd_per_mtok == pytest.approx(0.1399739583)
    assert od.output_usd_per_mtok == pytest.approx(7.4652777778)
    assert od.inferencex_usd_per_mtok == pytest.approx(8.5850694444)
    spot = priced_row(priced, "p5.48xlarge", "us-east-1", "spot")
    assert spot.blended_usd_per_mtok == pytest.approx(0.9538966049 * 17.2517 / 55.04)
    assert spot.tokens_per_usd == pytest.approx(1e6 / spot.blended_usd_per_mtok)


def test_discount_plan_costs_a_percentage_less(prices):
    # 20% off on-demand: every $/Mtok is 0.8 times the on-demand one.
    result = make_result(accelerator="NVIDIA H100 80GB HBM3", chips=8, batch_size=64, input_length=2048,
                         output_length=256, ttft_s=1.2, e2e_s=9.2)
    discounted = pricing.apply_discount(prices, 20)
    priced, _ = cost.price_results(frame(result), discounted, plans=["on_demand", "on_demand-20%"],
                                   cloud="aws", region="us-east-1", today=TODAY)
    assert set(priced.plan) == {"on_demand", "on_demand-20%"}
    od = priced_row(priced, "p5.48xlarge", "us-east-1", "on_demand")
    off = priced_row(priced, "p5.48xlarge", "us-east-1", "on_demand-20%")
    assert off.blended_usd_per_mtok == pytest.approx(0.8 * od.blended_usd_per_mtok)
    assert off.blended_usd_per_mtok == pytest.approx(0.8 * 0.9538966049)


def test_ci_is_carried_into_cost(prices):
    # L4 on g2-standard-4 us-central1: 0.70683 $/h for 1 chip. B=8, I=1024, O=128, E2E 2 s, TTFT 0.2 s.
    # Every measured 95% CI is mean * (1 -/+ 0.1) (the synthetic results' rule).
    # blended = 2.0 * 0.70683/3600 / (8*1152) * 1e6 = 0.0426089; CI from E2E's: [0.9, 1.1] x that.
    # InferenceX = 0.70683e6 / (3600 * 512) = 0.3834798; from throughput CI [0.9, 1.1] x 512 tok/s:
    # low = 0.3834798 / 1.1 = 0.3486180, high = 0.3834798 / 0.9 = 0.4260887.
    result = make_result(accelerator="NVIDIA L4", batch_size=8, input_length=1024, output_length=128,
                         ttft_s=0.2, e2e_s=2.0, rel_half_width=0.1)
    priced, _ = cost.price_results(frame(result), prices, today=TODAY)
    row = priced_row(priced, "g2-standard-4", "us-central1")
    assert row.blended_usd_per_mtok == pytest.approx(0.0426088686)
    assert row.blended_usd_per_mtok_ci95_low == pytest.approx(0.9 * 0.0426088686)
    assert row.blended_usd_per_mtok_ci95_high == pytest.approx(1.1 * 0.0426088686)
    assert row.inferencex_usd_per_mtok == pytest.approx(0.3834798177)
    assert row.inferencex_usd_per_mtok_ci95_low == pytest.approx(0.3834798177 / 1.1)
    assert row.inferencex_usd_per_mtok_ci95_high == pytest.approx(0.3834798177 / 0.9)
    assert row.output_tokens_per_s_per_chip_ci95_low == pytest.approx(0.9 * 512)
    # Input cost follows TTFT's CI, output cost TPOT's.
    assert row.input_usd_per_mtok_ci95_high == pytest.approx(1.1 * row.input_usd_per_mtok)
    assert row.output_usd_per_mtok_ci95_low == pytest.approx(0.9 * row.output_usd_per_mtok)


def test_cpu_runs_are_priced_per_vcpu(prices):
    # 48 threads on n2-standard-48 (2.33083 $/h for 48 vCPUs = 0.0485590 $/vCPU-h):
    # B=1, I=128, O=32, E2E 10 s: blended = 10 * 48 * 0.0485590/3600 / 160 * 1e6 = 40.4659 $/Mtok.
    result = make_result(accelerator="Intel(R) Xeon(R) CPU @ 2.20GHz", device="cpu", chips=48, batch_size=1,
                         input_length=128, output_length=32, ttft_s=1.0, e2e_s=10.0)
    priced, _ = cost.price_results(frame(result), prices, plans=["on_demand"], today=TODAY)
    row = priced_row(priced, "n2-standard-48", "us-central1")
    assert row.blended_usd_per_mtok == pytest.approx(10 * 2.33083 / 3600 / 160 * 1e6)


def test_failed_and_unpriceable_results_are_reported_with_reasons(prices):
    results = frame(
        make_result(status="failed", error="CUDA out of memory"),
        make_result(accelerator="NVIDIA GeForce RTX 4090"),
        make_result(accelerator="TPU7x", device="tpu"),
        make_result(accelerator="NVIDIA H100 80GB HBM3", valid=False, invalid_reasons=["cv 0.2 > 0.1"]),
    )
    # A table without TPU7x rows (the shipped one prices it on demand only): the unpriced note says why.
    priced, unpriced = cost.price_results(results, prices[prices["accelerator"] != "TPU7x"], today=TODAY)
    reasons = dict(zip(unpriced["file"], unpriced["reason"]))
    assert reasons["r0.json"] == "run failed: CUDA out of memory"
    assert "'NVIDIA GeForce RTX 4090'" in reasons["r1.json"] and "no price row" in reasons["r1.json"]
    assert reasons["r2.json"].startswith("TPU7x: no public TPU7x")
    # Invalid runs are priced, and keep valid=False for the reports to mark.
    assert set(priced["file"]) == {"r3.json"}
    assert not priced["valid"].any()


def test_filters_and_their_errors(prices):
    result = frame(make_result(accelerator="NVIDIA H100 80GB HBM3", chips=8))
    priced, unpriced = cost.price_results(result, prices, cloud="gcp", region="us-east4", today=TODAY)
    assert set(priced.instance_type) == {"a3-highgpu-8g"} and set(priced.region) == {"us-east4"}
    priced, unpriced = cost.price_results(result, prices, cloud="gcp", region="us-central1",
                                          instance="tpu-v6e-8", today=TODAY)
    assert priced.empty and "no H100 price row matches" in unpriced.reason.iloc[0]
    with pytest.raises(UserError, match="--cloud"):
        cost.price_results(result, prices, cloud="oracle", today=TODAY)
    with pytest.raises(UserError, match="unknown plan"):
        cost.price_results(result, prices, plans=["reserved"], today=TODAY)


def test_what_if_prices_a_run_on_another_instance(prices):
    # A 1-chip L4 run priced as if its per-chip speed were had on a TPU v6e-8 slice (2.7 $/chip-h).
    result = frame(make_result(accelerator="NVIDIA L4", batch_size=8, input_length=1024, output_length=128,
                               ttft_s=0.2, e2e_s=2.0))
    priced, unpriced = cost.price_results(result, prices, what_if_instance="tpu-v6e-8", plans=["on_demand"],
                                          today=TODAY)
    assert unpriced.empty and priced.what_if.all()
    row = priced_row(priced, "tpu-v6e-8", "us-central1")
    assert row.blended_usd_per_mtok == pytest.approx(2.0 * 2.7 / 3600 / (8 * 1152) * 1e6)
    with pytest.raises(UserError, match="--what-if-instance"):
        cost.price_results(result, prices, what_if_instance="p99.metal", today=TODAY)


def test_single_output_token_has_no_decode_cost(prices):
    result = frame(make_result(accelerator="NVIDIA H200", output_length=1, ttft_s=0.3, e2e_s=0.3))
    priced, _ = cost.price_results(result, prices, today=TODAY)
    assert priced.output_usd_per_mtok.isna().all()
    assert priced.input_usd_per_mtok.notna().all()


def test_price_age_is_carried(prices):
    result = frame(make_result(accelerator="NVIDIA H100 80GB HBM3"))
    priced, _ = cost.price_results(result, prices, cloud="azure", today=TODAY)
    assert set(priced.price_as_of) == {"2024-06-01"}
    assert set(priced.price_age_days) == {(TODAY - date(2024, 6, 1)).days}


# ----------------------------------------------------------------------------- flagged prices (issue 17 item 3)

# Two H100 boxes under one plan: the flagged one is cheaper by its error.
#   flagged:   8 GPUs at 43.06615 $/h = 5.383 $/GPU-h (spot above on-demand in its source)
#   unflagged: 8 GPUs at 87.83247 $/h = 10.979 $/GPU-h
FLAGGED_PRICES = """cloud,region,instance_type,accelerator,chips_per_instance,on_demand,spot,source,as_of
gcp,us-central1,a3-highgpu-8g,H100,8,43.06615,47.86592,catalog [FLAG: GPU SKU mismatch suspected],2026-01-22
gcp,us-east4,a3-highgpu-8g,H100,8,87.83247,34.15997,catalog,2026-01-22
"""


@pytest.fixture()
def flagged_prices(tmp_path):
    path = tmp_path / "prices.csv"
    path.write_text(FLAGGED_PRICES, encoding="utf-8")
    return pricing.load_prices([path], shipped=False, today=TODAY)


def test_a_flagged_price_is_passed_over_for_the_cheapest_choice(flagged_prices):
    results = frame(make_result(chips=1, ttft_s=0.2, e2e_s=2.0))
    priced, _ = cost.price_results(results, flagged_prices, plans=["on_demand"], today=TODAY)
    # Only the unflagged row prices the result: 10.979 $/GPU-h, never the flagged 5.383.
    assert list(priced["region"]) == ["us-east4"]
    assert priced.iloc[0]["usd_per_chip_hour"] == pytest.approx(87.83247 / 8)
    assert not priced.iloc[0]["price_flagged"]
    _, notes = cost.choose_prices(flagged_prices, ["on_demand"], accelerators=["H100"])
    assert notes and "gcp/us-central1/a3-highgpu-8g" in notes[0] and "--include-flagged" in notes[0]


def test_with_include_flagged_a_flagged_price_can_win_and_is_marked(flagged_prices):
    results = frame(make_result(chips=1, ttft_s=0.2, e2e_s=2.0))
    priced, _ = cost.price_results(results, flagged_prices, plans=["on_demand"], today=TODAY,
                                   include_flagged=True)
    cheapest = priced.sort_values("blended_usd_per_mtok").iloc[0]
    assert cheapest["region"] == "us-central1" and cheapest["usd_per_chip_hour"] == pytest.approx(43.06615 / 8)
    assert cheapest["price_flagged"] and cheapest["price_flag_reason"] == "GPU SKU mismatch suspected"
    assert cost.choose_prices(flagged_prices, ["on_demand"], include_flagged=True)[1] == []


def test_a_flagged_price_is_used_where_it_is_the_only_one(flagged_prices):
    # Spot: the flagged row (spot above on-demand) and the unflagged one both price H100 spot, so the
    # flagged one is set aside; drop the unflagged row and the flagged one prices the result, marked.
    only_flagged = flagged_prices[flagged_prices.region == "us-central1"]
    priced, unpriced = cost.price_results(frame(make_result()), only_flagged, plans=["spot"], today=TODAY)
    assert unpriced.empty and priced.iloc[0]["price_flagged"]
    assert "spot 47.8659 above on-demand 43.0662" not in priced.iloc[0]["price_flag_reason"]  # its own note wins


# ----------------------------------------------------------------------------- serving split (issue 17 item 5)


def test_probe_fit_solves_two_points_exactly():
    # 4 chips busy over both windows: 1000 a + 100 b = 4 and 200 a + 300 b = 4.
    # Times 5 the second: 1000 a + 1500 b = 20, less the first: 1400 b = 16, b = 8/700;
    # a = (4 - 100 * 8/700) / 1000 = 2/700.
    a, b = serve_cost.fit_chip_seconds_per_token([4, 4], [1000, 200], [100, 300])
    assert a == pytest.approx(2 / 700) and b == pytest.approx(8 / 700)
    # A third point on the same plane changes nothing: 600 * 2/700 + 200 * 8/700 = 4.
    a3, b3 = serve_cost.fit_chip_seconds_per_token([4, 4, 4], [1000, 200, 600], [100, 300, 200])
    assert (a3, b3) == (pytest.approx(2 / 700), pytest.approx(8 / 700))


def test_probe_fit_never_prices_a_token_below_zero():
    # a + b = 2 and 2a + 3b = 3.9 solve to a = 2.1, b = -0.1. Non-negative: b = 0 and
    # a = sum(x y) / sum(x x) = (1*2 + 2*3.9) / (1 + 4) = 1.96 (residuals -0.04, +0.02), better
    # than a = 0, b = (2 + 11.7) / 10 = 1.37 (residuals -0.63, +0.21).
    a, b = serve_cost.fit_chip_seconds_per_token([2, 3.9], [1, 2], [1, 3])
    assert a == pytest.approx(1.96) and b == 0.0


def test_probe_split_fits_only_defensible_probes():
    fit = serve_cost.probe_split([4, 4], [1000, 200], [100, 300])
    assert fit.method == "probe fit over 2 points"
    assert fit.input == pytest.approx(2 / 700) and fit.output == pytest.approx(8 / 700)
    assert "rms misfit 0.0%" in fit.note
    one = serve_cost.probe_split([4], [1000], [100])
    assert one.method == "blended only" and math.isnan(one.input) and "one point" in one.note
    # Output shares 100/1100 = 0.09 and 120/1120 = 0.11: too close to tell input from output.
    close = serve_cost.probe_split([4, 4], [1000, 1000], [100, 120])
    assert close.method == "blended only" and "0.09-0.11" in close.note
    # Shares 0.25 and 0.75, but 3a + b = 3.1 and a + 3b = 0.9 solve to b = -0.05: non-negative, b = 0
    # and a = (3*3.1 + 1*0.9) / (9 + 1) = 1.02. No chip time on output tokens is no split.
    assert serve_cost.fit_chip_seconds_per_token([3.1, 0.9], [3, 1], [1, 3]) == (pytest.approx(1.02), 0.0)
    bound = serve_cost.probe_split([3.1, 0.9], [3, 1], [1, 3])
    assert bound.method == "blended only" and "no chip time on output" in bound.note
    # Three points no plane through the origin comes near (the third serves 100 + 40 tokens/s on
    # the same 4 chips): no split rather than a fitted guess.
    far = serve_cost.probe_split([4, 4, 4], [1000, 200, 100], [100, 300, 40])
    assert far.method == "blended only" and "misses its 3 points by 47% rms" in far.note
