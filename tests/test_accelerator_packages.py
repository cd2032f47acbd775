"""tpubench against the real accelerator packages, on a host without the accelerator: PyPI's
torch-tpu wheel (TorchTPU, with libtpu) and torch-xla with PJRT's CPU client, each in a venv of its
own named by TPUBENCH_TORCH_TPU_PYTHON / TPUBENCH_TORCH_XLA_PYTHON (.ci/run makes both; torch-xla
pins a torch older than tpubench's own). tpubench runs there as a subprocess, from this checkout.
Skipped, with the reason, where a variable is not set."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tpubench.backends.torch import EAGER_MODE_ENVIRONMENT, TORCH_TPU_EAGER_MODES, TorchBackend

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "fixtures" / "tiny_moe.yaml"
TORCH_TPU_PYTHON = os.environ.get("TPUBENCH_TORCH_TPU_PYTHON")
TORCH_XLA_PYTHON = os.environ.get("TPUBENCH_TORCH_XLA_PYTHON")

pytestmark = pytest.mark.slow   # subprocesses that import torch and the device package

needs_torch_tpu = pytest.mark.skipif(not TORCH_TPU_PYTHON, reason="TPUBENCH_TORCH_TPU_PYTHON is not set: no "
                                     "torch-tpu venv (.ci/run makes one)")
needs_torch_xla = pytest.mark.skipif(not TORCH_XLA_PYTHON, reason="TPUBENCH_TORCH_XLA_PYTHON is not set: no "
                                     "torch-xla venv (.ci/run makes one)")
_CLI = "import sys; from tpubench.cli import main; sys.argv[0] = 'tpubench'; main()"


def _env(**extra: str) -> dict[str, str]:
    """This checkout's tpubench first on the path, a wide console (rich wraps table cells at the
    width it sees), and none of this process's device settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TORCH_TPU_", "TPU_", "PJRT_", "XLA_")) and k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(REPO), COLUMNS="400", PYTHONWARNINGS="ignore", **extra)
    return env


def _tpubench(python: str, *args: str, cwd: Path, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-c", _CLI, *args], cwd=cwd, env=_env(**env), capture_output=True, text=True,
                          timeout=timeout)


