"""Models sharded over 2 CPU processes (gloo), started by torch.distributed's launcher: tensor and
expert parallel end to end through the CLI, numerics equal to one chip, faults that fail a point
without hanging the sweep or leaving a process behind, and a world the user started with torchrun."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from helpers_cli import run_cli as cli

from tpubench import load_results
from tpubench.hardware.environment import cpu_chips
from tpubench.measure.world import FAULT_ENV
from tpubench.records.result import read_result

REPO = Path(__file__).resolve().parents[1]


def small_qwen3_moe(tmp_path: Path, **scenario) -> Path:
    """The small scale of the shipped qwen3_moe workload with short shapes and few iterations."""
    data = yaml.safe_load((REPO / "workloads" / "qwen3_moe.yaml").read_text())
    data["scales"]["small"]["scenario"] = {"batch_size": 2, "input_length": 16, "output_length": 6, **scenario}
    data["measurement"] = {"warmup": 1, "min_iterations": 3, "min_seconds": 0.0, "max_seconds": 20,
                           "target_ci": None, "max_cv": 10.0}
    data["parallel"] = {"collective_timeout_s": 20}
    path = tmp_path / "qwen3_moe.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def world_processes(marker: Path) -> list[int]:
    """PIDs of processes whose command line names `marker` (the folder a test's worlds live in:
    other tests may run worlds of their own at the same time)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if str(marker).encode() in cmdline:
                found.append(int(proc.name))
    return found


@pytest.fixture(autouse=True)
def worlds_in_tmp_path(tmp_path, monkeypatch):
    """Each world's spec folder (named on its ranks' command lines) under this test's tmp_path."""
    worlds = tmp_path / "worlds"
    worlds.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(worlds))
    return worlds


@pytest.mark.slow
def test_tensor_parallel_2_matches_one_chip(tmp_path, monkeypatch, capsys, worlds_in_tmp_path):
    workload = small_qwen3_moe(tmp_path)
    code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--tensor-parallel", "2", "--out",
                         str(tmp_path / "tp2"), "--no-price")
    assert code == 0, err
    assert "tp2" in out
    code, _, err = cli(monkeypatch, capsys, "run", str(workload), "--out", str(tmp_path / "one"), "--no-price")
    assert code == 0, err

    (tp2_file,) = (tmp_path / "tp2").glob("*.json")
    (one_file,) = (tmp_path / "one").glob("*.json")
    tp2, one = read_result(tp2_file), read_result(one_file)
    assert tp2.status == "ok" and tp2.validity.valid, tp2.validity.reasons
    env = tp2.environment
    # A CPU world is priced by the host's vCPU mask, as any CPU run (environment.device_chips).
    assert env["world_size"] == 2 and env["chips"] == cpu_chips() and env["process_group_backend"] == "gloo"
    assert env["parallel_layout"] == {"tensor": 2, "expert": 1}
    assert sorted(r["rank"] for r in env["ranks"]) == [0, 1] and len({r["pid"] for r in env["ranks"]}) == 2
    assert len(tp2.compile["per_rank"]) == 2
    assert "_tp2_" in tp2_file.name and tp2.point_key != one.point_key

    # Same host-made weights, sharded: float32 numerics agree with the single-chip run.
    assert tp2.numerics["greedy_tokens"] == one.numerics["greedy_tokens"]
    delta = max(abs(a - b) for a, b in zip(tp2.numerics["logits_sample"], one.numerics["logits_sample"]))
    assert delta <= 1e-4, delta
    code, out, _ = cli(monkeypatch, capsys, "compare", str(one_file), str(tp2_file), "--numerics")
    assert code == 0 and "agree" in out

    df = load_results([tmp_path / "tp2", tmp_path / "one"]).set_index("world_size")
    assert df.loc[2, "chips"] == cpu_chips() and df.loc[2, "tensor_parallel"] == 2 and df.loc[2, "expert_parallel"] == 1
    assert df.loc[1, "chips"] == one.environment["chips"] and df.loc[1, "tensor_parallel"] == 1
    assert world_processes(worlds_in_tmp_path) == []


@pytest.mark.slow
def test_expert_parallel_2_end_to_end(tmp_path, monkeypatch, capsys):
    workload = small_qwen3_moe(tmp_path)
    code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--expert-parallel", "2", "--out",
                         str(tmp_path / "r"), "--no-price", "--chip-power-w", "50")
    assert code == 0, err
    (path,) = (tmp_path / "r").glob("*.json")
    result = read_result(path)
    assert result.status == "ok" and result.point["expert_parallel"] == 2
    assert result.environment["parallel_layout"] == {"tensor": 1, "expert": 2}
    assert result.metrics["output_tokens_per_s"] > 0
    # Rank 0 metered the world's chips over its timed loop: the modelled figure times the world's chips.
    chips = result.environment["chips"]
    assert result.energy["method"] == "modelled" and result.energy["valid"], result.energy
    assert result.metrics["power_mean_w"] == pytest.approx(50.0 * chips)
    tokens = result.metrics["iterations"] * 2 * (16 + 6)
    assert result.metrics["joules_per_token"] == pytest.approx(result.metrics["energy_j"] / tokens)


