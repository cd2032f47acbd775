"""InferenceX (SemiAnalysis) rows, rebuilt from the InferenceX API answers that InferenceX-app's
Cypress fixtures captured (tpubench/data/published/inferencex.csv).

What is read, and why there:

- InferenceX-app's `capture:fixtures` script (packages/app/scripts/capture-cypress-fixtures.ts)
  saves the live API's `/api/v1/benchmarks?model=DeepSeek-R1-0528` answer (the latest row per
  configuration, sampled to at most 5 concurrencies per hardware/framework/precision/lengths) as
  `benchmarks.json`, and `/api/v1/benchmarks/history` for 1k/1k, 1k/8k and 8k/1k (10 newest dates
  per configuration, 3 concurrencies per date) as `benchmarks-history.json`. Every field of a row
  is kept, so each row is an API row as `tpubench import inferencex` reads it: this module hands
  them to that importer (tpubench.output.published.inferencex.parse_rows) and only adds where the
  row was read, the canonical chip name and the model's Hugging Face id.
- Every capture in the history of the pinned commit is read (the files were re-captured; an older
  capture holds runs the newer one's date window dropped). A run that appears more than once (the
  latest file and the history file, or two captures) is one row: the first copy is kept, newest
  capture first and the latest file before the history file (its copy names the image, so the
  framework version). Distinct runs of one configuration (another date or run) are all kept.
- The Hugging Face ids and the benchmark client's length rule are checked against InferenceX's own
  repository at its pinned commit (see MODELS and _check_lengths), so a regeneration against a
  newer commit fails loudly rather than mislabelling rows.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pandas as pd
import yaml
from git_mirror import Mirror, MirrorMissing, open_mirror

from tpubench.hardware.accelerators import normalize_accelerator
from tpubench.output.published.inferencex import parse_rows

APP = "vngcloud/InferenceX-app"        # a fork that carries SemiAnalysisAI/InferenceX-app's commits
HARNESS = "SemiAnalysisAI/InferenceX"  # the benchmark repository: configs and client
REPOS = {
    APP: "7fe6d62ad57a3df061be692e86578c7111d880c7",      # 2026-08-15
    HARNESS: "843c6254ff69b567f772f6a5fd97675af3d04431",  # 2026-08-21
}
CSV = "inferencex.csv"
FIXTURES = "packages/app/cypress/fixtures/api/"
# Latest file first: of two copies of a run, the latest file's names the image.
FILES = (FIXTURES + "benchmarks.json", FIXTURES + "benchmarks-history.json")

PUBLISHER, SUBMITTER = "InferenceX (SemiAnalysis)", "SemiAnalysis"

# The API's model key -> (InferenceX config `model-prefix`, Hugging Face id of the model). Each pair
# is checked in InferenceX's configs/**/*.yaml at its pinned commit: an entry whose model-prefix is
# the key and whose `model` is the id or a quantised checkpoint of it (`<id>-FP8`, ...). The fp4
# rows of dsr1 run NVIDIA's and AMD's fp4 checkpoints of DeepSeek-R1-0528
# (nvidia/DeepSeek-R1-0528-FP4-V2, amd/DeepSeek-R1-0528-MXFP4...): the same architecture, named by
# the base id. llama70b has no entry: its configs were removed before configs/ existed (it ran
# nvidia/Llama-3.3-70B-Instruct-FP8 in .github/workflows/70b-tmpl.yml at e9dd89c03), and no copy
# here holds a row of it.
MODELS = {
    "dsr1": ("dsr1", "deepseek-ai/DeepSeek-R1-0528"),
    "gptoss120b": ("gptoss", "openai/gpt-oss-120b"),
    "qwen3.5": ("qwen3.5", "Qwen/Qwen3.5-397B-A17B"),
    "kimik2.5": ("kimik2.5", "moonshotai/Kimi-K2.5"),
    "minimaxm2.5": ("minimaxm2.5", "MiniMaxAI/MiniMax-M2.5"),
    "minimaxm3": ("minimaxm3", "MiniMaxAI/MiniMax-M3"),
    "glm5": ("glm5", "zai-org/GLM-5"),
    "glm5.1": ("glm5.1", "zai-org/GLM-5.1"),
    "dsv4": ("dsv4", "deepseek-ai/DeepSeek-V4-Pro"),
}

# InferenceX's precision word is the weights' and the matmul inputs' format (fp8: block-scaled
# float8 e4m3 checkpoints; fp4: NVFP4 on NVIDIA, MXFP4 on AMD). The KV cache's dtype is in no API
# row (the scripts set it, but a row does not say which version of its script ran): left empty.
DTYPES = {"fp8": "fp8", "fp4": "fp4"}

# The client (utils/bench_serving/benchmark_serving.py, `--dataset-name random`) draws each
# prompt's input and output length uniformly from [ratio x nominal, nominal]; the single-node
# template passes ratio 0.8 (.github/workflows/benchmark-tmpl.yml, RANDOM_RANGE_RATIO; the
# workflow input's default, 0.8, before 2026-01-21). Multi-node recipes set their own.
RANGE_RATIO = "0.8"
SINGLE_NODE_LENGTHS = f"nominal (random-range-ratio {RANGE_RATIO})"
MULTI_NODE_LENGTHS = "nominal (random prompts; range ratio set by each multi-node recipe)"
CONCURRENCY_BASIS = "client (max concurrency)"

# What makes two API rows the same run: the configuration, the load, the date and the run.
RUN_KEY = ("model", "hardware", "framework", "precision", "spec_method", "disagg", "is_multinode",
           "prefill_tp", "prefill_ep", "prefill_dp_attention", "prefill_num_workers",
           "decode_tp", "decode_ep", "decode_dp_attention", "decode_num_workers",
           "num_prefill_gpu", "num_decode_gpu", "isl", "osl", "conc", "date", "run_url")


def build(mirrors: Path) -> dict[str, pd.DataFrame]:
    app = open_mirror(mirrors, APP, REPOS[APP])
    harness = open_mirror(mirrors, HARNESS, REPOS[HARNESS])
    _check_models(harness)
    _check_lengths(harness)
    frames, notes = [], []
    for (where, key), rows in _grouped(_unique_runs(app)).items():
        frame, dropped = parse_rows(rows, where, _hf_id(key))
        frames.append(_finish(frame, where))
        notes += [f"{where}: {note}" for note in dropped]
    for note in notes:   # what the importer left out, for the maintainer (SOURCES.md gives the counts)
        print(f"inferencex: {note}", file=sys.stderr)
    return {CSV: _ordered(pd.concat(frames, ignore_index=True))}


# --------------------------------------------------------------------------- reading the captures

def _captures(app: Mirror, path: str) -> list[Mirror]:
    """The app at every commit, newest first, that wrote a new version of `path`."""
    log = app._git("log", "--format=%H", app.commit, "--", path).split()
    out, seen = [], set()
    for sha in log:
        try:
            blob = app._git("rev-parse", f"{sha}:{path}").strip()
        except MirrorMissing:          # the commit deleted the file
            continue
        if blob not in seen:
            seen.add(blob)
            out.append(dataclasses.replace(app, commit=sha))
    return out


def _sources(app: Mirror) -> list[tuple[str, list[dict]]]:
    """(where, API rows) of every capture: newest capture first, the latest file before the history."""
    found = [(capture, path) for path in FILES for capture in _captures(app, path)]
    # Newest commit first (its date, then its id for a tie), then the file's place in FILES.
    found.sort(key=lambda cp: (cp[0].date, cp[0].commit, -FILES.index(cp[1])), reverse=True)
    return [(capture.cite(path), json.loads(capture.text(path))) for capture, path in found]


def _run_key(row: dict) -> str:
    if not row.get("run_url"):
        raise SystemExit(f"inferencex: an API row without run_url: {json.dumps(row)[:200]}")
    return json.dumps([row.get(k) for k in RUN_KEY])


def _unique_runs(app: Mirror) -> list[tuple[str, dict]]:
    """(where, row) for each distinct run, its first copy in _sources' order."""
    kept, seen = [], set()
    for where, rows in _sources(app):
        for row in rows:
            key = _run_key(row)
            if key not in seen:
                seen.add(key)
                kept.append((where, row))
    return kept


