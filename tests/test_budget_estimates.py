"""A token budget's estimated options (issue 48: `tpubench budget tokens RESULTS --on tpu-v6e-8 --on
H100:8`): each estimate at its operating point at the service level, sized like a measured option in
whole instances of its own chips, labelled estimate and kept apart from every measured total; what
cannot be sized listed with why; and the "before buying" budget with no measured result at all."""

from __future__ import annotations

import io
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from helpers_cli import run_cli

from tpubench.budget.estimated import FLAGS_SOURCE, at_point, candidate, estimated_budget
from tpubench.budget.request import BudgetOptions
from tpubench.budget.tokens import Slo, Traffic
from tpubench.cli import main
from tpubench.estimate.for_reports import ReportEstimates
from tpubench.money.pricing import load_prices
from tpubench.output.answer.operating_point import AT_LEAST, INTERPOLATED, operating_point
from tpubench.output.answer.options import estimate_sweep
from tpubench.output.answer.service_level import Slo as ServiceLevel
from tpubench.workload_spec.service_level import ServiceLevel as WorkloadServiceLevel

WORKLOAD = "workloads/qwen3_moe.yaml"
HOURS_PER_MONTH = 730.0


# --- by hand: the operating point's figures and the fleet ----------------------------------------------------

def _sweep(target="tpu-v6e-8", accelerator="TPU v6e", chips=8, plan="on_demand", loads=(1.0, 4.0),
           tpot=(0.025, 0.1), usd=(1.0, 0.25), price=2.7, cloud="gcp", region="us-central1",
           instance="tpu-v6e-8", refused="") -> pd.DataFrame:
    """An estimate's sweep as estimate.render.flat_rows gives it: one row per load in one plan; its
    intervals half and twice its $/Mtok, its p99 latencies its medians (tails of 1)."""
    rows = []
    for load, tpot_s, cost in zip(loads, tpot, usd):
        row = {"source": "estimate", "workload": "w", "target": target, "accelerator": accelerator, "chips": chips,
               "chip_family": "Google TPU", "concurrency": load, "input_length": 1024, "output_length": 256,
               "precision": "bf16", "refused": refused, "notes": "", "calibration_rows": 10,
               "calibration_rows_same_chip": 4, "ttft_tail": 1.0, "tpot_tail": 1.0, "ttft_s": 0.1, "tpot_s": tpot_s,
               "output_tokens_per_s_per_chip": 100.0 * load, "output_tokens_per_s_per_chip_low": 50.0 * load,
               "output_tokens_per_s_per_chip_high": 200.0 * load, "plan": plan, "cloud": cloud, "region": region,
               "instance_type": instance, "usd_per_chip_hour": price, "price_as_of": "2026-01-22"}
        for kind in ("input", "output", "blended"):
            row.update({f"{kind}_usd_per_mtok": cost, f"{kind}_usd_per_mtok_low": cost / 2,
                        f"{kind}_usd_per_mtok_high": cost * 2})
        rows.append(row)
    return pd.DataFrame(rows)


def test_every_figure_is_read_where_the_operating_point_is():
    # TPOT 25 ms at load 1 and 100 ms at load 4, a 50 ms bound: log(50/25) / log(100/25) = 0.5 of the
    # way in log(load), so load 2; $/Mtok 1.0 -> 0.25 gives 0.5 there, output tok/s/chip 100 -> 400 gives 200.
    sweep = _sweep()
    slo = ServiceLevel(ttft_s=None, tpot_s=0.05)
    op = operating_point(estimate_sweep(sweep, slo), slo)
    assert op.status == INTERPOLATED and op.point.load == pytest.approx(2.0)
    assert at_point(sweep, op, "blended_usd_per_mtok") == pytest.approx(0.5) == op.point.usd_per_mtok
    assert at_point(sweep, op, "output_tokens_per_s_per_chip") == pytest.approx(200.0)
    assert at_point(sweep, op, "blended_usd_per_mtok_high") == pytest.approx(1.0)
    # Its chip-seconds per token: $0.5 per 1e6 tokens at $2.7 per 3,600 chip-seconds.
    row = candidate(sweep, op, slo)
    assert row["blended_chip_s_per_token"] == pytest.approx(0.5e-6 * 3600 / 2.7)
    assert row["blended_chip_s_per_token_ci95_low"] == pytest.approx(0.25e-6 * 3600 / 2.7)
    assert row["source"] == "estimate" and row["chips"] == 8 and row["status"] == INTERPOLATED


