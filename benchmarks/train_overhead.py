"""Training harness overhead, and small-scale CPU training figures (eager and torch.compile).

1. tpubench's timed training step (training.measure_training, the loop `tpubench run` times)
   against a bare loop doing the same forward, backward and optimizer step on the same model,
   optimizer and batch with the same fence, paired and interleaved in one process (ABAB...) so
   machine noise hits both alike. Target: at most 2% apart at the median.
2. The small scale of each training workload through `tpubench run` itself, eager and compile:
   step time, training tokens/s and MFU against this host's GEMM probe.

    python benchmarks/train_overhead.py [--rounds 10] [--steps 5] [--no-figures]
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

from _common import ROOT, small_point
from _sweep import run_variant

from tpubench.scenarios.registry import point_label


def bare_steps(model, optimizer, batch, steps: int, fence, autocast) -> list[float]:
    """The reference: zero_grad, forward and backward per micro-step, optimizer step, fence; an
    untimed first step, as tpubench's measurement has."""
    accum = batch.shape[0]
    times = []
    fence()
    t_prev = time.perf_counter()
    for _ in range(steps + 1):
        optimizer.zero_grad(set_to_none=True)
        for i in range(accum):
            with autocast():
                loss = model(input_ids=batch[i], labels=batch[i], use_cache=False).loss
            (loss / accum if accum > 1 else loss).backward()
        optimizer.step()
        fence()
        t = time.perf_counter()
        times.append(t - t_prev)
        t_prev = t
    return times[1:]


def harness_steps(step, point, steps: int) -> list[float]:
    """tpubench's own measurement: an untimed first step, then `steps` timed steps."""
    from tpubench.scenarios.train.steps import measure_training

    timed = replace(point, measurement={**point.measurement, "warmup": 0, "min_iterations": steps,
                                        "min_seconds": 0.0, "target_ci": None})
    return measure_training(step, timed, "cpu").step_s


def overhead(args) -> None:
    import torch

    from tpubench.backends.torch import TorchDevice
    from tpubench.scenarios.train.steps import TrainStep, build_train_model, make_batch, make_optimizer, resolve_precision

    point = small_point(args.workload, batch=args.batch)
    precision = resolve_precision(point)
    model = build_train_model(point, precision, "cpu")
    optimizer = make_optimizer(model.parameters(), point.params["optimizer"])
    batch = torch.as_tensor(make_batch(point.measurement["seed"], point, model.config.vocab_size))
    step = TrainStep(model, model, optimizer, batch, precision, "cpu")
    fence = TorchDevice("cpu").fence
    harness_steps(step, point, 2)   # warm both paths up
    bare_steps(model, optimizer, batch, 2, fence, step._autocast)
    bare, harness, ratios = [], [], []
    for k in range(args.rounds):
        # ABBA...: which path goes first alternates, so neither always follows the other.
        if k % 2 == 0:
            h = harness_steps(step, point, args.steps)
            b = bare_steps(model, optimizer, batch, args.steps, fence, step._autocast)
        else:
            b = bare_steps(model, optimizer, batch, args.steps, fence, step._autocast)
            h = harness_steps(step, point, args.steps)
        harness.extend(h)
        bare.extend(b)
        # Paired per round: a burst of load on a shared machine hits both halves of a round.
        ratios.append(statistics.median(h) / statistics.median(b))
    mb, mh = statistics.median(bare), statistics.median(harness)
    over = statistics.median(ratios) - 1
    label = point_label(point).replace(precision.requested, precision.name, 1)
    print(f"point: {point.workload} small, {label}, {args.steps} steps x {args.rounds} "
          f"rounds, {torch.get_num_threads()} threads")
    print(f"bare loop training step  median {mb * 1e3:.2f} ms")
    print(f"tpubench training step   median {mh * 1e3:.2f} ms")
    print(f"per-round overhead: median {over:+.2%}, range {min(ratios) - 1:+.2%} .. {max(ratios) - 1:+.2%}")
    print(f"harness overhead at the median: {over:+.2%} (target <= +2% either way) -> "
          f"{'PASS' if abs(over) <= 0.02 else 'FAIL'}")


def figures() -> None:
    def modes(d):
        d.setdefault("execution", {})["mode"] = ["eager", "compile"]

    print()
    print(f"{'workload (small scale)':24} {'mode':8} {'batch x seq':>11} {'step p50 ms':>12} {'tokens/s (95% CI)':>22} "
          f"{'MFU':>7} {'compile s':>10} {'loss first->last':>17} {'valid':>6}")
    for workload in ("workloads/qwen3_moe_train.yaml", "workloads/qwen3_dense_train.yaml"):
        for r in run_variant(workload, modes):
            p, m = r.point, r.metrics
            name = f"{p['workload']}"
            if r.status != "ok":
                print(f"{name:24} {p['execution_mode']:8} failed: {r.error}")
                continue
            half = m["train_tokens_per_s_ci95_high"] - m["train_tokens_per_s"]
            print(f"{name:24} {p['execution_mode']:8} {p['batch_size']:>5} x {p['input_length']:<4} "
                  f"{m['step_p50_s'] * 1e3:>12.1f} {m['train_tokens_per_s']:>12,.0f} ± {half:<7,.0f} "
                  f"{m['mfu'] * 100:>6.1f}% {r.timing['compile_s']:>10.2f} "
                  f"{m['loss_first']:>8.3f}->{m['loss_last']:<7.3f} {str(r.validity.valid):>6} "
                  f"{'; '.join(r.validity.reasons)}")
    env = r.environment
    probe = env.get("host_probe", {})
    print(f"CPU: {env.get('accelerator_name')}, {env.get('chips')} threads; MFU against the host probe's float32 "
          f"GEMM peak {probe.get('cpu_peak_fp32_flops', float('nan')) / 1e9:,.1f} GFLOP/s "
          f"(small scales train in float32); formula {r.training['mfu_formula']}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", default="workloads/qwen3_moe_train.yaml")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--no-figures", action="store_true")
    args = parser.parse_args()
    assert (ROOT / args.workload).is_file(), args.workload
    overhead(args)
    if not args.no_figures:
        figures()


if __name__ == "__main__":
    main()
