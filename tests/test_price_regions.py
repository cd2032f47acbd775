"""Regions as the user chooses (`--cloud`, `--region`, repeatable): the answer's measured, estimated
and published options, and the budget, are priced only from the regions named, and say which; the
1- and 3-year verdicts compare TPU v6e with H100 once the table has both prices, with the stale-price
line where a price they rest on is old."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers_cli import run_cli
from helpers_synthetic import write_results

WORKLOAD = Path(__file__).resolve().parent.parent / "workloads" / "qwen3_moe.yaml"
# A negotiated H100 commitment of the user's own (a test price, not a public one), layered over the shipped table.
NEGOTIATED = """cloud,region,instance_type,accelerator,chips_per_instance,commit_1y,commit_3y,source,as_of
aws,us-east-1,p5.48xlarge,,,30.0,20.0,test: a user's negotiated rate,2026-11-01
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """One small-scale CPU point of a qwen3_moe workload decided between tpu-v6e-8 and H100:8."""
    root = tmp_path_factory.mktemp("regions")
    spec = yaml.safe_load(WORKLOAD.read_text())
    spec["compare_on"] = ["tpu-v6e-8", "H100:8"]
    (root / "wl.yaml").write_text(yaml.safe_dump(spec))
    path, = write_results(root / "results", [dict(accelerator="AMD EPYC", device="cpu", chips=2, workload="qwen3_moe",
                                                  scale="small", batch_size=8, input_length=128, output_length=32,
                                                  ttft_s=0.3, e2e_s=1.5)])
    data = json.loads(path.read_text())
    data["workload_file"] = str(root / "wl.yaml")
    path.write_text(json.dumps(data))
    (root / "negotiated.csv").write_text(NEGOTIATED)
    return root


def answer_csv(monkeypatch, capsys, folder, *args) -> pd.DataFrame:
    code, out, err = run_cli(monkeypatch, capsys, "report", str(folder / "results"), "--table", "answer", "--format",
                             "csv", *args)
    assert code == 0, err
    return pd.read_csv(io.StringIO(out))


def test_the_answer_prices_only_the_regions_named_and_says_which(monkeypatch, capsys, folder):
    rows = answer_csv(monkeypatch, capsys, folder, "--region", "us-east5", "--region", "us-east-1")
    priced = rows[rows["price_basis"].notna()]
    assert len(priced) and priced["price_basis"].str.contains(r"\((?:us-east5|us-east-1)\)").all()
    v6e = priced[(priced["accelerator"] == "TPU v6e") & (priced["plan"] == "spot")]
    assert v6e["price_basis"].str.contains("tpu-v6e-8 \\(us-east5\\), \\$1.28/chip-h, as of 2026-01-22").all()
    # Every region of the table when none is named: the cheapest spot region then is another one.
    everywhere = answer_csv(monkeypatch, capsys, folder)
    cheapest = everywhere[(everywhere["accelerator"] == "TPU v6e") & (everywhere["plan"] == "spot")
                          & (everywhere["source"] == "estimate")]
    assert not cheapest["price_basis"].str.contains("us-east5").any()


def test_an_unknown_region_is_one_line(monkeypatch, capsys, folder):
    code, _, err = run_cli(monkeypatch, capsys, "report", str(folder / "results"), "--region", "mars-1")
    assert code == 2 and "--region" in err and "mars-1" in err and len(err.strip().splitlines()) == 1


def test_one_and_three_year_verdicts_compare_tpu_v6e_with_h100(monkeypatch, capsys, folder):
    rows = answer_csv(monkeypatch, capsys, folder, "--prices", str(folder / "negotiated.csv"))
    for plan in ("commit_1y", "commit_3y"):
        verdict = rows[rows["plan"] == plan]["verdict_text"].iloc[0]
        assert "TPU v6e" in verdict and "H100" in verdict and "cheaper than" in verdict, verdict
    # The shipped 3-year TPU v6e price is Google's GA list of 2024-12-11: stale, said beside the verdict.
    stale = rows[rows["plan"] == "commit_3y"]["verdict_stale_note"].iloc[0]
    assert "3-year commitment price (us-east5, dated 2024-12-11)" in stale
    assert "tpubench pricing refresh" in rows[rows["plan"] == "commit_3y"]["verdict_refresh_command"].iloc[0]
    # Without the user's H100 commitment the plan is named as missing, with its reason, never dropped.
    shipped = answer_csv(monkeypatch, capsys, folder)
    gaps = shipped[shipped["plan"] == "commit_1y"]["verdict_gaps_note"].iloc[0]
    assert gaps.startswith("Not in this verdict: no 1-year commitment price for H100: no public figure")


BUDGET_PRICES = ("cloud,region,instance_type,accelerator,chips_per_instance,plan,usd_per_instance_hour,"
                 "preemption_rate_per_day,source,as_of\n") + """testcloud,r1,h100x4,H100,4,on_demand,32.0,,test price,2026-12-01
testcloud,r1,h100x4,H100,4,spot,16.0,0.5,test price,2026-01-01
testcloud,r2,h100x4,H100,4,on_demand,28.0,,test price,2026-12-01
testcloud,r3,h100x4,H100,4,on_demand,20.0,,test price,2026-12-01
"""


@pytest.fixture(scope="module")
def budget_folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("budget-regions")
    write_results(root / "results", [dict(accelerator="NVIDIA H100 80GB HBM3", chips=4, batch_size=8)])
    (root / "prices.csv").write_text(BUDGET_PRICES)
    return root


def budget_csv(monkeypatch, capsys, root, *args) -> tuple[pd.DataFrame, str]:
    code, out, err = run_cli(monkeypatch, capsys, "budget", "tokens", str(root / "results"), "--tokens-per-day", "1e9",
                             "--prices", str(root / "prices.csv"), "--cloud", "testcloud", *args)
    assert code == 0, err
    return (pd.read_csv(io.StringIO(out)) if "--format" in args else None), out


def test_the_budget_uses_the_regions_named_and_lists_its_stale_prices(monkeypatch, capsys, budget_folder):
    rows, _ = budget_csv(monkeypatch, capsys, budget_folder, "--region", "r1", "--region", "r2", "--format", "csv")
    assert set(rows["region"]) == {"r1", "r2"} and set(rows["price_as_of"]) <= {"2026-12-01", "2026-01-01"}
    _, text = budget_csv(monkeypatch, capsys, budget_folder, "--region", "r1")
    # r1's spot price is dated 2026-01-01: older than 30 days, said in the budget's notes with the command.
    assert "dated 2026-01-01 (spot)" in text and "tpubench pricing refresh" in text
    assert "(r1)" in text and "(r2)" not in text
