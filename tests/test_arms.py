"""One kernel A/B workload, run once per backend: each backend measures its own arms and skips the
other's with where they are measured (scenarios/generate/arms.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from tpubench.errors import Unavailable, UserError
from tpubench.scenarios.generate.arms import arms_elsewhere
from tpubench.workload_spec.point import RunPoint

FIXTURES = Path(__file__).parent / "fixtures"
BASE = RunPoint(workload="w", scale="full", family="qwen3_moe", hub_id=None, weights="random",
                trust_remote_code=False, dtype="float32", experts_implementation=None, model_config={})


def _arms(*names, loop=None):
    params = {"decode_loop": loop} if loop else {}
    return [replace(BASE, experts_implementation=n, params=params) for n in names]


def test_torch_leaves_the_jax_twins_arms_to_jax():
    points = _arms("eager", "grouped_mm", "ragged_dot", "tokamax")
    elsewhere = arms_elsewhere("torch", points)
    assert set(elsewhere) == {points[2].key(), points[3].key()}
    assert all(isinstance(e, Unavailable) and "--backend jax" in str(e) for e in elsewhere.values())


def test_jax_leaves_torch_arms_and_generate_to_torch_when_the_sweep_names_its_own():
    points = _arms("eager", "kernels", "gather", "tokamax") + _arms("gather", loop="hf_generate")
    elsewhere = arms_elsewhere("jax", points)
    assert set(elsewhere) == {points[0].key(), points[1].key(), points[4].key()}
    assert "generate()" in str(elsewhere[points[4].key()])


def test_a_plain_moe_workload_still_runs_on_the_jax_twins_default():
    assert arms_elsewhere("jax", _arms("grouped_mm", None)) == {}


def test_a_sweep_with_nothing_for_the_backend_is_refused_in_one_line():
    with pytest.raises(UserError) as exc:
        arms_elsewhere("torch", _arms("gather", "ragged_dot"))
    assert exc.value.field == "model.experts_implementation" and "--backend jax" in exc.value.message


@pytest.mark.slow   # builds a tiny model
def test_arms_this_run_cannot_measure_are_skipped_results_saying_why(tmp_path, monkeypatch, capsys):
    """A JAX arm in a torch run, and the Hub `kernels` arm on a CPU (no Hub MoE kernel for it):
    skipped results with their reasons, nothing measured under their names; the rest measured."""
    from helpers_cli import run_cli

    data = yaml.safe_load((FIXTURES / "tiny_moe.yaml").read_text())
    data["model"]["experts_implementation"] = ["eager", "ragged_dot", "kernels"]
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "res"
    code, text, err = run_cli(monkeypatch, capsys, "run", str(path), "--scale", "small", "--out", str(out))
    assert code == 0, text + err
    results = {r["point"]["experts_implementation"]: r for r in (json.loads(f.read_text()) for f in out.glob("*.json"))}
    status = {arm: (r["status"], r["error"]) for arm, r in results.items()}
    assert status["eager"][0] == "ok"
    assert status["ragged_dot"] == ("skipped", "experts implementation ragged_dot is the JAX twin's: measured with "
                                               "--backend jax")
    assert status["kernels"][0] == "skipped" and "no Hugging Face Hub MoE kernel for cpu" in status["kernels"][1]
    assert not results["kernels"]["metrics"] and not results["ragged_dot"]["metrics"]
    assert "skipped b1" in text and "kernels" in text
