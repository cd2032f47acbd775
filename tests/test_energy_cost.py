"""Joules and carbon per token of priced rows (money/energy.py): hand-computed cases, and a
measured result priced end to end."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from helpers_synthetic import make_result, results_frame

from tpubench.money import pricing
from tpubench.money.cost import price_results
from tpubench.money.energy import add_energy, joules_per_chip_second


def test_joules_follow_chip_seconds_by_hand():
    # 100 J over a 2 s window on 1 chip: 50 J per chip-second; 1 ms of chip time per token: 0.05 J.
    assert joules_per_chip_second(100.0, 2.0, 1) == pytest.approx(50.0)
    grid = pd.DataFrame({"cloud": ["gcp"], "region": ["us-central1"], "gco2e_per_kwh": [400.0], "year": [2024],
                         "source": ["test"], "source_url": [""], "note": [""]})
    rows = pd.DataFrame({"energy_j": [100.0, math.nan], "energy_window_s": [2.0, math.nan], "chips": [1, 1],
                         "blended_chip_s_per_token": [0.001, 0.001], "input_chip_s_per_token": [0.0004, 0.0004],
                         "cloud": ["gcp", "gcp"], "region": ["us-central1", "us-central1"]})
    out = add_energy(rows, grid)
    assert out["blended_j_per_token"].iloc[0] == pytest.approx(0.05)
    assert out["input_j_per_token"].iloc[0] == pytest.approx(0.02)
    assert out["tokens_per_kwh"].iloc[0] == pytest.approx(3.6e6 / 0.05)
    # 0.05 J/token = 5e4 J per Mtok = 0.013889 kWh, at 400 g/kWh: 5.556 g per Mtok.
    assert out["blended_gco2e_per_mtok"].iloc[0] == pytest.approx(0.05e6 / 3.6e6 * 400)
    assert math.isnan(out["blended_j_per_token"].iloc[1]) and math.isnan(out["blended_gco2e_per_mtok"].iloc[1])
    user = add_energy(rows.copy(), grid, user_gco2_per_kwh=100.0)
    assert user["grid_source"].iloc[0].startswith("user") and user["blended_gco2e_per_mtok"].iloc[0] == pytest.approx(
        0.05e6 / 3.6e6 * 100)


def test_a_measured_result_is_priced_with_its_joules_and_carbon():
    r = make_result(batch_size=8, input_length=1024, output_length=128, ttft_s=0.2, e2e_s=2.0)
    # 700 W for the whole 5 s window on the one H100.
    r.metrics.update(energy_j=3500.0, energy_window_s=5.0)
    r.energy = {"method": "measured", "detail": "NVML", "valid": True, "reasons": []}
    priced, _ = price_results(results_frame(r), pricing.load_prices(), plans=["on_demand"])
    row = priced.iloc[0]
    # Blended chip-seconds per token: E2E x chips / (B x (I + O)) = 2 / 9216; times 700 J per chip-second.
    assert row["blended_j_per_token"] == pytest.approx(2.0 / (8 * 1152) * 700.0)
    assert row["energy_method"] == "measured"
    assert (math.isnan(row["grid_gco2e_per_kwh"]) and row["grid_source"].startswith("unknown")) or \
        row["blended_gco2e_per_mtok"] == pytest.approx(row["blended_j_per_token"] * 1e6 / 3.6e6 * row["grid_gco2e_per_kwh"])


def test_results_without_energy_price_as_before():
    priced, _ = price_results(results_frame(make_result()), pricing.load_prices(), plans=["on_demand"])
    assert priced["blended_j_per_token"].isna().all() and priced["blended_usd_per_mtok"].notna().all()


def _measured_h100(**kw):
    r = make_result(batch_size=8, input_length=1024, output_length=128, ttft_s=0.2, e2e_s=2.0, **kw)
    r.metrics.update(energy_j=3500.0, energy_window_s=5.0)   # 700 W on the one H100
    r.energy = {"method": "measured", "detail": "NVML", "valid": True, "reasons": []}
    return r


def test_budget_energy_carbon_and_owned_capacity_by_hand():
    from tpubench.budget.request import Power
    from tpubench.budget.tokens import plan_budget

    df = results_frame(_measured_h100())
    prices = pricing.load_prices()
    plain = plan_budget(df, prices, tokens_per_day=1e9, output_share=0.1, plans=["on_demand"])
    power = Power(usd_per_kwh=0.10, pue=1.2, grid_gco2_per_kwh=400.0)
    rented = plan_budget(df, prices, tokens_per_day=1e9, output_share=0.1, plans=["on_demand"], power=power)
    row = rented.options.iloc[0]
    # 700 J per chip-second over 9216 / 2 = 4608 tokens/s per chip: 0.15191 J per token.
    j_per_token = 700.0 / 4608.0
    assert row["traffic_j_per_token"] == pytest.approx(j_per_token)
    work_kwh = 1e9 * (730 / 24) * 1.2 * j_per_token / 3.6e6
    # The fleet is one p5.48xlarge (8 H100s) all month; the traffic keeps them busy work_kwh's worth
    # and the rest of their chip-seconds is idle. This point recorded no idle power, so its idle chips
    # are charged at its busy 700 W (an upper bound, noted): 8 chips * 730 h * 700 W * PUE 1.2.
    idle_kwh = (8 * 730 * 3600 - 1e9 * (730 / 24) / 4608.0) * 700.0 * 1.2 / 3.6e6
    kwh = work_kwh + idle_kwh
    assert kwh == pytest.approx(8 * 730 * 0.7 * 1.2)
    assert row["monthly_kwh"] == pytest.approx(kwh) and row["monthly_idle_kwh"] == pytest.approx(idle_kwh)
    assert row["idle_basis"] == "busy power (no idle figure)" and any("upper bound" in n for n in rented.notes)
    assert row["monthly_energy_usd"] == pytest.approx(kwh * 0.10)
    assert row["monthly_kg_co2e"] == pytest.approx(kwh * 400.0 / 1000)
    # Rented: the cloud's price includes the energy; the monthly cost is unchanged.
    assert row["monthly_usd"] == pytest.approx(plain.options.iloc[0]["monthly_usd"])
    owned = plan_budget(df, prices, tokens_per_day=1e9, output_share=0.1, plans=["on_demand"],
                        power=Power(usd_per_kwh=0.10, pue=1.2, owned=True))
    assert owned.options.iloc[0]["monthly_usd"] == pytest.approx(plain.options.iloc[0]["monthly_usd"] + kwh * 0.10)


def test_owned_capacity_pays_for_its_idle_chips_by_hand():
    """budget --owned charged only the tokens served, so idle capacity was free. With the point's
    idle power recorded (70 W per H100), the fleet's month is the work at 700 W plus every other
    chip-second of the rented 8 GPUs at 70 W."""
    from tpubench.budget.request import Power
    from tpubench.budget.tokens import plan_budget

    r = _measured_h100()
    r.energy["idle_power_w"] = [70.0]      # the one GPU the point ran on, doing nothing
    df = results_frame(r)
    prices = pricing.load_prices()
    plain = plan_budget(df, prices, tokens_per_day=1e9, output_share=0.1, plans=["on_demand"])
    owned = plan_budget(df, prices, tokens_per_day=1e9, output_share=0.1, plans=["on_demand"],
                        power=Power(usd_per_kwh=0.10, pue=1.0, owned=True))
    row = owned.options.iloc[0]
    busy_chip_s = 1e9 * (730 / 24) / 4608.0                    # tokens a month / tokens per chip-second
    work_kwh = busy_chip_s * 700.0 / 3.6e6                      # = 1e9 * 730/24 * 700/4608 J / 3.6e6
    idle_kwh = (8 * 730 * 3600 - busy_chip_s) * 70.0 / 3.6e6
    assert row["rented_chips"] == 8 and row["idle_w_per_chip"] == pytest.approx(70.0)
    assert row["idle_basis"] == "idle baseline"
    assert row["monthly_idle_kwh"] == pytest.approx(idle_kwh)
    assert row["monthly_kwh"] == pytest.approx(work_kwh + idle_kwh)
    # 4608 tokens/s per chip and 11,574 at the peak: 3 GPUs' worth of work a month on 8 rented. The
    # 5 idle GPUs' 70 W (about 280 kWh) used to be free.
    assert idle_kwh == pytest.approx((8 * 730 * 3600 - 1e9 * 730 / 24 / 4608) * 70 / 3.6e6) and idle_kwh > 250
    assert row["monthly_usd"] == pytest.approx(plain.options.iloc[0]["monthly_usd"] + (work_kwh + idle_kwh) * 0.10)
    assert not any("upper bound" in n for n in owned.notes)


def test_budget_power_flags_are_checked(monkeypatch, capsys, tmp_path):
    from helpers_cli import run_cli
    from helpers_synthetic import write_result

    write_result(_measured_h100(), tmp_path)
    code, out, err = run_cli(monkeypatch, capsys, "budget", "tokens", str(tmp_path), "--tokens-per-day", "1e9", "--pue", "0.5")
    assert code == 2 and "--pue" in err
    code, out, err = run_cli(monkeypatch, capsys, "budget", "tokens", str(tmp_path), "--tokens-per-day", "1e9",
                             "--power-price", "0.1", "--grid-gco2-per-kwh", "400")
    assert code == 0 and "Energy/month" in out and "kWh" in out and " kg" in out


def test_reports_show_energy_beside_cost_only_where_measured(monkeypatch, capsys, tmp_path):
    from helpers_cli import run_cli
    from helpers_synthetic import write_result

    write_result(make_result(seed=1), tmp_path / "plain")
    code, out, _ = run_cli(monkeypatch, capsys, "report", str(tmp_path / "plain"), "--format", "markdown")
    assert code == 0 and "Energy per token" not in out
    write_result(_measured_h100(seed=2), tmp_path / "plain")
    code, out, _ = run_cli(monkeypatch, capsys, "report", str(tmp_path / "plain"), "--format", "markdown")
    assert code == 0 and "Energy per token" in out and f"{2.0 / 9216 * 700:.3g} J" in out


def test_report_takes_the_users_grid_intensity(monkeypatch, capsys, tmp_path):
    from helpers_cli import run_cli
    from helpers_synthetic import write_result

    write_result(_measured_h100(seed=3), tmp_path)
    code, out, _ = run_cli(monkeypatch, capsys, "report", str(tmp_path), "--format", "csv", "--grid-gco2-per-kwh", "360")
    assert code == 0
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(out)))
    j = float(rows[0]["blended_j_per_token"])
    assert float(rows[0]["blended_gco2e_per_mtok"]) == pytest.approx(j * 1e6 / 3.6e6 * 360, rel=1e-6)
    assert all(r["grid_source"].startswith("user") for r in rows)


def _with_energy(r, joules_per_token, method):
    r.metrics.update(joules_per_token=joules_per_token, joules_per_token_ci95_low=joules_per_token * 0.99,
                     joules_per_token_ci95_high=joules_per_token * 1.01)
    r.energy = {"method": method, "valid": True, "reasons": []}
    return r


def test_compare_weighs_energy_only_between_figures_made_alike():
    from tpubench.output.compare import compare_results

    a = _with_energy(make_result(device="cuda", seed=1), 0.20, "measured")
    b = _with_energy(make_result(device="cuda", seed=1), 0.10, "measured")
    (pair,), _ = compare_results([("a.json", a)], [("b.json", b)])
    energy = next(m for m in pair.metrics if m.metric == "joules_per_token")
    assert energy.ratio == pytest.approx(0.5) and energy.verdict == "less energy"
    modelled = _with_energy(make_result(device="cuda", seed=1), 0.10, "modelled")
    (pair,), _ = compare_results([("a.json", a)], [("m.json", modelled)])
    energy = next(m for m in pair.metrics if m.metric == "joules_per_token")
    assert math.isnan(energy.ratio) and energy.verdict == "not compared: A measured, B modelled"



def test_owned_capacity_without_an_energy_figure_is_not_priced_below_measured_ones():
    from tpubench.budget.request import Power
    from tpubench.budget.tokens import plan_budget

    df = results_frame(_measured_h100(seed=1), make_result(seed=2, accelerator="TPU v6e", device="tpu"))
    owned = plan_budget(df, pricing.load_prices(), tokens_per_day=1e9, output_share=0.1, plans=["on_demand"],
                        power=Power(usd_per_kwh=0.10, owned=True))
    costed = owned.options[owned.options["monthly_usd"].notna()]
    assert len(costed) and costed["monthly_kwh"].notna().all()
    assert owned.options["monthly_usd"].isna().any() and math.isnan(owned.options["monthly_usd"].iloc[-1])
    assert any("no energy figure" in n for n in owned.notes)
