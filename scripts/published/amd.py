"""AMD's vLLM figures for the Instinct MI300X (ROCm/vllm docs/dev-docker/README.md, the page of the
`rocm/vllm-dev` image), rebuilt from a git copy into tpubench/data/published/amd-vllm-dev.csv.

AMD publishes its LLM serving tables in git in this README (one release of the image per version,
2025-01-29 to 2025-07-18 on main). ROCm/MAD's benchmark/vllm README and the ROCm documentation's
vLLM pages (ROCm/ROCm docs/how-to/rocm-for-ai/inference/) print how to run the benchmarks but no
results; AMD's performance-results web page is not in a git repository.

What is read (the version at the pinned commit; each figure cited at the commit that introduced it):

- The latency table: vLLM's `benchmark_latency.py` on 8 MI300X (TP 8), Llama 3.1 70B and 405B in
  AMD's FP8 checkpoints (amd/Llama-3.1-*-Instruct-FP8-KV), static batches of 1 to 128 sequences,
  128 or 2048 input and 2048 output tokens, and the end-to-end latency of the batch in seconds
  (older versions in ms). That script generates exactly `--output-len` tokens per sequence, so the
  batch's output tokens/s = batch x output length / latency; per chip / 8. `concurrency` = the
  batch (`concurrency_basis` "static batch"). The latency itself has no column here (the table
  gives the mean over iterations, not a median).
- Not taken: the throughput table (`benchmark_throughput.py`, 1500-3200 prompts at once): its
  `Throughput (tokens/s)` does not say whether it counts output tokens or input and output tokens
  (the script prints both), so no output tokens/s can be read from it.
- Superseded versions (earlier image releases, vLLM 0.6.6 to 0.9.1) measured the same 32
  configurations with older images: not taken, as for the Neuron tables (the newest version, plus
  older ones only where they measured a configuration it lacks: none).

Model: the table's checkpoint is `published_model`; `model` is the Llama 3.1 checkpoint it
quantises (the same architecture). Precision: the table's `FP8`, the checkpoint's weights; the
benchmark command sets no KV-cache dtype: left empty.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
from git_mirror import Mirror, open_mirror

REPO = "ROCm/vllm"
REPOS = {REPO: "f8c9a385233a8e1f724411785a1c326006640df5"}   # main, 2025-08-28
CSV = "amd-vllm-dev.csv"
PATH = "docs/dev-docker/README.md"
PUBLISHER, SUBMITTER = "AMD ROCm vLLM (rocm/vllm-dev)", "AMD"
# The checkpoints the table names -> the Hugging Face id of the model each quantises.
MODELS = {
    "amd/Llama-3.1-70B-Instruct-FP8-KV": "meta-llama/Llama-3.1-70B-Instruct",
    "amd/Llama-3.1-405B-Instruct-FP8-KV": "meta-llama/Llama-3.1-405B-Instruct",
}


def _versions(mirrors: Path, head: Mirror):
    """(mirror, README text) of every version, oldest first."""
    for commit in head._git("log", "--full-history", "--reverse", "--format=%H", head.commit, "--", PATH).split():
        mirror = open_mirror(mirrors, REPO, commit)
        yield mirror, mirror.text(PATH)


def _latency_table(text: str) -> list[dict]:
    """The latency table's rows: model (carried down blank cells), TP, batch, lengths, latency in s."""
    section = re.search(r"### Latency Measurements\n(.*?)\*TP stands", text, re.S) or \
        re.search(r"## Latency Measurements\n(.*?)\*TP stands", text, re.S)
    if section is None:
        return []
    header = re.search(r"^\| Model \|.*MI300X Latency \((sec|ms)\) \|\s*$", section.group(1), re.M)
    scale = 1.0 if header.group(1) == "sec" else 1e-3
    rows, last = [], {}
    for line in section.group(1)[header.end():].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 7 or not re.fullmatch(r"[0-9.]+", cells[-1]):
            continue
        model, precision, tp = (cells[i] or last.get(i) for i in range(3))
        last.update({0: model, 1: precision, 2: tp})
        rows.append({"model": model, "precision": precision, "tp": int(tp), "batch": int(cells[3]),
                     "input": int(cells[4]), "output": int(cells[5]), "latency_s": float(cells[6]) * scale})
    return rows


def _checkpoint(name: str) -> str:
    """'Llama 3.1 405B (amd/Llama-3.1-405B-Instruct-FP8-KV)' -> the checkpoint, checked against the
    size the name gives (some versions label a 405B row with the 70B checkpoint)."""
    size, checkpoint = re.fullmatch(r"Llama 3\.1 (\d+B) \((\S+)\)", name).groups()
    if f"-{size}-" not in checkpoint:
        raise ValueError(f"{name}: the checkpoint does not match the size")
    return checkpoint


def _image(text: str) -> str:
    """The image release the page describes: its newest changelog entry and the versions it lists."""
    release = re.search(r"^## Changelog\s*\n+(\w+):", text, re.M).group(1)
    rocm = re.search(r"ROCm™ ([0-9.]+)", text).group(1)
    vllm = re.search(r"^- vLLM v?([0-9.]+)", text, re.M).group(1)
    return f"rocm/vllm-dev {release} (ROCm {rocm}, vLLM {vllm})"


def _row(parsed: dict, text: str, mirror: Mirror) -> dict:
    if not re.search(rf"{parsed['tp']}x AMD Instinct MI300X", text):
        raise ValueError("the page does not name the 8 x MI300X system the table ran on")
    checkpoint, chips = _checkpoint(parsed["model"]), parsed["tp"]
    tokens_per_s = parsed["batch"] * parsed["output"] / parsed["latency_s"]
    return {
        "publisher": PUBLISHER, "submitter": SUBMITTER, "model": MODELS[checkpoint], "published_model": checkpoint,
        "input_length": parsed["input"], "output_length": parsed["output"], "concurrency": parsed["batch"],
        "scenario": "vLLM benchmark_latency.py (static batch; output tok/s = batch x output / latency)",
        "accelerator": "MI300X", "chips": chips, "framework": "vLLM (ROCm)", "framework_version": _image(text),
        "precision": parsed["precision"].lower(), "weight_dtype": parsed["precision"].lower(),
        "output_tokens_per_s_per_chip": tokens_per_s / chips, "valid": True, "date": mirror.date,
        "reference": mirror.cite(PATH), "spec_decoding": "none", "disaggregated": False, "multinode": False,
        "concurrency_basis": "static batch", "length_basis": "exact (benchmark_latency.py --input-len/--output-len)",
    }


def build(mirrors: Path) -> dict[str, pd.DataFrame]:
    from tpubench.output.published.rows import published_frame

    head = open_mirror(mirrors, REPO, REPOS[REPO])
    first: dict[tuple, tuple[Mirror, str]] = {}   # (configuration, latency) -> where it first appeared
    for mirror, text in _versions(mirrors, head):
        for parsed in _latency_table(text):
            first.setdefault(tuple(parsed.values()), (mirror, text))
    newest = _latency_table(head.text(PATH))
    if not newest:
        raise ValueError(f"{PATH}: no latency table at the pinned commit")
    rows = [_row(parsed, *reversed(first[tuple(parsed.values())])) for parsed in newest]
    frame = published_frame(rows)
    order = ["model", "input_length", "output_length", "concurrency"]
    return {CSV: frame.sort_values(order, kind="stable").reset_index(drop=True)}
