"""Scenario diffuse without building a model: stages that sum to the call, the per-image figures and
their cost ($ per 1,000 images) by hand, the report's diffusion section, placement warnings,
numerics parity of tensor fingerprints, and bad workload values as one-line errors."""

from __future__ import annotations

import math
import warnings
from datetime import date
from pathlib import Path

import pandas as pd
import pytest
from helpers_cli import run_cli
from helpers_synthetic import results_frame as frame

from tpubench.errors import UserError
from tpubench.measure.numerics import compare_numerics
from tpubench.money import cost, pricing
from tpubench.output.report import build_report, render
from tpubench.records.result import RunResult
from tpubench.run.workload import load_workload
from tpubench.scenarios.diffuse.cost import chip_seconds
from tpubench.scenarios.diffuse.metrics import call_metrics, placement_warnings
from tpubench.scenarios.diffuse.stages import CallTimes, stages_from_marks
from tpubench.scenarios.diffuse.unit import IMAGES
from tpubench.scenarios.registry import SCENARIOS

TODAY = date(2026, 12, 2)
H100 = "NVIDIA H100 80GB HBM3"
PRICE_CSV = """cloud,region,instance_type,accelerator,chips_per_instance,on_demand,spot,commit_1y,commit_3y,source,as_of
testcloud,r1,h100x4,H100,4,32.0,16.0,,,hand-made test price,2026-12-01
"""


# ----------------------------------------------------------------------------- stages and figures


def test_stages_are_the_gaps_between_marks_and_sum_to_the_call():
    marks = {"start": 10.0, "encode_start": 10.5, "encode_end": 11.0, "first_step_start": 11.25,
             "step_end": [12.0, 12.5, 13.5], "decode_start": 13.75, "decode_end": 14.5, "end": 15.0}
    t = stages_from_marks(marks)
    assert t.whole_s == 5.0
    assert t.text_encode_s == 0.5
    assert t.prepare_s == 0.5 + 0.25            # before the encoders, and between them and step 1
    assert t.step_s == [0.75, 0.5, 1.0]
    assert t.vae_decode_s == 0.75
    assert t.postprocess_s == 0.25 + 0.5        # unpacking latents before decode, images after
    assert t.stage_sum_s() == pytest.approx(t.whole_s, abs=1e-12)


def _call(whole, steps=(0.2, 0.2), text=0.1, vae=0.3):
    rest = whole - text - sum(steps) - vae
    return CallTimes(whole_s=whole, text_encode_s=text, prepare_s=rest / 2, step_s=list(steps), vae_decode_s=vae,
                     postprocess_s=rest / 2)


def test_call_metrics_by_hand():
    # Two images per call, calls of 1.0 and 1.2 s: 0.5 and 0.6 s per image, mean 0.55 s,
    # images/s = 1 / 0.55 = 1.8182; over 4 chips 0.4545 per chip. Steps all 0.2 s; 1e12 FLOPs per
    # step at 0.2 s = 5e12 FLOP/s, against a 1e13 peak: MFU 0.5.
    calls = [_call(1.0), _call(1.2)]
    m, exceeds = call_metrics(calls, 2, chips=4, flops_per_step=1e12, peak_flops=1e13)
    assert m["image_mean_s"] == pytest.approx(0.55) and m["image_p50_s"] == pytest.approx(0.55)
    assert m["images_per_s"] == pytest.approx(1 / 0.55)
    assert m["images_per_s_per_chip"] == pytest.approx(1 / 0.55 / 4)
    # t(0.975, 1) = 12.706; stdev of (0.5, 0.6) = 0.070711; half-width = 12.706 * 0.070711 / sqrt(2) = 0.6353,
    # 1.1551 of the mean, taken in log space: 0.55 * exp(-/+1.1551) = 0.17327 .. 1.7459 s (never below zero)
    assert m["image_ci95_high_s"] == pytest.approx(0.55 * math.exp(0.6353 / 0.55), rel=1e-3)
    assert m["image_ci95_low_s"] == pytest.approx(0.55 * math.exp(-0.6353 / 0.55), rel=1e-3)
    assert m["images_per_s_ci95_low"] == pytest.approx(1 / 1.7459, rel=1e-3)
    assert m["images_per_s_ci95_high"] == pytest.approx(1 / 0.17327, rel=1e-3)
    stages = sum(m[f"{s}_s_per_image"] for s in ("text_encode", "prepare", "denoise", "vae_decode", "postprocess"))
    assert stages == pytest.approx(m["image_mean_s"])
    assert m["denoise_s_per_image"] == pytest.approx(0.4 / 2)
    assert m["denoise_step_p50_s"] == pytest.approx(0.2)
    assert m["denoise_mfu"] == pytest.approx(0.5) and not exceeds
    # A user waits for the whole call (its images arrive together): calls of 1.0 and 1.2 s.
    assert m["call_p99_s"] == pytest.approx(1.0 + 0.99 * 0.2) == pytest.approx(2 * m["image_p99_s"])
    _, exceeds = call_metrics(calls, 2, chips=4, flops_per_step=1e12, peak_flops=1e12, peak_tolerance=1.0)
    assert exceeds   # 5x the peak: a timing bug


