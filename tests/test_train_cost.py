"""Training results (scenario train, docs/definitions.md#training) priced per million training tokens,
budgeted for a token budget and reported beside generate and serve results, checked against
arithmetic done by hand in the comments."""

from __future__ import annotations

import io
import math
import re
from datetime import date

import pandas as pd
import pytest
from helpers_cli import run_cli
from helpers_synthetic import (
    make_result,
    make_serve_result,
    make_train_result,
    write_results,
    write_serve_results,
    write_train_results,
)
from helpers_synthetic import results_frame as frame

from tpubench.budget import tokens as budget
from tpubench.budget import training as training_budget
from tpubench.budget.render import render_budget
from tpubench.errors import UserError
from tpubench.money import cost, pricing
from tpubench.output.report import build_report, render
from tpubench.scenarios.train.unit import TRAINING_TOKENS

TODAY = date(2026, 12, 2)
H100 = "NVIDIA H100 80GB HBM3"
TPU = "TPU v6 lite"
# A 4-GPU H100 box at 32 $/h on demand (8 $/chip-h), 16 $/h spot (4 $/chip-h); TPU v6e slices at
# 2.7 $/chip-h: a 1-chip slice at 2.7 $/h and an 8-chip slice at 21.6 $/h.
PRICE_CSV = """cloud,region,instance_type,accelerator,chips_per_instance,on_demand,spot,commit_1y,commit_3y,source,as_of
testcloud,r1,h100x4,H100,4,32.0,16.0,,,hand-made test price,2026-12-01
testcloud,r1,tpu-v6e-8,TPU v6e,8,21.6,,,,hand-made test price,2026-12-01
testcloud,r1,tpu-v6e-1,TPU v6e,1,2.7,,,,hand-made test price,2026-12-01
"""

# Two data-parallel H100 ranks, B=4 sequences of S=1024 per rank, one optimizer step in 0.5 s:
#   8192 training tokens per step -> 16384 tokens/s, 8192 per chip
#   train_s_per_token = 0.5 / 8192 = 6.1035e-5 s; x 2 chips = 1.2207e-4 chip-s per training token
#   $/M training tokens on demand = 1.2207e-4 * 8/3600 * 1e6 = 0.271267 (= 8e6 / (3600 * 8192))
H100_TRAIN = dict(accelerator=H100, world_size=2, batch_size=4, sequence_length=1024, step_s=0.5)
H100_USD_PER_MTOK = 8e6 / (3600 * 8192)
# Two TPU v6e chips, B=5, S=1000, a 1 s step: 10000 tokens/step, 5000 tokens/s per chip;
#   train_s_per_token = 1e-4; 2e-4 chip-s per token; at 2.7 $/chip-h: 2e-4 * 2.7/3600 * 1e6 = 0.15 $/Mtok
TPU_TRAIN = dict(accelerator=TPU, device="tpu", world_size=2, batch_size=5, sequence_length=1000, step_s=1.0)


@pytest.fixture(scope="module")
def prices(tmp_path_factory):
    path = tmp_path_factory.mktemp("prices") / "prices.csv"
    path.write_text(PRICE_CSV, encoding="utf-8")
    return pricing.load_prices([path], shipped=False, today=TODAY)


def option(options: pd.DataFrame, instance: str, plan: str = "on_demand", **match) -> pd.Series:
    mask = (options["instance_type"] == instance) & (options["plan"] == plan)
    for key, value in match.items():
        mask &= options[key] == value
    rows = options[mask]
    assert len(rows) == 1, rows
    return rows.iloc[0]


# ----------------------------------------------------------------------------- cost


def test_train_row_priced_per_million_training_tokens(prices):
    priced, unpriced = cost.price_results(frame(make_train_result(**H100_TRAIN)), prices, today=TODAY)
    assert unpriced.empty
    on_demand = option(priced, "h100x4")
    assert on_demand["scenario_kind"] == "train" and on_demand["world_size"] == 2 and on_demand["chips"] == 2
    assert on_demand["train_chip_s_per_token"] == pytest.approx(0.5 / 8192 * 2)
    assert on_demand["train_usd_per_mtok"] == pytest.approx(0.5 / 8192 * 2 * 8 / 3600 * 1e6)
    assert on_demand["train_usd_per_mtok"] == pytest.approx(0.271267, rel=1e-5)
    assert on_demand["train_usd_per_mtok"] == pytest.approx(H100_USD_PER_MTOK)
    # CI: the train_s_per_token bounds (x 0.98, x 1.02) times chips, priced the same way.
    assert on_demand["train_usd_per_mtok_ci95_low"] == pytest.approx(0.271267 * 0.98, rel=1e-5)
    assert on_demand["train_usd_per_mtok_ci95_high"] == pytest.approx(0.271267 * 1.02, rel=1e-5)
    assert on_demand["train_tokens_per_s"] == pytest.approx(16384)
    assert on_demand["train_tokens_per_s_per_chip"] == pytest.approx(8192)
    assert on_demand["train_tokens_per_s_per_chip_ci95_low"] == pytest.approx(8192 * 0.98)
    assert on_demand["mfu"] == pytest.approx(0.4) and on_demand["step_p50_s"] == pytest.approx(0.5)
    # Spot is half the chip-hour price: half the cost.
    assert option(priced, "h100x4", "spot")["train_usd_per_mtok"] == pytest.approx(0.271267 / 2, rel=1e-5)
    # A training row has no inference figures: every inference $/Mtok column stays NaN.
    for column in ("input_usd_per_mtok", "output_usd_per_mtok", "blended_usd_per_mtok",
                   "inferencex_usd_per_mtok", "blended_chip_s_per_token", "output_tokens_per_s_per_chip"):
        assert math.isnan(on_demand[column]), column


