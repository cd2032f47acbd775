"""TCO tiers beside list prices (money/tco.py): the tier file's validation, each platform's fleet at a
tier's rate or multiple of list, owned capacity with its energy, and the budget command's output."""

from __future__ import annotations

from datetime import date

import pytest
from helpers_synthetic import make_result, results_frame

from tpubench.budget import tokens as budget
from tpubench.errors import UserError
from tpubench.money import pricing, tco

TODAY = date(2026, 12, 2)
HEADER = "tier,accelerator,cloud,usd_per_chip_hour,list_multiplier,adds_energy,source,as_of\n"
TIERS = (HEADER
         + "hyperscaler,,,,0.7,,negotiated 30% off list,2026-11-01\n"
         + "neocloud,TPU v6e,,1.5,,,provider quote,2026-11-15\n"
         + "neocloud,H100,,2.1,,,provider quote,2026-11-15\n"
         + "owned,H100,,1.0,,true,capex over 4 years,2026-10-01\n")


def tier_file(tmp_path, text=TIERS):
    path = tmp_path / "tco.csv"
    path.write_text(text)
    return path


def v6e_point():
    # 2500 tokens/s/chip (tests/test_budget.py): 1e5 tokens/s take 40 chips.
    return make_result(accelerator="TPU v6 lite", device="tpu", batch_size=10, input_length=1000,
                       output_length=250, ttft_s=1.0, e2e_s=5.0)


def test_tier_file_rows(tmp_path):
    tiers = tco.load_tco(tier_file(tmp_path), today=TODAY)
    assert list(tiers["tier"]) == ["hyperscaler", "neocloud", "neocloud", "owned"]
    assert tiers.iloc[0]["accelerator"] == tco.ANY and tiers.iloc[0]["list_multiplier"] == 0.7
    assert bool(tiers.iloc[3]["adds_energy"]) and not bool(tiers.iloc[1]["adds_energy"])
    # The most specific row wins: neocloud has a TPU v6e row, hyperscaler only a catch-all.
    assert tco.tier_row(tiers, "neocloud", "TPU v6e", "gcp")["usd_per_chip_hour"] == 1.5
    assert tco.tier_row(tiers, "hyperscaler", "TPU v6e", "gcp")["list_multiplier"] == 0.7
    assert tco.tier_row(tiers, "owned", "TPU v6e", "gcp") is None


@pytest.mark.parametrize("row,field,message", [
    ("x,,,2,0.5,,s,2026-11-01", "usd_per_chip_hour", "exactly one of"),
    ("x,,,,,,s,2026-11-01", "usd_per_chip_hour", "exactly one of"),
    ("x,,,-2,,,s,2026-11-01", "usd_per_chip_hour", "positive number"),
    ("x,,,abc,,,s,2026-11-01", "usd_per_chip_hour", "not a number"),
    ("x,,,2,,maybe,s,2026-11-01", "adds_energy", "not true or false"),
    ("x,,,2,,,,2026-11-01", "source", "say where the rate comes from"),
    ("x,,,2,,,s,01/11/2026", "as_of", "not an ISO date"),
    ("x,,,2,,,s,2027-01-01", "as_of", "in the future"),
    ("x/y,,,2,,,s,2026-11-01", "tier", "not a tier name"),
    ("x,,,2,,,s", None, "fields but the header has"),
])
def test_bad_tier_rows_are_one_line_errors(tmp_path, row, field, message):
    path = tier_file(tmp_path, HEADER + row + "\n")
    with pytest.raises(UserError, match=message) as info:
        tco.load_tco(path, today=TODAY)
    assert info.value.where == f"{path}:2" and info.value.field == field
    assert "\n" not in str(info.value)