def test_a_component_on_the_host_is_a_warning_only_beside_an_accelerator():
    split = {"transformer": "cuda:0", "vae": "cuda:0", "text_encoder": "cpu", "text_encoder_2": "cpu"}
    (warning,) = placement_warnings(split, "cuda")
    assert warning.startswith("text encoders on CPU: cost per image includes host time")
    assert placement_warnings({k: "cuda:0" for k in split}, "cuda") == []
    assert placement_warnings({k: "cpu" for k in split}, "cpu") == []
    (vae,) = placement_warnings({**split, "text_encoder": "cuda:0", "text_encoder_2": "cuda:0", "vae": "cpu"}, "cuda")
    assert vae.startswith("vae on CPU")


# ----------------------------------------------------------------------------- cost


def make_image_result(*, chips=2, image_s=0.5, rel=0.1, warnings=(), file_seed=0, valid=True) -> RunResult:
    point = {"workload": "flux_diffuse", "scale": "full", "family": "flux", "hub_id": None, "weights": "random",
             "trust_remote_code": False, "dtype": "bfloat16", "experts_implementation": None, "model_config": {},
             "batch_size": 4, "input_length": 1, "output_length": None, "execution_mode": "eager",
             "scenario_kind": "diffuse", "params": {"resolution": 1024, "steps": 28}, "compile_options": {},
             "measurement": {"seed": file_seed}}
    metrics = {"image_s_per_image": image_s, "image_s_per_image_ci95_low": image_s * (1 - rel),
               "image_s_per_image_ci95_high": image_s * (1 + rel), "image_mean_s": image_s, "image_p50_s": image_s,
               "image_p99_s": image_s * 1.2, "call_p50_s": image_s * 4, "call_p99_s": image_s * 1.2 * 4,   # 4 a call
               "images_per_s": 1 / image_s, "images_per_s_ci95_low": 1 / (image_s * (1 + rel)),
               "images_per_s_ci95_high": 1 / (image_s * (1 - rel)), "text_encode_s_per_image": 0.05,
               "denoise_s_per_image": image_s - 0.15, "vae_decode_s_per_image": 0.1, "denoise_step_p50_s": 0.01,
               "denoise_mfu": 0.3, "resolution_px": 1024, "denoise_steps": 28}
    return RunResult(workload_file="workloads/flux_diffuse.yaml", point=point, point_key=f"img-{chips}-{image_s}-{file_seed}",
                     backend="torch", device="cuda", environment={"accelerator_name": H100, "chips": chips,
                                                                  "hostname": "h", "torch": "2.13"},
                     started_at="2026-12-01T00:00:00+00:00", metrics=metrics, warnings=list(warnings),
                     validity={"valid": valid, "reasons": [] if valid else ["1 recompilation(s) during the timed phase"]})


