"""CLI response times: `tpubench --help`, `tpubench validate` on every shipped workload, and the
refusal of a sweep of 8 million points (targets: <= 0.3 s median for --help and validate (issue 34),
< 1 s for the refusal; torch, jax and transformers are imported by none of them). Each line also
gives the CPU time the command used: what to compare on a machine others are using.

    python benchmarks/cli_startup.py [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def timed(cmd: list[str], runs: int, expect_code: int = 0) -> tuple[list[float], list[float]]:
    """Wall seconds and CPU seconds (user + system of the child) of each run. On a shared machine
    the wall time counts other processes' turns too; the CPU time is the command's own work."""
    # Warm the file cache, and write the bytecode an installed package has (pip compiles it): where
    # PYTHONDONTWRITEBYTECODE is set (some CI and sandboxes), every run would otherwise compile the
    # modules edited since their .pyc was written, ~100 ms that no installed tpubench pays.
    warm_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(cmd, capture_output=True, env=warm_env)
    times, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        times.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != expect_code:
            sys.exit(f"{' '.join(cmd)} exited {done.returncode}, expected {expect_code}: {done.stderr.strip()}")
    return times, cpu


def huge_sweep(folder: Path) -> Path:
    """qwen3_moe with 200 batch sizes x 200 input lengths x 200 output lengths: 8,000,000 points."""
    data = yaml.safe_load((ROOT / "workloads" / "qwen3_moe.yaml").read_text())
    axis = list(range(1, 201))
    data["scenario"].update(batch_size=axis, input_length=axis, output_length=axis)
    path = folder / "huge_sweep.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    exe = shutil.which("tpubench")
    base = [exe] if exe else [sys.executable, "-m", "tpubench.cli"]
    workloads = sorted(str(p) for p in (ROOT / "workloads").glob("*.yaml"))
    with tempfile.TemporaryDirectory() as tmp:
        cases = [
            ("--help", base + ["--help"], 0, 0.3),
            *[(f"validate {Path(w).name}", base + ["validate", w], 0, 0.3) for w in workloads],
            ("validate 8M-point sweep (refused)", base + ["validate", str(huge_sweep(Path(tmp)))], 2, 1.0),
            ("run 8M-point sweep (refused)", base + ["run", str(Path(tmp) / "huge_sweep.yaml"), "--out",
                                                    str(Path(tmp) / "r")], 2, 1.0),
        ]
        failed = False
        for label, cmd, code, target in cases:
            times, cpu = timed(cmd, args.runs, code)
            med = statistics.median(times)
            ok = med <= target
            failed |= not ok
            print(f"{label:<40} median {med * 1e3:5.0f} ms, min {min(times) * 1e3:5.0f} ms, "
                  f"CPU median {statistics.median(cpu) * 1e3:5.0f} ms over {args.runs} runs; "
                  f"target <= {target * 1e3:.0f} ms -> {'PASS' if ok else 'FAIL'}")
    probe = ("import sys; from tpubench.cli import main; sys.argv = ['tpubench', 'validate', *sys.argv[1:]]\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in ('torch', 'jax', 'transformers', 'pandas') if m in sys.modules), file=sys.stderr)")
    heavy = subprocess.run([sys.executable, "-c", probe, *workloads], capture_output=True, text=True).stderr.strip()
    print(f"heavy modules imported by validate: {heavy.splitlines()[-1] if heavy else '?'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
