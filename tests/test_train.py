"""Scenario train (docs/scenarios/train.md) on tiny random models on the CPU: end to end through the
CLI, MFU from a FLOPs count done by hand, data-parallel 2 (DDP and FSDP2 over gloo) against one
rank on the same global batch, the loss falling when gradients flow, NaN and out-of-memory points."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import pytest
import yaml
from helpers_cli import run_cli as cli

from tpubench.records.result import read_result

TINY_MOE = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 16, "intermediate_size": 128, "num_experts": 8, "num_experts_per_tok": 2,
            "moe_intermediate_size": 32, "vocab_size": 256, "max_position_embeddings": 256}
TINY_DENSE = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 16, "intermediate_size": 128, "vocab_size": 256, "max_position_embeddings": 256}
# Data-parallel 2 against 1 in float32: the same global batch, gradients averaged by gloo in
# another order than one rank's sum. Measured here: the losses of the first 5 steps agree to
# 1e-7 relative (one float32 ulp, DDP and FSDP2); the bound leaves room for other summation orders.
DP_LOSS_RTOL = 1e-5


def write_workload(tmp_path: Path, name: str = "tiny_train", *, family: str = "qwen3_moe", config=None,
                   scenario=None, parallel=None, measurement=None, dtype: str = "float32", mode="eager") -> Path:
    data = {
        "name": name,
        "model": {"family": family, "dtype": dtype, "config": config or TINY_MOE,
                  **({"experts_implementation": "eager"} if family == "qwen3_moe" else {})},
        "scenario": {"kind": "train", "batch_size": 2, "sequence_length": 32, "precision": "fp32",
                     "optimizer": {"name": "adamw", "lr": 1e-3}, **(scenario or {})},
        "execution": {"mode": mode},
        "measurement": {"warmup": 1, "min_iterations": 3, "min_seconds": 0.0, "max_seconds": 30,
                        "target_ci": None, "max_cv": 10.0,
                        **(measurement or {})},
        "parallel": {"collective_timeout_s": 30, **(parallel or {})},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def results_in(folder: Path) -> list:
    return sorted((read_result(f) for f in folder.glob("*.json")), key=lambda r: r.started_at + r.point_key)


@pytest.fixture
def worlds_in_tmp_path(tmp_path, monkeypatch):
    """Each world's spec folder under this test's tmp_path (other tests may run worlds too)."""
    worlds = tmp_path / "worlds"
    worlds.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(worlds))
    return worlds


# ----------------------------------------------------------------------------- end to end


@pytest.mark.slow
def test_train_points_end_to_end_through_the_cli(tmp_path, monkeypatch, capsys):
    workload = write_workload(tmp_path, scenario={"batch_size": [2, 4]})
    code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--out", str(tmp_path / "r"), "--no-price")
    assert code == 0, err
    assert "tpubench run: training" in out and "b2 seq32 fp32 eager" in out
    first, second = sorted(results_in(tmp_path / "r"), key=lambda r: r.point["batch_size"])
    for r in (first, second):
        assert r.status == "ok" and r.validity.valid, r.validity.reasons
        assert r.point["scenario_kind"] == "train"
        m = r.metrics
        tokens = r.point["batch_size"] * 32
        assert m["train_tokens_per_step"] == tokens
        assert m["train_tokens_per_s"] == pytest.approx(tokens / m["step_mean_s"])
        assert m["train_tokens_per_s_ci95_low"] == pytest.approx(tokens / m["step_ci95_high_s"])
        assert m["train_tokens_per_s_per_chip"] == pytest.approx(m["train_tokens_per_s"])   # one chip
        assert m["train_s_per_token"] == pytest.approx(m["step_mean_s"] / tokens)
        assert m["train_s_per_token_ci95_high"] == pytest.approx(m["step_ci95_high_s"] / tokens)
        assert m["step_p50_s"] > 0 and m["iterations"] == len(r.samples["step_s"]) >= 3
        assert 0 < m["mfu"] < 1.5 and m["model_flops_per_token"] == 6 * m["active_params"] + 12 * 2 * 4 * 16 * 32
        assert r.training["mfu_formula"] == "6N+12LHQT (PaLM appendix B), no recomputation"
        # Every step's loss, in order: the first (compile) step, one warm-up step, the timed steps.
        assert len(r.samples["loss"]) == 1 + 1 + m["iterations"]
        assert m["loss_first"] == r.samples["loss"][0] and m["loss_last"] == r.samples["loss"][-1]
        assert m["loss_last"] < m["loss_first"]
        assert m["peak_memory_bytes"] > 0 and r.timing["compile_s"] >= 0
        # MoE: tokens per expert of one micro-batch, every token routed to top-k = 2 experts per layer.
        counts = r.training["tokens_per_expert"]
        assert len(counts) == 2 and all(sum(c) == tokens * 2 for c in counts)
        assert m["moe_load_max_over_mean"] >= 1 >= m["moe_load_min_over_mean"] and m["moe_layers"] == 2
    assert second.model_reused and second.timing["load_s"] == 0

    # The second point reused the model with its initial weights put back: the same first loss
    # as a sweep of that point alone, which builds the model afresh.
    alone = write_workload(tmp_path, "alone", scenario={"batch_size": 4})
    code, _, err = cli(monkeypatch, capsys, "run", str(alone), "--out", str(tmp_path / "alone"), "--no-price")
    assert code == 0, err
    (fresh,) = results_in(tmp_path / "alone")
    assert fresh.samples["loss"][:3] == second.samples["loss"][:3]


@pytest.mark.slow
def test_run_prices_training_points_per_million_training_tokens(tmp_path, monkeypatch, capsys):
    workload = write_workload(tmp_path, measurement={"warmup": 0, "min_iterations": 2})
    code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--out", str(tmp_path / "r"))
    assert code == 0, err
    # The training-token unit's table (scenarios/train/unit.py, console.render_run_cost).
    assert "cost per million training tokens" in out and "$/M training tokens" in out
    assert "$/Mtok blended" not in out     # a training point has no inference cost


@pytest.mark.slow
def test_run_table_and_precision_note(tmp_path, monkeypatch, capsys):
    """A bfloat16 model with bf16 autocast trains with float32 master weights; a float32 scale
    of a bf16_autocast workload trains in float32 and says so."""
    workload = write_workload(tmp_path, dtype="bfloat16", scenario={"precision": "bf16_autocast"},
                              measurement={"warmup": 0, "min_iterations": 2})
    data = yaml.safe_load(workload.read_text())
    data["scales"] = {"small": {"dtype": "float32"}}
    workload.write_text(yaml.safe_dump(data, sort_keys=False))
    code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--scale", "full", "--out", str(tmp_path / "bf16"),
                         "--no-price")
    assert code == 0, err
    (r,) = results_in(tmp_path / "bf16")
    assert r.status == "ok" and r.training["precision"] == "bf16_autocast"
    assert r.training["param_dtype"] == "float32" and r.training["compute_dtype"] == "bfloat16"
    code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--scale", "small", "--out", str(tmp_path / "s"),
                         "--no-price")
    assert code == 0, err
    assert "this point's dtype is float32, so it trains in float32" in " ".join(out.split())
    assert "b2 seq32 fp32 eager" in out   # the table names the precision that ran
    (r,) = results_in(tmp_path / "s")
    assert r.training["precision"] == "fp32" and r.training["precision_requested"] == "bf16_autocast"


@pytest.mark.slow
def test_compile_mode_compiles_once_and_matches_eager(tmp_path, monkeypatch, capsys):
    one_layer = {**TINY_DENSE, "num_hidden_layers": 1}
    workload = write_workload(tmp_path, family="qwen3", config=one_layer, mode=["eager", "compile"])
    code, _, err = cli(monkeypatch, capsys, "run", str(workload), "--out", str(tmp_path / "r"), "--no-price")
    assert code == 0, err
    compiled, eager = sorted(results_in(tmp_path / "r"), key=lambda r: r.point["execution_mode"])
    assert compiled.point["execution_mode"] == "compile" and compiled.validity.valid, compiled.validity.reasons
    c = compiled.compile
    assert c["mode"] == "compile" and c["graphs_compiled_first_call"] >= 1 and c["recompiles_timed"] == 0
    assert c["graph_breaks"] == 0 and compiled.timing["compile_s"] > 0
    # Inductor's fused kernels sum in another order: float32 losses agree to well within 1e-4.
    assert compiled.samples["loss"][:5] == pytest.approx(eager.samples["loss"][:5], rel=1e-4)


# ----------------------------------------------------------------------------- MFU by hand


def test_train_flops_and_mfu_by_hand():
    from tpubench.hardware.counts import train_flops_per_token
    from tpubench.hardware.model_shape import ModelShape
    from tpubench.hardware.roofline import train_mfu

    # Dense: per layer q 64x64, k and v 64x32 each, o 64x64 (12,288) + MLP 3 x 64 x 128 (24,576)
    # = 36,864; 2 layers + lm_head 64 x 256 (16,384) = 90,112 = N (embeddings left out).
    dense = ModelShape.from_config("qwen3", {**TINY_DENSE, "tie_word_embeddings": False})
    assert dense.active_params == 90_112
    # 6N = 540,672; 12 L H Q T = 12 x 2 x 4 x 16 x 32 = 49,152.
    assert train_flops_per_token(dense, 32) == 540_672 + 49_152 == 589_824
    # 1,000 tokens/s on one chip of 1 GFLOP/s peak: 589,824,000 / 1e9.
    assert train_mfu(1000, 589_824, 1, 1e9) == pytest.approx(0.589824)
    # Two chips share the world's FLOPs: each does half, against its own peak.
    assert train_mfu(1000, 589_824, 2, 1e9) == pytest.approx(0.294912)
    assert train_mfu(1000, 589_824, 1, None) is None
    # MoE: attention 12,288 + router 64 x 8 (512) + top-2 experts of 3 x 64 x 32 (2 x 6,144)
    # = 25,088 per layer; 2 layers + lm_head 16,384 = 66,560 active (of 8 experts' worth stored).
    moe = ModelShape.from_config("qwen3_moe", TINY_MOE)
    assert moe.active_params == 66_560
    assert train_flops_per_token(moe, 32) == 6 * 66_560 + 49_152


def test_train_roofline_metrics_per_chip_in_a_cpu_world():
    from tpubench.measure.efficiency import train_roofline_metrics
    from tpubench.workload_spec.point import RunPoint

    point = RunPoint(workload="w", scale="full", family="qwen3", hub_id=None, weights="random",
                     trust_remote_code=False, dtype="float32", experts_implementation=None,
                     model_config={**TINY_DENSE, "tie_word_embeddings": False}, batch_size=2, input_length=32,
                     output_length=None, scenario_kind="train", data_parallel=2, params={"fsdp": False})
    metrics = {"train_tokens_per_s": 1000.0, "train_tokens_per_s_ci95_low": 900.0,
               "train_tokens_per_s_ci95_high": 1100.0, "train_tokens_per_step": 128}
    # A host probe's peak is shared by the world's ranks: 2e9 for the host, 1e9 per rank.
    peaks = {"peak_flops": 2e9, "shared_by_world": True, "tolerance": 1.5}
    out, exceeds = train_roofline_metrics(point, metrics, peaks)
    assert out["model_flops_per_token"] == 589_824 and out["model_flops_per_step"] == 589_824 * 128
    assert out["train_achieved_flops_per_s"] == pytest.approx(589_824_000)
    assert out["train_achieved_flops_per_s_per_chip"] == pytest.approx(294_912_000)
    assert out["mfu"] == pytest.approx(0.294912)
    assert out["mfu_ci95_low"] == pytest.approx(0.294912 * 0.9) and not exceeds
    out, exceeds = train_roofline_metrics(point, {**metrics, "train_tokens_per_s": 1e4}, peaks)
    assert out["mfu"] == pytest.approx(2.94912) and exceeds


def test_rates_routing_and_loss_summaries_by_hand():
    from tpubench.scenarios.train.steps import loss_metrics, routing_summary, step_stats, train_rates

    m = step_stats([1.0, 2.0, 3.0])
    assert m["step_mean_s"] == 2.0 and m["step_p50_s"] == 2.0 and m["step_cv"] == pytest.approx(0.5)
    # t(0.975, 2) = 4.303; half-width 4.303 x 1 / sqrt(3) = 2.4843, 1.2422 of the mean: in log space
    # 2 x exp(-/+1.2422) = 0.5774 .. 6.9262 s (a time: never below zero).
    assert m["step_ci95_high_s"] == pytest.approx(2 * math.exp(4.303 / math.sqrt(3) / 2))
    assert m["step_ci95_low_s"] == pytest.approx(2 * math.exp(-4.303 / math.sqrt(3) / 2))
    rates = train_rates({"step_mean_s": 2.0, "step_ci95_low_s": 1.0, "step_ci95_high_s": 4.0}, 8000, 4)
    assert rates["train_tokens_per_s"] == 4000 and rates["train_tokens_per_s_ci95_low"] == 2000
    assert rates["train_tokens_per_s_ci95_high"] == 8000 and rates["train_tokens_per_s_ci95_rel"] == 1.0
    assert rates["train_tokens_per_s_per_chip"] == 1000 and rates["train_tokens_per_s_per_chip_ci95_low"] == 500
    assert rates["train_s_per_token"] == 2.0 / 8000 and rates["train_s_per_token_ci95_high"] == 4.0 / 8000
    # Layer 1: loads 2, 2, 2, 2 (balanced); layer 2: 6, 2, 0, 0 (mean 2: max/mean 3, min/mean 0,
    # CV = pstdev(6, 2, 0, 0) / 2 = sqrt(((16 + 0 + 4 + 4) / 4)) / 2 = sqrt(6) / 2).
    s = routing_summary([[2, 2, 2, 2], [6, 2, 0, 0]])
    assert s["moe_load_max_over_mean"] == 3.0 and s["moe_load_min_over_mean"] == 0.0
    assert s["moe_load_cv"] == pytest.approx((0 + math.sqrt(6) / 2) / 2)
    assert s["moe_experts_unused_fraction"] == 0.25 and s["moe_layers"] == 2 and s["moe_routes_per_layer"] == 8
    assert routing_summary([]) == {}
    metrics, reasons = loss_metrics([3.0, 2.0, float("nan"), float("inf")])
    assert metrics["loss_nonfinite_steps"] == 2 and "first at step 3" in reasons[0]
    assert loss_metrics([3.0, 2.0])[1] == []


def test_precision_table():
    from dataclasses import replace

    from tpubench.scenarios.train.steps import PrecisionError, resolve_precision
    from tpubench.workload_spec.point import RunPoint

    p = RunPoint(workload="w", scale="full", family="qwen3", hub_id=None, weights="random", trust_remote_code=False,
                 dtype="bfloat16", experts_implementation=None, model_config={}, scenario_kind="train",
                 params={"precision": "bf16_autocast"})
    auto = resolve_precision(p)
    assert (auto.name, auto.param_dtype, auto.compute_dtype, auto.autocast) == ("bf16_autocast", "float32", "bfloat16", True)
    pure = resolve_precision(replace(p, params={"precision": "bf16"}))
    assert (pure.param_dtype, pure.compute_dtype, pure.autocast) == ("bfloat16", "bfloat16", False)
    fp32 = resolve_precision(replace(p, dtype="float32"))
    assert fp32.name == "fp32" and fp32.requested == "bf16_autocast" and "trains in float32" in fp32.note
    with pytest.raises(PrecisionError, match="set model.dtype"):
        resolve_precision(replace(p, params={"precision": "fp32"}))
    with pytest.raises(PrecisionError, match="loss scaling"):
        resolve_precision(replace(p, dtype="float16"))


# ----------------------------------------------------------------------------- gradients flow, NaN


def _train_once(tmp_path, monkeypatch, capsys, name: str, **kwargs):
    workload = write_workload(tmp_path, name, **kwargs)
    code, _, err = cli(monkeypatch, capsys, "run", str(workload), "--out", str(tmp_path / name), "--no-price")
    (result,) = results_in(tmp_path / name)
    return code, err, result


@pytest.mark.slow
def test_loss_falls_over_20_steps_on_one_repeated_batch(tmp_path, monkeypatch, capsys):
    code, err, r = _train_once(tmp_path, monkeypatch, capsys, "falls", family="qwen3", config=TINY_DENSE,
                               scenario={"optimizer": {"name": "adamw", "lr": 1e-2, "weight_decay": 0.0},
                                         "gradient_accumulation": 2, "activation_checkpointing": True},
                               measurement={"warmup": 0, "min_iterations": 19})
    assert code == 0, err
    losses = r.samples["loss"]
    assert len(losses) == 20
    # ln(256) = 5.55 at random init; memorising one batch of 128 tokens drives it far below.
    assert losses[0] == pytest.approx(math.log(256), abs=0.3)
    assert losses[-1] < 0.5 * losses[0], losses
    assert sum(b < a for a, b in zip(losses, losses[1:])) >= 15, losses


@pytest.mark.slow
def test_loss_stays_put_when_gradients_do_not_flow(tmp_path, monkeypatch, capsys):
    """The control of the test above: with every parameter frozen the same check fails."""
    from tpubench.scenarios.train import steps as training

    real = training.build_train_model

    def frozen(*args, **kwargs):
        model = real(*args, **kwargs)
        for param in model.parameters():
            param.requires_grad_(False)
        model.lm_head.weight.requires_grad_(True)   # something must need a gradient for backward
        model.lm_head.weight.register_hook(lambda grad: grad * 0)
        return model

    monkeypatch.setattr(training, "build_train_model", frozen)
    code, err, r = _train_once(tmp_path, monkeypatch, capsys, "frozen", family="qwen3", config=TINY_DENSE,
                               scenario={"optimizer": {"name": "adamw", "lr": 1e-2, "weight_decay": 0.0}},
                               measurement={"warmup": 0, "min_iterations": 19})
    assert code == 0, err
    losses = r.samples["loss"]
    assert not losses[-1] < 0.5 * losses[0]
    assert max(losses) - min(losses) < 1e-5


@pytest.mark.slow
def test_nan_loss_makes_the_point_invalid(tmp_path, monkeypatch, capsys):
    # A diverging run, made certain: validate now refuses the learning rates that used to make one
    # (lr <= 10), so the loss itself turns NaN from its fourth computation on.
    import torch

    cross_entropy, calls = torch.nn.functional.cross_entropy, []

    def diverging(*args, **kwargs):
        calls.append(1)
        loss = cross_entropy(*args, **kwargs)
        return loss * float("nan") if len(calls) > 3 else loss

    monkeypatch.setattr(torch.nn.functional, "cross_entropy", diverging)
    code, err, r = _train_once(tmp_path, monkeypatch, capsys, "diverges")
    assert code == 0, err
    assert r.status == "ok" and not r.validity.valid
    assert any("loss is NaN or inf" in reason for reason in r.validity.reasons)
    assert r.metrics["loss_nonfinite_steps"] >= 1 and r.training["loss_nonfinite_at_steps"]
    # The samples stop before the first non-finite loss (a result file holds no NaN).
    assert len(r.samples["loss"]) == r.training["loss_nonfinite_at_steps"][0] - 1
    assert all(math.isfinite(x) for x in r.samples["loss"])


# ----------------------------------------------------------------------------- memory


@pytest.mark.slow
def test_point_that_cannot_fit_is_refused_with_a_hint(tmp_path, monkeypatch, capsys):
    from tpubench.backends.torch import TorchBackend
    from tpubench.run.sweep import expand
    from tpubench.run.workload import load_workload
    from tpubench.scenarios.train.steps import estimate_train_bytes

    workload = write_workload(tmp_path, scenario={"batch_size": [2, 64]})
    small, big = expand(load_workload(workload))
    need_small = sum(estimate_train_bytes(small).values())
    need_big = sum(estimate_train_bytes(big).values())
    assert need_big > need_small
    free = int((need_small + need_big) / 2 / 0.9)
    monkeypatch.setattr(TorchBackend, "available_memory", lambda self: free)
    code, _, err = cli(monkeypatch, capsys, "run", str(workload), "--out", str(tmp_path / "r"), "--no-price")
    assert code == 0, err
    by_batch = {r.point["batch_size"]: r for r in results_in(tmp_path / "r")}
    assert by_batch[2].status == "ok"
    error = by_batch[64].error
    assert by_batch[64].status == "failed" and "does not fit" in error
    assert "scenario.batch_size 32" in error or "scenario.batch_size" in error
    assert "activation_checkpointing: true" in error and "parallel: {data:" in error and "fsdp: true}" in error
    # Nothing fits at all: the run is refused before anything is built.
    monkeypatch.setattr(TorchBackend, "available_memory", lambda self: 1024)
    code, _, err = cli(monkeypatch, capsys, "run", str(workload), "--out", str(tmp_path / "none"), "--no-price")
    assert code == 2 and "no point fits" in err and not (tmp_path / "none").exists()


@pytest.mark.slow
def test_out_of_memory_is_a_failed_point_with_a_hint_and_the_sweep_goes_on(tmp_path, monkeypatch, capsys):
    import torch

    from tpubench.scenarios.train import steps as training

    real_step = training.TrainStep.step

    def step(self):
        if self.batch.shape[1] == 4:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        return real_step(self)

    monkeypatch.setattr(training.TrainStep, "step", step)
    workload = write_workload(tmp_path, scenario={"batch_size": [4, 2]})
    code, _, err = cli(monkeypatch, capsys, "run", str(workload), "--out", str(tmp_path / "r"), "--no-price")
    assert code == 0, err
    by_batch = {r.point["batch_size"]: r for r in results_in(tmp_path / "r")}
    failed = by_batch[4]
    assert failed.status == "failed" and failed.error.startswith("MemoryError: out of memory while training")
    assert "Tried to allocate 20.00 GiB" in failed.error
    assert "scenario.batch_size 2" in failed.error and "activation_checkpointing: true" in failed.error
    assert "fsdp: true" in failed.error
    assert by_batch[2].status == "ok" and by_batch[2].validity.valid


def test_bad_precision_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    workload = write_workload(tmp_path, dtype="bfloat16", scenario={"precision": "fp32"})
    code, _, err = cli(monkeypatch, capsys, "run", str(workload), "--out", str(tmp_path / "r"), "--no-price")
    assert code == 2 and "precision fp32 with dtype bfloat16" in err and "Traceback" not in err


# ----------------------------------------------------------------------------- data parallel


@pytest.mark.slow
def test_data_parallel_2_matches_one_rank_on_the_same_global_batch(tmp_path, monkeypatch, capsys,
                                                                   worlds_in_tmp_path):
    """DDP and FSDP2 over 2 gloo ranks, each on half the global batch, give the losses one rank
    gives on all of it (float32, gradient accumulation 2: no_sync on the first micro-step)."""
    common = {"measurement": {"warmup": 1, "min_iterations": 3}}
    runs = {
        "one": write_workload(tmp_path, "one", scenario={"batch_size": 4, "gradient_accumulation": 2}, **common),
        "ddp": write_workload(tmp_path, "ddp", scenario={"batch_size": 2, "gradient_accumulation": 2},
                              parallel={"data": 2}, **common),
        "fsdp": write_workload(tmp_path, "fsdp", scenario={"batch_size": 2, "gradient_accumulation": 2},
                               parallel={"data": 2, "fsdp": True}, **common),
    }
    results = {}
    for name, workload in runs.items():
        out = tmp_path / name
        code, stdout, err = cli(monkeypatch, capsys, "run", str(workload), "--out", str(out), "--no-price")
        if code != 0 and "died (SIGABRT)" in stdout:
            # Seen once in CI (1 of 4 full runs): a gloo rank aborted in a DDP world. Until it is
            # understood (the failed result now keeps the launcher's log tail), one retry.
            out = tmp_path / f"{name}-again"
            code, stdout, err = cli(monkeypatch, capsys, "run", str(workload), "--out", str(out), "--no-price")
        assert code == 0, stdout + err
        (results[name],) = results_in(out)
        assert results[name].status == "ok" and results[name].validity.valid, results[name].validity.reasons
    one = results["one"]
    for name in ("ddp", "fsdp"):
        r = results[name]
        env = r.environment
        assert env["world_size"] == 2 and env["process_group_backend"] == "gloo"
        assert env["parallel_layout"] == {"tensor": 1, "expert": 1, "data": 2, "fsdp": name == "fsdp"}
        assert sorted(x["rank"] for x in env["ranks"]) == [0, 1] and len(r.compile["per_rank"]) == 2
        assert r.training["data_parallel"] == {"ddp": "DDP", "fsdp": "FSDP2"}[name]
        # 2 sequences x 32 tokens x 2 micro-steps x 2 ranks, as one rank's 4 x 32 x 2.
        assert r.metrics["train_tokens_per_step"] == one.metrics["train_tokens_per_step"] == 256
        assert r.metrics["train_tokens_per_s_per_chip"] == pytest.approx(r.metrics["train_tokens_per_s"] / 2)
        # Routing summed over both ranks' first micro-batches: the global micro-batch, as one rank.
        assert [sum(c) for c in r.training["tokens_per_expert"]] == [sum(c) for c in one.training["tokens_per_expert"]]
        first = min(len(one.samples["loss"]), len(r.samples["loss"]), 5)
        assert first >= 5
        assert r.samples["loss"][:first] == pytest.approx(one.samples["loss"][:first], rel=DP_LOSS_RTOL)
