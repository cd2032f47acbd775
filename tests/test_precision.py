"""Precision as a sweep axis (model.quantization): the three dtypes a point runs in, where each
quantisation can run, the quality gate against the unquantised model, and real int8 points on the
CPU through torchao."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from tpubench.models.quality_gate import compare_logits, verdict
from tpubench.models.quantization import refusal
from tpubench.workload_spec.precision import precision_of

FIXTURE = Path(__file__).parent / "fixtures" / "tiny_dense_quant.yaml"
GATE = {"max_mean_kl": 0.01, "min_token_agreement": 0.8, "steps": 32}


def test_precision_of_names_each_dtype():
    assert precision_of("bfloat16").as_dict() == {"weight_dtype": "bfloat16", "activation_dtype": "bfloat16",
                                                  "kv_cache_dtype": "bfloat16"}
    assert precision_of("bfloat16", "int8_weight_only").as_dict() == {
        "weight_dtype": "int8", "activation_dtype": "bfloat16", "kv_cache_dtype": "bfloat16"}
    w8a8 = precision_of("float32", "int8_dynamic")
    assert (w8a8.weight_dtype, w8a8.activation_dtype, w8a8.kv_cache_dtype) == ("int8", "int8", "float32")
    assert precision_of("bfloat16", "fp8").label() == "w fp8 / a fp8 / kv bf16"
    assert precision_of("bfloat16").label() == "bf16"
    with pytest.raises(ValueError, match="unknown quantization"):
        precision_of("bfloat16", "int3")


def test_kl_and_agreement_on_a_hand_computed_case():
    # Position 0: identical logits (KL 0, same argmax). Position 1: logits (1, 0) against (0, 1):
    # p = (s, 1 - s) with s = e / (1 + e), q = (1 - s, s), KL = (2s - 1) * ln(s / (1 - s)) = 2s - 1.
    s = math.e / (1 + math.e)
    figures = compare_logits(np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 0.0], [0.0, 1.0]]))
    assert figures["max_kl"] == pytest.approx(2 * s - 1)
    assert figures["mean_kl"] == pytest.approx((2 * s - 1) / 2)
    assert figures["token_agreement"] == 0.5
    assert figures["positions"] == 2 and figures["max_abs_logit_delta"] == 1.0
    with pytest.raises(ValueError):
        compare_logits(np.zeros((2, 3)), np.zeros((3, 3)))


def test_the_gate_fails_past_either_tolerance_and_on_nan():
    assert verdict({"mean_kl": 0.001, "token_agreement": 1.0}, GATE) == []
    assert len(verdict({"mean_kl": 0.5, "token_agreement": 1.0}, GATE)) == 1
    assert "agree" in verdict({"mean_kl": 0.0, "token_agreement": 0.5}, GATE)[0]
    assert len(verdict({"mean_kl": math.nan, "token_agreement": math.nan}, GATE)) == 2
    # A tolerance of 0 refuses any quantised model that moves a logit at all.
    assert verdict({"mean_kl": 1e-9, "token_agreement": 1.0}, {**GATE, "max_mean_kl": 0.0})


@pytest.mark.parametrize("quantization, device, capability, runs", [
    ("none", "tpu", None, True),
    ("int8_weight_only", "cpu", None, True),
    ("int8_dynamic", "cuda", (8, 0), True),
    ("fp8", "cpu", None, False),
    ("fp8", "cuda", (8, 0), False),
    ("fp8_rowwise", "cuda", (9, 0), True),
    ("fp4", "cuda", (9, 0), False),
    ("fp4", "cuda", (10, 0), True),
    ("int8_weight_only", "tpu", None, False),
])
def test_where_each_quantization_runs(quantization, device, capability, runs):
    why = refusal(quantization, device, capability)
    assert (why is None) == runs
    if why:
        assert quantization in why and "not emulated" in why


def test_an_unknown_quantization_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    from helpers_cli import run_cli

    data = yaml.safe_load(FIXTURE.read_text())
    data["model"]["quantization"] = ["none", "int3"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    code, out, err = run_cli(monkeypatch, capsys, "validate", str(bad))
    assert code == 2 and err.count("\n") == 1 and "model.quantization" in err and "Traceback" not in err


def test_unquantized_points_keep_their_key():
    from tpubench.run.sweep import expand
    from tpubench.run.workload import load_workload

    points = expand(load_workload(FIXTURE), "full")
    none = next(p for p in points if p.quantization == "none")
    legacy = {k: v for k, v in none.to_dict().items() if k not in ("quantization", "quality")}
    from tpubench.workload_spec.point import RunPoint
    assert RunPoint(**legacy).key() == none.key()
    quantised = [p for p in points if p.quantization != "none"]
    assert len({p.key() for p in quantised}) == 3 and all(p.quality["max_mean_kl"] == 0.01 for p in quantised)
    assert len({p.model_identity() for p in points}) == 4   # each quantisation builds its own model


@pytest.mark.slow
def test_int8_points_are_measured_and_gated_fp8_is_skipped_on_the_cpu(tmp_path, monkeypatch, capsys):
    from helpers_cli import run_cli

    code, out, err = run_cli(monkeypatch, capsys, "run", str(FIXTURE), "--out", str(tmp_path))
    assert code == 0, out + err
    results = {json.loads(f.read_text())["point"]["quantization"]: json.loads(f.read_text())
               for f in tmp_path.glob("*.json")}
    assert set(results) == {"none", "int8_weight_only", "int8_dynamic", "fp8"}
    assert results["fp8"]["status"] == "skipped" and "not emulated" in results["fp8"]["error"]
    for name in ("int8_weight_only", "int8_dynamic"):
        r = results[name]
        assert r["status"] == "ok" and r["validity"]["valid"], r["validity"]
        assert r["numerics"]["quality"]["mean_kl"] < 0.01 and r["numerics"]["quality"]["token_agreement"] >= 0.8
        assert r["precision"]["weight_dtype"] == "int8"
    assert results["int8_dynamic"]["precision"]["activation_dtype"] == "int8"
    assert results["none"]["precision"] == {"weight_dtype": "float32", "activation_dtype": "float32",
                                            "kv_cache_dtype": "float32"}
    assert "quality" not in results["none"]["numerics"]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["tolerance 0", "corrupted scale"])
def test_a_broken_quantisation_is_reported_invalid(tmp_path, monkeypatch, capsys, how):
    from helpers_cli import run_cli

    import tpubench.models.quantization as quantization

    data = yaml.safe_load(FIXTURE.read_text())
    data["model"]["quantization"] = "int8_weight_only"
    if how == "tolerance 0":
        data["model"]["quality"] = {"max_mean_kl": 0.0}
    else:
        real = quantization.quantize

        def corrupted(model, name):
            real(model, name)
            for module in model.modules():   # every int8 weight's scale 8x too large
                scale = getattr(getattr(module, "weight", None), "scale", None)
                if scale is not None:
                    scale.mul_(8.0)
            return model

        monkeypatch.setattr(quantization, "quantize", corrupted)
    workload = tmp_path / "w.yaml"
    workload.write_text(yaml.safe_dump(data))
    code, out, err = run_cli(monkeypatch, capsys, "run", str(workload), "--out", str(tmp_path / "r"))
    (result,) = [json.loads(f.read_text()) for f in (tmp_path / "r").glob("*.json")]
    assert result["status"] == "ok" and not result["validity"]["valid"]
    assert any("model.quality" in reason for reason in result["validity"]["reasons"])


def _result(**point_fields):
    from tpubench.records.result import RunResult
    from tpubench.workload_spec.point import RunPoint

    point = RunPoint(workload="w", scale="small", family="qwen3", hub_id=None, weights="random",
                     trust_remote_code=False, dtype="float32", experts_implementation=None,
                     model_config={"hidden_size": 8}, **point_fields).to_dict()
    return RunResult(point=point, point_key="k", backend="torch", device="cpu", started_at="2026-12-05",
                     metrics={"output_tokens_per_s": 100.0, "output_tokens_per_s_ci95_half": 1.0},
                     environment={"chips": 1})


def test_compare_pairs_like_with_like_unless_asked_and_says_when_a_pair_crosses():
    from tpubench.output.compare import compare_results

    plain, w8a8 = _result(), _result(quantization="int8_dynamic", quality=dict(GATE))
    pairs, unmatched = compare_results([("a.json", plain)], [("b.json", w8a8)])
    assert not pairs and any("quantization: none vs int8_dynamic" in u for u in unmatched)
    pairs, _ = compare_results([("a.json", plain)], [("b.json", w8a8)], allow_precision_mix=True)
    assert len(pairs) == 1 and "crosses precisions: float32 -> float32 q=int8_dynamic" in pairs[0].label
    # A result from before the fields existed is the same point as an unquantised one now.
    old = _result()
    old.point.pop("quantization")
    old.point.pop("quality")
    pairs, _ = compare_results([("old.json", old)], [("new.json", plain)])
    assert len(pairs) == 1 and "crosses" not in pairs[0].label
