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
1 / median (else mean) time to output token, so only Server and Interactive results have one:
Offline results, and every summary.csv row (throughput only, no latency), cannot be placed on an
interactivity front, and the import says so. MLPerf draws its prompts from a data set rather than
fixing lengths: a result matches your points only when you state the lengths to compare at
(`--input-length`, `--output-length`).

A submitter's folder holds every benchmark it ran: results of benchmarks that are not LLMs
(resnet50, retinanet, rgat, stable-diffusion-xl, whisper, dlrm, ...) or that give no token rate
are skipped and counted, never an error. The precision (weight_data_types: fp8, fp4, mxfp4 ...)
is read from the result's `measurements/<system>/<benchmark>/<scenario>/*.json` (the system
description has none), so an fp4 result is never compared with a bf16 point as if alike. The
scenario is the results folder's (LoadGen's summary calls an Interactive run "Server"). A result the
physics gate refuses (estimate/gate.py: a figure not positive, or faster than its chips' roofline
allows) is left out with a note naming its summary file (or `summary.csv:line` and system).
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import pandas as pd

from tpubench.errors import UserError
from tpubench.estimate.gate import gate
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
# MLPerf Inference benchmarks that are not LLMs. Whisper (speech to text) reports a token rate
# too, but its official result is samples/s and its tokens are no LLM's: it is skipped as well.
_NOT_LLM = re.compile(r"^(resnet|retinanet|ssd|bert|3d-unet|dlrm|rnnt|stable-diffusion|sdxl|rgat|whisper|"
                      r"pointpainting|flux|wan|mobilenet|efficientnet|yolo)", re.I)
_SCENARIOS = {"offline": "Offline", "server": "Server", "interactive": "Interactive",
              "singlestream": "SingleStream", "multistream": "MultiStream"}


def read_summary(path: Path) -> dict[str, str]:
    """LoadGen's summary file as parse_summary reads it."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UserError(f"cannot read: {exc.strerror or exc}", where=str(path)) from None
    return parse_summary(text)


def parse_summary(text: str) -> dict[str, str]:
    """LoadGen's `key : value` lines, keys lower-cased (the first of a repeated key wins)."""
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


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _finite_or_blank(value, where: str, field: str) -> float:
    """A number cell: NaN when blank or not a number (the row is then skipped), an error when it
    is a number too large for a float (a 400-digit figure, inf): that is no result, but a broken file."""
    try:
        x = float(str(value).strip())
    except (TypeError, ValueError):
        return math.nan
    if not math.isfinite(x):
        raise UserError(f"not a finite number: {_short(value)}", where=where, field=field)
    return x


def _positive_int(value, where: str, field: str) -> int:
    x = _float(value)
    if not (x > 0 and x == int(x)):
        raise UserError(f"expected a positive whole number, got {_short(value)}", where=where, field=field)
    return int(x)


def split_framework(text) -> tuple[str | None, str | None]:
    """'TensorRT 10.11, CUDA 12.9' -> ('TensorRT', '10.11'): the first component and its version."""
    first = str(text or "").split(",")[0].strip()
    if not first:
        return None, None
    m = _FRAMEWORK.match(first)
    return (m["name"].strip(), m["version"]) if m else (first, None)


def _json_object(path: Path, what: str) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read: {exc.strerror or exc}", where=str(path)) from None
    except RecursionError:
        raise UserError(f"not {what}: JSON nested too deeply", where=str(path)) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError(f"not JSON: {exc}", where=str(path)) from None
    if not isinstance(data, dict):
        raise UserError(f"expected {what} (an object), got {type(data).__name__}", where=str(path))
    return data


def _system(path: Path) -> dict:
    return _json_object(path, "a system description")


def _precision(submitter_dir: Path, system: str, benchmark: str, scenario: str, fallback) -> str | None:
    """weight_data_types of a result: its measurements/<system>/<benchmark>/<scenario>/*.json
    (named <system>_<scenario>.json, or <system>.json in some submissions), else the system's."""
    folder = submitter_dir / "measurements" / system / benchmark
    if folder.is_dir():
        for child in sorted(folder.iterdir()):
            if child.is_dir() and child.name.lower() == scenario.lower():
                for f in sorted(child.glob("*.json")):
                    value = _json_object(f, "a measurements description").get("weight_data_types")
                    if isinstance(value, str) and value.strip():
                        return value.strip()
    return fallback.strip() if isinstance(fallback, str) and fallback.strip() else None


