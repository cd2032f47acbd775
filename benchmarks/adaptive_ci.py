"""How long the CPU small-scale default takes to reach a 95% CI half-width of 2% on output
tokens/s (measurement.target_ci = 0.02), against the fixed-iteration default.

    python benchmarks/adaptive_ci.py [--target 0.02] [--max-seconds 120]
"""

from __future__ import annotations

import argparse

from _sweep import run_variant


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", type=float, default=0.02)
    parser.add_argument("--max-seconds", type=float, default=120.0)
    args = parser.parse_args()

    def adaptive(d):
        d["measurement"].update(target_ci=args.target, max_seconds=args.max_seconds)

    rows = [("fixed (default)", r) for r in run_variant("workloads/qwen3_moe.yaml", lambda d: None)]
    rows += [(f"target_ci={args.target:g}", r) for r in run_variant("workloads/qwen3_moe.yaml", adaptive)]
    print("qwen3_moe small, CPU")
    print(f"{'mode':18} {'batch':>5} {'iterations':>10} {'timed s':>8} {'95% CI half-width':>18} {'tok/s':>8}")
    for name, r in rows:
        m = r.metrics
        print(f"{name:18} {r.point['batch_size']:>5} {m['iterations']:>10} {r.timing['measure_s']:>8.1f} "
              f"{m['output_tokens_per_s_ci95_rel']:>17.2%} {m['output_tokens_per_s']:>8.1f}")


if __name__ == "__main__":
    main()
