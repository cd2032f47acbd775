"""AWS Neuron documentation (aws-neuron/aws-neuron-sdk): the LLM inference figures AWS publishes for
Trainium, Trainium2 and Inferentia2, rebuilt from a git copy into tpubench/data/published/aws-neuron.csv.

What is read:

- The performance pages' decoder tables (TABLES: `{trn1,inf2}/{throughput,latency}_data_decoder.csv`,
  under general/benchmarks/ until 2025-10-17, about-neuron/benchmarks/ since): every row of the
  version at the pinned commit, each cited at the commit that introduced its figures (the move and
  the 2024-04-30 addition of a `Weight Storage Data Type` column left the older figures unchanged;
  the dtype columns are read in the pinned version). These are Transformers NeuronX static
  batches: `concurrency` = the batch size (`concurrency_basis` "static batch"); throughput per chip
  = the instance's output tokens/s / chips; TTFT and TPOT p50/p99 in seconds. A configuration that
  both the `Batch` and the `Real Time` table list with the same figures (Inferentia2's batch-1
  70B rows) is one row, cited in the throughput table.
- Older versions of these tables (2023-05 to 2024-04-01: `Throughput (tokens/second)`, `Latency per
  Token`, OPT-13B/30B/66B, Llama-2-13B/70B) measured configurations the newest lacks, but their
  throughput counts the whole sequence, not output tokens (Llama-2-13B, batch 1, 3968 in / 128 out:
  2589.6 tokens/s = 1 / 0.38 ms per token), and some lack input/output lengths: not taken (no
  output tokens/s can be read). The encoder-decoder tables (T5) are in that schema too: not taken.
- Trainium2 (NxD Inference tutorials, TUTORIALS): the LLMPerf outputs the tutorials print (vLLM
  with NxD Inference, 10,000 input / 1,500 output tokens asked, one request at a time): output
  tokens/s = LLMPerf's `Overall Output Throughput`, TTFT and inter-token latency (the tutorials
  patch LLMPerf so that it leaves TTFT out: TPOT) median, mean and p99, end-to-end median, lengths
  = the mean input and output tokens the run printed. The newest printed output of each tutorial is
  taken; an earlier one of the Llama 3.3 70B tutorial (2024-12-21, before the LLMPerf patch) was
  replaced at the same configuration: not taken. The tutorials' comparison CSVs summarise the same
  runs (rounded; the 405B one gives a per-request median as its throughput and calls the fp8 run
  bf16): the printed outputs are read instead.
- Trainium2 (vLLM Neuron tutorials, EAGLE3): the baseline and EAGLE3 `output_throughput`,
  `median_tpot_ms` and `median_ttft_ms` the tutorials print for their `vllm bench serve` runs
  (sonnet, 512 input / 128 output tokens asked; the tutorials call the numbers representative).
- Speculative rows are kept (`spec_decoding` names the method and draft); they do not calibrate.

Chips (the devices the tensor-parallel degree occupies): chips = TP degree / NeuronCores per chip.
trn1.32xlarge has 16 Trainium chips of 2 NeuronCore-v2 (32 cores: TP 32 = 16 chips); inf2.48xlarge
has 12 Inferentia2 chips of 2 NeuronCore-v2 (TP 24 = 12 chips, TP 8 = 4); trn2.48xlarge has 16
Trainium2 chips of 8 physical NeuronCore-v3, grouped 2 per logical core at the default and stated
LNC = 2 (4 logical cores per chip: TP 64 = 16 chips, TP 16 = 4, TP 8 = 2).

Precision: the tables' `Weight Storage Data Type` (int8 -> "int8 weights") with the matmuls in bf16
(`Compilation Autocast Data Type` Matmult-BF16); the tutorials' `--torch-dtype bfloat16`, fp8
checkpoints and `--dtype bfloat16`; a tutorial that serves a bf16 checkpoint with no dtype flag
(vLLM's `--dtype auto`) is `bf16` with its dtype columns left empty. No source states the KV
cache's dtype.

Not taken: the T5 tables (above); the prefix-caching comparison (TTFT only, no throughput);
deploy/environments' DLC quickstart (a smoke-test demo: Llama-2-7b, 32-token context, TP 96, a
throughput whose definition is not given).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from git_mirror import Mirror, open_mirror

REPO = "aws-neuron/aws-neuron-sdk"
REPOS = {REPO: "81ce03ae261e12925e53437a0f690478e6366155"}   # master, 2026-08-21
CSV = "aws-neuron.csv"
PUBLISHER, SUBMITTER = "AWS Neuron documentation", "AWS"

# Instance -> (chip, NeuronCores per chip that a TP rank occupies, cores of the instance).
INSTANCES = {
    "trn1.32xlarge": ("Trainium", 2, 32),
    "inf2.48xlarge": ("Inferentia2", 2, 24),
    "trn2.48xlarge": ("Trainium2", 4, 64),   # logical cores at LNC 2 (8 physical cores per chip)
}
# The tables' model names -> Hugging Face ids (the base checkpoints the names are).
MODELS = {
    "Llama-3-8B": "meta-llama/Meta-Llama-3-8B",
    "Llama-3-70B": "meta-llama/Meta-Llama-3-70B",
    "Llama-2-7b": "meta-llama/Llama-2-7b-hf",
    "Llama-2-13b": "meta-llama/Llama-2-13b-hf",
    "Llama-2-70b": "meta-llama/Llama-2-70b-hf",
    "Mistral-7B-Instruct-v0.2": "mistralai/Mistral-7B-Instruct-v0.2",
    "CodeLlama-13b-hf": "codellama/CodeLlama-13b-hf",
}


def _lineage(inst: str, kind: str) -> tuple[str, str]:
    """A table's path before and after the 2025-10-17 move."""
    name = f"{inst}/{kind}_data_decoder.csv"
    return f"general/benchmarks/{name}", f"about-neuron/benchmarks/{name}"