def _tree_row(summary_path: Path, root: Path, lengths: dict) -> dict | str:
    """One published row from a LoadGen summary, or why it was skipped ('not an LLM', 'no token rate')."""
    run = summary_path.parent                       # .../performance/run_1
    scenario_dir = run.parent.parent
    benchmark_dir, system_dir = scenario_dir.parent, scenario_dir.parent.parent
    submitter_dir = system_dir.parent.parent
    if _NOT_LLM.match(benchmark_dir.name):
        return "not an LLM"
    summary = read_summary(summary_path)
    rate = next((_float(summary[k]) for k in _THROUGHPUT_KEYS if k in summary), math.nan)
    if not rate > 0:
        return "no token rate"
    system_file = submitter_dir / "systems" / f"{system_dir.name}.json"
    if not system_file.is_file():
        raise UserError(f"no system description {system_file.relative_to(root)} for this result",
                        where=str(summary_path))
    system = _system(system_file)
    where = str(system_file)
    nodes = _positive_int(system.get("number_of_nodes", 1), where, "number_of_nodes")
    chips = _positive_int(system.get("accelerators_per_node"), where, "accelerators_per_node") * nodes
    latencies = {column: next((_float(summary[k]) * _NS for k in keys if k in summary), math.nan)
                 for column, keys in _LATENCY_KEYS.items()}
    tpot = latencies["tpot_p50_s"] if latencies["tpot_p50_s"] > 0 else latencies["tpot_mean_s"]
    framework, version = split_framework(system.get("framework"))
    scenario = _SCENARIOS.get(scenario_dir.name.lower(), summary.get("scenario", scenario_dir.name))
    return {
        "publisher": PUBLISHER, "submitter": system.get("submitter") or submitter_dir.name,
        "model": lengths["model"] or benchmark_dir.name, "published_model": benchmark_dir.name,
        "input_length": lengths["input_length"], "output_length": lengths["output_length"],
        "concurrency": math.nan, "scenario": scenario,
        "accelerator": system.get("accelerator_model_name"), "chips": chips,
        "framework": framework, "framework_version": version,
        "precision": _precision(submitter_dir, system_dir.name, benchmark_dir.name, scenario_dir.name,
                                system.get("weight_data_types")),
        # MLPerf's system descriptions say how many nodes, not whether prefill and decode were
        # split or whether speculative decoding ran: those stay unknown (None), not False.
        "multinode": nodes > 1, "disaggregated": None, "spec_decoding": None,
        "output_tokens_per_s_per_chip": rate / chips, "total_tokens_per_s_per_chip": math.nan,
        "interactivity_tokens_per_s": interactivity_from_tpot(tpot), **latencies, "e2e_p50_s": math.nan,
        "valid": summary.get("result is", "").upper().startswith("VALID"), "date": None,
        "reference": str(summary_path.relative_to(root)),
    }


_CSV_NEEDED = ("Organization", "SystemName", "MlperfModel", "Scenario", "Result", "accelerator_model_name",
               "accelerators_per_node", "framework", "Units")


