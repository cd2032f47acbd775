"""README's main command, timed end to end (model build included). Target: within 90 s on 2 cores.

    python benchmarks/main_command.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    exe = shutil.which("tpubench") or f"{sys.executable} -m tpubench.cli"
    with tempfile.TemporaryDirectory() as out:
        cmd = f"{exe} run workloads/qwen3_moe.yaml --out {out}"
        t = time.perf_counter()
        proc = subprocess.run(cmd, shell=True, cwd=ROOT, capture_output=True, text=True)
        elapsed = time.perf_counter() - t
        print(proc.stdout[-3000:])
        if proc.returncode != 0:
            print(proc.stderr[-2000:])
    print(f"`tpubench run workloads/qwen3_moe.yaml` took {elapsed:.1f} s (exit {proc.returncode}); "
          f"target <= 90 s -> {'PASS' if elapsed <= 90 and proc.returncode == 0 else 'FAIL'}")


if __name__ == "__main__":
    main()