# Throughput tables first: a row both tables hold is cited in the throughput table.
TABLES = (_lineage("trn1", "throughput"), _lineage("trn1", "latency"), _lineage("inf2", "throughput"),
          _lineage("inf2", "latency"))
_THROUGHPUT = "Output Token Throughput (tokens/sec)"
_KEY = ("Model", "Inst. Type", "TP Degree", "Batch Size", "Input Length", "Output Length")
_FIGURES = (_THROUGHPUT, "TTFT Latency P50 (ms)", "TTFT Latency P99 (ms)", "TPOT Latency P50 (ms)", "TPOT Latency P99 (ms)")


# --- git -------------------------------------------------------------------------------------

def _at(mirrors: Path, commit: str) -> Mirror:
    return open_mirror(mirrors, REPO, commit)


def _versions(mirrors: Path, head: Mirror, paths: tuple[str, ...]):
    """(mirror, path, text) of every version of a file (under any of its names), oldest first."""
    for commit in head._git("log", "--full-history", "--reverse", "--format=%H", head.commit, "--", *paths).split():
        mirror = _at(mirrors, commit)
        for path in reversed(paths):
            text = mirror.text_if_present(path)
            if text is not None:
                yield mirror, path, text
                break


# --- the performance pages' tables -----------------------------------------------------------

def _table(text: str) -> pd.DataFrame | None:
    """A decoder table with output-token throughput and TTFT/TPOT columns (None: the older schema)."""
    frame = pd.read_csv(io.StringIO(text), dtype=str)
    if _THROUGHPUT not in frame.columns:
        return None
    frame.columns = [c.strip() for c in frame.columns]
    return frame.dropna(subset=["Model"])


def _key(row) -> tuple:
    return tuple(str(row[c]).strip().lower() for c in _KEY)


def _figures(row) -> tuple:
    return tuple(float(row[c]) for c in _FIGURES)


def _chips(instance: str, tp: int) -> tuple[str, int]:
    """(chip, chips the TP degree occupies) on an instance."""
    chip, per_chip, cores = INSTANCES[instance.lower()]
    if tp > cores or tp % per_chip:
        raise ValueError(f"TP {tp} does not fill whole chips of {instance}")
    return chip, tp // per_chip


