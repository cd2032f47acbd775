"""TensorRT-LLM's own performance page (NVIDIA): the H100 and L40S peak-throughput tables of
`docs/source/performance.md`, one CSV (trtllm-perf.csv).

Source: NVIDIA/TensorRT-LLM's history up to its v0.7.1 release branch, read through the fork
octoml/TensorRT-LLM-release, which carries NVIDIA's `release/0.5.0` and `release/v0.7.1` branches
unchanged (upstream's own snapshot, 2.5 GB, is over the fetch limit). REPOS pins the tip of
release/v0.7.1 (2023-12-26); every version of the page on that branch's history is read, and each
row is cited at the commit that introduced its figure (the commit after which the row no longer
changed).

Taken, at the pin, from the page's peak-throughput section ("reference data at large batch sizes,
representing high throughput offline tasks"):
- "H100 GPUs (FP8)": `Throughput (out tok/s/GPU)` is already per chip. The section says its data
  "has been updated for v0.6.1"; the page's reproduction steps say they were measured "on an
  H100-HBM3-80GB system" (H100 SXM) and build every engine with `--enable_fp8 --fp8_kv_cache`
  (FP8 matmuls, "FP8 computation is a feature in H100"; an fp8 KV cache): weight, activation and
  KV-cache dtypes fp8.
- "L40S GPUs (FP8)": "The following data is from TensorRT-LLM v0.5"; `Throughput (out tok/s)` over
  TP 1, so per chip as printed. The v0.5 page gives no build command, so only `precision` (fp8,
  the table's heading) is filled; the dtype columns stay empty.
Fields: chips = TP (one GPU per rank, no pipeline parallelism in these tables); concurrency = the
table's batch size, run as one static batch by `gptSessionBenchmark` (concurrency_basis "static
batch"), with exactly the input and output lengths of the row (`--input_output_len`); the model:
"LLaMA 7B" and "LLaMA 70B" are the page's "Llama2-7b" and "Llama2-70b" benchmarks (their build
commands: 32 layers x 4096, 11008 FFN, 32,000 vocabulary; the 70B with 8 KV heads), GPT-J 6B and
Falcon 180B as named (their architectures are not in data/published_models.json, so they are
shipped but do not calibrate).

Left out: the A100 table (the page does not say which A100: 40 or 80 GB, SXM or PCIe); the
low-latency tables (first-token latency at batch 1, no throughput); older versions' figures that a
later version replaced (v0.5's H100 table); the blog posts beside the page (H100vsA100.md: one GPT-J
row at v0.5; H200launch.md: "preliminary" H200 figures; Falcon180B-H200.md: no batch sizes).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
from git_mirror import Mirror, open_mirror

from tpubench.output.published.rows import published_frame

REPO = "octoml/TensorRT-LLM-release"
REPOS = {REPO: "80bc07510ac4ddf13c0d76ad295cdb2b75614618"}   # release/v0.7.1, 2023-12-26
CSV = "trtllm-perf.csv"
PATH = "docs/source/performance.md"
PUBLISHER, SUBMITTER = "TensorRT-LLM performance page (NVIDIA)", "NVIDIA"
# The tables taken: heading -> chip.
TABLES = {"H100 GPUs (FP8)": "H100", "L40S GPUs (FP8)": "L40S"}
MODELS = {"LLaMA 7B": "meta-llama/Llama-2-7b-hf", "LLaMA 70B": "meta-llama/Llama-2-70b-hf",
          "GPT-J 6B": "EleutherAI/gpt-j-6b", "Falcon 180B": "tiiuae/falcon-180B"}
_SECTION = re.compile(r"^## (Peak|High) Throughput\s*$(.*?)(?=^## )", re.M | re.S)
_TABLE = re.compile(r"^### (.+?)(?:<sup>.*?</sup>)?\s*$(.*?)(?=^### |\Z)", re.M | re.S)
_VERSION = re.compile(r"(?:from TensorRT-LLM|updated for) v(\d+(?:\.\d+)+)")
_FOOTNOTE = re.compile(r"<sup>.*?</sup>|\s\(\d\)$")
_KEY = ("chip", "Model", "Batch Size", "TP", "Input Length", "Output Length")


def build(mirrors: Path) -> dict[str, pd.DataFrame]:
    head = open_mirror(mirrors, REPO, REPOS[REPO])
    introduced: dict[tuple, tuple[float, Mirror]] = {}
    for mirror, text in head.versions(PATH):
        for row in page_rows(text):
            key, figure = tuple(row[k] for k in _KEY), row["throughput"]
            if key not in introduced or introduced[key][0] != figure:
                introduced[key] = (figure, mirror)
    rows = [csv_row(row, introduced[tuple(row[k] for k in _KEY)][1]) for row in page_rows(head.text(PATH))]
    if not rows:
        raise SystemExit(f"TensorRT-LLM: no H100 or L40S table in {head.cite(PATH)}")
    return {CSV: published_frame(rows)}


def page_rows(text: str) -> list[dict]:
    """The rows of the H100 and L40S tables of the peak-throughput section (none in versions
    before that section existed), with the TensorRT-LLM version each table states."""
    section = _SECTION.search(text)
    if not section:
        return []
    default = _VERSION.search(section[2])
    out = []
    for heading, body in _TABLE.findall(section[2]):
        chip = TABLES.get(heading.strip())
        if chip is None:
            continue
        version = _VERSION.search(body) or default
        out += [{**row, "chip": chip, "version": version[1] if version else None} for row in markdown_rows(body)]
    return out


def markdown_rows(body: str) -> list[dict]:
    """A markdown table's non-empty rows as {header: cell}, with `throughput` (the last column) a
    number and `per_gpu` whether its header says per GPU."""
    lines = [line.strip() for line in body.splitlines() if line.strip().startswith("|")]
    # Footnote marks are not part of a column's name: "TP (1)", "Batch Size<sup>(1)</sup>".
    header = [_FOOTNOTE.sub("", c.strip()).strip() for c in lines[0].strip("|").split("|")]
    out = []
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if not cells[0]:
            continue
        row = dict(zip(header, cells))
        row["throughput"] = float(cells[-1].replace(",", ""))
        row["per_gpu"] = header[-1].endswith("/GPU)")
        out.append(row)
    return out


def csv_row(row: dict, introduced: Mirror) -> dict:
    tp, h100 = int(row["TP"]), row["chip"] == "H100"
    fp8 = "fp8" if h100 else None   # the page's build commands (--enable_fp8 --fp8_kv_cache) are H100's
    return {
        "publisher": PUBLISHER, "submitter": SUBMITTER, "model": MODELS[row["Model"]], "published_model": row["Model"],
        "input_length": int(row["Input Length"]), "output_length": int(row["Output Length"]),
        "concurrency": int(row["Batch Size"]), "concurrency_basis": "static batch",
        "length_basis": "exact (gptSessionBenchmark --input_output_len)",
        "scenario": "peak throughput, one static batch (gptSessionBenchmark)",
        "accelerator": row["chip"], "chips": tp, "framework": "TensorRT-LLM", "framework_version": row["version"],
        "precision": "fp8", "weight_dtype": fp8, "activation_dtype": fp8, "kv_cache_dtype": fp8,
        "output_tokens_per_s_per_chip": row["throughput"] if row["per_gpu"] else row["throughput"] / tp,
        "valid": True, "date": introduced.date,
        "reference": f"{introduced.cite(PATH)}, table '{row['chip']} GPUs (FP8)'",
        "spec_decoding": "none", "disaggregated": False, "multinode": False,
    }
