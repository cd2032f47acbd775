"""`tpubench estimate`: the efficiency fit on hand-computed cases, the roofline of a published
DeepSeek-R1 row by hand, the leave-one-out check's honesty (the held-out row never shapes its own
estimate or interval), the refusal below 3 calibration rows, `--on` names, and the command's
labelled output, one-line errors and light imports."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers_cli import run_cli

from tpubench.errors import UserError
from tpubench.estimate.calibration import observations
from tpubench.estimate.chips import chip, parse_target
from tpubench.estimate.features import Point, kv_cache_bytes_per_chip, roofline
from tpubench.estimate.fit import conformal_halfwidth, fit_efficiency, loo_residuals
from tpubench.estimate.models import compute_precision, published_model
from tpubench.estimate.predict import MIN_ROWS, calibrate, estimate
from tpubench.estimate.validate import held_out
from tpubench.hardware.counts import decode_bytes_per_chip
from tpubench.money.pricing import load_prices

WORKLOAD = "workloads/qwen3_moe.yaml"
# The committed example results (examples/results/: a qwen3 point measured on a CPU).
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "results"


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


def test_leave_one_group_out_residuals_by_hand():
    # Intercept only, one family, groups {0, 1} and {2, 3}: each group is predicted by the other's mean.
    r = loo_residuals(np.ones((4, 1)), [0.0, 1.0, 2.0, 3.0], ["F"] * 4, groups=["a", "a", "b", "b"])
    assert r == pytest.approx([-2.5, -1.5, 1.5, 2.5])


def test_conformal_halfwidth_rank_and_small_sample_flag():
    assert conformal_halfwidth([-2, -2 / 3, 2 / 3, 2]) == (2.0, False)       # n=4 < 9: largest, below nominal
    assert conformal_halfwidth(np.arange(1, 10)) == (9.0, True)             # ceil(10 x 0.9) = 9th of 9
    assert conformal_halfwidth(np.arange(1, 20)) == (18.0, True)            # ceil(20 x 0.9) = 18th of 19


# --- roofline of one point -------------------------------------------------------------------------

def test_decode_roofline_is_the_bytes_one_chip_reads_over_its_bandwidth():
    shape = published_model("meta-llama/Llama-3.3-70B-Instruct")[1]
    point = Point(shape=shape, weight_bytes=2.0, kv_bytes=2.0, compute_precision="bf16", chips=8, concurrency=4,
                  input_len=1000, output_len=1000)
    roof = roofline(point, peak_flops=1e15, peak_bytes_per_s=1e12)
    # Llama 70B has 8 KV heads: on 8 chips each reads 1/8 of the cache, as hardware.counts says.
    chip_bytes = sum(decode_bytes_per_chip(shape, 4, lambda layer: layer.attended(1500), 2.0, 2.0, None, 8).values())
    assert roof.decode_bound == "memory"
    assert roof.decode_step_s == pytest.approx(chip_bytes / 1e12)
    # Prefill makes the first of the 1000 output tokens: 999 decode steps follow.
    assert roof.cycle_s == pytest.approx(roof.prefill_s + 999 * roof.decode_step_s)


def test_deepseek_r1_shape_has_latent_attention_and_its_published_size():
    shape = published_model("deepseek-ai/DeepSeek-R1-0528")[1]
    # DeepSeek-V3's report: 671B parameters (without the 14B MTP module), 37B activated per token.
    assert shape.total_params / 1e9 == pytest.approx(671.0, abs=0.1)
    assert shape.active_params / 1e9 == pytest.approx(36.6, abs=0.1)
    assert len(shape.moe_layers) == 61 - 3                                  # first_k_dense_replace = 3
    layer = shape.layers[-1]
    assert layer.kv_bytes_per_token(1) == 512 + 64                        # one latent + the rotary key
    assert layer.attention_flops_per_token(1) == 2 * 128 * (128 + 64 + 128)  # QK^T over 192, PV over 128


def test_a_cache_splits_by_kv_head_no_finer():
    llama = published_model("meta-llama/Llama-3.3-70B-Instruct")[1]          # 8 KV heads x 128, 80 layers
    whole = 80 * 2 * 8 * 128 * 2 * 1000 * 4                                   # K and V, bf16, 1000 tokens, batch 4
    assert kv_cache_bytes_per_chip(llama, 4, 1000, 2.0, 8) == pytest.approx(whole / 8)
    assert kv_cache_bytes_per_chip(llama, 4, 1000, 2.0, 16) == pytest.approx(whole / 8)   # a head on 2 chips
    r1 = published_model("deepseek-r1")[1]                                     # MLA: one latent, no heads to split
    assert kv_cache_bytes_per_chip(r1, 4, 1000, 2.0, 8) == pytest.approx(61 * (512 + 64) * 2 * 1000 * 4)


def test_deepseek_r1_on_8_h200_by_hand():
    """InferenceX's DeepSeek-R1-0528 fp8 row on 8 x H200 (SGLang, concurrency 64, 1024 in, 8192 out,
    255.02 output tokens/s per GPU; 2026-03-25), its roofline worked out from the config alone.

    DeepSeek-V3 config: hidden 7168, 61 layers (the first 3 dense), 128 heads, q_lora 1536,
    kv_lora 512, qk 128 + 64 rotary, v 128, dense MLP 18432, 256 routed experts of 2048 (8 per token)
    plus 1 shared, vocab 129280. H200: 4.8 TB/s, 1979 TFLOP/s dense fp8 (data/accelerators.csv)."""
    h, L, dense, moe = 7168, 61, 3, 58
    attn = h * 1536 + 1536 * 128 * 192 + h * (512 + 64) + 512 * 128 * (128 + 128) + 128 * 128 * h
    assert attn == 187_105_280
    dense_mlp, expert, router, lm_head = 3 * h * 18432, 3 * h * 2048, h * 256, 129280 * h
    # Weights one chip of 8 reads per step, fp8 (1 byte): attention, dense MLPs, shared experts and
    # lm_head split 8 ways; router, norms and the router's bias on every chip; the distinct experts
    # 64 tokens route to (uniform routing) split 8 ways; the 64 tokens' embedding rows.
    sharded = L * attn + dense * dense_mlp + moe * expert + lm_head
    replicated = moe * router + L * (1536 + 512 + 2 * h) + moe * 256 + h
    distinct = 256 * (1 - (1 - 8 / 256) ** 64)
    assert distinct == pytest.approx(222.4, abs=0.1)
    weights = sharded / 8 + replicated + moe * distinct * expert / 8 + 64 * h
    # The MLA cache (512 latent + 64 rotary, bf16) at the mean context 1024 + 8192 / 2, read whole
    # by every chip (no KV heads to split).
    context = 1024 + 8192 / 2
    kv = L * (512 + 64) * 2 * context * 64
    step_bytes = weights + kv
    assert step_bytes / 1e9 == pytest.approx(96.17, abs=0.01)   # 2.0 + 0.1 + 71.0 experts + 23.0 cache
    # FLOPs: 2 x active weights (top-8 + shared experts, lm_head) + attention, QK^T over 192 dims
    # and PV over 128 per head and attended token.
    active = L * attn + dense * dense_mlp + moe * (expert + router + 8 * expert)
    assert (active + lm_head) / 1e9 == pytest.approx(36.6, abs=0.05)   # DeepSeek-V3's "37B activated"
    per_key = 2 * 128 * (192 + 128)
    step_flops = 64 * (2 * (active + lm_head) + L * per_key * context)
    prefill_flops = 64 * (2 * active * 1024 + L * per_key * 1024 * 1025 / 2 + 2 * lm_head)
    bw, fp8 = 4.8e12, 1.979e15
    step_s = max(step_flops / 8 / fp8, step_bytes / bw)
    prefill_s = max(prefill_flops / 8 / fp8, (sharded / 8 + replicated + moe * 256 * expert / 8) / bw)
    assert step_s == pytest.approx(step_bytes / bw)                           # decode: memory-bound
    assert prefill_s == pytest.approx(prefill_flops / 8 / fp8)                # prefill: compute-bound
    observed = 64 * 8192 / (255.02 * 8)                                       # one cycle, Little's law
    efficiency = (prefill_s + 8191 * step_s) / observed                      # prefill made token 1

    spec = chip("H200", compute_precision("fp8"))
    assert (spec.peak_bytes_per_s, spec.peak_flops) == (bw, fp8)
    row = {"publisher": "InferenceX (SemiAnalysis)", "model": "deepseek-ai/DeepSeek-R1-0528", "accelerator": "H200",
           "chips": 8, "concurrency": 64, "input_length": 1024, "output_length": 8192, "precision": "fp8",
           "output_tokens_per_s_per_chip": 255.02, "date": "2026-03-25", "reference": "inferencex"}
    obs = observations(pd.DataFrame([row]))
    roof = roofline(obs.points[0], spec.peak_flops, spec.peak_bytes_per_s)
    assert roof.decode_step_s == pytest.approx(step_s, rel=1e-9)
    assert roof.prefill_s == pytest.approx(prefill_s, rel=1e-9)
    assert obs.rows.loc[0, "efficiency"] == pytest.approx(efficiency, rel=1e-9)
    assert efficiency == pytest.approx(0.64, abs=0.01)


def test_weight_only_quantisation_runs_at_the_bf16_peak():
    assert compute_precision("int8 weights") == "bf16" and compute_precision("W4A16") == "bf16"
    assert chip("H100", compute_precision("int8 weights")).peak_flops == chip("H100", "bf16").peak_flops
    assert chip("H100", compute_precision("fp8")).peak_flops > chip("H100", "bf16").peak_flops


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
    point = Point(shape=shape, weight_bytes=2.0, kv_bytes=2.0, compute_precision="bf16", chips=target.chips,
                  concurrency=concurrency, input_len=1000, output_len=1000)
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


def test_leave_one_out_never_lets_the_held_out_row_shape_its_estimate_or_interval():
    rows = pd.concat([_rows("H200", [20, 70, 120, 190, 260], [1, 4, 8, 16, 32]),
                      _rows("TPU v6e", [300, 450, 200], [64, 128, 32])], ignore_index=True)
    rows["publisher"] = [f"publisher {i}" for i in range(len(rows))]   # every row a sweep of its own
    before = held_out(observations(rows))
    moved = rows.copy()
    moved.loc[2, "output_tokens_per_s_per_chip"] /= 5    # the held-out row changes (x5 would beat its roofline)...
    after = held_out(observations(moved))
    # ...its own estimate and interval do not (every other row's do: it is in their calibration).
    assert after.loc[2, "estimated"] == pytest.approx(before.loc[2, "estimated"])
    assert after.loc[2, "interval_factor"] == pytest.approx(before.loc[2, "interval_factor"])
    assert after.loc[0, "estimated"] != pytest.approx(before.loc[0, "estimated"])
    # And it is what the command would say with the row removed from its calibration rows.
    alone = calibrate(rows.drop(index=2))
    target = parse_target("H200:8", load_prices())
    est = estimate(alone, target, chip("H200", "bf16"), observations(rows).points[2])
    value, low, high = est.output_tokens_per_s_per_chip
    assert before.loc[2, "estimated"] == pytest.approx(value)
    assert before.loc[2, "covered"] == (low <= 120 <= high)


def test_holding_out_a_family_s_only_sweep_is_refused_not_guessed():
    rows = pd.concat([_rows("H200", [20, 70, 120, 190, 260], [1, 4, 8, 16, 32]),
                      _rows("TPU v6e", [300, 450, 200], [64, 128, 32])], ignore_index=True)
    per_row = held_out(observations(rows), by="sweep")
    assert (per_row["refused"] != "").all()                              # each family is one sweep
    assert per_row["refused"].str.contains("0 calibration row").all()


def test_rows_that_mean_another_system_are_counted_out():
    rows = _rows("H200", [20, 70], [1, 4])
    rows.loc[0, "spec_decoding"] = "mtp"
    rows.loc[1, "concurrency"] = float("nan")
    obs = observations(rows)
    assert len(obs.y) == 0
    assert obs.left_out == {"speculative decoding (not modelled)": 1, "no concurrency": 1}


def test_your_measured_generate_result_calibrates_its_family(tmp_path):
    from tpubench.estimate.calibration import measured_rows

    # A real result file of this repository (a qwen3 point measured on a CPU), as if run on one H100.
    result = json.loads(sorted(EXAMPLES.glob("qwen3_dense_small_cpu_b8-*.json"))[0].read_text())
    result.update(device="cuda", environment={**result["environment"], "accelerator_name": "NVIDIA H100 80GB HBM3",
                                              "chips": 1})
    result["metrics"]["output_tokens_per_s"] = 2000.0
    (tmp_path / "r.json").write_text(json.dumps(result))
    (tmp_path / "failed.json").write_text(json.dumps({**result, "status": "failed", "error": "x"}))
    (tmp_path / "estimate.json").write_text(json.dumps({"source": "estimate", "estimates": []}))
    rows = measured_rows([tmp_path])
    assert len(rows) == 1 and rows.loc[0, "accelerator"] == "H100" and rows.loc[0, "concurrency"] == 8
    obs = observations(rows)
    assert len(obs.y) == 1 and obs.rows.loc[0, "source"] == "measured" and obs.families == ["NVIDIA Hopper"]
    assert obs.points[0].kv_bytes == 4.0 and obs.points[0].weight_bytes == 4.0     # the small scale is float32


def test_the_same_rows_are_calibrated_once_and_other_rows_again():
    from tpubench.estimate.command import calibration
    from tpubench.output.published.store import shipped_published

    published = shipped_published().iloc[:60]
    made = calibration(published)
    assert len(made.obs.y) >= 2 and calibration(published.copy()) is made      # the same rows, another frame
    changed = published.copy()
    changed["output_tokens_per_s_per_chip"] *= 2
    other = calibration(changed)
    assert other is not made and other.fit.pooled[0] == pytest.approx(made.fit.pooled[0] + math.log(2))


def test_pricing_is_the_measured_rows_arithmetic_by_hand():
    from tpubench.estimate.predict import Estimate
    from tpubench.estimate.pricing import priced

    est = Estimate(target="H100:8", accelerator="H100", family="NVIDIA Hopper", chips=8, concurrency=8,
                   input_length=1000, output_length=100, calibration_rows=9, calibration_chip_rows=0,
                   calibrated_by=(), output_tokens_per_s_per_chip=(500.0, 250.0, 1000.0),
                   input_chip_s_per_token=(1e-4, 5e-5, 2e-4), output_chip_s_per_token=(2e-3, 1e-3, 4e-3),
                   blended_chip_s_per_token=(3e-4, 1.5e-4, 6e-4))
    price = pd.Series({"plan": "on_demand", "cloud": "aws", "region": "us-east-1", "instance_type": "p5.48xlarge",
                       "usd_per_chip_hour": 3.6, "as_of": "2026-01-01"})
    out = priced(est, price)
    # 3.6 $/chip-hour = 0.001 $/chip-second: $/Mtok = chip-seconds per token x 0.001 x 1e6.
    assert (out["blended_usd_per_mtok"], out["blended_usd_per_mtok_low"], out["blended_usd_per_mtok_high"]) == \
        pytest.approx((0.3, 0.15, 0.6))
    assert out["input_usd_per_mtok"] == pytest.approx(0.1) and out["output_usd_per_mtok"] == pytest.approx(2.0)
    # InferenceX-style: the whole chip-hour over one chip's output tokens, 3.6 / (500 x 3600) x 1e6;
    # the slow end of the throughput interval is the dear end of the cost.
    assert (out["inferencex_usd_per_mtok"], out["inferencex_usd_per_mtok_low"], out["inferencex_usd_per_mtok_high"]) == \
        pytest.approx((2.0, 1.0, 4.0))


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


def test_cli_table_says_estimate_and_sums_up_its_sources_in_one_line(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, "estimate", WORKLOAD, "--on", "tpu-v6e-8", "--on", "trn2")
    assert code == 0, err
    assert "ESTIMATE (not measured" in out
    cited = [line for line in out.splitlines() if "source(s)" in line]
    assert len(cited) == 1 and cited[0].startswith("estimate calibrated on ")
    assert "Google TPU row(s) from" in cited[0] and "AWS Trainium/Inferentia row(s) from" in cited[0]
    assert "listed by --sources FILE or --format json" in cited[0]
    assert "tpu-recipes" not in out and "sglang-jax" not in out           # no citation on the terminal


@pytest.mark.parametrize("name", ["sources.md", "sources.json"])
def test_cli_sources_file_lists_every_calibration_row(monkeypatch, capsys, tmp_path, name):
    path = tmp_path / name
    code, out, err = run_cli(monkeypatch, capsys, "estimate", WORKLOAD, "--on", "tpu-v6e-8", "--sources", str(path))
    assert code == 0, err
    assert f"listed in {path}" in out and f"wrote the estimate's calibration rows to {path}" in err
    code, as_json, _ = run_cli(monkeypatch, capsys, "estimate", WORKLOAD, "--on", "tpu-v6e-8", "--format", "json")
    data = json.loads(as_json)
    tpu_rows = next(r for r in data["estimates"] if r["chip_family"] == "Google TPU")["calibrated_by"].split(" | ")
    families = data["calibration"]["families"]
    text = path.read_text()
    if name.endswith(".json"):
        written = json.loads(text)["families"]
        assert written["Google TPU"]["calibration_rows"] == tpu_rows
        assert written["Google TPU"]["sources"] == families["Google TPU"]["sources"]
    else:
        assert all(f"- {row}" in text for row in tpu_rows) and all(f"- {s}" in text for s in families["Google TPU"]["sources"])
    assert len(tpu_rows) == families["Google TPU"]["rows"] > 10


def test_cli_csv_counts_sources_instead_of_listing_them(monkeypatch, capsys):
    import io

    code, out, err = run_cli(monkeypatch, capsys, "estimate", WORKLOAD, "--on", "H100:8", "--format", "csv")
    assert code == 0, err
    table = pd.read_csv(io.StringIO(out))
    assert "calibrated_by" not in table and (table["calibration_sources"] > 1).all()
    assert max(map(len, out.splitlines())) < 2000


@pytest.mark.parametrize("bad", ["foo", "H100:0", "tpu-v7-8", "H100-8", "v5p-3", "gb200"])
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
    named = {spec: (t.accelerator, t.chips) for spec in ("v6e-8", "H100:8", "trn2.48xlarge", "tpu7x-8", "ironwood",
                                                          "GB200:4", "p5.48xlarge", "H100 80GB")
             for t in [parse_target(spec, prices)]}
    assert named == {"v6e-8": ("TPU v6e", 8), "H100:8": ("H100", 8), "trn2.48xlarge": ("Trainium2", 16),
                     "tpu7x-8": ("TPU7x", 4),                             # TPU7x names count TensorCores
                     "ironwood": ("TPU7x", 4), "GB200:4": ("GB200", 4), "p5.48xlarge": ("H100", 8),
                     "H100 80GB": ("H100", 8)}
    assert parse_target("trn2.48xlarge", prices).instance_type == "trn2.48xlarge"   # priced on its own rows
    with pytest.raises(UserError):
        parse_target("", prices)


def test_estimates_never_enter_measured_or_published_tables(monkeypatch, capsys, tmp_path):
    import tpubench
    from tpubench.output.published.store import read_published

    code, out, _ = run_cli(monkeypatch, capsys, "estimate", WORKLOAD, "--on", "H100:8", "--format", "json")
    assert code == 0
    (tmp_path / "published").mkdir()
    (tmp_path / "estimate.json").write_text(out)
    code, out, _ = run_cli(monkeypatch, capsys, "estimate", WORKLOAD, "--on", "H100:8", "--format", "csv")
    assert code == 0 and out.startswith("source,") and out.splitlines()[1].startswith("estimate,")
    (tmp_path / "published" / "estimate.csv").write_text(out)   # even saved where imports live
    with pytest.warns(UserWarning, match="estimate.json"):
        assert tpubench.load_results(tmp_path).empty
    assert read_published([tmp_path]).empty


@pytest.mark.slow   # the estimate CLI in a fresh Python process
def test_the_estimate_imports_no_torch_jax_or_transformers():
    import subprocess
    import sys

    code = ("import sys; from tpubench.cli import app; from typer.testing import CliRunner; "
            f"r = CliRunner().invoke(app, ['estimate', '{WORKLOAD}', '--on', 'H100:8', '-f', 'json']); "
            "assert r.exit_code == 0, r.output; "
            "print(sorted(m for m in ('torch', 'jax', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"
