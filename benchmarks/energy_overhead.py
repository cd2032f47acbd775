"""The energy sampler's own cost: a generate point's iteration time with energy sampling on (tpubench's
RAPL source over a fake powercap tree, read at 10 Hz and at 100 Hz) against off.

Two figures per mode:

- the wall-clock overhead: the three modes run interleaved in one process, one window of a few
  iterations each, in a rotated and mirrored order every round (off, 10 Hz, 100 Hz, 100 Hz, 10 Hz,
  off; then 10 Hz, 100 Hz, off, off, ...), so drift and machine noise hit them alike; each round
  compares the modes' sums. Target: under 1%, read from the 95% CI of the mean ratio over rounds.
- the sampler thread's own CPU time as a share of one core over its windows (time.thread_time in
  the thread): what sampling takes from the point when every core is busy, read without the
  wall clock's noise.

The host's bare timer wake-up is printed beside them: the floor under any sampler that wakes on a
timer, whatever it reads.

    python benchmarks/energy_overhead.py [--rounds 30] [--iterations 2] [--threads N]
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import statistics
import tempfile
import time
from pathlib import Path

from _common import session_for, small_point

from tpubench.hardware.energy_sources import find_source
from tpubench.measure.energy import DEFAULT_INTERVAL_S, EnergyMeter
from tpubench.measure.stats import mean_ci95
from tpubench.scenarios.registry import point_label


def fake_powercap(root: Path) -> Path:
    """One CPU package zone, as /sys/class/powercap has it."""
    zone = root / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").write_text("123456789\n")
    (zone / "max_energy_range_uj").write_text("262143328850\n")
    return root


def timer_wake_s(hz: float = 100, seconds: float = 2.0) -> float:
    """CPU seconds this process spends per wake of a bare time.sleep loop at `hz`: the host's (and
    its hypervisor's) cost of a timer wake-up, which every periodic sampler pays."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    before = usage.ru_utime + usage.ru_stime
    wakes = int(hz * seconds)
    for _ in range(wakes):
        time.sleep(1 / hz)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (usage.ru_utime + usage.ru_stime - before) / wakes


def timed_window(session, steps: int, count: int, meter) -> tuple[float, float, int]:
    """Seconds of `count` iterations, and the sampler's CPU seconds and readings over them."""
    from tpubench.scenarios.generate.measure import run_iteration

    start = time.perf_counter()
    with meter.window() if meter is not None else contextlib.nullcontext():
        for _ in range(count):
            run_iteration(session, steps)
    wall = time.perf_counter() - start
    if meter is None:
        return wall, 0.0, 0
    return wall, meter.result.sampler_cpu_s, meter.result.readings


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads (default: torch's, every core); fewer leaves a core spare, "
                             "as an accelerator host has")
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    point = small_point(batch=args.batch)
    session, _ = session_for(point)
    with tempfile.TemporaryDirectory() as tmp:
        source, why = find_source("cpu", powercap_root=fake_powercap(Path(tmp) / "powercap"))
        assert source is not None, why
        meters = {"off": None, "10 Hz": EnergyMeter(source, 0.1, idle_s=0), "100 Hz": EnergyMeter(source, 0.01, idle_s=0)}
        names = list(meters)
        ratios = {name: [] for name in names[1:]}
        wall = {name: 0.0 for name in names}
        cpu = {name: 0.0 for name in names}
        readings = {name: 0 for name in names}
        with session:
            for meter in meters.values():   # warm-up every mode
                timed_window(session, point.output_length, 1, meter)
            for k in range(args.rounds):
                order = names[k % len(names):] + names[:k % len(names)]
                sums = dict.fromkeys(names, 0.0)
                for name in order + order[::-1]:
                    seconds, sampler_cpu, count = timed_window(session, point.output_length, args.iterations, meters[name])
                    sums[name] += seconds
                    wall[name] += seconds
                    cpu[name] += sampler_cpu
                    readings[name] += count
                for name in ratios:
                    ratios[name].append(sums[name] / sums["off"])
        source.close()
    wake = timer_wake_s()
    print(f"point: {point.workload} small, {point_label(point)}, torch threads {torch.get_num_threads()}, "
          f"{args.iterations} iterations a window x 2 windows a mode x {args.rounds} rounds")
    print(f"host timer wake-up (bare time.sleep at 100 Hz): {wake * 1e6:.0f} us CPU a wake "
          f"-> {wake * 100:.2%} of a core at 100 Hz before any reading")
    wall_verdicts, worst_cpu = [], 0.0
    for name, r in ratios.items():
        overhead, (mean, low, high) = statistics.median(r) - 1, mean_ci95(r)
        share = cpu[name] / wall[name]
        worst_cpu = max(worst_cpu, share)
        # On a noisy host the interval can span the target: then the wall clock cannot tell, and the
        # sampler's CPU share is the figure to read.
        wall_verdicts.append("PASS" if high - 1 < 0.01 else "FAIL" if low - 1 > 0.01 else "INCONCLUSIVE")
        print(f"sampling at {name}: wall-clock overhead at the median {overhead:+.2%}, mean {mean - 1:+.2%} "
              f"(95% CI {low - 1:+.2%} .. {high - 1:+.2%}) -> {wall_verdicts[-1]}; sampler "
              f"{readings[name] / wall[name]:.0f} readings/s, {cpu[name] / readings[name] * 1e6:.0f} us CPU a reading, "
              f"{share:.2%} of a core")
    wall_verdict = next((v for v in ("FAIL", "INCONCLUSIVE") if v in wall_verdicts), "PASS")
    print(f"energy sampler overhead (target < 1%): wall clock -> {wall_verdict}; sampler CPU, worst mode "
          f"{worst_cpu:.2%} of a core (what a host with no spare core pays) -> {'PASS' if worst_cpu < 0.01 else 'FAIL'}")
    # tpubench samples at DEFAULT_INTERVAL_S (issue 34: the 100 Hz goal, or a default rate that meets
    # it with its cost stated); every result records its own cost (energy.sampler_cpu_s, readings).
    default = f"{1 / DEFAULT_INTERVAL_S:g} Hz"
    if default in cpu:
        share = cpu[default] / wall[default]
        print(f"at tpubench's sampling rate ({default}, DEFAULT_INTERVAL_S = {DEFAULT_INTERVAL_S:g} s): sampler "
              f"{share:.2%} of a core -> {'PASS' if share < 0.01 else 'FAIL'}")


if __name__ == "__main__":
    main()
