"""Lengths are means where a length is a mean (the estimate of a workload, a published row: a data
set's 505.6 tokens) and whole tokens where they are a shape (a measured batch's prompts and answers)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers_cli import run_cli

from tpubench.errors import UserError
from tpubench.estimate.calibration import observations
from tpubench.output.published.rows import published_frame
from tpubench.run.sweep import expand
from tpubench.run.workload import load_workload

REPO = Path(__file__).resolve().parent.parent
QWEN3_MOE = REPO / "workloads" / "qwen3_moe.yaml"


def _workload(tmp_path, **scenario) -> Path:
    data = yaml.safe_load(QWEN3_MOE.read_text())
    data["scenario"].update(scenario)
    path = tmp_path / "mean.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_the_estimate_takes_a_mean_length_as_written(monkeypatch, capsys, tmp_path):
    workload = _workload(tmp_path, input_length=505.6, output_length=[233.4, 256])
    code, out, err = run_cli(monkeypatch, capsys, "estimate", str(workload), "--on", "H100:8", "--format", "json")
    assert code == 0, err
    rows = json.loads(out)["estimates"]
    assert {r["input_length"] for r in rows} == {505.6} and {r["output_length"] for r in rows} == {233.4, 256}
    assert all(not r["refused"] and r["output_tokens_per_s_per_chip"] > 0 for r in rows)


def test_a_measured_batch_refuses_a_mean_length_in_one_line(monkeypatch, capsys, tmp_path):
    workload = _workload(tmp_path, input_length=505.6)
    code, out, err = run_cli(monkeypatch, capsys, "validate", str(workload))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert str(workload) in err and "scenario.input_length" in err and "505.6 tokens is a mean" in err
    with pytest.raises(UserError, match="needs whole tokens"):
        expand(load_workload(workload), "full", source=str(workload))
    # The small scale sets its own whole lengths: it runs.
    assert all(p.input_length == 128 for p in expand(load_workload(workload), "small", source=str(workload)))


def test_a_whole_number_written_as_a_float_is_a_whole_length(tmp_path):
    points = expand(load_workload(_workload(tmp_path, input_length=1024.0)), "full")
    assert {p.input_length for p in points} == {1024} and all(isinstance(p.input_length, int) for p in points)


@pytest.mark.parametrize("bad, says", [(0.5, "greater than or equal to 1"), ("many", "valid number"),
                                       (-3, "greater than or equal to 1"), (10 ** 9, "less than or equal to")])
def test_a_bad_length_is_still_a_one_line_error(monkeypatch, capsys, tmp_path, bad, says):
    code, out, err = run_cli(monkeypatch, capsys, "validate", str(_workload(tmp_path, input_length=bad)))
    assert code == 2 and len(err.strip().splitlines()) == 1 and says in err and "scenario.input_length" in err


def test_a_scale_s_own_lengths_stay_whole(monkeypatch, capsys, tmp_path):
    data = yaml.safe_load(QWEN3_MOE.read_text())
    data["scales"]["small"]["scenario"]["input_length"] = 127.5
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data))
    code, out, err = run_cli(monkeypatch, capsys, "validate", str(path))
    assert code == 2 and "scales.small.scenario.input_length" in err


def test_a_published_row_with_mean_lengths_calibrates():
    row = {"publisher": "MLPerf Inference", "model": "llama-3.1-8b", "accelerator": "H200", "chips": 8,
           "input_length": 505.6, "output_length": 233.4, "concurrency": 64, "precision": "fp8",
           "output_tokens_per_s_per_chip": 2000.0, "valid": True, "date": "2026-04-01", "reference": "r"}
    rows = published_frame([row]).assign(source="published")
    obs = observations(rows)
    assert len(obs.y) == 1 and obs.rows.iloc[0]["input_length"] == 505.6


def test_mlperf_import_takes_a_data_set_mean(tmp_path, monkeypatch, capsys):
    tree = REPO / "tests" / "fixtures" / "published" / "real" / "mlperf_v5.1_tree"
    code, out, err = run_cli(monkeypatch, capsys, "import", "mlperf", str(tree), "--into", str(tmp_path),
                             "--input-length", "505.6", "--output-length", "233.4")
    assert code == 0, err
    (stored,) = list((tmp_path / "published").glob("*.csv"))
    frame = pd.read_csv(stored)
    assert set(frame["input_length"]) == {505.6} and set(frame["output_length"]) == {233.4}


def test_a_serve_workload_s_mean_lengths_are_estimated_and_not_sent(monkeypatch, capsys, tmp_path):
    data = yaml.safe_load((REPO / "workloads" / "serve_local.yaml").read_text())
    data["model"]["config"].update(yaml.safe_load(QWEN3_MOE.read_text())["model"]["config"])   # the full model
    data["scenario"].update(input_length=505.6, output_length=233.4)
    path = tmp_path / "serve_mean.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    code, out, err = run_cli(monkeypatch, capsys, "estimate", str(path), "--on", "H100:8", "--format", "json")
    assert code == 0, err
    rows = json.loads(out)["estimates"]
    assert {(r["input_length"], r["output_length"]) for r in rows} == {(505.6, 233.4)}
    code, out, err = run_cli(monkeypatch, capsys, "validate", str(path))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "scenario.input_length" in err and "a mean" in err
