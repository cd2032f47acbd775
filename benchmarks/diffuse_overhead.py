"""Harness overhead of a diffusion point: tpubench's staged pipeline call (the fenced marks, the
wrapped text encoders and VAE decode, the denoiser's pre-hook and the step-end callback that cut a
call into stages: scenarios/diffuse/stages.py) against a bare loop of the same pipeline calls on
the same pipeline with the same fence, paired and interleaved in one process (ABBA...) so machine
noise hits both alike. Target: at most 2% apart at the median.

    python benchmarks/diffuse_overhead.py [--workload workloads/flux_diffuse.yaml] [--rounds 40] [--calls 1] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from _common import ROOT


def small_point(workload: str):
    from tpubench.run.workload import load_workload
    from tpubench.scenarios.registry import SCENARIOS

    w = load_workload(ROOT / workload)
    scenario = SCENARIOS[w.scenario.kind]
    return scenario.points(w, "small", scenario.sweep_axes(w, "small"), workload)[0]


def bare_calls(pipe, kwargs, point, calls: int, fence) -> list[float]:
    """The reference: the pipeline called as a user would, fenced before and after."""
    from tpubench.scenarios.diffuse.measure import generator

    out = []
    for _ in range(calls):
        fence()
        t = time.perf_counter()
        pipe(**kwargs, generator=generator(point), output_type="np", return_dict=False)
        fence()
        out.append(time.perf_counter() - t)
    return out


def harness_calls(staged, kwargs, point, calls: int) -> list[float]:
    """tpubench's own call, as measure.py times it: the whole of the staged call."""
    from tpubench.scenarios.diffuse.measure import generator

    return [staged.call(**kwargs, generator=generator(point))[0].whole_s for _ in range(calls)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", default="workloads/flux_diffuse.yaml")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--calls", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args()

    import torch

    from tpubench.backends.torch import TorchDevice
    from tpubench.measure.timing import fenced_clock
    from tpubench.scenarios.diffuse.build import build_pipeline, quiet_diffusers
    from tpubench.scenarios.diffuse.families import denoiser
    from tpubench.scenarios.diffuse.measure import call_kwargs
    from tpubench.scenarios.diffuse.stages import StagedPipeline
    from tpubench.scenarios.registry import point_label

    if args.threads:
        torch.set_num_threads(args.threads)
    point = small_point(args.workload)
    with quiet_diffusers():
        pipe = build_pipeline(point, "cpu")
    pipe.set_progress_bar_config(disable=True)
    fence = TorchDevice("cpu").fence
    kwargs = call_kwargs(point)
    bare, harness, ratios = [], [], []

    def run_harness(calls):
        # The hooks are installed only for the harness half: the bare half is the plain pipeline.
        s = StagedPipeline(pipe, denoiser(point.family), fenced_clock(fence))
        try:
            return harness_calls(s, kwargs, point, calls)
        finally:
            s.close()

    with torch.inference_mode():
        bare_calls(pipe, kwargs, point, 2, fence)   # warm both paths up
        run_harness(2)
        for k in range(args.rounds):
            # ABBA...: which path goes first alternates, so neither always follows the other.
            if k % 2 == 0:
                h, b = run_harness(args.calls), bare_calls(pipe, kwargs, point, args.calls, fence)
            else:
                b = bare_calls(pipe, kwargs, point, args.calls, fence)
                h = run_harness(args.calls)
            harness.extend(h)
            bare.extend(b)
            # Paired per round: a burst of load on a shared machine hits both halves of a round.
            ratios.append(statistics.median(h) / statistics.median(b))
    mb, mh = statistics.median(bare), statistics.median(harness)
    over = statistics.median(ratios) - 1
    print(f"point: {point.workload} small, {point_label(point)}, {args.calls} calls x {args.rounds} rounds, "
          f"{torch.get_num_threads()} threads")
    print(f"bare pipeline call       median {mb * 1e3:.2f} ms")
    print(f"tpubench staged call     median {mh * 1e3:.2f} ms")
    print(f"per-round overhead: median {over:+.2%}, range {min(ratios) - 1:+.2%} .. {max(ratios) - 1:+.2%}")
    # What the harness adds to a call, apart from load: one fenced clock read per mark (start,
    # encoders x2, first step, one per step, decode x2, end). Timed alone, it does not drift with
    # the machine's load as whole calls on a shared host do.
    now = fenced_clock(fence)
    marks = 7 + int(point.params["steps"])
    t = time.perf_counter()
    for _ in range(10000):
        now()
    per_mark = (time.perf_counter() - t) / 10000
    print(f"fenced clock reads: {marks} per call x {per_mark * 1e6:.2f} us = {marks * per_mark * 1e6:.1f} us "
          f"= {marks * per_mark / mb:.4%} of the bare call")
    print(f"harness overhead at the median: {over:+.2%} (target <= +2% either way) -> "
          f"{'PASS' if abs(over) <= 0.02 else 'FAIL'}")


if __name__ == "__main__":
    main()
