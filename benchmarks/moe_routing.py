"""How routing moves MoE decode speed, per experts implementation (CPU, small scale; issue 20).

Decode of the qwen3_moe small scale at batch 1/8/64 under `uniform` and `skewed` (Zipf) routing
(docs/workloads.md#routing), for each torch experts implementation: the decode rate, its speed-up
over the eager loop at the same batch and routing (95% CI propagated from both rates' CIs), the
skewed/uniform decode-time ratio per arm, and the measured load (max/mean, distinct experts per
decode step) that the roofline's bytes used.

    python benchmarks/moe_routing.py [--batches 1 8 64] [--zipf 1.2] [--input 8] [--output 6] [--iterations 3]
"""

from __future__ import annotations

import argparse
import math

from _sweep import run_variant

ARMS = ("eager", "grouped_mm", "batched_mm")


def _half(metrics: dict, name: str) -> float:
    lo, hi = metrics.get(f"{name}_ci95_low"), metrics.get(f"{name}_ci95_high")
    return (hi - lo) / 2 if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi) else math.nan


def main() -> None:
    from tpubench.measure.stats import ratio_with_uncertainty
    from tpubench.workload_spec.point import routing_label

    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--zipf", type=float, default=1.2)
    parser.add_argument("--input", type=int, default=8)
    parser.add_argument("--output", type=int, default=6)
    parser.add_argument("--iterations", type=int, default=3)
    args = parser.parse_args()
    routings = ["uniform", {"skewed": {"zipf": args.zipf}}]

    def edit(d):
        d["model"]["experts_implementation"] = list(ARMS)
        d["model"]["routing"] = routings
        d["scales"]["small"]["scenario"] = {"batch_size": args.batches, "input_length": args.input,
                                            "output_length": args.output}
        d["measurement"] = {"warmup": 1, "min_iterations": args.iterations, "min_seconds": 0.0, "max_seconds": 30,
                            "max_cv": 1.0}

    results = [r for r in run_variant("workloads/qwen3_moe.yaml", edit) if r.status == "ok"]
    by = {(r.point["experts_implementation"], routing_label(r.point["routing"]), r.point["batch_size"]): r.metrics
          for r in results}
    print(f"qwen3_moe small (32 experts, top-4, 4 layers), input {args.input}, output {args.output}, torch CPU")
    print(f"{'batch':>5} {'routing':9} {'experts':11} {'decode tok/s':>13} {'vs eager loop (95% CI)':>24} "
          f"{'max/mean':>8} {'distinct/step':>13}")
    for batch in args.batches:
        for routing in map(routing_label, routings):
            base = by.get(("eager", routing, batch))
            for arm in ARMS:
                m = by.get((arm, routing, batch))
                if m is None:
                    print(f"{batch:>5} {routing:9} {arm:11} failed")
                    continue
                rate = m["decode_tokens_per_s"]
                if base:
                    r, h = ratio_with_uncertainty(rate, _half(m, "decode_tokens_per_s"),
                                                  base["decode_tokens_per_s"], _half(base, "decode_tokens_per_s"))
                    speed = f"{r:.2f}x ({r - h:.2f}-{r + h:.2f})"
                else:
                    speed = "-"
                print(f"{batch:>5} {routing:9} {arm:11} {rate:>13,.1f} {speed:>24} "
                      f"{m['expert_load_imbalance']:>8.2f} {m['distinct_experts_per_decode_step']:>13.1f}")
    print("\nskewed / uniform decode time (TPOT p50 ratio, >1 = skew is slower)")
    skewed, uniform = routing_label(routings[1]), routing_label(routings[0])
    for batch in args.batches:
        cells = []
        for arm in ARMS:
            s, u = by.get((arm, skewed, batch)), by.get((arm, uniform, batch))
            cells.append(f"{arm} {s['tpot_p50_s'] / u['tpot_p50_s']:.2f}" if s and u else f"{arm} -")
        print(f"  batch {batch:>3}: " + ", ".join(cells))


if __name__ == "__main__":
    main()
