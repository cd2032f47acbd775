"""Writes workloads/traces/small_mooncake.jsonl: a small synthetic trace in the Mooncake format
(timestamp ms, input_length, output_length, hash_ids of token blocks), made here from a fixed
seed. It is not a recording of anyone's traffic: it has the shape such traces have (Poisson
arrivals, a few popular system prompts, conversations that come back with their history grown),
small enough for a tiny model served on a shared 2-CPU machine: its blocks are 64 tokens (replay
it with `block_size: 64`; Mooncake's own are 512) and its prompts at most 192 tokens.
tests/test_traffic.py checks the shipped file is what this script writes.

    python benchmarks/make_small_trace.py [--out PATH]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "workloads" / "traces" / "small_mooncake.jsonl"
SEED = 2026
ROWS = 32
RATE_PER_S = 1.5        # mean arrival rate
BLOCK = 64
SYSTEM_PROMPTS = 4      # one block each, chosen with Zipf-like popularity
MAX_BLOCKS = 3
FOLLOW_UP = 0.4         # the share of requests that continue an earlier conversation


def rows(seed: int = SEED) -> list[dict]:
    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, SYSTEM_PROMPTS + 1)
    popularity /= popularity.sum()
    next_id = SYSTEM_PROMPTS
    t_ms, out, chains = 0.0, [], []
    for k in range(ROWS):
        if k:       # the first request opens the trace at 0 ms, as Mooncake's do
            t_ms += rng.exponential(1000.0 / RATE_PER_S)
        growable = [c for c in chains if len(c) < MAX_BLOCKS]
        if growable and rng.random() < FOLLOW_UP:
            base = growable[rng.integers(len(growable))]        # the conversation comes back
        else:
            base = [int(rng.choice(SYSTEM_PROMPTS, p=popularity))]
        ids = base + list(range(next_id, next_id + 1))
        next_id += 1
        chains.append(ids)
        # The last block is partly filled: the prompt ends somewhere inside it.
        input_length = (len(ids) - 1) * BLOCK + int(rng.integers(8, BLOCK + 1))
        out.append({"timestamp": int(t_ms), "input_length": input_length,
                    "output_length": int(rng.integers(4, 17)), "hash_ids": ids})
    return out


def write_trace(path: Path = OUT) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows()))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    path = write_trace(args.out)
    print(f"wrote {path} ({ROWS} rows)")


if __name__ == "__main__":
    main()