@pytest.mark.slow
def test_killed_rank_fails_the_point_and_the_sweep_goes_on(tmp_path, monkeypatch, capsys, worlds_in_tmp_path):
    workload = small_qwen3_moe(tmp_path, batch_size=[1, 2])
    monkeypatch.setenv(FAULT_ENV, "1:measure:kill")   # rank 1 of the first world kills itself
    code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--tensor-parallel", "2", "--out",
                         str(tmp_path / "r"), "--no-price")
    assert code == 0, err   # one point of two failed: the run itself did not
    results = sorted((read_result(f) for f in (tmp_path / "r").glob("*.json")), key=lambda r: r.point["batch_size"])
    assert [r.status for r in results] == ["failed", "ok"]
    assert results[0].error == "WorldFailed: rank 1 died (SIGKILL)"
    assert world_processes(worlds_in_tmp_path) == []


@pytest.mark.slow
def test_hung_rank_fails_the_point_within_the_collective_timeout(tmp_path, monkeypatch, capsys, worlds_in_tmp_path):
    workload = small_qwen3_moe(tmp_path)
    data = yaml.safe_load(workload.read_text())
    data["parallel"]["collective_timeout_s"] = 3
    workload.write_text(yaml.safe_dump(data, sort_keys=False))
    monkeypatch.setenv(FAULT_ENV, "1:measure:hang")
    code, _, err = cli(monkeypatch, capsys, "run", str(workload), "--tensor-parallel", "2", "--out",
                       str(tmp_path / "r"), "--no-price")
    assert code == 1   # every point failed
    # Rank 0's collective gave up (the collective timeout), not the world's deadline, which would
    # fail it as "did not finish" after 3 timeouts + 2 x max_seconds.
    (path,) = (tmp_path / "r").glob("*.json")
    result = read_result(path)
    assert result.status == "failed" and result.error.startswith("WorldFailed: rank 0:"), result.error
    assert world_processes(worlds_in_tmp_path) == []


def test_bad_layouts_are_one_line_errors(tmp_path, monkeypatch, capsys):
    tiny = REPO / "tests" / "fixtures" / "tiny_moe.yaml"
    code, _, err = cli(monkeypatch, capsys, "run", str(tiny), "--tensor-parallel", "2", "--out", str(tmp_path))
    assert code == 2 and "--tensor-parallel: 2 ranks cannot split num_key_value_heads=1 evenly" in err
    workload = small_qwen3_moe(tmp_path)
    code, _, err = cli(monkeypatch, capsys, "run", str(workload), "--expert-parallel", "3", "--out", str(tmp_path))
    assert code == 2 and "3 ranks cannot split" in err and "experts evenly" in err
    code, _, err = cli(monkeypatch, capsys, "run", str(workload), "--backend", "jax", "--tensor-parallel", "2")
    assert code == 2 and ("one chip" in err or "not available" in err)
    data = yaml.safe_load(workload.read_text())
    data["parallel"].update(tensor=[1, 2], expert=2)
    workload.write_text(yaml.safe_dump(data, sort_keys=False))
    code, _, err = cli(monkeypatch, capsys, "validate", str(workload))
    assert code == 2 and "parallel.expert" in err and "cannot be combined" in err


def test_memory_check_per_chip_names_the_smallest_layout(monkeypatch):
    from dataclasses import replace

    from tpubench.backends.torch import TorchBackend
    from tpubench.models.torch_models import estimate_bytes
    from tpubench.run.sweep import expand
    from tpubench.run.workload import load_workload
    from tpubench.scenarios.generate.fit import check_fit as _check_memory

    (point,) = [p for p in expand(load_workload(REPO / "workloads" / "qwen3_moe.yaml"), "small") if p.batch_size == 1]
    tp2 = replace(point, tensor_parallel=2)
    one, per_chip = estimate_bytes(point), estimate_bytes(tp2)
    assert per_chip < one
    be = TorchBackend("cuda")   # a device whose free memory is per chip (no chip is needed here)
    monkeypatch.setattr(be, "available_memory", lambda: int((one + per_chip) / 2 / 0.9))
    too_big, notes = _check_memory(be, [point, tp2], "w.yaml")
    assert "does not fit" in too_big[point.key()] and "the smallest layout that fits is --tensor-parallel 2" in \
        too_big[point.key()]
    assert tp2.key() not in too_big and "fits on 2 chips" in notes[tp2.key()] and "but not on one" in notes[tp2.key()]


@pytest.mark.slow
def test_run_under_a_users_torchrun(tmp_path):
    workload = small_qwen3_moe(tmp_path)
    out = tmp_path / "r"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                           "-m", "tpubench.cli", "run", str(workload), "--tensor-parallel", "2", "--out", str(out),
                           "--no-price"], capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = out.glob("*.json")   # rank 0 writes for the world; rank 1 writes nothing
    result = read_result(path)
    assert result.status == "ok" and result.environment["world_size"] == 2
    assert done.stdout.count("wrote 1 result file(s)") == 1