def _python(python: str, code: str, *, cwd: Path, timeout: float = 120, **env: str) -> str:
    proc = subprocess.run([python, "-c", code], cwd=cwd, env=_env(**env), capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _row(table: str, device: str) -> str:
    """The `tpubench backends` row of a torch device (one line: the console is wide)."""
    rows = [line for line in table.splitlines() if re.search(rf"\btorch\s*│\s*{device}\s*│", line)]
    assert len(rows) == 1, table
    return " ".join(rows[0].split())


# ----------------------------------------------------------------------------- TorchTPU (torch-tpu)


@needs_torch_tpu
def test_torch_tpu_installed_without_a_chip_is_listed_and_refused(tmp_path):
    versions = json.loads(_python(TORCH_TPU_PYTHON, "import json; from importlib.metadata import version as v; "
                                  "print(json.dumps({d: v(d) for d in ('torch', 'torch-tpu', 'libtpu')}))",
                                  cwd=tmp_path))
    assert versions["torch-tpu"] and versions["libtpu"], versions

    listed = _tpubench(TORCH_TPU_PYTHON, "backends", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr[-3000:]
    # docs/measurement.md#backends: why not, naming the hardware (the package is there)
    assert "│ no │ torch_tpu is installed but no tpu device is present" in _row(listed.stdout, "tpu")
    assert "│ yes │" in _row(listed.stdout, "cpu")

    # Asking for the device: one line naming it, exit 2, no traceback, nothing run on the CPU.
    ran = _tpubench(TORCH_TPU_PYTHON, "run", str(TINY), "--device", "tpu", "--out", str(tmp_path / "r"),
                    cwd=tmp_path)
    assert ran.returncode == 2, ran.stdout + ran.stderr[-3000:]
    assert ran.stderr.strip().splitlines()[-1] == ("error: --device: torch:tpu is not available here: "
                                                   "torch_tpu is installed but no tpu device is present")
    assert "Traceback" not in ran.stderr and not (tmp_path / "r").exists()


@needs_torch_tpu
def test_eager_mode_variables_are_the_ones_torch_tpu_reads(tmp_path):
    """Each execution mode's variables, set as tpubench sets them in a point's fresh process, put
    the installed TorchTPU in that mode (`torch.tpu.eager_mode` answers without a TPU)."""
    assert set(EAGER_MODE_ENVIRONMENT) < set(TORCH_TPU_EAGER_MODES)
    code = "import torch; from tpubench.backends.torch import torch_tpu_eager_mode; print(torch_tpu_eager_mode())"
    for mode, expected in TORCH_TPU_EAGER_MODES.items():
        point = type("P", (), {"execution_mode": mode})()
        variables = TorchBackend("tpu").process_environment(point)
        out = _python(TORCH_TPU_PYTHON, code, cwd=tmp_path, **variables)
        assert out.strip().splitlines()[-1] == expected, (mode, variables, out)


@needs_torch_tpu
def test_the_fence_reads_back_in_the_mode_torch_tpu_defers_and_its_profiler_config_is_there(tmp_path):
    """docs/measurement.md#device-sources against the installed wheel: only DEFER_AND_FUSE makes
    tpubench's fence read a value back; TorchTPU's profiler config and memory summaries exist."""
    code = ("import torch; from tpubench.backends.torch import TorchDevice; "
            "print(TorchDevice('tpu').deferred, hasattr(torch.tpu, '_hbm_usage_summary'), "
            "hasattr(torch.tpu, '_get_cache_stats'), "
            f"type(torch.tpu.profiler.TpuProfilerConfig(run_dir={str(tmp_path)!r})).__name__)")
    deferred = _python(TORCH_TPU_PYTHON, code, cwd=tmp_path, TORCH_TPU_DEFER_AND_FUSE="1").strip().splitlines()[-1]
    assert deferred == "True True True TpuProfilerConfig", deferred
    default = _python(TORCH_TPU_PYTHON, code, cwd=tmp_path).strip().splitlines()[-1]
    assert default.startswith("False "), default


# ----------------------------------------------------------------------------- PyTorch/XLA on the CPU


@needs_torch_xla
def test_torch_xla_on_the_cpu_is_listed_as_the_pjrt_cpu_client(tmp_path):
    listed = _tpubench(TORCH_XLA_PYTHON, "backends", cwd=tmp_path, PJRT_DEVICE="CPU")
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert re.search(r"│ yes │ CPU via torch_xla \d+\.\d+", _row(listed.stdout, "xla")), listed.stdout


@needs_torch_xla
def test_a_qwen3_moe_point_runs_on_xla_cpu_with_its_graph_compiles_recorded(tmp_path):
    """The tiny Qwen3-MoE through torch_xla's lazy tensors on PJRT's CPU client: batched_mm experts
    run whole on the device, and the result counts the graphs XLA compiled in each phase; the eager
    experts loop (a data-dependent nonzero, which torch_xla runs on the host) is an invalid point."""
    data = yaml.safe_load(TINY.read_text())
    data["model"]["experts_implementation"] = ["batched_mm", "eager"]
    data["scenario"]["batch_size"] = 1
    data["measurement"].update(warmup=1, min_iterations=2)
    workload = tmp_path / "tiny_xla.yaml"
    workload.write_text(yaml.safe_dump(data))
    ran = _tpubench(TORCH_XLA_PYTHON, "run", str(workload), "--device", "xla", "--scale", "small", "--no-price",
                    "--out", str(tmp_path / "r"), cwd=tmp_path, timeout=600, PJRT_DEVICE="CPU")
    assert ran.returncode in (0, 1), ran.stdout[-3000:] + ran.stderr[-3000:]   # 1: a point is invalid
    results = {r["point"]["experts_implementation"]: r
               for r in (json.loads(f.read_text()) for f in (tmp_path / "r").glob("*.json"))}
    assert set(results) == {"batched_mm", "eager"}, ran.stdout[-3000:]

    ok = results["batched_mm"]
    assert ok["status"] == "ok", ok["error"]
    env = ok["environment"]
    assert env["accelerator_name"] == "XLA:CPU" and env["torch_xla"] and env["transformers"].startswith("5.")
    c = ok["compile"]
    assert c["graphs_compiled_first_call"] >= 1 and c["recompiles_timed"] == 0
    # torch_xla's own counter of graphs compiled (UncachedCompile) agrees with the per-phase counts
    # (from its CompileTime metric), and the timed loop only reused compiled graphs.
    assert c["xla_graphs_compiled"] == c["graphs_compiled_first_call"] + c["graphs_compiled_warmup"]
    assert c["xla_graphs_cached"] > 0 and c["xla_graph_executions"] >= c["xla_graphs_cached"]
    assert c["xla_compile_time_total_s"] > 0
    assert c["cpu_fallback_ops_timed"] == [] and ok["validity"]["valid"], ok["validity"]
    assert ok["metrics"]["output_tokens_per_s"] > 0

    loop = results["eager"]
    assert loop["status"] == "ok", loop["error"]
    assert "aten::nonzero" in loop["compile"]["cpu_fallback_ops_timed"] and not loop["validity"]["valid"]
    # the loop's host reads cut the lazy graph into more pieces, each compiled
    assert loop["compile"]["xla_graphs_compiled"] > c["xla_graphs_compiled"]
