"""Scenario diffuse on tiny random pipelines on the CPU: a Flux-architecture pipeline end to end
through the CLI (result file, stages summing to the whole, a cost row, the report's section,
numerics parity between two runs, energy per image from a modelled chip power, a profiled call), and the SD3 and
SDXL small scales building and drawing."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from helpers_cli import run_cli

pytestmark = pytest.mark.slow

TINY_FLUX = """name: tiny_flux
scales:
  small:
    dtype: float32
    config: {preset: small, resolution: 32, steps: 2}
    scenario: {batch_size: 2}
scenario: {kind: diffuse, pipeline: flux, resolution: 1024, steps: 28, prompt_words: 6}
measurement: {warmup: 1, min_iterations: 3, min_seconds: 0, max_seconds: 60, target_ci: null}
"""


def _results(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.rglob("*.json"))]


CHIP_POWER_W = 50.0


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Run `a` without energy; run `b` with a modelled 50 W per chip (no host sensor is looked
    for, so the figure is the model's on any machine) and --profile."""
    root = tmp_path_factory.mktemp("diffuse")
    workload = root / "tiny_flux.yaml"
    workload.write_text(TINY_FLUX, encoding="utf-8")
    mp = pytest.MonkeyPatch()
    try:
        import sys

        from tpubench.cli import main
        from tpubench.run import runner

        find = runner.find_source
        mp.setattr(runner, "find_source", lambda *a, **k: find(*a, **k, powercap_root=root / "no-powercap"))
        outs = []
        for name, energy in (("a", ["--no-energy"]), ("b", ["--chip-power-w", str(CHIP_POWER_W), "--profile"])):
            out = root / name
            mp.setattr(sys, "argv", ["tpubench", "run", str(workload), "--backend", "torch", "--device", "cpu",
                                     "--scale", "small", "--out", str(out), *energy])
            try:
                main()
            except SystemExit as exc:
                assert exc.code in (0, None), exc.code
            outs.append(out)
    finally:
        mp.undo()
    return outs


def test_flux_end_to_end_result_stages_and_cost(two_runs):
    (result,) = _results(two_runs[0])
    assert result["status"] == "ok" and result["point"]["scenario_kind"] == "diffuse"
    s, m = result["samples"], result["metrics"]
    assert len(s["call_s"]) >= 3 and len(s["denoise_step_s"]) == 2 * len(s["call_s"])
    for i, whole in enumerate(s["call_s"]):   # the fenced stages add up to the whole call
        parts = (s["text_encode_s"][i] + s["prepare_s"][i] + s["denoise_s"][i] + s["vae_decode_s"][i]
                 + s["postprocess_s"][i])
        assert parts == pytest.approx(whole, abs=1e-6)
        assert s["denoise_s"][i] == pytest.approx(sum(s["denoise_step_s"][2 * i:2 * i + 2]), abs=1e-9)
    assert m["image_mean_s"] == pytest.approx(sum(s["call_s"]) / len(s["call_s"]) / 2)
    assert m["images_per_s"] > 0 and m["flops_per_denoise_step"] > 0 and m["peak_memory_bytes"] > 0
    assert result["diffusion"]["placement"] == {"transformer": "cpu", "vae": "cpu", "text_encoder": "cpu",
                                                "text_encoder_2": "cpu"}
    assert set(result["numerics"]["tensors"]) == {"first_step_noise_pred", "final_latents"}
    t = result["timing"]
    assert t["load_s"] > 0 and t["cold_start_s"] == pytest.approx(t["load_s"] + t["first_iteration_s"])

    from tpubench.money import cost, pricing
    from tpubench.output.frames import load_results

    rows = load_results([two_runs[0]])
    priced, unpriced = cost.price_results(rows, pricing.load_prices([]))
    assert unpriced.empty and priced["image_usd_per_kimage"].notna().all()
    chips = rows["chips"].iloc[0]
    per_chip_s = priced["usd_per_chip_hour"].astype(float) / 3600
    assert priced["image_usd_per_kimage"].tolist() == pytest.approx(
        (m["image_s_per_image"] * chips * per_chip_s * 1000).tolist())


