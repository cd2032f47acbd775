"""Hugging Face optimum-neuron's vLLM benchmarks on Trainium2 and Trainium (huggingface/optimum-neuron
`benchmark/vllm/single-instance/*/vllm-results.csv`), one CSV (optimum-neuron.csv).

Each configuration folder holds the server's `.env` (MODEL_ID, BATCH_SIZE, SEQUENCE_LENGTH,
TENSOR_PARALLEL_SIZE: `serve.sh` passes them to `optimum-cli neuron serve`, which starts vLLM with
`--max-num-seqs` = BATCH_SIZE) and the guidellm summary `generate_csv.py` wrote: one line per
guidellm run (`synchronous`: one request at a time; `asynchronous@R req/sec`: Poisson arrivals at
R; `throughput`: as fast as the client's concurrency allows), with `Requests per Second`,
`Request Latency (s)` (mean), `Time-to-first-token (ms)` and `Inter Token Latency (ms)` (guidellm
0.1.0's means) and `Output Token Throughput (t/s)` of the whole server. Every figure is read at the
commit that added the file (none changed since), and so are the `.env` and the benchmark script.

Fields:
- Chip and chips: a `-trn2` folder ran on Trainium2 (the commits say trn2.3xlarge for Qwen3-32B and
  Qwen3-30B-A3B, "Trainium 2 TP4" for Llama 3.1 8B); optimum-neuron compiles for trn2 at logical
  NeuronCore config 2 (`models/inference/backend/config.py`: `logical_nc_config` is 2 on trn2), 4
  logical cores per chip, so chips = TP / 4 (TP 4 = 1 chip, TP 64 = 16 chips, one trn2.48xlarge).
  The other folders use TP 32, which `single-instance/README.md` says needs a trn1.32xlarge
  (Trainium, 2 NeuronCores per chip): chips = TP / 2 = 16.
- Throughput per chip = the server's output tokens/s / chips.
- Concurrency: 1 for `synchronous`; else Little's law, requests/s x mean request latency, both from
  the same line (the client's cap, guidellm's GUIDELLM__MAX_CONCURRENCY, is the script's `users`
  argument, default 128, not recorded per run). `running_batch` = BATCH_SIZE where that exceeds it.
- Lengths: input 1500 (guidellm emulated data, `prompt_tokens=1500, prompt_tokens_variance=150`
  in the benchmark script at that commit); output = output tokens/s / requests/s of the run (the
  script asks for 250 +- 20; generation may stop earlier).
- Latencies: mean TTFT and mean TPOT (guidellm's inter-token latency); no median is given, so the
  interactivity column (1 / median TPOT) stays empty.
- Precision: bf16 (`serve` passes the dtype of optimum-neuron's cached configuration, else
  bfloat16; the checkpoints are bf16). KV cache dtype not stated.
- Framework: "optimum-neuron vLLM", version = optimum-neuron's `version.py` at that commit.

Left out: the data-parallel results (`data-parallel/llama3.1-8b/*.csv`: the instance is not
stated), the chunked-prefill comparison (`chunked-prefill/`, Inferentia2, engine options of one
configuration), and the TGI benchmarks of older versions (`benchmark/text-generation-inference/`,
not in the pinned tree).
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pandas as pd
from git_mirror import Mirror, open_mirror

from tpubench.output.published.rows import published_frame

REPO = "huggingface/optimum-neuron"
REPOS = {REPO: "213224e6aae42e570b88b3a5e6f2716112823469"}   # main, 2026-08-19
CSV = "optimum-neuron.csv"
FOLDER = "benchmark/vllm/single-instance"
PUBLISHER, SUBMITTER = "optimum-neuron vLLM benchmarks (Hugging Face)", "Hugging Face"
# (chip, logical NeuronCores per chip) by folder suffix; see the module notes.
INSTANCES = {"trn2": ("Trainium2", 4), "trn1": ("Trainium", 2)}
SCRIPTS = ("benchmark/vllm/benchmark.sh", "benchmark/vllm/performance.sh")
LITTLE = "Little's law: completed requests/s x mean request latency"
_DATA = re.compile(r"prompt_tokens=(\d+)")


def build(mirrors: Path) -> dict[str, pd.DataFrame]:
    head = open_mirror(mirrors, REPO, REPOS[REPO])
    rows = []
    for path in head.glob(f"{FOLDER}/*/vllm-results.csv"):
        added = next(head.versions(path))[0]
        rows += config_rows(added, path.rsplit("/", 1)[0])
    if not rows:
        raise SystemExit(f"optimum-neuron: no results under {head.cite(FOLDER)}")
    return {CSV: published_frame(rows)}


def config_rows(mirror: Mirror, folder: str) -> list[dict]:
    """The rows of one configuration folder, read at `mirror` (the commit that added them)."""
    env = dict(re.findall(r"^(\w+)=['\"]?([^'\"\n]*)", mirror.text(f"{folder}/.env"), re.M))
    chip, cores = INSTANCES["trn2" if folder.endswith("-trn2") else "trn1"]
    tp = int(env["TENSOR_PARALLEL_SIZE"])
    if tp % cores:
        raise SystemExit(f"optimum-neuron: TP {tp} of {mirror.cite(folder + '/.env')} does not fill whole {chip} chips")
    script = next((mirror.text(p) for p in SCRIPTS if p in mirror.files), "")
    prompt = _DATA.search(script)
    if prompt is None:
        raise SystemExit(f"optimum-neuron: no emulated prompt length in the benchmark script at {mirror.commit[:12]}")
    results = pd.read_csv(io.StringIO(mirror.text(f"{folder}/vllm-results.csv")))
    common = {"model": env["MODEL_ID"], "published_model": env["MODEL_ID"], "accelerator": chip, "chips": tp // cores,
              "input_length": float(prompt[1]), "framework": "optimum-neuron vLLM", "framework_version": _version(mirror),
              "date": mirror.date, "reference": mirror.cite(f"{folder}/vllm-results.csv")}
    return [run_row(run, common, int(env["BATCH_SIZE"])) for run in results.to_dict("records")]


def run_row(run: dict, common: dict, batch: int) -> dict:
    rate, latency = float(run["Requests per Second"]), float(run["Request Latency (s)"])
    output = float(run["Output Token Throughput (t/s)"])
    kind = str(run["Input type"])
    concurrency = 1.0 if kind == "synchronous" else rate * latency
    return {
        **common, "publisher": PUBLISHER, "submitter": SUBMITTER, "scenario": f"guidellm {kind}",
        "output_length": output / rate,
        "length_basis": "input: nominal (guidellm emulated prompt_tokens, +-150); output: output tokens/s / requests/s",
        "concurrency": concurrency, "concurrency_basis": "client: one request at a time" if kind == "synchronous" else LITTLE,
        "running_batch": float(batch) if concurrency > batch else None,
        "precision": "bf16", "output_tokens_per_s_per_chip": output / common["chips"],
        "ttft_mean_s": float(run["Time-to-first-token (ms)"]) / 1000,
        "tpot_mean_s": float(run["Inter Token Latency (ms)"]) / 1000,
        "valid": True, "spec_decoding": "none", "disaggregated": False, "multinode": False,
    }


def _version(mirror: Mirror) -> str | None:
    found = re.search(r'__version__ = "([^"]+)"', mirror.text_if_present("optimum/neuron/version.py") or "")
    return found[1] if found else None
