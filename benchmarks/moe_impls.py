"""MoE experts implementation A/B: eager vs grouped_mm vs batched_mm at batch 64 (CPU, small scale).

Checks a claim such as "a MoE kernel makes batch-64 decode N times faster" on this setup, and
whether the implementations agree numerically. The prompt is short (8 tokens) because batched_mm
copies each routed expert's weights per token: at 64 x 128 prompt tokens that is ~10 GB.

    python benchmarks/moe_impls.py [--batch 64] [--input 8] [--output 32]
"""

from __future__ import annotations

import argparse

from _sweep import run_variant


def main() -> None:
    from tpubench.measure.numerics import compare_numerics

    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--input", type=int, default=8)
    parser.add_argument("--output", type=int, default=32)
    args = parser.parse_args()

    def edit(d):
        d["model"]["experts_implementation"] = ["eager", "grouped_mm", "batched_mm"]
        d["scales"]["small"]["scenario"] = {"batch_size": args.batch, "input_length": args.input,
                                            "output_length": args.output}

    results = run_variant("workloads/qwen3_moe.yaml", edit)
    base = next((r for r in results if r.point["experts_implementation"] == "eager" and r.status == "ok"), None)
    print(f"qwen3_moe small, batch {args.batch}, input {args.input}, output {args.output}, CPU")
    print(f"{'experts':12} {'decode tok/s':>13} {'TPOT p50 ms':>12} {'TTFT p50 ms':>12} {'vs eager':>9} "
          f"{'numerics vs eager':>40}")
    for r in results:
        impl = r.point["experts_implementation"]
        if r.status != "ok":
            print(f"{impl:12} failed: {r.error}")
            continue
        m = r.metrics
        speed = m["decode_tokens_per_s"] / base.metrics["decode_tokens_per_s"] if base else float("nan")
        parity = compare_numerics(base, r) if base else None
        print(f"{impl:12} {m['decode_tokens_per_s']:>13,.1f} {m['tpot_p50_s'] * 1e3:>12.2f} "
              f"{m['ttft_p50_s'] * 1e3:>12.1f} {speed:>8.2f}x "
              f"{(parity.verdict + ' (max|d| ' + format(parity.max_abs_delta, '.1e') + ')') if parity else '-':>40}")


if __name__ == "__main__":
    main()