def _made(*sweeps: pd.DataFrame, slo: WorkloadServiceLevel | None = None) -> ReportEstimates:
    wl = SimpleNamespace(name="w", slo=slo or WorkloadServiceLevel(ttft_s=2.0, tpot_s=0.05), points=[], volume=None)
    return ReportEstimates(rows=pd.concat(sweeps, ignore_index=True), contexts={"w": ("w.yaml", wl)},
                           notes=["x: no estimate: its results name no workload file"])


@pytest.fixture(scope="module")
def prices():
    return load_prices()


def test_an_estimate_is_sized_in_whole_instances_of_its_chips_and_what_cannot_be_is_listed(prices):
    meets = _sweep(loads=(1.0, 2.0, 4.0), tpot=(0.01, 0.02, 0.04), usd=(2.0, 1.0, 0.5))   # meets at every load
    refused = _sweep(target="L4:1", accelerator="L4", chips=1, plan="", loads=(1.0,), tpot=(math.nan,),
                     usd=(math.nan,), refused="too few calibration rows")
    spot_only = _sweep(target="H100:8", accelerator="H100", plan="spot", price=1.8, cloud="aws", region="eu-west-2",
                       instance="p5.48xlarge")
    misses = _sweep(target="tpu-v5e-8", accelerator="TPU v5e", tpot=(0.06, 0.2))
    one_gpu = _sweep(target="H100:1", accelerator="H100", chips=1, loads=(1.0, 2.0, 4.0), tpot=(0.01, 0.02, 0.04),
                     usd=(2.0, 1.0, 0.5), price=6.88, cloud="aws", region="us-east-1", instance="p5.48xlarge")
    budget = estimated_budget(_made(meets, refused, spot_only, misses, one_gpu), Traffic(1e9, 0.25), Slo(),
                              BudgetOptions(plans=("on_demand",)), prices)
    assert budget.slos["w"].source == "w.yaml's slo" and budget.notes[0].startswith("x: no estimate")
    assert "H100:1: rented as p5.48xlarge (8 chips), the instance the price table prices it at: 8 replicas of 1 " \
           "chip to an instance" in budget.notes
    sized, gpu = budget.options.to_dict("records")
    # At the top of its sweep (still meeting the SLO: "at least" this cheap), $0.5/Mtok at $2.7/chip-h
    # is 1 / (0.5e-6 x 3600 / 2.7) = 1,500 tokens/s per chip; 1e9 tokens a day is 11,574 tokens/s, under
    # one 8-chip replica's 12,000: one tpu-v6e-8 slice, 8 x $2.70 x 730 h = $15,768 a month. The interval's
    # high cost is from its low rate (750/s per chip, 6,000 per slice: two slices).
    assert sized["status"] == AT_LEAST and sized["load"] == 4.0
    assert sized["tokens_per_s_per_chip"] == pytest.approx(1500.0)
    assert (sized["instances"], sized["rented_chips"], sized["rank_overall"]) == (1, 8, 1)
    assert sized["monthly_usd"] == pytest.approx(8 * 2.7 * HOURS_PER_MONTH)
    assert sized["monthly_usd_low"] == pytest.approx(15768.0)
    assert sized["monthly_usd_high"] == pytest.approx(2 * 15768.0)
    assert sized["interval"] == "90% prediction interval" and sized["source"] == "estimate"
    assert sized["price_source"] and sized["chips_per_instance"] == 8      # the shipped row it is priced at
    # One H100 per replica, rented as the 8-GPU p5.48xlarge the table prices it at: $0.5/Mtok at $6.88/chip-h is
    # 3,822 tokens/s per chip, so ceil(11,574 / 3,822) = 4 one-GPU replicas, packed into one p5.48xlarge:
    # 8 x $6.88 x 730 h = $40,179 a month (never one GPU's $5,022: no one rents an eighth of the machine).
    assert (gpu["replicas"], gpu["instances"], gpu["rented_chips"], gpu["rank_overall"]) == (4, 1, 8, 2)
    assert gpu["monthly_usd"] == pytest.approx(8 * 6.88 * HOURS_PER_MONTH)
    why = dict(zip(budget.not_sized["option"], budget.not_sized["why"]))
    assert why == {"L4 ×1 (L4:1)": "no estimate: too few calibration rows",
                   "H100 ×8 (H100:8) · bf16": why["H100 ×8 (H100:8) · bf16"],
                   "TPU v5e ×8 (tpu-v5e-8) · bf16": "does not meet the service level: TPOT p99 60 ms > 50 ms at load 1 "
                                                    "(1.20x)"}
    assert why["H100 ×8 (H100:8) · bf16"].startswith("no on-demand price for H100")
    # The budget's own SLO flags replace the workload's: TPOT 5 ms is missed at every load.
    flagged = estimated_budget(_made(meets), Traffic(1e9, 0.25), Slo(tpot_p99_s=0.005),
                               BudgetOptions(plans=("on_demand",)), prices)
    assert flagged.options.empty and flagged.slos["w"].source == FLAGS_SOURCE
    assert flagged.not_sized["why"].tolist() == ["does not meet the service level: TPOT p99 10 ms > 5 ms at load 1 (2.00x)"]


