"""MLPerf Inference published results, as MLCommons publishes them (the inference_results_vX.Y
repositories), in either of two forms:

1. The submission tree (checked 2026-12-03 against mlcommons/inference_results_v5.x submissions,
   e.g. ntuhpc/inference_results_v5.1 and the Nebius/Vultr v5.1 paths, and the submission
   checker's SYSTEM_DESC_REQUIRED_FIELDS):

       <division>/<submitter>/systems/<system>.json
       <division>/<submitter>/results/<system>/<benchmark>/<scenario>/performance/run_1/mlperf_log_summary.txt

   The system JSON gives `submitter`, `system_name`, `number_of_nodes`, `accelerators_per_node`,
   `accelerator_model_name` and `framework` ("TensorRT 10.11, CUDA 12.9"). LoadGen's summary
   gives `Scenario`, `Result is : VALID|INVALID`, for an LLM `Tokens per second` (Offline) or
   `Completed tokens per second` (Server, Interactive), and for those the first-token and
   time-to-output-token latencies in ns (`50.00 percentile first token latency (ns)`,
   `Mean First Token latency (ns)`, `99.00 percentile time to output token (ns)`, ...).

2. The summary CSV the submission checker writes (`summary/summary.csv`; header checked against
   mlcommons/inference `tools/submission/submission_checker.py`): Organization, Availability,
   Division, SystemType, SystemName, Platform, Model, MlperfModel, Scenario, Result, Accuracy,
   number_of_nodes, ..., accelerator_model_name, accelerators_per_node, ..., framework, ...,
   version, ..., Units. Only token rates (`Units` naming tokens) are read; it has no latencies.

MLPerf's LLM token rate counts generated tokens, so throughput per chip = that rate / (nodes x
accelerators per node), comparable with tpubench's output tokens/s per chip. Interactivity is
1 / median (else mean) time to output token, so only Server and Interactive results have one.
MLPerf draws its prompts from a data set rather than fixing lengths: a result matches your points
only when you state the lengths to compare at (`--input-length`, `--output-length`).
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import pandas as pd

from tpubench.errors import UserError
from tpubench.output.published.rows import interactivity_from_tpot, published_frame

PUBLISHER = "MLPerf Inference"
SUMMARY_GLOB = "results/*/*/*/performance/run_1/mlperf_log_summary.txt"
_NS = 1e-9
_THROUGHPUT_KEYS = ("tokens per second", "completed tokens per second")
_LATENCY_KEYS = {
    "ttft_p50_s": ("50.00 percentile first token latency (ns)",),
    "ttft_mean_s": ("mean first token latency (ns)",),
    "ttft_p99_s": ("99.00 percentile first token latency (ns)",),
    "tpot_p50_s": ("50.00 percentile time to output token (ns)",),
    "tpot_mean_s": ("mean time to output token (ns)", "mean time per output token (ns)"),
    "tpot_p99_s": ("99.00 percentile time to output token (ns)",),
}
_FRAMEWORK = re.compile(r"^\s*(?P<name>[A-Za-z][\w .+/-]*?)\s+v?(?P<version>\d[\w.+-]*)")


def read_summary(path: Path) -> dict[str, str]:
    """LoadGen's `key : value` lines, keys lower-cased (the first of a repeated key wins)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UserError(f"cannot read: {exc.strerror or exc}", where=str(path)) from None
    out: dict[str, str] = {}
    for line in text.splitlines():
        if ":" in line:
            key, value = line.split(":", 1)
            out.setdefault(" ".join(key.split()).lower(), value.strip())
    return out


def _float(value) -> float:
    try:
        x = float(str(value).strip())
    except (TypeError, ValueError):
        return math.nan
    return x if math.isfinite(x) else math.nan


def _positive_int(value, where: str, field: str) -> int:
    x = _float(value)
    if not (x > 0 and x == int(x)):
        raise UserError(f"expected a positive whole number, got {value!r}", where=where, field=field)
    return int(x)


def split_framework(text) -> tuple[str | None, str | None]:
    """'TensorRT 10.11, CUDA 12.9' -> ('TensorRT', '10.11'): the first component and its version."""
    first = str(text or "").split(",")[0].strip()
    if not first:
        return None, None
    m = _FRAMEWORK.match(first)
    return (m["name"].strip(), m["version"]) if m else (first, None)


