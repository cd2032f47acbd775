"""A scenario with a unit of output tpubench does not ship (tests/demo_scenario/: transcription,
priced per 1,000 audio seconds) is one package plus one registry line: registered, its rows are
priced, metered for energy and carbon, shown after a run and reported in markdown, HTML and CSV
from its OutputUnit alone, with figures computed here by hand."""

from __future__ import annotations

import io
import math
from datetime import date

import pandas as pd
import pytest
from demo_scenario import AUDIO_SECONDS, Transcribe
from helpers_synthetic import results_frame as frame

from tpubench.money import cost, pricing
from tpubench.output.report import build_report, render
from tpubench.records.result import RunResult, write_result
from tpubench.scenarios import registry

TODAY = date(2026, 12, 2)
# 4 H100s for $32/h on demand: $8 per chip-hour (spot: $4).
PRICE_CSV = """cloud,region,instance_type,accelerator,chips_per_instance,on_demand,spot,commit_1y,commit_3y,source,as_of
testcloud,r1,h100x4,H100,4,32.0,16.0,,,hand-made test price,2026-12-01
"""


@pytest.fixture
def demo(monkeypatch):
    """The one registry line."""
    monkeypatch.setitem(registry.SCENARIOS, "transcribe", Transcribe())


@pytest.fixture(scope="module")
def prices(tmp_path_factory):
    path = tmp_path_factory.mktemp("prices") / "prices.csv"
    path.write_text(PRICE_CSV, encoding="utf-8")
    return pricing.load_prices([path], shipped=False, today=TODAY)


def asr_result(*, energy: bool = True) -> RunResult:
    """2 H100s transcribe 200 audio seconds per second (180..220): 0.01 s of the call per audio
    second (0.009..0.011); with energy, 2 chips x 300 W over a 10 s window."""
    metrics = {"compute_s_per_audio_s": 0.01, "compute_s_per_audio_s_ci95_low": 0.009,
               "compute_s_per_audio_s_ci95_high": 0.011, "audio_s_per_s": 200.0, "audio_s_per_s_ci95_low": 180.0,
               "audio_s_per_s_ci95_high": 220.0, "word_error_rate": 0.05}
    if energy:
        metrics.update(energy_j=2 * 300.0 * 10, energy_window_s=10.0)
    point = {"workload": "demo_asr", "scale": "full", "family": "whisper", "hub_id": None, "weights": "random",
             "trust_remote_code": False, "dtype": "bfloat16", "experts_implementation": None, "model_config": {},
             "batch_size": 8, "input_length": 1, "output_length": None, "execution_mode": "eager",
             "scenario_kind": "transcribe", "params": {"clip_s": 30.0}, "compile_options": {}, "measurement": {}}
    return RunResult(workload_file="workloads/demo_asr.yaml", point=point, point_key=f"asr-{energy}",
                     backend="torch", device="cuda", environment={"accelerator_name": "NVIDIA H100 80GB HBM3",
                                                                  "chips": 2, "hostname": "h", "torch": "2.13"},
                     started_at="2026-12-01T00:00:00+00:00", metrics=metrics,
                     energy={"method": "measured", "valid": True} if energy else {},
                     validity={"valid": True, "reasons": []})


# By hand: 0.01 s x 2 chips = 0.02 chip-s per audio second (0.018..0.022); at $8 per chip-hour,
# 0.02 x 8 / 3600 x 1000 = $0.0444 per 1,000 audio seconds ($0.0400..$0.0489).
CHIP_S = 0.02
USD_PER_K = CHIP_S * 8 / 3600 * 1000


def test_the_unit_is_registered_with_its_scenario(demo):
    assert registry.units()[-1] is AUDIO_SECONDS and registry.unit_of("transcribe") is AUDIO_SECONDS
    assert {"audio_usd_per_kaudio_s", "audio_j_per_audio_s_ci95_high", "audio_s_per_kwh",
            "audio_gco2e_per_kaudio_s"} <= set(cost.priced_columns())


def test_audio_is_priced_per_thousand_audio_seconds_with_energy_and_carbon(demo, prices):
    priced, unpriced = cost.price_results(frame(asr_result()), prices, today=TODAY, grid_gco2_per_kwh=400.0)
    assert unpriced.empty
    row = priced[priced["plan"] == "on_demand"].iloc[0]
    assert row["audio_chip_s_per_audio_s"] == pytest.approx(CHIP_S)
    assert row["audio_usd_per_kaudio_s"] == pytest.approx(USD_PER_K)
    assert (row["audio_usd_per_kaudio_s_ci95_low"], row["audio_usd_per_kaudio_s_ci95_high"]) == pytest.approx(
        (0.018 * 8 / 3.6, 0.022 * 8 / 3.6))
    spot = priced[priced["plan"] == "spot"].iloc[0]
    assert spot["audio_usd_per_kaudio_s"] == pytest.approx(USD_PER_K / 2)
    # 200 audio s/s over 2 chips: 100 per chip (90..110).
    assert (row["audio_s_per_s_per_chip"], row["audio_s_per_s_per_chip_ci95_low"],
            row["audio_s_per_s_per_chip_ci95_high"]) == pytest.approx((100.0, 90.0, 110.0))
    # 6000 J / (10 s x 2 chips) = 300 J per chip-second -> 0.02 x 300 = 6 J per audio second (5.4..6.6);
    # 3.6e6 / 6 = 600,000 audio seconds per kWh; 6 J x 1000 / 3.6e6 x 400 g/kWh = 0.667 g per 1,000.
    assert (row["audio_j_per_audio_s"], row["audio_j_per_audio_s_ci95_low"],
            row["audio_j_per_audio_s_ci95_high"]) == pytest.approx((6.0, 5.4, 6.6))
    assert row["audio_s_per_kwh"] == pytest.approx(600_000)
    assert row["audio_gco2e_per_kaudio_s"] == pytest.approx(6 * 1000 / 3.6e6 * 400)
    assert row["word_error_rate"] == pytest.approx(0.05)
    # It is no token: every other unit's figures are NaN on it.
    assert math.isnan(row["blended_usd_per_mtok"]) and math.isnan(row["train_usd_per_mtok"])
    assert cost.unit_rows(priced, AUDIO_SECONDS).all()


