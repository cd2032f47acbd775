"""Decode tokens/s and compile seconds: torch eager vs torch.compile vs JAX jit (CPU, small scale).

    python benchmarks/compile_modes.py [--workload workloads/qwen3_moe.yaml]
"""

from __future__ import annotations

import argparse

from _sweep import run_variant


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", default="workloads/qwen3_moe.yaml")
    args = parser.parse_args()

    def mode(name):
        def edit(d):
            d.setdefault("execution", {})["mode"] = name
        return edit

    rows = [("torch eager", r) for r in run_variant(args.workload, mode("eager"))]
    rows += [("torch.compile (inductor)", r) for r in run_variant(args.workload, mode("compile"))]
    rows += [("JAX jit (AOT)", r) for r in run_variant(args.workload, mode("eager"), backend="jax")]
    print(f"{args.workload}, small scale, CPU ({rows[0][1].environment.get('accelerator_name')}, "
          f"{rows[0][1].environment.get('chips')} threads)")
    print(f"{'path':26} {'batch':>5} {'decode tok/s':>14} {'TPOT p50 ms':>12} {'compile s':>10} "
          f"{'graphs':>7} {'recompiles':>10} {'valid':>6}")
    for name, r in rows:
        if r.status != "ok":
            print(f"{name:26} {r.point['batch_size']:>5} failed: {r.error}")
            continue
        m, c = r.metrics, r.compile
        graphs = c.get("graphs_compiled_first_call", "-") if "aot_prefill_compile_s" not in c else 2
        print(f"{name:26} {r.point['batch_size']:>5} {m['decode_tokens_per_s']:>14,.1f} "
              f"{m['tpot_p50_s'] * 1e3:>12.2f} {r.timing['compile_s']:>10.2f} {graphs!s:>7} "
              f"{c['recompiles_timed']:>10} {str(r.validity.valid):>6} {'; '.join(r.validity.reasons)}")


if __name__ == "__main__":
    main()