def _system(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read: {exc.strerror or exc}", where=str(path)) from None
    except ValueError as exc:
        raise UserError(f"not JSON: {exc}", where=str(path)) from None
    if not isinstance(data, dict):
        raise UserError("expected a system description object", where=str(path))
    return data


def _tree_row(summary_path: Path, root: Path, lengths: dict) -> dict:
    run = summary_path.parent                       # .../performance/run_1
    scenario_dir = run.parent.parent
    benchmark_dir, system_dir = scenario_dir.parent, scenario_dir.parent.parent
    submitter_dir = system_dir.parent.parent
    system_file = submitter_dir / "systems" / f"{system_dir.name}.json"
    if not system_file.is_file():
        raise UserError(f"no system description {system_file.relative_to(root)} for this result",
                        where=str(summary_path))
    system = _system(system_file)
    where = str(system_file)
    chips = (_positive_int(system.get("accelerators_per_node"), where, "accelerators_per_node")
             * _positive_int(system.get("number_of_nodes", 1), where, "number_of_nodes"))
    summary = read_summary(summary_path)
    rate = next((_float(summary[k]) for k in _THROUGHPUT_KEYS if k in summary), math.nan)
    if not rate > 0:
        raise UserError("no token rate (an LLM result has 'Tokens per second' or 'Completed tokens per second')",
                        where=str(summary_path))
    latencies = {column: next((_float(summary[k]) * _NS for k in keys if k in summary), math.nan)
                 for column, keys in _LATENCY_KEYS.items()}
    tpot = latencies["tpot_p50_s"] if latencies["tpot_p50_s"] > 0 else latencies["tpot_mean_s"]
    framework, version = split_framework(system.get("framework"))
    return {
        "publisher": PUBLISHER, "submitter": system.get("submitter") or submitter_dir.name,
        "model": lengths["model"] or benchmark_dir.name, "published_model": benchmark_dir.name,
        "input_length": lengths["input_length"], "output_length": lengths["output_length"],
        "concurrency": math.nan, "scenario": summary.get("scenario", scenario_dir.name),
        "accelerator": system.get("accelerator_model_name"), "chips": chips,
        "framework": framework, "framework_version": version, "precision": system.get("weight_data_types"),
        "output_tokens_per_s_per_chip": rate / chips, "total_tokens_per_s_per_chip": math.nan,
        "interactivity_tokens_per_s": interactivity_from_tpot(tpot), **latencies, "e2e_p50_s": math.nan,
        "valid": summary.get("result is", "").upper().startswith("VALID"), "date": None,
        "reference": str(summary_path.relative_to(root)),
    }


def _summary_csv_rows(path: Path, lengths: dict) -> tuple[list[dict], int]:
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            table = list(csv.DictReader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UserError(f"cannot read: {exc}", where=str(path)) from None
    needed = {"Organization", "SystemName", "MlperfModel", "Scenario", "Result", "accelerator_model_name",
              "accelerators_per_node", "framework", "Units"}
    missing = sorted(needed - set(table[0] if table else ()))
    if missing:
        raise UserError(f"not an MLPerf summary CSV: no column {', '.join(missing)}", where=str(path))
    rows, skipped = [], 0
    for line, rec in enumerate(table, start=2):
        rate = _float(rec["Result"])
        per_node = _float(rec["accelerators_per_node"])
        nodes = _float(rec.get("number_of_nodes") or 1)
        if "token" not in rec["Units"].lower() or not rate > 0 or not per_node > 0 or not nodes > 0:
            skipped += 1   # images/s, samples/s, or a CPU-only system: nothing per chip to compare
            continue
        framework, version = split_framework(rec["framework"])
        chips = per_node * nodes
        rows.append({
            "publisher": PUBLISHER + (f" {rec['version']}" if rec.get("version") else ""),
            "submitter": rec["Organization"], "model": lengths["model"] or rec["MlperfModel"],
            "published_model": rec["MlperfModel"], "input_length": lengths["input_length"],
            "output_length": lengths["output_length"], "concurrency": math.nan, "scenario": rec["Scenario"],
            "accelerator": rec["accelerator_model_name"], "chips": chips, "framework": framework,
            "framework_version": version, "precision": rec.get("weight_data_types"),
            "output_tokens_per_s_per_chip": rate / chips, "total_tokens_per_s_per_chip": math.nan,
            "interactivity_tokens_per_s": math.nan, "valid": True, "date": None,
            "reference": f"{path.name}:{line} {rec['SystemName']}",
        })
    return rows, skipped


def import_mlperf(folder: str | Path, *, model: str | None = None, input_length: int | None = None,
                  output_length: int | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Published rows from an MLPerf results folder (either form of the module docstring; a
    summary.csv named directly works too), and notes on what was left out."""
    root = Path(folder)
    if not root.exists():
        raise UserError("no such file or folder", where=str(root))
    lengths = {"model": model, "input_length": input_length, "output_length": output_length}
    summaries = [] if root.is_file() else sorted(root.rglob(SUMMARY_GLOB))
    # A results repository has both forms of the same results: the tree, with latencies, wins.
    csvs = [root] if root.is_file() else [] if summaries else sorted(root.rglob("summary.csv"))
    if not csvs and not summaries:
        raise UserError("no MLPerf results found: expected <submitter>/results/<system>/<benchmark>/<scenario>/"
                        "performance/run_1/mlperf_log_summary.txt with <submitter>/systems/<system>.json, "
                        "or a summary.csv", where=str(root))
    rows, notes = [], []
    for path in summaries:
        rows.append(_tree_row(path, root if root.is_dir() else root.parent, lengths))
    for path in csvs:
        found, skipped = _summary_csv_rows(path, lengths)
        rows += found
        if skipped:
            notes.append(f"{path}: {skipped} row(s) not in tokens/s or without accelerators left out")
    if input_length is None or output_length is None:
        notes.append("MLPerf results have no fixed lengths: give --input-length and --output-length to compare "
                     "them with your points")
    return published_frame(rows), notes
