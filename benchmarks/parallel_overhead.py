"""Multi-chip harness overhead: the decode steps of a 2-process tensor-parallel world timed by
tpubench's own loop (`run_iteration`: fence, stamp, bookkeeping) against a bare loop doing the same
sharded model calls and fences, paired and interleaved round by round on the same world (ABAB...),
so machine noise hits both alike. Target: at most 2% apart at the median.

    python benchmarks/parallel_overhead.py [--rounds 12] [--batch 8]

It starts its own 2-rank world (gloo on the CPU) with torch.distributed's launcher; rank 0 prints.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from _common import small_point
from harness_overhead import paired_rounds

from tpubench.scenarios.registry import point_label


def worker(args) -> None:
    import torch
    import torch.distributed as dist

    from tpubench.backends import get_backend
    from tpubench.measure.world import join_world
    from tpubench.scenarios.generate.measure import _vocab_size, make_prompt

    torch.set_num_threads(max(1, args.threads))
    point = replace(small_point(batch=args.batch), tensor_parallel=2)
    be = get_backend("torch", "cpu")
    join_world(be, 120)
    built = be.build_sharded(point, args.checkpoint)
    prompt = make_prompt(point.measurement["seed"], point.batch_size, point.input_length, _vocab_size(point))
    session = be.session(built, point, prompt)
    steps = point.output_length - 1
    bare, harness, ratios = paired_rounds(session, steps, args.rounds)
    if dist.get_rank() == 0:
        mb, mh = statistics.median(bare), statistics.median(harness)
        overhead = statistics.median(ratios) - 1
        print(f"point: {point.workload} small, {point_label(point)}, world of 2 (gloo, {args.threads} thread(s) per rank), "
              f"{steps} decode steps x {args.rounds} rounds")
        print(f"bare 2-process loop decode step   median {mb * 1e3:.3f} ms")
        print(f"tpubench 2-process decode step    median {mh * 1e3:.3f} ms")
        print(f"per-round overhead: median {overhead:+.2%}, range {min(ratios) - 1:+.2%} .. {max(ratios) - 1:+.2%}")
        print(f"overhead at the median: {overhead:+.2%} (target <= +2% apart) -> {'PASS' if abs(overhead) <= 0.02 else 'FAIL'}")
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--checkpoint", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) // 2), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if "RANK" in os.environ:
        worker(args)
        return
    from tpubench.models.torch_models import save_host_checkpoint

    with tempfile.TemporaryDirectory(prefix="tpubench-bench-") as tmp:
        save_host_checkpoint(small_point(batch=args.batch), Path(tmp) / "weights")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
               str(Path(__file__).resolve()), "--rounds", str(args.rounds), "--batch", str(args.batch),
               "--checkpoint", str(Path(tmp) / "weights"), "--threads", str(args.threads)]
        sys.exit(subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": str(args.threads)}).returncode)


if __name__ == "__main__":
    main()