def test_bad_tier_files_are_one_line_errors(tmp_path):
    path = tier_file(tmp_path, HEADER + "x,,,2,,,s,2026-11-01\nx,,,3,,,t,2026-11-01\n")
    with pytest.raises(UserError, match="line 2 already gives tier 'x'") as info:
        tco.load_tco(path, today=TODAY)
    assert info.value.where == f"{path}:3"
    # Two spellings of one tier would share the budget CSV's tco_neo_cloud_monthly_usd column.
    path = tier_file(tmp_path, HEADER + "Neo cloud,H100,,2,,,s,2026-11-01\nneo-cloud,,,3,,,t,2026-11-01\n")
    with pytest.raises(UserError, match="spelt 'Neo cloud' on an earlier row") as info:
        tco.load_tco(path, today=TODAY)
    assert (info.value.where, info.value.field) == (f"{path}:3", "tier")
    assert tco.tier_column("Neo cloud") == "tco_neo_cloud_monthly_usd"
    with pytest.raises(UserError, match="unknown column") as info:
        tco.load_tco(tier_file(tmp_path, "tier,price,source,as_of\nx,2,s,2026-11-01\n"), today=TODAY)
    assert info.value.field == "price"
    with pytest.raises(UserError, match="no rate column"):
        tco.load_tco(tier_file(tmp_path, "tier,source,as_of\nx,s,2026-11-01\n"), today=TODAY)
    with pytest.raises(UserError, match="no tier rows"):
        tco.load_tco(tier_file(tmp_path, HEADER), today=TODAY)
    with pytest.raises(UserError, match="no such TCO tier file"):
        tco.load_tco(tmp_path / "missing.csv", today=TODAY)


def test_tiers_price_the_budgets_fleet(tmp_path):
    # 8.64e9 tokens/day = 1e5 tokens/s at 2500 tokens/s/chip: 40 chips = 5 tpu-v6e-8 slices.
    # List on demand 21.6 $/h / 8 = 2.7 $/chip-h: 40 * 2.7 * 730 = 78,840 $/month.
    tiers = tco.load_tco(tier_file(tmp_path), today=TODAY)
    result = budget.plan_budget(results_frame(v6e_point()), pricing.load_prices(today=TODAY), tokens_per_day=8.64e9,
                                output_share=0.2, plans=["on_demand"], region="us-central1", tco_tiers=tiers,
                                today=TODAY)
    t = result.tco
    mine = t[t.instance_type == "tpu-v6e-8"].set_index("tier")
    assert set(mine.index) == {"hyperscaler", "neocloud"}                      # no owned row for TPU v6e
    assert (mine["rented_chips"] == 40).all()
    assert mine.loc["hyperscaler", "list_monthly_usd"] == pytest.approx(78_840)
    # 0.7 x list: 55,188 $/month, 23,652 less than list.
    assert mine.loc["hyperscaler", "monthly_usd"] == pytest.approx(0.7 * 78_840)
    assert mine.loc["hyperscaler", "saving_vs_list_usd_per_month"] == pytest.approx(0.3 * 78_840)
    # A neocloud's own rate: 40 * 1.5 * 730 = 43,800 $/month.
    assert mine.loc["neocloud", "monthly_usd"] == pytest.approx(43_800)
    assert mine.loc["neocloud", "tier_basis"] == "rate"
    assert mine.loc["neocloud", "monthly_usd_ci95_low"] <= 43_800 <= mine.loc["neocloud", "monthly_usd_ci95_high"]
    # The options carry each tier's monthly cost for the CSV.
    row = result.options[result.options.instance_type == "tpu-v6e-8"].iloc[0]
    assert row["tco_neocloud_monthly_usd"] == pytest.approx(43_800)
    assert any("owned match no platform" in n for n in result.notes)


def _measured_h100():
    r = make_result(batch_size=8, input_length=1024, output_length=128, ttft_s=0.2, e2e_s=2.0)
    r.metrics.update(energy_j=3500.0, energy_window_s=5.0)   # 700 W on the one H100
    r.energy = {"method": "measured", "detail": "NVML", "valid": True, "reasons": []}
    return r


def test_an_owned_tier_adds_the_energy(tmp_path):
    tiers = tco.load_tco(tier_file(tmp_path), today=TODAY)
    prices = pricing.load_prices(today=TODAY)
    result = budget.plan_budget(results_frame(_measured_h100()), prices, tokens_per_day=1e9, output_share=0.1,
                                plans=["on_demand"], cloud="aws", tco_tiers=tiers, today=TODAY,
                                power=budget.Power(usd_per_kwh=0.10, pue=1.2))
    option = result.options.iloc[0]
    owned = result.tco[(result.tco.instance_type == option.instance_type) & (result.tco.region == option.region)
                       & (result.tco.tier == "owned")].iloc[0]
    # Rented chips at 1 $/chip-h plus the month's energy at 0.10 $/kWh and PUE 1.2.
    assert option.monthly_energy_usd > 0
    assert owned.monthly_usd == pytest.approx(option.rented_chips * 1.0 * 730 + option.monthly_energy_usd)
    assert bool(owned.energy_in_monthly_usd)
    with pytest.raises(UserError, match="tier owned adds energy .*: give --power-price") as info:
        budget.plan_budget(results_frame(_measured_h100()), prices, tokens_per_day=1e9, output_share=0.1,
                           plans=["on_demand"], cloud="aws", tco_tiers=tiers, today=TODAY)
    assert info.value.field == "--tco"


