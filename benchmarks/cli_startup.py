"""`tpubench --help` start-up time (target < 0.5 s; torch and jax are not imported at start-up).

    python benchmarks/cli_startup.py [--runs 10]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    exe = shutil.which("tpubench")
    cmd = [exe, "--help"] if exe else [sys.executable, "-m", "tpubench.cli", "--help"]
    subprocess.run(cmd, capture_output=True, check=True)  # warm the file cache
    times = []
    for _ in range(args.runs):
        t = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True)
        times.append(time.perf_counter() - t)
    probe = subprocess.run([sys.executable, "-c", "import sys, tpubench.cli; print(sorted(m for m in ('torch', 'jax', 'transformers', 'pandas') if m in sys.modules))"],
                           capture_output=True, text=True, check=True).stdout.strip()
    med = statistics.median(times)
    print(f"{' '.join(cmd)}: median {med * 1e3:.0f} ms, min {min(times) * 1e3:.0f} ms over {args.runs} runs")
    print(f"heavy modules imported at start-up: {probe}")
    print(f"target < 500 ms -> {'PASS' if med < 0.5 else 'FAIL'}")


if __name__ == "__main__":
    main()