def test_cost_is_chips_times_seconds_per_token_not_world_size(prices):
    # On a CPU `chips` counts vCPUs of every rank: 2 ranks on 8 chips pay for 8. Same step as
    # H100_TRAIN: 6.1035e-5 s per token x 8 chips = 4.8828e-4 chip-s = 1.0851 $/Mtok at 8 $/chip-h.
    result = make_train_result(**{**H100_TRAIN, "chips": 8})
    priced, _ = cost.price_results(frame(result), prices, plans=["on_demand"], today=TODAY)
    row = option(priced, "h100x4")
    assert row["train_chip_s_per_token"] == pytest.approx(0.5 / 8192 * 8)
    assert row["train_usd_per_mtok"] == pytest.approx(4 * H100_USD_PER_MTOK)
    assert row["train_tokens_per_s_per_chip"] == pytest.approx(16384 / 8)


def test_inference_rows_have_no_training_cost(prices):
    priced, _ = cost.price_results(frame(make_result(accelerator=H100), make_serve_result(accelerator=H100)),
                                   prices, plans=["on_demand"], today=TODAY)
    assert priced["blended_usd_per_mtok"].notna().all()
    for column in TRAINING_TOKENS.cost_columns() + ["train_tokens_per_s_per_chip", "mfu"]:
        assert priced[column].isna().all(), column
    assert not cost.unit_rows(priced, TRAINING_TOKENS).any()


# ----------------------------------------------------------------------------- training budget


def test_plan_training_by_hand(prices):
    plan = training_budget.plan_training(frame(make_train_result(**H100_TRAIN)), prices, train_tokens=1e9, today=TODAY)
    h = option(plan.options, "h100x4")
    # A 2-chip replica on a 4-GPU box: 2 replicas, 1 instance, all 4 chips busy.
    assert (h.replicas, h.instances, h.rented_chips, h.utilisation) == (2, 1, 4, 1.0)
    # 1e9 tokens / 8192 per step = 122070.3 steps x 0.5 s = 61035.2 s of one replica; / 2 replicas
    # = 30517.6 s = 8.4771 h; x 32 $/h = 271.27 $ (= 1000 Mtok x 0.271267 $/Mtok).
    assert h.hours == pytest.approx(1e9 / 8192 * 0.5 / 2 / 3600)
    assert h.hours == pytest.approx(8.47710, rel=1e-5)
    assert h.usd == pytest.approx(271.267, rel=1e-5)
    assert h.usd == pytest.approx(1e3 * H100_USD_PER_MTOK)
    assert h.hours_ci95_low == pytest.approx(8.47710 * 0.98, rel=1e-5)
    assert h.usd_ci95_high == pytest.approx(271.267 * 1.02, rel=1e-5)
    spot = option(plan.options, "h100x4", "spot")
    assert spot.hours == pytest.approx(h.hours) and spot.usd == pytest.approx(271.267 / 2, rel=1e-5)
    # Cheapest first: spot, then on demand.
    assert list(plan.options["plan"]) == ["spot", "on_demand"]
    assert list(plan.options["rank_overall"]) == [1, 2]
    assert list(plan.options["rank_in_plan"]) == [1, 1]