def test_reports_have_a_transcription_section(demo, prices):
    data = build_report(frame(asr_result(), asr_result(energy=False)), prices=prices, today=TODAY)
    assert data.summary.empty and len(data.summary_of(AUDIO_SECONDS)) == 2   # one per plan
    md = render(data, "markdown")
    assert "### Transcription: the cheapest option per plan" in md
    section = md[md.index("## Transcription, demo_asr (full): $ per 1,000 audio seconds per platform and plan"):]
    assert "0.0444 (0.0400–0.0489)" in section and "100 (90.0–110)" in section
    assert "6.00 J" in section and "No result could be priced" not in md
    html = render(data, "html")
    assert "<h2>Transcription, demo_asr (full): $ per 1,000 audio seconds per platform and plan</h2>" in html
    table = pd.read_csv(io.StringIO(render(data, "csv")))
    audio = table[table["cost_basis"] == "transcription"]
    assert len(audio) == 4 and audio["audio_usd_per_kaudio_s"].max() == pytest.approx(USD_PER_K, rel=1e-5)


def test_the_run_cost_table_prices_audio_at_the_cheapest_instance(demo, prices, tmp_path, monkeypatch):
    from rich.console import Console

    from tpubench.console import render_run_cost

    monkeypatch.setattr(pricing, "load_prices", lambda *a, **k: prices)
    path = write_result(asr_result(), tmp_path)
    buffer = io.StringIO()
    render_run_cost(Console(file=buffer, width=300), [path])
    text = buffer.getvalue()
    assert "cost per 1,000 audio seconds (cheapest instance per plan)" in text and "$/Mtok" not in text
    on_demand = next(line for line in text.splitlines() if "on-demand" in line)
    assert "asr x8 cuda" in on_demand and "$0.0444 ($0.0400-$0.0489)" in on_demand and "100.0" in on_demand


def test_audio_seconds_are_budgeted_per_day(demo, tmp_path, monkeypatch, capsys):
    """A unit without a planner of its own is sized per day by the generic one (budget/per_day.py):
    `tpubench budget audio-seconds --audio-seconds-per-day N` sizes a fleet for it with no other change."""
    from helpers_cli import run_cli

    write_result(asr_result(), tmp_path / "results")
    (tmp_path / "prices.csv").write_text(PRICE_CSV, encoding="utf-8")
    args = ["budget", "audio-seconds", str(tmp_path / "results"), "--prices", str(tmp_path / "prices.csv"),
            "--audio-seconds-per-day", "17280000", "--power-price", "0.1"]
    # By hand: 17,280,000 audio s a day = 200 a second. Sized on chip-seconds, as images are: 1 / 0.02 =
    # 50 audio s/s per chip (45.5..55.6), 100 per 2-chip replica -> 2 replicas, two to an h100x4:
    # 1 instance, 32 $/h x 730 h = $23,360 a month. The slow bound (90.9 per replica) needs 3
    # replicas, 2 instances: $46,720. Energy: 200 x 2,628,000 s x 6 J / 3.6e6 = 876 kWh ($87.60 at 0.1).
    code, out, err = run_cli(monkeypatch, capsys, *args, "--format", "csv", "--plan", "on_demand")
    assert code == 0, err
    row = pd.read_csv(io.StringIO(out)).iloc[0]
    assert (row["per_day"], row["replicas"], row["instances"], row["rented_chips"]) == (17_280_000, 2, 1, 4)
    assert row["audio_s_per_s_per_chip"] == pytest.approx(50.0)
    assert (row["monthly_usd"], row["monthly_usd_ci95_low"], row["monthly_usd_ci95_high"]) == pytest.approx(
        (23_360, 23_360, 46_720))
    assert row["monthly_kwh"] == pytest.approx(876) and row["monthly_energy_usd"] == pytest.approx(87.6)
    code, out, err = run_cli(monkeypatch, capsys, *args)
    assert code == 0, err
    assert "# tpubench budget: audio seconds" in out and "17,280,000 audio seconds/day" in out
    assert "$23,360 ($23,360–$46,720)" in out and "$11,680" in out   # spot: half the price
    # `tpubench budget --help` lists its subcommand; a flag only another planner reads is refused, naming it.
    code, out, _ = run_cli(monkeypatch, capsys, "budget", "--help")
    assert code == 0 and "audio-seconds  Audio seconds per day on transcribe points." in out
    code, _, err = run_cli(monkeypatch, capsys, *args, "--slo-ttft-ms", "100")
    assert code == 2 and err.startswith("error: --slo-ttft-ms:") and "not to `tpubench budget audio-seconds`" in err