@pytest.fixture(scope="module")
def prices(tmp_path_factory):
    path = tmp_path_factory.mktemp("prices") / "prices.csv"
    path.write_text(PRICE_CSV, encoding="utf-8")
    return pricing.load_prices([path], shipped=False, today=TODAY)


def test_chip_seconds_per_image_is_seconds_per_image_times_chips():
    out = chip_seconds(frame(make_image_result(chips=2, image_s=0.5)))
    assert out["image_chip_s_per_image"].iloc[0] == pytest.approx(1.0)
    assert out["image_chip_s_per_image_ci95_low"].iloc[0] == pytest.approx(0.9)
    assert out["image_chip_s_per_image_ci95_high"].iloc[0] == pytest.approx(1.1)


def test_an_image_row_is_priced_per_thousand_images(prices):
    # 0.5 s per image on 2 H100s: 1 chip-s per image; at 8 $/chip-h (32 $/h for 4 chips)
    # 1 * 8/3600 * 1000 = 2.2222 $ per 1,000 images; spot (4 $/chip-h) half that.
    priced, unpriced = cost.price_results(frame(make_image_result()), prices, today=TODAY)
    assert unpriced.empty
    row = priced[priced["plan"] == "on_demand"].iloc[0]
    assert row["image_usd_per_kimage"] == pytest.approx(8 / 3600 * 1000)
    assert row["image_usd_per_kimage_ci95_low"] == pytest.approx(0.9 * 8 / 3600 * 1000)
    assert row["images_per_s_per_chip"] == pytest.approx(2 / 2)
    assert priced[priced["plan"] == "spot"].iloc[0]["image_usd_per_kimage"] == pytest.approx(4 / 3600 * 1000)
    # An image row has no per-token cost, and is never read as one.
    for column in ("blended_usd_per_mtok", "train_usd_per_mtok", "output_tokens_per_s_per_chip"):
        assert math.isnan(row[column]), column
    assert cost.unit_rows(priced, IMAGES).all() and (cost.unit_keys(priced) == "image").all()


def test_pricing_image_rows_adds_columns_at_once(prices, tmp_path):
    # A frame grown column by column warns "DataFrame is highly fragmented" (and slows what follows):
    # cost.py adds its columns together (cost.with_columns). Results as read from files.
    from tpubench import load_results
    from tpubench.records.result import write_result

    for i in range(3):
        write_result(make_image_result(image_s=0.1 * (i + 1), file_seed=i), tmp_path)
    results = load_results([tmp_path])
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.PerformanceWarning)
        priced, _ = cost.price_results(results, prices, today=TODAY)
    assert len(priced) == 6


def test_report_has_a_diffusion_section_with_stages_and_placement(prices):
    split = "text encoders on CPU: cost per image includes host time (text_encoder ran on the host, the rest on cuda)"
    results = frame(make_image_result(image_s=0.5, warnings=[split]), make_image_result(image_s=1.0, chips=1, file_seed=1))
    data = build_report(results, prices=prices, today=TODAY)
    assert data.summary.empty and len(data.summary_of(IMAGES)) == 2   # one per plan: the cheapest point
    text = render(data, "markdown")
    assert "## Images, flux_diffuse" in text and "$/1k images" in text
    assert "2.22" in text                                  # 1 chip-s per image at 8 $/chip-h
    assert "text encoders on CPU: cost per image includes host time" in text
    assert "Pareto front" in text
    assert "No result could be priced" not in text
    assert "Images, flux_diffuse" in render(data, "html")