def test_budget_command_shows_how_to_buy_and_tiers(monkeypatch, capsys, tmp_path):
    from helpers_cli import run_cli
    from helpers_synthetic import write_result

    write_result(v6e_point(), tmp_path / "results")
    prices = tmp_path / "commit.csv"
    prices.write_text("cloud,region,instance_type,commit_1y,source,as_of\n"
                      "gcp,us-central1,tpu-v6e-8,13.6,test commitment,2026-11-01\n")
    tiers = tier_file(tmp_path).with_name("tiers.csv")
    tiers.write_text(HEADER + "neocloud,TPU v6e,,1.5,,,provider quote,2026-11-15\n")
    args = ["budget", "tokens", str(tmp_path / "results"), "--tokens-per-day", "8.64e9", "--region", "us-central1",
            "--prices", str(prices), "--months", "12", "--peak-factor", "2", "--peak-hours", "4", "--tco", str(tiers)]
    code, out, err = run_cli(monkeypatch, capsys, *args)
    assert code == 0, err
    assert "## How to buy, cheapest first" in out and "4 × 1-year commit" in out and "6 × on-demand" in out
    assert "63%" in out                                                        # break-even 13.6 / 21.6
    assert "## TCO tiers beside list prices" in out and "provider quote (2026-11-15)" in out
    code, out, err = run_cli(monkeypatch, capsys, *args, "--format", "csv")
    assert code == 0 and "buy_base_plan" in out.splitlines()[0] and "tco_neocloud_monthly_usd" in out
    # --peak-factor above 1 without --peak-hours: a one-line error, exit 2.
    code, out, err = run_cli(monkeypatch, capsys, *args[:-6], "--months", "12", "--peak-factor", "2")
    assert code == 2 and "--peak-hours" in err and "Traceback" not in err


def test_report_prices_each_on_demand_point_at_each_tier(tmp_path, monkeypatch, capsys):
    from helpers_cli import run_cli
    from helpers_synthetic import write_result

    from tpubench.output.report import build_report

    tiers = tco.load_tco(tier_file(tmp_path), today=TODAY)
    data = build_report(results_frame(v6e_point()), prices=pricing.load_prices(today=TODAY), region="us-central1",
                        tco_tiers=tiers, today=TODAY)
    listed = data.summary[(data.summary.plan == "on_demand") & (data.summary.instance_type == "tpu-v6e-8")].iloc[0]
    mine = data.tco[data.tco.instance_type == "tpu-v6e-8"].set_index("tier")
    assert set(mine.index) == {"hyperscaler", "neocloud"}                      # no owned row for TPU v6e
    # $/Mtok scales with the chip-hour price: 0.7 x list; the neocloud's 1.5 of the list 2.7 $/chip-h.
    for column in ("blended_usd_per_mtok", "blended_usd_per_mtok_ci95_high", "inferencex_usd_per_mtok"):
        assert mine.loc["hyperscaler", column] == pytest.approx(0.7 * listed[column])
        assert mine.loc["neocloud", column] == pytest.approx(1.5 / 2.7 * listed[column])
    assert mine.loc["neocloud", "list_usd_per_chip_hour"] == pytest.approx(2.7)
    assert any("owned match no platform" in w for w in data.warnings)
    # The command: a section per workload with the tier's rate and source; none without --tco.
    write_result(v6e_point(), tmp_path / "results")
    args = ["report", str(tmp_path / "results"), "--region", "us-central1"]
    code, out, err = run_cli(monkeypatch, capsys, *args, "--tco", str(tier_file(tmp_path)))
    assert code == 0, err
    assert "TCO tiers beside the list on-demand price" in out and "provider quote (2026-11-15)" in out
    assert "x0.7 list" in out
    code, out, err = run_cli(monkeypatch, capsys, *args)
    assert code == 0 and "TCO tiers beside" not in out
    code, out, err = run_cli(monkeypatch, capsys, *args, "--format", "html", "--tco", str(tier_file(tmp_path)))
    assert code == 0 and "TCO tiers beside the list on-demand price" in out