def _table_precision(row) -> dict:
    weights = str(row.get("Weight Storage Data Type", "")).strip().lower()
    if weights not in ("bf16", "int8"):
        raise ValueError(f"{row['Model']}: weight storage {weights!r}")
    if str(row["Compilation Autocast Data Type"]).strip() != "Matmult-BF16":
        raise ValueError(f"{row['Model']}: autocast {row['Compilation Autocast Data Type']!r}")
    return {"precision": "int8 weights" if weights == "int8" else "bf16", "weight_dtype": weights,
            "activation_dtype": "bf16"}


def _table_row(row, mirror: Mirror, path: str) -> dict:
    model = str(row["Model"]).strip()
    tp, batch = int(row["TP Degree"]), int(row["Batch Size"])
    chip, chips = _chips(str(row["Inst. Type"]).strip(), tp)
    throughput, ttft50, ttft99, tpot50, tpot99 = _figures(row)
    return {
        "publisher": PUBLISHER, "submitter": SUBMITTER, "model": MODELS[model], "published_model": model,
        "input_length": int(row["Input Length"]), "output_length": int(row["Output Length"]), "concurrency": batch,
        "scenario": f"static batch ({str(row['Application Type']).strip()} table)", "accelerator": chip, "chips": chips,
        "framework": str(row["Framework"]).strip(), "framework_version": f"Neuron {str(row['Neuron Version']).strip()}",
        "output_tokens_per_s_per_chip": throughput / chips, "interactivity_tokens_per_s": 1000.0 / tpot50,
        "ttft_p50_s": ttft50 / 1000, "ttft_p99_s": ttft99 / 1000, "tpot_p50_s": tpot50 / 1000, "tpot_p99_s": tpot99 / 1000,
        "valid": True, "date": mirror.date, "reference": mirror.cite(path), "spec_decoding": "none",
        "disaggregated": False, "multinode": False, "concurrency_basis": "static batch",
        **_table_precision(row),
    }


def _table_rows(mirrors: Path, head: Mirror) -> list[dict]:
    """Every row of each table at the pinned commit, plus any configuration only an older version
    (of the same schema) measured, at its last figures; each cited where its figures first appeared."""
    rows, seen = [], set()
    for paths in TABLES:
        first: dict[tuple, tuple[Mirror, str]] = {}
        last: dict[tuple, pd.Series] = {}   # configuration -> its row in the last version that has it
        for mirror, path, text in _versions(mirrors, head, paths):
            frame = _table(text)
            for _, row in (frame.iterrows() if frame is not None else ()):
                first.setdefault((_key(row), _figures(row)), (mirror, path))
                last[_key(row)] = row
        text = head.text_if_present(paths[-1])
        pinned = _table(text) if text is not None else None
        if pinned is None:
            raise ValueError(f"{paths[-1]}: no decoder table in the pinned commit")
        newest = [row for _, row in pinned.iterrows()]
        keys = {_key(row) for row in newest}
        for row in newest + [row for key, row in last.items() if key not in keys]:
            ident = (_key(row), _figures(row))
            if ident in seen:   # the same configuration and figures in the Batch and Real Time tables
                continue
            seen.add(ident)
            rows.append(_table_row(row, *first[ident]))
    return rows


# --- NxD Inference tutorials (Trainium2): LLMPerf outputs ---------------------------------------

@dataclass(frozen=True)
class Run:
    """What one printed LLMPerf output ran (read alongside: TP, LNC, batch cap, concurrency)."""
    model_dir: str       # the model directory the printed output names
    model: str           # Hugging Face id
    precision: str
    weight_dtype: str
    spec: str            # "none" or the method and draft


TUTORIALS = {
    "libraries/nxd-inference/tutorials/trn2-llama3.3-70b-tutorial.rst": (
        Run("Llama-3.3-70B-Instruct", "meta-llama/Llama-3.3-70B-Instruct", "bf16", "bf16", "none"),
        Run("Llama-3.3-70B-Instruct", "meta-llama/Llama-3.3-70B-Instruct", "bf16", "bf16",
            "fused speculation (draft Llama-3.2-1B-Instruct, 7 speculative tokens)"),
    ),
    "libraries/nxd-inference/tutorials/trn2-llama3.1-405b-speculative-tutorial.rst": (
        Run("llama-3.1-405b", "meta-llama/Llama-3.1-405B-Instruct", "bf16", "bf16", "none"),
        Run("Llama-3.1-405B-Instruct-FP8-rescaled", "meta-llama/Llama-3.1-405B-Instruct-FP8", "fp8 weights",
            "fp8 (e4m3, rescaled for Neuron; per-channel, MLP)",
            "fused speculation (draft Llama-3.2-1b-instruct, 7 speculative tokens)"),
    ),
}
_LLMPERF = re.compile(r"Results for token benchmark for (\S+) queried with the openai api\.(.*?)Overall Output Throughput:"
                      r"\s*([0-9.]+)", re.S)