def test_energy_per_image_is_priced_like_energy_per_token(prices):
    # 2 chips drew 150 W each over a 4 s window: 150 J per chip-second; 1 chip-s per image (0.9..1.1)
    # -> 150 J per image (135..165), shown in the diffusion section, marked modelled.
    result = make_image_result()
    result.metrics.update(energy_j=2 * 150.0 * 4, energy_window_s=4.0, joules_per_image=150.0)
    result.energy = {"method": "modelled", "valid": True}
    priced, _ = cost.price_results(frame(result), prices, today=TODAY)
    row = priced[priced["plan"] == "on_demand"].iloc[0]
    assert row["image_j_per_image"] == pytest.approx(150.0)
    assert (row["image_j_per_image_ci95_low"], row["image_j_per_image_ci95_high"]) == pytest.approx((135.0, 165.0))
    assert math.isnan(row["blended_j_per_token"])
    text = render(build_report(frame(result), prices=prices, today=TODAY), "markdown")
    assert "150 (135–165) (modelled)" in text
    # Without energy the column says so.
    text = render(build_report(frame(make_image_result()), prices=prices, today=TODAY), "markdown")
    assert "| J/image |" in text and "–" in text


def test_pareto_keeps_points_no_other_beats_on_both():
    from tpubench.output.report.images import pareto

    # One chip each. a: 1 image per 0.5 s call (2 images/s); b: 4 images per 1.6 s call (2.5
    # images/s, but a user waits 1.6 s); c: 3 images per 2.5 s call (1.2 images/s). Per image, b
    # (0.4 s) would beat a (0.5 s) on both and leave a off the front; per call a is the quick one.
    # c: a slower call than b and fewer images/s.
    rows = pd.DataFrame({"file": list("abca"), "workload": "w", "scale": "s", "valid": True,
                         "images_per_s_per_chip": [2.0, 2.5, 1.2, 2.0], "image_p50_s": [0.5, 0.4, 2.5 / 3, 0.5],
                         "call_p50_s": [0.5, 1.6, 2.5, 0.5], "image_usd_per_kimage": [3.0, 1.0, 1.0, 2.0]})
    front = pareto(rows)
    assert list(front["file"]) == ["a", "b"]
    assert list(front["image_usd_per_kimage"]) == [2.0, 1.0]   # a's cheaper price row of its two


# ----------------------------------------------------------------------------- numerics


def _fingerprinted(sample, dtype="float32", steps=4):
    r = make_image_result()
    r.point = {**r.point, "dtype": dtype, "params": {"steps": steps}}
    r.numerics = {"weights_identical_across_devices": True,
                  "tensors": {"final_latents": {"shape": [1, 4], "sample_ids": [0, 1, 2, 3], "sample": sample,
                                                "std": 1.0}}}
    return r


def test_tensor_fingerprints_agree_within_the_dtype_tolerance():
    a = _fingerprinted([0.1, 0.2, 0.3, 0.4])
    assert compare_numerics(a, _fingerprinted([0.1, 0.2, 0.3, 0.4005])).verdict == "agree"     # < 1e-3
    assert compare_numerics(a, _fingerprinted([0.1, 0.2, 0.3, 0.41])).verdict == "disagree"
    # bfloat16: a quarter of the tensor's spread (std 1.0).
    assert compare_numerics(_fingerprinted([0.1, 0.2, 0.3, 0.4], "bfloat16"),
                            _fingerprinted([0.1, 0.2, 0.3, 0.6], "bfloat16")).verdict == "agree"
    assert compare_numerics(a, _fingerprinted([0.1, 0.2, 0.3, 0.4], steps=8)).verdict == "not comparable"


# ----------------------------------------------------------------------------- the workload

SMALL = """name: tiny_flux
scales:
  small:
    dtype: float32
    config: {preset: small, resolution: 32, steps: 2}
scenario:
  kind: diffuse
  pipeline: flux
  resolution: 1024
  steps: 28
"""


