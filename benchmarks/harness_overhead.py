"""Harness overhead: tpubench's decode-step time against a bare loop calling the same model step.

Both loops use the same model, static cache, positions and fence, and run interleaved in one
process (ABAB...) so machine noise hits both alike. Target: at most 2% at the median.

    python benchmarks/harness_overhead.py [--rounds 6]
"""

from __future__ import annotations

import argparse
import statistics
import time

from _common import session_for, small_point

from tpubench.scenarios.registry import point_label


def bare_decode_steps(session, steps: int) -> list[float]:
    """The reference: the same forward call and the same fence, no harness around it."""
    session.reset()
    model_forward, cache, positions = session.forward, session.cache, session.decode_positions
    out = model_forward(input_ids=session.prompt_ids, cache=cache, cache_position=session.prefill_positions,
                        logits_to_keep=1, use_cache=True)
    token = out.logits[:, -1].argmax(-1)
    session.fence()
    times = []
    t_prev = time.perf_counter()
    for step in range(steps):
        out = model_forward(input_ids=token[:, None], cache=cache, cache_position=positions[step],
                            logits_to_keep=1, use_cache=True)
        token = out.logits[:, -1].argmax(-1)
        session.fence()
        t = time.perf_counter()
        times.append(t - t_prev)
        t_prev = t
    return times


def harness_decode_steps(session, steps: int) -> list[float]:
    from tpubench.scenarios.generate.measure import run_iteration

    it, _ = run_iteration(session, steps + 1)
    stamps = it.stamps_s
    return [b - a for a, b in zip(stamps, stamps[1:])]


def paired_rounds(session, steps: int, rounds: int) -> tuple[list[float], list[float], list[float]]:
    """(bare step times, tpubench step times, per-round median ratios), ABAB... after a warm-up of
    both paths. Paired per round: a burst of load on a shared machine hits both halves of a round."""
    bare, harness, ratios = [], [], []
    with session:
        harness_decode_steps(session, steps)  # warm-up both paths
        bare_decode_steps(session, steps)
        for _ in range(rounds):
            h, b = harness_decode_steps(session, steps), bare_decode_steps(session, steps)
            harness.extend(h)
            bare.extend(b)
            ratios.append(statistics.median(h) / statistics.median(b))
    return bare, harness, ratios


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    point = small_point(batch=args.batch)
    session, _ = session_for(point)
    steps = point.output_length - 1
    bare, harness, ratios = paired_rounds(session, steps, args.rounds)
    mb, mh = statistics.median(bare), statistics.median(harness)
    overhead = statistics.median(ratios) - 1
    print(f"point: {point.workload} small, {point_label(point)}, {steps} decode steps x {args.rounds} rounds")
    print(f"bare loop decode step   median {mb * 1e3:.3f} ms")
    print(f"tpubench decode step    median {mh * 1e3:.3f} ms")
    print(f"per-round overhead: median {overhead:+.2%}, range {min(ratios) - 1:+.2%} .. {max(ratios) - 1:+.2%}")
    print(f"harness overhead at the median: {overhead:+.2%} (target <= +2%) -> {'PASS' if overhead <= 0.02 else 'FAIL'}")


if __name__ == "__main__":
    main()