def _stat(block: str, metric: str, stat: str) -> float:
    section = re.search(rf"{metric}\s*\n((?:\s+\w+ = [-0-9.e]+\s*\n)+)", block).group(1)
    return float(re.search(rf"\b{stat} = ([-0-9.e]+)", section).group(1))


def _setting(segment: str, pattern: str) -> int:
    """The last value of a setting in the script that precedes a printed output."""
    values = re.findall(pattern, segment)
    if not values:
        raise ValueError(f"no {pattern} before the printed output")
    return int(values[-1])


def _llmperf(text: str, runs: tuple[Run, ...]) -> list[dict]:
    text = text.replace("—", "-")   # some scripts spell `--flag` with an em dash
    blocks = list(_LLMPERF.finditer(text))
    if not blocks:
        return []
    if len(blocks) != len(runs):
        raise ValueError(f"{len(blocks)} printed LLMPerf outputs, {len(runs)} expected")
    rows, start = [], 0
    for hit, run in zip(blocks, runs):
        if hit.group(1).rstrip("/").rsplit("/", 1)[-1] != run.model_dir:
            raise ValueError(f"printed output for {hit.group(1)}, expected {run.model_dir}")
        segment, block, start = text[start:hit.start()], hit.group(2), hit.end()
        if (run.spec == "none") == ("--speculative-model" in segment):
            raise ValueError(f"{run.model_dir}: speculation does not match the script")
        tp, lnc = _setting(segment, r"--tensor-parallel-size[= ](\d+)"), _setting(segment, r"NEURON_RT_VIRTUAL_CORE_SIZE=(\d+)")
        if lnc != 2:
            raise ValueError(f"LNC {lnc}: the chip count rule assumes LNC 2")
        chip, chips = _chips("trn2.48xlarge", tp)
        tpot = _stat(block, "inter_token_latency_s", "p50")
        rows.append({
            "model": run.model, "published_model": run.model_dir, "accelerator": chip, "chips": chips,
            "input_length": _stat(block, "number_input_tokens", "mean"),
            "output_length": _stat(block, "number_output_tokens", "mean"),
            "concurrency": _setting(segment, r"--num-concurrent-requests[= ](\d+)"),
            "max_num_seqs": _setting(segment, r"--max-num-seqs[= ](\d+)"),
            "output_tokens_per_s_per_chip": float(hit.group(3)) / chips, "interactivity_tokens_per_s": 1.0 / tpot,
            "ttft_p50_s": _stat(block, "ttft_s", "p50"), "ttft_mean_s": _stat(block, "ttft_s", "mean"),
            "ttft_p99_s": _stat(block, "ttft_s", "p99"), "tpot_p50_s": tpot,
            "tpot_mean_s": _stat(block, "inter_token_latency_s", "mean"),
            "tpot_p99_s": _stat(block, "inter_token_latency_s", "p99"), "e2e_p50_s": _stat(block, "end_to_end_latency_s", "p50"),
            "precision": run.precision, "weight_dtype": run.weight_dtype, "spec_decoding": run.spec,
            "scenario": "LLMPerf load test, one request at a time", "framework": "vLLM (NxD Inference)",
            "length_basis": "mean of the printed input and output tokens over the run's requests",
        })
    return rows


def _printed(mirrors: Path, head: Mirror, path: str, parse) -> tuple[list[dict], Mirror]:
    """A tutorial's figures at the pinned commit, with the commit that first printed them."""
    rows = parse(head.text(path))
    if not rows:
        raise ValueError(f"{path}: no printed figures at the pinned commit")
    return rows, next(mirror for mirror, _, text in _versions(mirrors, head, (path,)) if parse(text) == rows)


# --- vLLM Neuron tutorials (Trainium2): EAGLE3 baseline and speculative runs -------------------

