"""JetStream (AI-Hypercomputer/JetStream): the one TPU v5e LLM throughput its repository prints,
one CSV (jetstream.csv).

`experimental/jax/README.md` (an experimental JAX inference engine "tested with v5e-8") prints the
output of `inference/entrypoint/mini_offline_benchmarking.py`: 1,000 OpenOrca prompts handed to
`OfflineInference` at once (its default model, meta-llama/Llama-2-7b-chat-hf, loaded in its model
registry's default dtype, bfloat16), with the total input and output tokens and both token rates.
Taken: that run, on a TPU v5e-8 (8 chips; the README creates a "Cloud TPU v5e-8"), cited at the
commit that introduced the figures. Fields: lengths = the printed totals / 1,000 requests (means);
output tokens/s per chip = the printed output token throughput / 8; total = (input + output) / 8.
The engine's batch is not stated (the script hands every request over at once and the engine
batches them as its defaults allow), so `concurrency` stays empty and the row does not calibrate.

Looked at and left out: AI-Hypercomputer/jetstream-pytorch `benchmarks/summary.md` (TPU v5e-8
Llama 2/3 and Gemma, 2024-03 to 2024-07): its "throughput (token/s)" does not say whether it is
the client's output or input token rate (JetStream's benchmark_serving.py printed both), and the
lengths are ShareGPT's, not stated; JetStream's and MaxText's other pages print no inference figure
for v5e or v5p (MaxText's v5e and v5p tables are training MFU).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
from git_mirror import open_mirror

from tpubench.output.published.rows import published_frame

REPO = "AI-Hypercomputer/JetStream"
REPOS = {REPO: "acd4f5ad50ed2fb38e0e5bd7defd81e34a62706c"}   # main, 2026-01-05
CSV = "jetstream.csv"
PATH = "experimental/jax/README.md"
CHIPS = 8   # TPU v5e-8
_FIGURES = {key: re.compile(rf"{label}:\s*([0-9.]+)") for key, label in (
    ("requests", "Total requests"), ("input", "Total input tokens"), ("output", "Total output tokens"),
    ("input_rate", "Input token throughput"), ("output_rate", "Output token throughput"))}


def build(mirrors: Path) -> dict[str, pd.DataFrame]:
    head = open_mirror(mirrors, REPO, REPOS[REPO])
    figures = printed(head.text(PATH))
    introduced = next(m for m, text in head.versions(PATH) if printed(text) == figures)
    if "v5e-8" not in head.text(PATH):
        raise SystemExit(f"JetStream: {head.cite(PATH)} no longer names the v5e-8 it ran on")
    return {CSV: published_frame([{
        "publisher": "JetStream (AI-Hypercomputer)", "submitter": "Google",
        "model": "meta-llama/Llama-2-7b-chat-hf", "published_model": "meta-llama/Llama-2-7b-chat-hf",
        "input_length": figures["input"] / figures["requests"], "output_length": figures["output"] / figures["requests"],
        "length_basis": "printed totals / requests (means over 1,000 OpenOrca prompts)",
        "scenario": "offline: 1,000 prompts at once (mini_offline_benchmarking.py)",
        "accelerator": "TPU v5e", "chips": CHIPS, "framework": "JetStream experimental JAX engine",
        "precision": "bf16", "output_tokens_per_s_per_chip": figures["output_rate"] / CHIPS,
        "total_tokens_per_s_per_chip": (figures["input_rate"] + figures["output_rate"]) / CHIPS,
        "valid": True, "date": introduced.date, "reference": introduced.cite(PATH),
        "spec_decoding": "none", "disaggregated": False, "multinode": False,
    }])}


def printed(text: str) -> dict[str, float] | None:
    """The benchmark figures the page prints, or None where a version prints none."""
    found = {key: pattern.search(text) for key, pattern in _FIGURES.items()}
    return None if not all(found.values()) else {key: float(m[1]) for key, m in found.items()}