def test_shipped_workloads_resolve_their_small_scales():
    for name in ("flux", "sd3", "sdxl"):
        w = load_workload(Path("workloads") / f"{name}_diffuse.yaml")
        scenario = SCENARIOS["diffuse"]
        (point, *_) = scenario.points(w, "small", scenario.sweep_axes(w, "small"), "x")
        assert point.family == name and point.params["resolution"] == 64 and point.dtype == "float32"
        assert point.scenario_kind == "diffuse" and point.batch_size == 2
    flux = load_workload("workloads/flux_diffuse.yaml")
    full = SCENARIOS["diffuse"].points(flux, "full", SCENARIOS["diffuse"].sweep_axes(flux, "full"), "x")
    assert [p.batch_size for p in full] == [1, 4]
    assert full[0].model_config["transformer"]["num_layers"] == 19   # FLUX.1-dev written out


@pytest.mark.parametrize("edit, field, words", [
    (("steps: 2}", "steps: 2, transformer: {num_layer: 2}}"), "scales.small.config.transformer.num_layer",
     "did you mean 'num_layers'"),
    (("steps: 2}", "steps: 2, unet: {}}"), "scales.small.config.unet", "unknown key 'unet'"),
    (("resolution: 32", "resolution: 30"), "scales.small.config.resolution", "not a multiple of 4"),
    (("steps: 28", "steps: 28\n  scheduler: dpmpp_2m"), "scenario.scheduler", "does not fit flux"),
    (("steps: 2}", "steps: 2, vae: {latent_channels: 8}}"), "scales.small.config", "in_channels is 16"),
    (("preset: small", "preset: tiny"), "scales.small.config.preset", "preset is one of"),
    (("pipeline: flux", "pipeline: dalle"), "scenario.pipeline", "flux"),
    (("steps: 28", "steps: 0"), "scenario.steps", "greater than 0"),
    (("steps: 2}", "steps: 2, max_sequence_length: [64, 128]}"), "scales.small.config.max_sequence_length",
     "expected a positive integer"),
])
def test_bad_values_are_one_line_errors_naming_file_line_and_field(tmp_path, edit, field, words):
    path = tmp_path / "w.yaml"
    path.write_text(SMALL.replace(*edit), encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_workload(path)
    line = err.value.one_line()
    assert "\n" not in line and f"{path}:" in line and field in line and words in line, line


def test_validate_exits_2_on_a_bad_value(tmp_path, monkeypatch, capsys):
    path = tmp_path / "w.yaml"
    path.write_text(SMALL.replace("resolution: 32", "resolution: 30"), encoding="utf-8")
    code, out, err = run_cli(monkeypatch, capsys, "validate", str(path))
    assert code == 2 and "Traceback" not in out + err and "multiple of 4" in out + err


def test_the_run_cost_table_after_a_diffuse_run_prices_images_at_the_cheapest_instance(tmp_path):
    """`tpubench run` of a diffuse workload printed the per-token table: dashes for every $/Mtok, and
    an instance picked by a NaN sort (not the cheapest: $2.48 against $1.91 per 1,000 images). It
    now prints $ per 1,000 images, the cheapest priced instance per plan."""
    from io import StringIO

    from rich.console import Console

    from tpubench.console import render_run_cost
    from tpubench.records.result import write_result

    path = write_result(make_image_result(chips=1, image_s=0.5, rel=0.1), tmp_path)
    buffer = StringIO()
    render_run_cost(Console(file=buffer, width=300), [path])
    text = buffer.getvalue()
    assert "cost per 1,000 images" in text and "$/Mtok" not in text
    # By hand: the cheapest on-demand H100 chip-hour in the shipped table, times 0.5 chip-seconds per
    # image, over 3600 s, times 1,000 images.
    prices = pricing.load_prices()
    h100 = prices[(prices["accelerator"] == "H100") & (prices["plan"] == "on_demand") & ~prices["flagged"]]
    best = h100.loc[h100["usd_per_chip_hour"].idxmin()]
    on_demand = next(line for line in text.splitlines() if "on-demand" in line)
    assert f"{best['region']} {best['instance_type']}" in on_demand
    assert f"${best['usd_per_chip_hour'] * 0.5 / 3.6:.4f}" in on_demand
