"""benchmarks/accelerator_check.py: its CPU quick mode end to end, its cross-check wrapper, and
that a phase that overruns is stopped with everything it started."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

pytestmark = pytest.mark.slow   # runs the benchmark script and its child processes

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "accelerator_check.py"


@pytest.fixture(scope="module")
def check_module():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import accelerator_check
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return accelerator_check


def _run_group(cmd, timeout):
    """Run in its own process group; on time-out stop that group, never anything else."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"accelerator_check.py did not finish in {timeout} s:\n{out[-4000:]}")
    return proc.returncode, out


def test_quick_cpu_run_writes_results_and_crosscheck(tmp_path):
    import tpubench

    out_dir = tmp_path / "results"
    # The budget is a cap, not a pace: a quiet host needs well under 150 s, a busy one (load 16 on
    # 2 vCPUs) several times that, and a budget too small for it skips points. The time-out only
    # guards against a hang; whether the script keeps to its budget is its summary's claim.
    rc, out = _run_group([sys.executable, str(SCRIPT), "--quick", "--scale", "small", "--device", "cpu",
                          "--out", str(out_dir), "--budget-s", "1500"], timeout=2400)
    assert rc == 0, out[-4000:]
    assert "$ tpubench backends" in out and "torch" in out

    df = tpubench.load_results(out_dir)
    assert len(df) >= 2, out[-4000:]
    assert set(df["status"]) == {"ok"}
    assert set(df["backend"]) >= {"torch"}
    if importlib.util.find_spec("jax") is not None:   # the JAX path is cheap at this size: it runs too
        assert "jax" in set(df["backend"]), out[-4000:]

    summaries = list(out_dir.glob("accelerator_check_*.summary"))
    assert len(summaries) == 1
    summary = json.loads(summaries[0].read_text())
    assert summary["measured_points"] == len(summary["points"]) == len(df)
    assert summary["wall_s"] > 0
    assert summary["versions"]["torch"]
    assert any("compile" in s["what"] for s in summary["skipped"])   # --quick: eager only, and says so
    files = {Path(f).resolve() for f in df["file"]}
    for point in summary["points"]:
        assert point["status"] == "ok"
        assert Path(point["result_file"]).resolve() in files
        check = point["crosscheck"]
        assert "problem" not in check, check
        assert check["fenced_iterations_recorded"] == \
            check["fenced_iterations_expected"] + check["untimed_iterations_after"]
        for name in ("ttft_ratio", "tpot_ratio"):
            ratio = check[name]
            # Two clocks over the same fenced intervals: near 1; machines are noisy, so loosely.
            assert math.isfinite(ratio) and 0.5 <= ratio <= 2.0, (name, ratio)


def test_timed_session_observes_tpubench_iterations(check_module):
    """The wrapper changes nothing tpubench's loop sees and gets one reading per fence."""
    from tpubench.scenarios.generate.measure import run_iteration

    class FakeSession:
        def __init__(self):
            self.fences = 0
            self.last_logits = "logits"

        def reset(self):
            pass

        def prefill(self):
            return [0]

        def decode(self, tokens, step):
            time.sleep(0.001)
            return [step]

        def fence(self):
            self.fences += 1

    inner = FakeSession()
    session = check_module.TimedSession(inner, check_module.HostClockTimer(), point=None)
    stamps = [run_iteration(session, 5)[0].stamps_s for _ in range(2)]
    assert session.last_logits == "logits"          # everything else is the session's own
    groups = session.finish()
    assert inner.fences == 12 and len(groups) == 2
    for group, ours in zip(groups, stamps):
        assert len(group) == 6 and group[0] == 0.0
        assert all(b >= a for a, b in zip(group, group[1:]))
        assert group[-1] == pytest.approx(ours[-1], rel=0.2, abs=2e-3)


def test_crosscheck_flags_a_disagreeing_timer(check_module):
    point = SimpleNamespace(output_length=3, measurement={"warmup": 1})
    # tpubench saw TTFT 10 ms and TPOT 5 ms; the independent readings say twice as long.
    result = SimpleNamespace(status="ok", metrics={"iterations": 2, "ttft_p50_s": 0.010, "tpot_p50_s": 0.005,
                                                   "e2e_p50_s": 0.020},
                             samples={"ttft_s": [0.010, 0.010], "tpot_s": [0.005, 0.005], "e2e_s": [0.02, 0.02]})
    slow = [0.0, 0.020, 0.030, 0.040]
    # first call + 1 warm-up + 2 measured iterations = 4 groups of readings, 3 fences each
    check = check_module.crosscheck(point, result, [slow] * 4, "test clock", "test")
    assert check["ttft_ratio"] == pytest.approx(0.5) and check["tpot_ratio"] == pytest.approx(0.5)
    assert set(check["flagged"]) == {"ttft_ratio", "tpot_ratio"}
    same = [0.0, 0.010, 0.015, 0.020]
    check = check_module.crosscheck(point, result, [same] * 4, "test clock", "test")
    assert check["flagged"] == [] and "problem" not in check
    assert check["ttft_ratio"] == pytest.approx(1.0) and check["tpot_ratio"] == pytest.approx(1.0)
    check = check_module.crosscheck(point, result, [same] * 3, "test clock", "test")
    assert "recorded 3 fenced iterations, tpubench ran 4" in check["problem"]
    # An MoE point's expert-load pass is one more (untimed) iteration after the timed loop: it is
    # expected, and not read as a measured one.
    result.moe = {"recorded": "one untimed iteration after the timed loop, times its iterations"}
    check = check_module.crosscheck(point, result, [same] * 4 + [slow], "test clock", "test")
    assert "problem" not in check and check["ttft_ratio"] == pytest.approx(1.0)


@pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX")
def test_child_overrun_stops_its_whole_process_group(check_module):
    code = ("import subprocess, sys, time; "
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "print(p.pid, flush=True); time.sleep(60)")
    child = check_module.Child([sys.executable, "-c", code], dict(os.environ), echo=False)
    deadline = time.monotonic() + 60
    while not child.lines and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int(child.lines[0])
    rc, timed_out = child.wait(1.0)
    assert timed_out and child.proc.poll() is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _alive(grandchild):
        time.sleep(0.05)
    assert not _alive(grandchild)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")