def _grouped(runs: list[tuple[str, dict]]) -> dict[tuple[str, str], list[dict]]:
    """Rows by (where read, model key): parse_rows names one model per call."""
    out: dict[tuple[str, str], list[dict]] = {}
    for where, row in runs:
        out.setdefault((where, str(row.get("model"))), []).append(row)
    return out


# --------------------------------------------------------------------------- checks against InferenceX

def _hf_id(key: str) -> str:
    if key not in MODELS:
        raise SystemExit(f"inferencex: InferenceX model key {key!r} has no Hugging Face id in MODELS: "
                         "read it in InferenceX's configs and add it")
    return MODELS[key][1]


def _config_models(harness: Mirror) -> set[tuple[str, str]]:
    """(model-prefix, model) of every benchmark entry in InferenceX's configs/**/*.yaml."""
    pairs = set()
    for path in harness.glob("configs/*.yaml"):
        entries = yaml.safe_load(harness.text(path)) or {}
        for entry in entries.values() if isinstance(entries, dict) else ():
            if isinstance(entry, dict) and entry.get("model-prefix") and entry.get("model"):
                pairs.add((str(entry["model-prefix"]), str(entry["model"])))
    return pairs


def _check_models(harness: Mirror) -> None:
    pairs = _config_models(harness)
    for key, (prefix, hf_id) in MODELS.items():
        if not any(p == prefix and (m == hf_id or m.startswith(hf_id + "-")) for p, m in pairs):
            raise SystemExit(f"inferencex: {harness.repo}@{harness.commit[:12]}: no config runs {hf_id} "
                             f"as model-prefix {prefix} (MODELS[{key!r}])")