def _summary_csv_rows(path: Path, lengths: dict) -> tuple[list[dict], list[str]]:
    """Rows of a summary.csv, and the models of the rows skipped (not a token rate, no accelerators)."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, [])
            table = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UserError(f"cannot read: {exc}", where=str(path)) from None
    missing = [c for c in _CSV_NEEDED if c not in header]
    if missing:
        raise UserError(f"not an MLPerf summary CSV: no column {', '.join(missing)}", where=str(path))
    rows, skipped = [], []
    for line, cells in enumerate(table, start=2):
        where = f"{path}:{line}"
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            field = header[len(cells)] if len(cells) < len(header) else header[-1]
            raise UserError(f"row has {len(cells)} fields, the header {len(header)}", where=where, field=field)
        rec = dict(zip(header, cells))
        rate = _finite_or_blank(rec["Result"], where, "Result")
        per_node = _finite_or_blank(rec["accelerators_per_node"], where, "accelerators_per_node")
        nodes = _finite_or_blank(rec.get("number_of_nodes") or 1, where, "number_of_nodes")
        if ("token" not in rec["Units"].lower() or _NOT_LLM.match(rec["MlperfModel"])
                or not rate > 0 or not per_node > 0 or not nodes > 0):
            skipped.append(rec["MlperfModel"])   # images/s, samples/s, queries/s, or a CPU-only system
            continue
        framework, version = split_framework(rec["framework"])
        chips = per_node * nodes
        rows.append({
            "publisher": PUBLISHER + (f" {rec['version']}" if rec.get("version") else ""),
            "submitter": rec["Organization"], "model": lengths["model"] or rec["MlperfModel"],
            "published_model": rec["MlperfModel"], "input_length": lengths["input_length"],
            "output_length": lengths["output_length"], "concurrency": math.nan, "scenario": rec["Scenario"],
            "accelerator": rec["accelerator_model_name"], "chips": chips, "framework": framework,
            "framework_version": version, "precision": rec.get("weight_data_types") or None,
            "multinode": nodes > 1, "disaggregated": None, "spec_decoding": None,
            "output_tokens_per_s_per_chip": rate / chips, "total_tokens_per_s_per_chip": math.nan,
            "interactivity_tokens_per_s": math.nan, "valid": True, "date": None,
            "reference": f"{path.name}:{line} {rec['SystemName']}",
        })
    return rows, skipped


def _names(values: list[str]) -> str:
    names = sorted(set(values))
    return ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")


def import_mlperf(folder: str | Path, *, model: str | None = None, input_length: float | None = None,
                  output_length: float | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Published rows from an MLPerf results folder (either form of the module docstring; a
    summary.csv named directly works too), and notes on what was left out or cannot be compared."""
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
    rows, notes, not_llm, no_rate = [], [], [], []
    base = root if root.is_dir() else root.parent
    for path in summaries:
        found = _tree_row(path, base, lengths)
        if isinstance(found, dict):
            rows.append(found)
        else:
            (not_llm if found == "not an LLM" else no_rate).append(path.parents[3].name)
    if not_llm:
        notes.append(f"{len(not_llm)} result(s) of benchmarks that are not LLMs skipped ({_names(not_llm)})")
    if no_rate:
        notes.append(f"{len(no_rate)} result(s) without a token rate skipped ({_names(no_rate)})")
    csv_rows = 0
    for path in csvs:
        found, skipped = _summary_csv_rows(path, lengths)
        rows += found
        csv_rows += len(found)
        if skipped:
            notes.append(f"{path}: {len(skipped)} row(s) not in tokens/s, not an LLM or without accelerators "
                         f"left out ({_names(skipped)})")
    if csv_rows:
        notes.append(f"{csv_rows} summary.csv row(s) give throughput only, no TTFT or TPOT: they cannot be placed "
                     "on an interactivity front or compared with your points (import the results tree, "
                     "<submitter>/results/..., for the latencies of Server and Interactive runs)")
    untimed = sum(1 for r in rows[:len(rows) - csv_rows] if not r["interactivity_tokens_per_s"] > 0)
    if untimed:
        notes.append(f"{untimed} result(s) without a time per output token (Offline runs) imported for reference: "
                     "they cannot be compared on interactivity")
    unstated = sum(1 for r in rows if not r["precision"])
    if unstated:
        notes.append(f"{unstated} result(s) without a stated precision (weight_data_types): compared with points "
                     "of any precision")
    if rows and (input_length is None or output_length is None):
        notes.append("MLPerf results have no fixed lengths: give --input-length and --output-length to compare "
                     "them with your points")
    # Each refused row named by its summary (a results tree's file, or summary.csv:line and system).
    return gate(published_frame(rows), notes.append, names=[f"{base / r['reference']}" for r in rows]), notes
