"""The energy sampler's own cost: a generate point's iteration time with energy sampling on (a fake
source read at 10 Hz and at 100 Hz, each read as costly as a sysfs counter read) against off.

The three modes run interleaved in one process, a few iterations each per round and in a rotated
order every round (off, 10 Hz, 100 Hz; then 10 Hz, 100 Hz, off; ...), so machine noise and drift
hit them alike; each round compares medians. Target: under 1% at the median over rounds.

    python benchmarks/energy_overhead.py [--rounds 30] [--iterations 2]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from pathlib import Path

from _common import session_for, small_point
from tpubench.hardware.energy_sources import Reading
from tpubench.measure.energy import EnergyMeter
from tpubench.scenarios.registry import point_label


class FileCounterSource:
    """Reads a counter from a file on every sample, as RAPL does from sysfs."""

    name, method, detail, devices = "file-counter", "measured", "a counter file", 1

    def __init__(self, folder: Path):
        self.path = folder / "energy_uj"
        self.path.write_text("0")
        self.t0 = time.perf_counter()

    def read(self) -> Reading:
        t = time.perf_counter()
        int(self.path.read_text())
        return Reading(t, joules=(100.0 * (t - self.t0),))

    def close(self) -> None:
        pass


def iterations(session, steps: int, count: int, meter) -> list[float]:
    from tpubench.scenarios.generate.measure import run_iteration

    with meter.window() if meter is not None else contextlib.nullcontext():
        return [run_iteration(session, steps)[0].stamps_s[-1] for _ in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    point = small_point(batch=args.batch)
    session, _ = session_for(point)
    with tempfile.TemporaryDirectory() as tmp:
        source = FileCounterSource(Path(tmp))
        meters = {"off": None, "10 Hz": EnergyMeter(source, 0.1, idle_s=0), "100 Hz": EnergyMeter(source, 0.01, idle_s=0)}
        ratios = {name: [] for name in meters if name != "off"}
        medians = {name: [] for name in meters}
        with session:
            for meter in meters.values():   # warm-up every mode
                iterations(session, point.output_length, 2, meter)
            names = list(meters)
            for k in range(args.rounds):
                order = names[k % len(names):] + names[:k % len(names)]
                round_median = {name: statistics.median(iterations(session, point.output_length, args.iterations,
                                                                   meters[name])) for name in order}
                for name, value in round_median.items():
                    medians[name].append(value)
                for name in ratios:
                    ratios[name].append(round_median[name] / round_median["off"])
        last = meters["100 Hz"].result
    print(f"point: {point.workload} small, {point_label(point)}, {args.iterations} iterations x {args.rounds} rounds")
    for name, values in medians.items():
        print(f"{name:>6}: iteration median {statistics.median(values) * 1e3:.2f} ms")
    worst = 0.0
    for name, r in ratios.items():
        overhead = statistics.median(r) - 1
        worst = max(worst, overhead)
        print(f"sampling at {name}: overhead at the median {overhead:+.2%} (range {min(r) - 1:+.2%} .. {max(r) - 1:+.2%})")
    print(f"last 100 Hz window: {last.window_s:.2f} s, {last.energy_j:.1f} J from the fake counter (valid: {last.valid})")
    print(f"energy sampler overhead, worst mode: {worst:+.2%} (target < +1%) -> {'PASS' if worst < 0.01 else 'FAIL'}")


if __name__ == "__main__":
    main()