def test_two_chip_points_pack_four_to_a_v6e_8_and_the_fastest_per_rented_chip_wins(prices):
    two = make_train_result(**TPU_TRAIN, seed=1)
    # The same speed per chip on a world of 3 (B=5, S=1000, 15000 tokens in a 1 s step): 2 replicas
    # fill 6 of the 8 chips, 3750 tokens/s per rented chip against the 2-chip point's 5000.
    three = make_train_result(**{**TPU_TRAIN, "world_size": 3}, seed=2)
    # A faster but invalid point is left out.
    invalid = make_train_result(**{**TPU_TRAIN, "step_s": 0.1}, valid=False, invalid_reasons=["loss is nan"],
                                seed=3)
    plan = training_budget.plan_training(frame(two, three, invalid), prices, train_tokens=1e9, today=TODAY)
    s8 = option(plan.options, "tpu-v6e-8")
    assert (s8.chips, s8.replicas, s8.instances, s8.rented_chips) == (2, 4, 1, 8)
    # 1e9 x 1e-4 s per token / 4 replicas = 25000 s = 6.9444 h; x 21.6 $/h = 150 $
    # (= 1e9 x 2e-4 chip-s x 2.7/3600 $/chip-s).
    assert s8.hours == pytest.approx(1e9 * 1e-4 / 4 / 3600)
    assert s8.usd == pytest.approx(150.0)
    assert s8.train_usd_per_mtok == pytest.approx(0.15)
    assert s8.train_tokens_per_s_per_rented_chip == pytest.approx(5000)
    # A 1-chip slice cannot hold a 2- or 3-chip world: no option there, and a note says so.
    assert not (plan.options["instance_type"] == "tpu-v6e-1").any()
    assert any("TPU slices smaller than their world" in n for n in plan.notes)
    assert any("1 invalid training run(s)" in n for n in plan.notes)

    alone = training_budget.plan_training(frame(three), prices, train_tokens=1e9, today=TODAY)
    t8 = option(alone.options, "tpu-v6e-8")
    # 2 replicas of 3 chips: 1e9 / 15000 per replica-second / 2 = 33333 s = 9.2593 h; x 21.6 = 200 $
    # (150 $ / 0.75 of the slice in use).
    assert (t8.replicas, t8.rented_chips, t8.utilisation) == (2, 8, 0.75)
    assert t8.hours == pytest.approx(1e9 / 15000 / 2 / 3600)
    assert t8.usd == pytest.approx(200.0)


def test_a_world_wider_than_an_instance_rents_several(prices):
    # 16 H100 ranks, B=1, S=1000, a 2 s step: 16000 tokens/step, 8000 tokens/s, 500 per chip;
    # 1.25e-4 s per token. One replica over 4 boxes: 1e9 x 1.25e-4 / 3600 = 34.722 h,
    # x 4 x 32 $/h = 4444.44 $ (= 2e6 chip-s x 8/3600).
    wide = make_train_result(accelerator=H100, world_size=16, batch_size=1, sequence_length=1000, step_s=2.0)
    plan = training_budget.plan_training(frame(wide), prices, train_tokens=1e9, plans=["on_demand"], today=TODAY)
    h = option(plan.options, "h100x4")
    assert (h.replicas, h.instances, h.rented_chips, bool(h.replica_spans_instances)) == (1, 4, 16, True)
    assert h.hours == pytest.approx(1e9 * 1.25e-4 / 3600)
    assert h.usd == pytest.approx(4444.444, rel=1e-6)


def test_plan_training_leaves_inference_points_out(prices):
    results = frame(make_train_result(**H100_TRAIN), make_result(accelerator=H100),
                    make_serve_result(accelerator=H100))
    plan = training_budget.plan_training(results, prices, train_tokens=1e9, plans=["on_demand"], today=TODAY)
    assert list(plan.options["scenario_kind"]) == ["train"]
    assert any("2 result(s) without training figures" in n for n in plan.notes)
    # ... and the inference budget leaves the training point out.
    inference = budget.plan_budget(results, prices, tokens_per_day=1e8, output_share=0.25,
                                   plans=["on_demand"], today=TODAY)
    assert "train" not in set(inference.options["scenario_kind"])


@pytest.mark.parametrize("tokens", [0, -1.0, math.inf, math.nan])
def test_plan_training_refuses_a_token_budget_that_is_not_positive(prices, tokens):
    with pytest.raises(UserError, match="--train-tokens"):
        training_budget.plan_training(frame(make_train_result(**H100_TRAIN)), prices, train_tokens=tokens, today=TODAY)


# ----------------------------------------------------------------------------- CLI and reports


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mixed")
    write_train_results(folder, [H100_TRAIN, TPU_TRAIN])
    write_results(folder, [dict(accelerator=H100)])
    write_serve_results(folder, [dict(accelerator=H100)])
    return folder


@pytest.fixture(scope="module")
def price_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli-prices") / "prices.csv"
    path.write_text(PRICE_CSV, encoding="utf-8")
    return path


