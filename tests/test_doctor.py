"""`tpubench doctor` (issue 51): its verdicts on hand-made figures, what it tells a user to install,
and the whole command on this CPU host (device parts skipped with their reasons), writing a result
file and a readiness summary; its 2-rank collective through gloo on two CPU processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tpubench.doctor import stack
from tpubench.doctor.verdicts import FENCE_MIN_GROWTH, Check, fence_verdict, memory_verdict, readiness
from tpubench.hardware.host_accelerators import HostAccelerators

REPO = Path(__file__).resolve().parent.parent


def test_a_fence_that_waits_sees_a_bigger_matmul_take_longer():
    waits = fence_verdict({1024: 0.0001, 4096: 0.004, 8192: 0.03})
    assert waits.status == "ok" and waits.figures["growth"] == pytest.approx(300)
    early = fence_verdict({1024: 0.00002, 4096: 0.000021, 8192: 0.000025})   # launch cost only
    assert early.status == "fail" and "returns before the work has run" in early.detail
    assert fence_verdict({1024: 1.0, 8192: FENCE_MIN_GROWTH}).status == "ok"


def test_a_peak_memory_of_zero_is_a_failure_never_a_figure():
    assert memory_verdict(0, 1 << 28, "src").status == "fail"
    assert memory_verdict(None, 1 << 28, "src").status == "fail"
    assert memory_verdict(1 << 27, 1 << 28, "src").status == "fail"
    assert memory_verdict(3 << 28, 1 << 28, "src").status == "ok"


def test_ready_only_without_a_failure_and_the_fixes_are_listed():
    ok, skip = Check("a", "ok", ""), Check("b", "skip", "no chips")
    assert readiness([ok, skip]) == (True, [])
    assert readiness([ok, Check("c", "fail", "x", fix="pip install y")]) == (False, ["c: pip install y"])


@pytest.mark.parametrize("kind, package, words", [
    ("tpu", "torch_tpu", "pip install torch==2.13.0 && pip install 'tpubench[tpu]'"),
    ("neuron", "torch_neuronx", "pip install 'tpubench[neuron]' --extra-index-url https://pip.repos.neuron.amazonaws.com"),
])
def test_a_host_with_chips_and_without_their_package_is_told_what_to_install(monkeypatch, kind, package, words):
    real = stack.importlib.util.find_spec
    monkeypatch.setattr(stack.importlib.util, "find_spec", lambda name: None if name == package else real(name))
    found = HostAccelerators(kind, "chip", 8, "test")
    checks = stack.stack_checks(found, stack.default_device(found), {})
    failed = [c for c in checks if c.status == "fail"]
    assert [c.name for c in failed] == [f"{kind} package"] and failed[0].fix.startswith(words)


def test_asking_for_a_device_the_host_lacks_fails_the_chips_check():
    checks = stack.stack_checks(HostAccelerators("cpu", None, 2, "test"), "tpu", {})
    assert checks[0].status == "fail" and "run this on the tpu machine" in checks[0].fix


def test_doctor_starts_without_torch():
    code = ("import sys; from tpubench.cli import main; sys.argv = ['tpubench', 'doctor', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\nprint('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert done.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.slow   # the device probe and `tpubench run` as child processes
def test_doctor_on_this_cpu_host_runs_the_small_workload_and_says_why_it_skips_the_rest(tmp_path):
    out = tmp_path / "doctor"
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-c", "import sys; sys.argv[0] = 'tpubench'; from tpubench.cli import main; "
                           "main()", "doctor", "--quick", "--device", "cpu", "--out", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    summaries = list(out.glob("doctor_*.summary"))
    assert len(summaries) == 1, done.stdout + done.stderr[-3000:]
    summary = json.loads(summaries[0].read_text())
    checks = {c["name"]: c for c in summary["checks"]}
    assert checks["device"]["status"] == "ok" and checks["memory"]["status"] == "ok"
    assert checks["memory"]["figures"]["peak_bytes"] > 0
    for name, why in [("fence", "no queue to fence"), ("compile", "--quick"), ("collective", "2 chips"),
                      ("full model, batch 1", "for an accelerator")]:
        assert checks[name]["status"] == "skip" and why in checks[name]["detail"], checks[name]
    small = checks["small workload"]
    assert small["status"] == "ok", small
    results = list(out.glob("*.json"))
    assert len(results) == 1
    result = json.loads(results[0].read_text())
    assert result["status"] == "ok" and result["point"]["batch_size"] == 1
    assert result["environment"]["device_sources"]["compile_backend"] == "inductor"
    assert summary["ready"] is True and done.returncode == 0, done.stdout[-3000:]
    assert "READY: " in done.stdout and summary["versions"]["torch"]


@pytest.mark.slow   # two processes join a gloo process group
def test_the_two_rank_collective_runs_through_the_backends_process_group():
    from tpubench.doctor.command import two_rank_all_reduce

    check = two_rank_all_reduce("cpu")
    assert check.status == "ok", check.detail
    assert check.figures["backend"] == "gloo" and "expected 3" in check.detail