# --- the command, on the committed results ------------------------------------------------------------------

def _tpubench(out: Path, *args: str) -> str:
    """`tpubench ARGS... --out OUT`'s output (a module's runs share one process' calibration)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "argv", ["tpubench", *args, "--out", str(out)])
        with pytest.raises(SystemExit) as exit_:
            main()
            raise SystemExit(0)
    assert exit_.value.code in (0, None)
    return out.read_text(encoding="utf-8")


BUDGET = ("budget", "tokens", "examples/results", "--tokens-per-day", "1e9")
ESTIMATES = ("--on", "tpu-v6e-8", "--on", "H100:8", "--workload", WORKLOAD)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("budget")
    return {"md": _tpubench(out / "b.md", *BUDGET, *ESTIMATES),
            "csv": _tpubench(out / "b.csv", *BUDGET, *ESTIMATES, "--format", "csv"),
            "plain_csv": _tpubench(out / "p.csv", *BUDGET, "--format", "csv"),
            "published_csv": _tpubench(out / "pub.csv", *BUDGET, *ESTIMATES, "--plan", "spot", "--include-published",
                                       "--format", "csv"),
            "plain_published_csv": _tpubench(out / "ppub.csv", *BUDGET, "--plan", "spot", "--include-published",
                                             "--format", "csv")}


def test_estimates_are_a_section_of_their_own_each_row_labelled(runs):
    md = runs["md"]
    measured, _, estimated = md.partition("## Estimates: chips you have not measured (not in any measured total)")
    assert "## Measured options, cheapest first" in measured and "(small)" in measured
    assert "estimate" not in measured.split("## Measured options")[1] and "H100 ×8" not in measured
    table = [line for line in estimated.split("### Estimates not sized")[0].splitlines() if line.startswith("| qwen3")]
    assert table and all(line.split(" | ")[2] == "estimate" for line in table)
    assert any("TPU v6e ×8 (tpu-v6e-8) · bf16" in line and "| on-demand |" in line for line in table)
    assert any("H100 ×8 (H100:8) · bf16" in line and "| spot |" in line for line in table)
    assert ("Service level for qwen3_moe: TTFT p99 ≤ 2 s, TPOT p99 ≤ 50 ms (20 tok/s per user) "
            f"({WORKLOAD}'s slo)") in estimated
    # A plan the table has no price for is listed with why, never dropped; so is a chip no estimate is made for.
    assert "H100 ×8 (H100:8) · bf16: no 1-year commitment price for H100 [n" in estimated


def test_monthly_cost_of_an_estimate_by_hand(runs):
    table = pd.read_csv(io.StringIO(runs["csv"]))
    est = table[table["source"] == "estimate"]
    row = est[(est["option"] == "TPU v6e ×8 (tpu-v6e-8) · bf16") & (est["plan"] == "on_demand")].iloc[0]
    # Chip-seconds per token from its $/Mtok at its price; the fleet for 1e9 tokens a day in 8-chip slices.
    chip_s = row["blended_usd_per_mtok"] / 1e6 / (row["usd_per_chip_hour"] / 3600)
    assert row["tokens_per_s_per_chip"] == pytest.approx(1 / chip_s, rel=1e-5)
    instances = math.ceil(1e9 / 86400 / (row["tokens_per_s_per_chip"] * 8))
    assert (row["instances"], row["rented_chips"], row["chips_per_instance"]) == (instances, 8 * instances, 8)
    assert row["monthly_usd"] == pytest.approx(8 * instances * row["usd_per_chip_hour"] * HOURS_PER_MONTH, rel=1e-5)
    assert row["monthly_usd_low"] <= row["monthly_usd"] <= row["monthly_usd_high"]
    # Taken at the workload's SLO (TPOT p99 <= 50 ms), at a load of the estimate's own sweep.
    assert row["percentile"] == 99 and row["tpot_s"] <= 0.05 + 1e-9 and row["load"] > 1
    unpriced = table[(table["source"] == "estimate") & table["monthly_usd"].isna()]
    assert unpriced["why_not"].str.startswith("no ").all() and len(unpriced)


@pytest.mark.parametrize("with_estimates, without", [("csv", "plain_csv"), ("published_csv", "plain_published_csv")])
def test_no_measured_or_published_row_changes_when_estimates_are_asked_for(runs, with_estimates, without):
    both = pd.read_csv(io.StringIO(runs[with_estimates]))
    alone = pd.read_csv(io.StringIO(runs[without]))
    assert set(both["source"]) == set(alone["source"]) | {"estimate"}
    if with_estimates == "published_csv":
        assert set(alone["source"]) == {"measured", "published"}
    rest = both[both["source"] != "estimate"][alone.columns].reset_index(drop=True)
    pd.testing.assert_frame_equal(rest, alone, check_dtype=False)   # ranks and totals the same: no estimate among them


def test_before_buying_no_measured_result_at_all(tmp_path, monkeypatch, capsys):
    empty = tmp_path / "results"
    empty.mkdir()
    args = ["budget", "tokens", str(empty), "--tokens-per-day", "1e9", "--on", "H100:8", "--plan", "spot"]
    code, out, err = run_cli(monkeypatch, capsys, *args, "--workload", WORKLOAD, "--slo-tpot-ms", "30")
    assert code == 0, err
    assert "No measured option" in out and "| qwen3_moe (full) | 1 | estimate | " in out
    assert f"Service level for qwen3_moe: TPOT p99 ≤ 30 ms (33.3 tok/s per user) ({FLAGS_SOURCE})" in out
    code, _, err = run_cli(monkeypatch, capsys, *args)          # no result names a workload file
    assert code == 2 and err.count("\n") == 1 and "--workload" in err


@pytest.mark.parametrize("args, field", [
    (("--on", "tpu-v9z-8"), "--on"),
    (("--on", "H100:8@fp9"), "--on"),
    (("--workload", "workloads/nope.yaml"), "--workload"),
])
def test_a_bad_chip_or_workload_is_a_one_line_error(tmp_path, monkeypatch, capsys, args, field):
    code, _, err = run_cli(monkeypatch, capsys, "budget", "tokens", str(tmp_path), "--tokens-per-day", "1e9", *args)
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"error: {field}") and "Traceback" not in err


def test_estimates_are_a_token_budget_s_options_only(tmp_path, monkeypatch, capsys):
    code, _, err = run_cli(monkeypatch, capsys, "budget", "train", str(tmp_path), "--train-tokens", "1e9", "--on",
                           "H100:8")
    assert code == 2 and err.startswith("error: --on: applies to `tpubench budget generate|serve|tokens`")