def _check_lengths(harness: Mirror) -> None:
    """The client's length rule and the single-node template's ratio are still what the rows say."""
    client = harness.text("utils/bench_serving/benchmark_serving.py")
    template = harness.text(".github/workflows/benchmark-tmpl.yml")
    if "lower = int(seq_len * range_ratio)" not in client or f"RANDOM_RANGE_RATIO: {RANGE_RATIO}" not in template:
        raise SystemExit(f"inferencex: {harness.repo}@{harness.commit[:12]}: the random prompts' length rule "
                         "changed: re-read it and update length_basis")


# --------------------------------------------------------------------------- the rows

def _chip(hardware: str) -> str:
    name = normalize_accelerator(hardware)
    if name is None:
        raise SystemExit(f"inferencex: InferenceX hardware {hardware!r} has no canonical accelerator name")
    return name


def _finish(frame: pd.DataFrame, where: str) -> pd.DataFrame:
    """parse_rows' rows as shipped: publisher, canonical chip, dtypes, bases and where read."""
    out = frame.copy()
    out["publisher"], out["submitter"] = PUBLISHER, SUBMITTER
    out["accelerator"] = out["accelerator"].map(_chip)
    out["reference"] = out["reference"].astype(str) + f" (API row captured in {where})"
    out["weight_dtype"] = out["precision"].map(DTYPES)
    out["activation_dtype"] = out["precision"].map(DTYPES)
    out["concurrency_basis"] = CONCURRENCY_BASIS
    apart = [bool(d) or m is not False for d, m in zip(out["disaggregated"], out["multinode"])]
    out["length_basis"] = [MULTI_NODE_LENGTHS if a else SINGLE_NODE_LENGTHS for a in apart]
    return out


SORT = ("model", "accelerator", "framework", "precision", "spec_decoding", "disaggregated", "multinode",
        "input_length", "output_length", "chips", "decode_chips", "concurrency", "date", "reference")


def _ordered(frame: pd.DataFrame) -> pd.DataFrame:
    """A fixed row order, so the CSV's bytes depend only on the rows."""
    def key(column: pd.Series) -> pd.Series:
        if column.name in ("input_length", "output_length", "chips", "decode_chips", "concurrency"):
            return column.fillna(-1.0)
        return column.map(lambda v: "" if pd.isna(v) else str(v))

    return frame.sort_values(list(SORT), key=key, kind="mergesort").reset_index(drop=True)
