"""tpubench decode tokens/s against transformers' own `generate()` with a static cache.

Same model, batch, prompt and lengths (EOS ignored via min_new_tokens). Target: ratio >= 1.0,
so the harness never makes a platform look slower than the library's own fast path. Runs are
interleaved (ABAB...) so noise hits both alike.

    python benchmarks/vs_generate.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from _common import session_for, small_point

from tpubench.scenarios.registry import point_label


def generate_decode_rate(model, ids, new_tokens: int) -> float:
    """Decode tokens/s of generate(): (total - prefill) time, prefill timed by a 1-token generate."""
    import torch

    kw = dict(attention_mask=torch.ones_like(ids), do_sample=False, cache_implementation="static",
              pad_token_id=0, eos_token_id=None)
    t = time.perf_counter()
    model.generate(ids, max_new_tokens=1, min_new_tokens=1, **kw)
    prefill = time.perf_counter() - t
    t = time.perf_counter()
    out = model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, **kw)
    total = time.perf_counter() - t
    assert out.shape[1] == ids.shape[1] + new_tokens
    return ids.shape[0] * (new_tokens - 1) / (total - prefill)


def main() -> None:
    from tpubench.scenarios.generate.measure import iteration_metrics, run_iteration

    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    point = small_point(batch=args.batch)
    session, _ = session_for(point)
    import torch

    ours, theirs = [], []
    with session:
        run_iteration(session, point.output_length)
        generate_decode_rate(session.model, session.prompt_ids, point.output_length)
        for _ in range(args.rounds):
            it, _ = run_iteration(session, point.output_length)
            ours.append(iteration_metrics(it.stamps_s, point.batch_size, point.input_length)["decode_tokens_per_s"])
            with torch.inference_mode():
                theirs.append(generate_decode_rate(session.model, session.prompt_ids, point.output_length))
    a, b = statistics.median(ours), statistics.median(theirs)
    ratios = [x / y for x, y in zip(ours, theirs)]   # paired per round: shared-machine bursts cancel
    ratio = statistics.median(ratios)
    print(f"point: {point.workload} small, {point_label(point)}, {args.rounds} rounds")
    print(f"tpubench decode              median {a:,.1f} tokens/s")
    print(f"transformers generate(static) median {b:,.1f} tokens/s")
    print(f"per-round ratio: median {ratio:.3f}, range {min(ratios):.3f} .. {max(ratios):.3f}")
    print(f"ratio tpubench / generate: {ratio:.3f} (target >= 1.0) -> {'PASS' if ratio >= 1.0 else 'FAIL'}")


if __name__ == "__main__":
    main()
