"""The MoE kernel A/B at small scale on this machine (issue 20): workloads/moe_kernels.yaml's small
scale (Qwen3-30B-A3B's architecture shrunk: 32 experts, top-4, 4 layers), decode at batch 1/8/64,
under `uniform` and `skewed` (Zipf) routing, every arm of both backends: torch eager / grouped_mm /
batched_mm / kernels, each in tpubench's loop and in transformers' generate(), and the JAX twin's
gather / ragged_dot / tokamax. The workload is run once per backend, as a user runs it; the
speed-ups are the report's own (output/report/kernel_speedups.py: each arm's mean TPOT against the
named baseline, the eager loop, with a 95% CI), then how skew moves each arm's decode time
(skewed / uniform mean TPOT, 95% CI).

Rounds (--rounds N) run the two backends in alternating order (torch then JAX, JAX then torch, ...)
into separate folders, so a slow spell of the machine shows up as rounds that disagree rather than
as a speed-up; each round's table is printed.

    python benchmarks/moe_kernels.py [--rounds 1] [--batches 1 8 64] [--zipf 1.2] [--input 16] [--output 8]
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

from _sweep import run_variant


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--zipf", type=float, default=1.2)
    parser.add_argument("--input", type=int, default=16)
    parser.add_argument("--output", type=int, default=8)
    parser.add_argument("--iterations", type=int, default=5)
    args = parser.parse_args()
    routings = ["uniform", {"skewed": {"zipf": args.zipf}}]

    def edit(d):
        d["model"]["routing"] = routings
        d["scales"]["small"]["scenario"] = {"batch_size": args.batches, "input_length": args.input,
                                            "output_length": args.output}
        d["measurement"] = {"warmup": 1, "min_iterations": args.iterations, "min_seconds": 0.5, "max_seconds": 30,
                            "max_cv": 1.0, "seed": 0}

    print(f"workloads/moe_kernels.yaml --scale small, batches {args.batches}, input {args.input}, output "
          f"{args.output}, routing uniform and Zipf {args.zipf}, CPU")
    for round_no in range(args.rounds):
        out = Path(tempfile.mkdtemp(prefix="tpubench-moe-kernels-"))
        order = ("torch", "jax") if round_no % 2 == 0 else ("jax", "torch")
        for backend in order:
            run_variant("workloads/moe_kernels.yaml", edit, backend=backend, out=out)
        print(f"\n## round {round_no + 1} ({' then '.join(order)}; results in {out})")
        report(out)


def report(out: Path) -> None:
    import tpubench
    from tpubench.measure.stats import ratio_with_uncertainty
    from tpubench.output.report.kernel_speedups import speedups, statement

    table = speedups(tpubench.load_results(out))
    for (routing, batch), group in table.groupby(["routing", "batch_size"], sort=False):
        print(f"\nbatch {batch}, routing {routing}")
        for _, row in group.iterrows():
            rate = row["decode_tokens_per_s"]
            shown = f"{rate:>10,.1f} tok/s" if row["status"] == "ok" and math.isfinite(rate) else " " * 16
            print(f"  {shown}  {statement(row)}")

    print("\nskewed / uniform mean TPOT per arm (above 1: skew slows the decode), 95% CI")
    ok = table[table["status"] == "ok"]
    for batch in sorted(ok["batch_size"].unique()):
        cells = []
        for arm in ok["arm"].unique():
            rows = ok[(ok["batch_size"] == batch) & (ok["arm"] == arm)].set_index("routing")
            if len(rows) != 2:
                continue
            skewed, uniform = (rows.loc[r] for r in (next(r for r in rows.index if r != "uniform"), "uniform"))
            r, h = ratio_with_uncertainty(skewed["tpot_mean_s"], _half(skewed), uniform["tpot_mean_s"], _half(uniform))
            cells.append(f"{arm} {r:.2f} ({r - h:.2f}-{r + h:.2f})")
        print(f"  batch {batch:>3}: " + "; ".join(cells))


def _half(row) -> float:
    return (row["tpot_ci95_high_s"] - row["tpot_ci95_low_s"]) / 2


if __name__ == "__main__":
    main()
