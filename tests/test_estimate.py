"""`tpubench estimate`: the efficiency fit on hand-computed cases, its leave-one-out interval, the
refusal below 3 calibration rows, and the command's labelled output and one-line errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from helpers_cli import run_cli
from tpubench.errors import UserError
from tpubench.estimate.calibration import observations
from tpubench.estimate.chips import chip, parse_target
from tpubench.estimate.features import Point, roofline
from tpubench.estimate.fit import conformal_halfwidth, fit_efficiency, loo_residuals
from tpubench.estimate.models import published_model
from tpubench.estimate.predict import MIN_ROWS, calibrate, estimate
from tpubench.hardware.counts import decode_bytes_per_chip
from tpubench.money.pricing import load_prices

WORKLOAD = "workloads/qwen3_moe.yaml"


# --- fit: hand-computed ---------------------------------------------------------------------------

def test_pooled_intercepts_match_the_hand_solution():
    # Family A: y = 1, 1; B: y = 3, 3, 3, 3; ridge 2 on each family's deviation. Minimising
    # sum (y - b - d_f)^2 + 2 (d_A^2 + d_B^2): d_A = (1 - b) / 2, d_B = 2 (3 - b) / 3 and the residuals
    # summing to 0 give b = 15/7, so A's level is 11/7 and B's 19/7 (shrunk toward each other).
    fit = fit_efficiency(np.ones((6, 1)), [1, 1, 3, 3, 3, 3], ["A", "A", "B", "B", "B", "B"], ridge=2.0)
    assert fit.pooled[0] == pytest.approx(15 / 7)
    assert fit.coefficients("A")[0] == pytest.approx(11 / 7)
    assert fit.coefficients("B")[0] == pytest.approx(19 / 7)
    assert fit.coefficients("unseen")[0] == pytest.approx(15 / 7)   # a new family gets the pooled fit


def test_exact_line_is_recovered_and_a_constant_term_is_held_at_zero():
    log_c = np.log([1.0, 2.0, 4.0, 8.0])
    X = np.column_stack([np.ones(4), log_c, np.full(4, math.log(8))])   # every row on 8 chips
    y = -2.0 + 0.5 * log_c
    fit = fit_efficiency(X, y, ["F"] * 4, terms=("intercept", "log_concurrency", "log_chips"))
    assert fit.coefficients("F") == pytest.approx([-2.0, 0.5, 0.0])
    assert fit.held == ("log_chips",)
    assert fit.predict([1.0, math.log(16), math.log(8)], "F") == pytest.approx(-2.0 + 0.5 * math.log(16))


def test_leave_one_out_residuals_by_hand():
    # Intercept only, one family: row i is predicted by the mean of the other three
    # (each family's deviation is only ridge-shrunk, and one family's cancels against the pooled level).
    r = loo_residuals(np.ones((4, 1)), [0.0, 1.0, 2.0, 3.0], ["F"] * 4)
    assert r == pytest.approx([-2.0, -2 / 3, 2 / 3, 2.0])


def test_conformal_halfwidth_rank_and_small_sample_flag():
    assert conformal_halfwidth([-2, -2 / 3, 2 / 3, 2]) == (2.0, False)       # n=4 < 9: largest, below nominal
    assert conformal_halfwidth(np.arange(1, 10)) == (9.0, True)             # ceil(10 x 0.9) = 9th of 9
    assert conformal_halfwidth(np.arange(1, 20)) == (18.0, True)            # ceil(20 x 0.9) = 18th of 19


# --- roofline of one point -------------------------------------------------------------------------

def test_decode_roofline_is_the_bytes_one_chip_reads_over_its_bandwidth():
    shape = published_model("meta-llama/Llama-3.3-70B-Instruct")[1]
    point = Point(shape=shape, weight_bytes=2.0, kv_bytes=2.0, chips=8, concurrency=4, input_len=1000, output_len=1000)
    roof = roofline(point, peak_flops=1e15, peak_bytes_per_s=1e12)
    chip_bytes = sum(decode_bytes_per_chip(shape, 4, lambda layer: layer.attended(1500), 2.0, 2.0, None, 8).values())
    assert roof.decode_bound == "memory"
    assert roof.decode_step_s == pytest.approx(chip_bytes / 1e12)
    assert roof.cycle_s == pytest.approx(roof.prefill_s + 1000 * roof.decode_step_s)


def test_deepseek_r1_shape_has_latent_attention_and_its_published_size():
    shape = published_model("deepseek-ai/DeepSeek-R1-0528")[1]
    # DeepSeek-V3's report: 671B parameters (without the 14B MTP module), 37B activated per token.
    assert shape.total_params / 1e9 == pytest.approx(671.0, abs=0.1)
    assert shape.active_params / 1e9 == pytest.approx(36.6, abs=0.1)
    assert len(shape.moe_layers) == 61 - 3                                  # first_k_dense_replace = 3
    layer = shape.layers[-1]
    assert layer.kv_bytes_per_token(1) == 512 + 64                        # one latent + the rotary key
    assert layer.attention_flops_per_token(1) == 2 * 128 * (128 + 64 + 128)  # QK^T over 192, PV over 128


# --- predictions, intervals and the refusal --------------------------------------------------------

def _rows(accelerator: str, rates: list[float], concurrencies: list[float], model="meta-llama/Llama-3.3-70B-Instruct"):
    return pd.DataFrame([{
        "publisher": "test", "model": model, "accelerator": accelerator, "chips": 8, "concurrency": c,
        "input_length": 1000, "output_length": 1000, "precision": "bf16", "valid": True,
        "output_tokens_per_s_per_chip": r, "date": "2026-01-01", "reference": f"ref-{accelerator}-{c:g}",
    } for r, c in zip(rates, concurrencies)])


def _calibration(tpu_rows: int):
    gpu = _rows("H200", [20, 70, 120, 190, 260], [1, 4, 8, 16, 32])
    tpu = _rows("TPU v6e", [300, 450, 200][:tpu_rows], [64, 128, 32][:tpu_rows])
    return calibrate(pd.concat([gpu, tpu], ignore_index=True))


def _estimate(cal, spec: str, concurrency: float = 16):
    target = parse_target(spec, load_prices())
    shape = published_model("meta-llama/Llama-3.3-70B-Instruct")[1]
    point = Point(shape=shape, weight_bytes=2.0, kv_bytes=2.0, chips=target.chips, concurrency=concurrency,
                  input_len=1000, output_len=1000)
    return estimate(cal, target, chip(target.accelerator, "bf16"), point)


def test_estimate_carries_an_interval_from_the_leave_one_out_residuals():
    cal = _calibration(3)
    est = _estimate(cal, "H100:8")
    assert est.refused is None and est.label == "estimate"
    value, low, high = est.output_tokens_per_s_per_chip
    q, _, _ = cal.halfwidth("NVIDIA Hopper")
    assert q > 0
    assert (low, high) == pytest.approx((value * math.exp(-q), value * math.exp(q)))
    t, t_low, t_high = est.tpot_s                     # a time scales as 1 / efficiency
    assert (t_low, t_high) == pytest.approx((t * math.exp(-q), t * math.exp(q)))
    assert est.calibration_rows == 5 and est.calibration_chip_rows == 0   # Hopper rows, all H200
    assert all("ref-H200" in ref for ref in est.calibrated_by)


def test_a_family_with_fewer_than_three_rows_gets_no_estimate():
    est = _estimate(_calibration(MIN_ROWS - 1), "tpu-v6e-8")
    assert est.refused and "Google TPU has 2 calibration row(s)" in est.refused
    assert math.isnan(est.output_tokens_per_s_per_chip[0])
    assert _estimate(_calibration(MIN_ROWS), "tpu-v6e-8").refused is None


def test_rows_that_mean_another_system_are_counted_out():
    rows = _rows("H200", [20, 70], [1, 4])
    rows.loc[0, "spec_decoding"] = "mtp"
    rows.loc[1, "concurrency"] = float("nan")
    obs = observations(rows)
    assert len(obs.y) == 0
    assert obs.left_out == {"speculative decoding (not modelled)": 1, "no concurrency": 1}


def test_your_measured_generate_result_calibrates_its_family(tmp_path):
    from tpubench.estimate.calibration import measured_rows

    config = {"hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
              "head_dim": 64, "intermediate_size": 1536, "vocab_size": 8192}
    result = {"status": "ok", "validity": {"valid": True}, "device": "cuda", "started_at": "2026-12-01",
              "point": {"workload": "mine", "family": "qwen3", "model_config": config, "dtype": "bfloat16",
                        "batch_size": 8, "input_length": 128, "output_length": 32},
              "environment": {"accelerator_name": "NVIDIA H100 80GB HBM3", "chips": 1},
              "metrics": {"output_tokens_per_s": 2000.0}}
    (tmp_path / "r.json").write_text(json.dumps(result))
    (tmp_path / "cpu.json").write_text(json.dumps({**result, "status": "failed"}))
    rows = measured_rows([tmp_path])
    assert len(rows) == 1 and rows.loc[0, "accelerator"] == "H100"
    obs = observations(rows)
    assert len(obs.y) == 1 and obs.rows.loc[0, "source"] == "measured" and obs.families == ["NVIDIA Hopper"]


# --- the command -----------------------------------------------------------------------------------

def test_cli_json_is_labelled_estimate_and_names_its_calibration(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, "estimate", WORKLOAD, "--on", "H100:8", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["source"] == "estimate"
    rows = data["estimates"]
    assert rows and {r["source"] for r in rows} == {"estimate"}
    assert {r["concurrency"] for r in rows} == {1, 8, 32, 64}             # the workload's batch sizes
    hopper = data["calibration"]["families"]["NVIDIA Hopper"]
    assert hopper["rows"] >= MIN_ROWS and hopper["sources"]
    priced = [r for r in rows if r["plan"]]
    assert priced and all(r["blended_usd_per_mtok_low"] < r["blended_usd_per_mtok"] < r["blended_usd_per_mtok_high"]
                          for r in priced)


def test_cli_table_says_estimate_and_lists_sources(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, "estimate", WORKLOAD, "--on", "tpu-v6e-8", "--on", "trn2")
    assert code == 0, err
    assert "ESTIMATE (not measured" in out
    assert "estimate calibrated for Google TPU" in out and "estimate calibrated for AWS Trainium" in out


@pytest.mark.parametrize("bad", ["foo", "H100:0", "tpu-v7-8"])
def test_cli_bad_on_is_a_one_line_error_exit_2(monkeypatch, capsys, bad):
    code, out, err = run_cli(monkeypatch, capsys, "estimate", WORKLOAD, "--on", bad)
    assert code == 2
    assert err.strip().startswith("error: --on:") and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_parse_target_names():
    prices = load_prices()
    assert (parse_target("tpu-v6e-8", prices).accelerator, parse_target("tpu-v6e-8", prices).chips) == ("TPU v6e", 8)
    assert parse_target("v5p-8", prices).chips == 4                    # v5p slices count TensorCores
    assert (parse_target("trn2", prices).accelerator, parse_target("trn2", prices).chips) == ("Trainium2", 16)
    with pytest.raises(UserError):
        parse_target("", prices)