def test_report_and_numerics_parity_of_two_runs(two_runs, monkeypatch, capsys):
    code, out, _ = run_cli(monkeypatch, capsys, "report", str(two_runs[0]))
    assert code == 0 and "Images, tiny_flux (small): $ per 1,000 images" in out
    code, out, err = run_cli(monkeypatch, capsys, "compare", str(two_runs[0]), str(two_runs[1]), "--numerics")
    assert code == 0, out + err
    assert "agree" in out and "disagree" not in out
    a, b = _results(two_runs[0])[0], _results(two_runs[1])[0]
    assert a["numerics"]["tensors"]["final_latents"]["sample"] == b["numerics"]["tensors"]["final_latents"]["sample"]


def test_energy_per_image_is_the_modelled_power_times_seconds_per_image(two_runs, monkeypatch, capsys):
    (result,) = _results(two_runs[1])
    m, energy = result["metrics"], result["energy"]
    assert energy["method"] == "modelled" and energy["valid"]
    chips = result["environment"].get("chips") or 1
    watts = CHIP_POWER_W * chips
    assert m["power_mean_w"] == pytest.approx(watts, rel=1e-6)
    # The window is the timed calls (and the few statements between them): J/image = W x s/image.
    assert m["joules_per_image"] == pytest.approx(watts * m["image_mean_s"], rel=0.05)
    assert m["energy_j"] == pytest.approx(m["joules_per_image"] * len(result["samples"]["call_s"]) * 2)
    assert m["joules_per_image_ci95_low"] <= m["joules_per_image"] <= m["joules_per_image_ci95_high"]
    assert "joules_per_image" not in _results(two_runs[0])[0]["metrics"]   # --no-energy

    from tpubench.money import cost, pricing
    from tpubench.output.frames import load_results

    priced, _ = cost.price_results(load_results([two_runs[1]]), pricing.load_prices([]))
    # Priced like energy per token: chip-seconds per image x J per chip-second of the window.
    assert priced["image_j_per_image"].tolist() == pytest.approx(
        (priced["image_chip_s_per_image"] * CHIP_POWER_W).tolist(), rel=0.05)
    assert (priced["energy_method"] == "modelled").all()
    code, out, _ = run_cli(monkeypatch, capsys, "report", str(two_runs[1]))
    assert code == 0 and "J/image" in out and "(modelled)" in out


def test_profile_of_one_more_call_beside_the_result(two_runs):
    (result,) = _results(two_runs[1])
    profile = result["profile"]
    assert profile["available"], profile
    # One call of the timed loop's kind, profiled after it: its categories add up to its wall time
    # (one CPU thread here) and its trace lies beside the result.
    assert sum(profile["categories"].values()) == pytest.approx(profile["total_s"], rel=0.10)
    assert profile["categories"]["attention_s"] > 0
    assert profile["timed_s"] == pytest.approx(statistics.median(result["samples"]["call_s"]))
    assert len(list(two_runs[1].rglob(profile["trace_file"]))) == 1
    assert _results(two_runs[0])[0]["profile"] == {}    # without --profile


@pytest.mark.parametrize("family", ["sd3", "sdxl"])
def test_small_scales_build_and_draw(family):
    import time

    from tpubench.run.workload import load_workload
    from tpubench.scenarios.diffuse.build import build_pipeline
    from tpubench.scenarios.diffuse.families import denoiser
    from tpubench.scenarios.diffuse.measure import call_kwargs, generator
    from tpubench.scenarios.diffuse.stages import StagedPipeline
    from tpubench.scenarios.registry import SCENARIOS

    scenario = SCENARIOS["diffuse"]
    w = load_workload(f"workloads/{family}_diffuse.yaml")
    point = scenario.points(w, "small", scenario.sweep_axes(w, "small"), "x")[0]
    pipe = build_pipeline(point, "cpu")
    pipe.set_progress_bar_config(disable=True)
    staged = StagedPipeline(pipe, denoiser(family), time.perf_counter, capture=True)
    kwargs = {**call_kwargs(point), "height": 32, "width": 32, "num_inference_steps": 1}
    times, images = staged.call(generator=generator(point), **kwargs)
    staged.close()
    assert images.shape == (2, 32, 32, 3)
    assert len(times.step_s) == 1 and times.stage_sum_s() == pytest.approx(times.whole_s, abs=1e-9)
    # Guidance > 1 batches both halves into one denoiser call: the first noise prediction holds 4.
    assert staged.captured["noise_pred"].shape[0] == 4