EAGLE3 = (
    "vllm-neuron/docs/tutorials/tutorial-eagle3-speculative-decoding-llama-3-1.md",
    "vllm-neuron/docs/tutorials/tutorial-eagle3-speculative-decoding-gpt-oss.md",
)


def _eagle3(text: str) -> list[dict]:
    printed = {m.group(1): (float(m.group(2)), float(m.group(3)))
               for m in re.finditer(r"^(output_throughput|median_tpot_ms|median_ttft_ms)\s+baseline=([0-9.]+)\s+eagle3=([0-9.]+)",
                                    text, re.M)}
    if len(printed) != 3:
        return []
    model = re.search(r"^vllm serve (\S+)", text, re.M).group(1)
    draft = re.search(r'"method":\s*"eagle3",\s*"model":\s*"([^"]+)",\s*"num_speculative_tokens":\s*(\d+)', text)
    tp = _setting(text, r"--tensor-parallel-size (\d+)")
    chip, chips = _chips("trn2.48xlarge", tp)   # vLLM Neuron's default LNC 2 on Trn2 (no LNC set)
    dtype = re.search(r"--dtype (\w+)", text)
    prompts = _setting(text, r"--num-prompts (\d+)")
    common = {
        "model": model, "published_model": model.split("/")[-1], "accelerator": chip, "chips": chips,
        "input_length": _setting(text, r"--sonnet-input-len (\d+)"),
        "output_length": _setting(text, r"--sonnet-output-len (\d+)"),
        "concurrency": _setting(text, r"--max-concurrency (\d+)"), "max_num_seqs": _setting(text, r"--max-num-seqs (\d+)"),
        "precision": "bf16", "weight_dtype": "bf16" if dtype and dtype.group(1) == "bfloat16" else None,
        "scenario": f"vllm bench serve (sonnet, {prompts} prompts)", "framework": "vLLM Neuron",
        "length_basis": "nominal (sonnet-input-len / sonnet-output-len)",
    }
    rows = []
    for i, spec in enumerate(("none", f"eagle3 (draft {draft.group(1)}, num_speculative_tokens {draft.group(2)})")):
        tpot = printed["median_tpot_ms"][i] / 1000
        rows.append({**common, "spec_decoding": spec, "output_tokens_per_s_per_chip": printed["output_throughput"][i] / chips,
                     "tpot_p50_s": tpot, "ttft_p50_s": printed["median_ttft_ms"][i] / 1000,
                     "interactivity_tokens_per_s": 1 / tpot})
    return rows


def _sdk(text: str) -> str | None:
    hit = re.search(r"Neuron SDK (\d+\.\d+) or later", text)
    return f"Neuron SDK {hit.group(1)} or later" if hit else None


def _tutorial_rows(mirrors: Path, head: Mirror) -> list[dict]:
    out = []
    sources = [(path, lambda text, runs=runs: _llmperf(text, runs)) for path, runs in TUTORIALS.items()]
    sources += [(path, _eagle3) for path in EAGLE3]
    for path, parse in sources:
        rows, mirror = _printed(mirrors, head, path, parse)
        version = _sdk(mirror.text(path))
        for row in rows:
            cap = row.pop("max_num_seqs")
            basis = "client concurrency (LLMPerf --num-concurrent-requests)" if "LLMPerf" in row["scenario"] \
                else "client --max-concurrency"
            if row["concurrency"] > cap:
                row["running_batch"] = cap
            out.append({**row, "publisher": PUBLISHER, "submitter": SUBMITTER, "framework_version": version,
                        "valid": True, "date": mirror.date, "reference": mirror.cite(path), "disaggregated": False,
                        "multinode": False, "concurrency_basis": f"{basis}; server --max-num-seqs {cap}"})
    return out


def build(mirrors: Path) -> dict[str, pd.DataFrame]:
    from tpubench.output.published.rows import published_frame

    head = open_mirror(mirrors, REPO, REPOS[REPO])
    frame = published_frame(_table_rows(mirrors, head) + _tutorial_rows(mirrors, head))
    order = ["accelerator", "model", "framework", "spec_decoding", "input_length", "output_length", "concurrency", "reference"]
    return {CSV: frame.sort_values(order, kind="stable").reset_index(drop=True)}