def test_cli_budget_train_tokens(results_dir, price_file, monkeypatch, capsys):
    args = ["budget", "train", str(results_dir), "--train-tokens", "1e9", "--prices", str(price_file), "--cloud", "testcloud"]
    code, out, err = run_cli(monkeypatch, capsys, *args, "--format", "csv")
    assert code == 0, err
    table = pd.read_csv(io.StringIO(out))
    assert set(table["scenario_kind"]) == {"train"}
    h = table[(table["instance_type"] == "h100x4") & (table["plan"] == "on_demand")].iloc[0]
    assert h["usd"] == pytest.approx(271.267, rel=1e-5) and h["hours"] == pytest.approx(8.4771, rel=1e-4)
    s8 = table[table["instance_type"] == "tpu-v6e-8"].iloc[0]
    assert (s8["usd"], s8["instances"], s8["replicas"]) == (pytest.approx(150.0, rel=1e-5), 1, 4)
    assert list(table["usd"]) == sorted(table["usd"])

    code, out, err = run_cli(monkeypatch, capsys, *args)
    assert code == 0, err
    assert "# tpubench training budget" in out and "1,000,000,000 training tokens" in out
    assert "1 × tpu-v6e-8 (4 replicas of 2 chips, 100% of 8 used)" in out
    assert "$150 ($147–$153)" in out and "$271 ($266–$277)" in out
    assert "nan" not in out.lower().replace("nanos", "")


@pytest.mark.parametrize("extra", [[], ["--train-tokens", "1e9", "--tokens-per-day", "1e9"],
                                   ["--train-tokens", "1e9", "--slo-ttft-ms", "500"]])
def test_cli_training_budget_wants_its_volume_and_only_its_options(results_dir, monkeypatch, capsys, extra):
    code, _, err = run_cli(monkeypatch, capsys, "budget", "train", str(results_dir), *extra)
    assert code == 2 and "error" in err.lower() and "internal error" not in err


@pytest.fixture(scope="module")
def report_data(results_dir, prices):
    return build_report(results_dir, prices=prices, today=TODAY)


def test_report_keeps_training_apart(report_data):
    assert set(report_data.summary["scenario_kind"]) == {"generate", "serve"}
    training = report_data.summary_of(TRAINING_TOKENS)
    assert set(training["scenario_kind"]) == {"train"}
    assert training["train_usd_per_mtok"].notna().all()
    assert report_data.summary["train_usd_per_mtok"].isna().all()


def test_markdown_report_has_a_training_section(report_data):
    md = render(report_data, "markdown")
    assert "## Training, synthetic_train (full): $ per million training tokens per platform and plan" in md
    assert "## Training runs (2)" in md and "## Runs (2)" in md
    training = md[md.index("## Training, "):]
    # H100 on demand: 0.271 $/M training tokens (0.266-0.277), 8192 tokens/s per chip, MFU 40%.
    assert "0.271 (0.266–0.277)" in training and "8,192 (8,028–8,356)" in training and "40%" in training
    assert "0.150 (0.147–0.153)" in training and "B=4 S=1024 ×2 bfloat16 eager" in training
    # The inference tables above never show a training point (the summary at the top has a table of its own).
    inference = md[md.index("cheapest point per platform and plan"):md.index("## Training, ")]
    assert "S=1024" not in inference and "synthetic_train" not in inference
    for junk in ("B=None", "S=None", "nan"):
        assert junk not in md


def test_html_report_has_a_training_table_and_figure(report_data):
    html = render(report_data, "html")
    assert html.startswith("<!DOCTYPE html>")
    assert "Training, synthetic_train (full)" in html and "Training runs (2)" in html
    assert 'id="train-0"' in html
    charts = re.findall(r'<figure class="chart" id="([a-z-]+)-\d+"', html)
    shipped = charts.count("published-ref")      # the shipped published rows' figures
    answers = charts.count("answer")             # the answer table's, inference only
    assert len(charts) - shipped - answers == 4       # inference cost, Pareto, latency; training
    page = re.sub(r"<script[^>]*>.*?</script>", "", html, flags=re.S)    # the inline charting scripts aside
    assert not re.search(r"""(src|href)\s*=\s*["'](?!data:)""", page)


def test_csv_report_labels_training_rows(report_data):
    table = pd.read_csv(io.StringIO(render(report_data, "csv")))
    train = table[table["cost_basis"] == "training"]
    inference = table[table["cost_basis"] == "inference"]
    assert set(train["scenario_kind"]) == {"train"} and set(inference["scenario_kind"]) == {"generate", "serve"}
    assert train["train_usd_per_mtok"].notna().all() and train["blended_usd_per_mtok"].isna().all()
    assert inference["blended_usd_per_mtok"].notna().all() and inference["train_usd_per_mtok"].isna().all()
    assert {"train_usd_per_mtok_ci95_low", "train_usd_per_mtok_ci95_high", "mfu"} <= set(table)


def test_training_budget_renders_no_html(prices):
    plan = training_budget.plan_training(frame(make_train_result(**H100_TRAIN)), prices, train_tokens=1e9, today=TODAY)
    with pytest.raises(UserError):
        render_budget(plan, "html")
