"""Start-up of a sharded point: how long a 2-rank world takes to start (launch to every rank in the
process group) and to load the small qwen3_moe sharded, against the single-process load, measured
by `tpubench run` itself (result timings), alternating tp2 and single-chip runs.

    python benchmarks/parallel_startup.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import yaml
from _common import ROOT


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from tpubench.run.runner import run_sweep

    data = yaml.safe_load((ROOT / "workloads" / "qwen3_moe.yaml").read_text())
    data["scales"]["small"]["scenario"] = {"batch_size": 1, "input_length": 16, "output_length": 4}
    data["measurement"] = {"warmup": 0, "min_iterations": 1, "min_seconds": 0.0, "max_seconds": 10, "max_cv": 10.0}
    figures: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        workload = Path(tmp) / "qwen3_moe.yaml"
        workload.write_text(yaml.safe_dump(data))
        for r in range(args.rounds):
            for tp in (2, 1):
                t = time.perf_counter()
                (outcome,) = run_sweep(workload, scale="small", out_dir=Path(tmp) / f"r{r}-tp{tp}",
                                       tensor_parallel=tp)
                wall = time.perf_counter() - t
                timing = outcome.result.timing
                figures.setdefault(f"tp{tp} point wall (weights, world, load, measure)", []).append(wall)
                figures.setdefault(f"tp{tp} load (max over ranks)", []).append(timing["load_s"])
                if tp == 2:
                    figures.setdefault("tp2 world start (launch -> process group on every rank)", []).append(
                        timing["world_start_s"])
    for name, values in figures.items():
        print(f"{name:<60} median {statistics.median(values):6.2f} s  (min {min(values):.2f}, max {max(values):.2f}, "
              f"{len(values)} runs)")
    one = statistics.median(figures["tp1 load (max over ranks)"])
    two = statistics.median(figures["tp2 load (max over ranks)"])
    start = statistics.median(figures["tp2 world start (launch -> process group on every rank)"])
    print(f"sharded load is {two / one:.1f}x the single-process load; world start adds {start:.2f} s per point")


if __name__ == "__main__":
    main()
