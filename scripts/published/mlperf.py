"""MLPerf Inference: every LLM result of the closed division, datacenter suite, of each round whose
results repository is in the mirrors (v4.1, v5.1 and v6.0), one CSV per round (mlperf-v4.1.csv, ...).

What is read, per round (REPOS pins the commit):
- `summary_results.json`, MLCommons' own table of the round's results (v5.1 and later; v4.1's
  repository has none, so mlperf_tree builds the same records from the submission tree, with the
  LoadGen detail log's token rate as the figure the summary log is checked against): one record per (result ID,
  system, benchmark, scenario), with `Category` (closed/open), `Suite`, `Model` (the benchmark),
  `Scenario`, `Nodes`, `a#` (accelerators per node), `Total Accelerators` (v6.0 only),
  `Accelerator`, `weight_data_types`, `Accuracy` (the accuracy run's figures, with
  `TOKENS_PER_SAMPLE` for most LLMs), `Performance_Result` and `Location` (the results folder).
- For each record, its LoadGen log `<Location>/performance/run_1/mlperf_log_summary.txt`: `Result
  is : VALID` (else valid = false); the token rate (Offline `Tokens per second`, Server and
  Interactive `Completed tokens per second`), which must equal the record's `Performance_Result`
  to the digits both print (the summary rounds to 6 significant digits, the log to 2 decimals; a
  larger difference stops the build rather than picking one; v5.1's llama3.1-8b Interactive records
  say "Queries/s" but hold the log's tokens/s); the first-token and time-to-output-
  token percentiles (ns -> s); `Completed samples per second` and `Mean latency (ns)`.
- `<division>/<submitter>/systems/<system>.json` (`framework`, `number_of_nodes`,
  `accelerators_per_node`, checked against the summary's counts) and the result's measurements JSON
  (`results/<system>/<benchmark>/<scenario>/measurements.json` in v6.0, `measurements/<system>/
  <benchmark>/<scenario>/*.json` in v5.1) for `weight_data_types`.

Fields: chips = accelerators per node x nodes; multinode = nodes > 1 (kept; the estimate does not
calibrate on them). Throughput per chip = the log's token rate / chips (MLPerf counts generated
tokens only, so total_tokens_per_s_per_chip stays empty). Interactivity = 1 / median time to output
token; e2e_p50 = LoadGen's 50th percentile latency (Server, Interactive; an Offline run's latencies
are of one whole batch, not of a request). precision = `weight_data_types` as the submission states
it, and so weight_dtype, except where the submitter's own code says otherwise (mlperf_dtypes: v4.1's
TensorRT-LLM builders load only an fp8 checkpoint, though every such result states fp16);
kv_cache_dtype = the KV cache dtype the submitter's configs or code state (mlperf_dtypes), empty
where they state none or several; activation_dtype likewise (v4.1's TensorRT-LLM submitters'
calibration.md: the linear layers' inputs are quantised to fp8), else empty (`input_data_types`,
int32 for the LLMs, is the dtype of the token ids fed in, not of the matmuls).
Accelerator: tpubench's canonical name (hardware.accelerators.normalize_accelerator: "NVIDIA
B200-SXM-180GB" -> B200, "Virtualized NVIDIA H200-SXM-141GB" -> H200, "AMD Instinct MI355X 288GB
HBM3e (Power Cap 1000 W)" -> MI355X), also for a chip the spec table (data/accelerators.csv) has no
row for yet: its rows wait for one before they calibrate.

Calibration fields: concurrency, Server and Interactive only (MLPerf fixes an arrival rate, not a
concurrency), by Little's law = completed samples/s x mean latency (s), both from the log;
output_length = the accuracy run's TOKENS_PER_SAMPLE where the summary gives it (within 2% of the
performance log's own mean), else the performance run's tokens/s / samples/s from the log
(llama3.1-8b reports GEN_LEN, which counts characters, gpt-oss-120b no length at all); input_length
= the mean input tokens of the benchmark's performance data set, in the model's tokenizer:
- llama3.1-405b and gpt-oss-120b: the figure MLCommons states (INPUT_MEAN).
- llama2-70b-99/-99.9, llama3.1-8b, mixtral-8x7b and deepseek-r1: no MLCommons text states one (not
  the READMEs, docs, scripts or configs of any version of mlcommons/inference, nor mlcommons/
  inference_policies, nor the submitters' code in the v5.1 and v6.0 results repositories), so the
  mean is computed here from a per-sample table (TOKEN_TABLES): openshift-psap/performance-dashboard
  mlperf-data/summaries/<benchmark>.csv, one row per sample of MLCommons' own preprocessed data set
  (`input_length` = the data set's own token count column, e.g. llama2-70b's `tok_input_length`,
  written by mlperf-data/original/generate_dataset_summaries.py of the same repository). The build
  stops unless a table has exactly the benchmark's sample count (24,576 / 13,368 / 15,000 / 4,388,
  inference_policies' inference_rules.adoc). The tables are MLCommons' data: their reference output
  means equal MLCommons' own figures (mixtral-8x7b 144.84 = language/mixtral-8x7b/README.md
  `tokens_per_sample`; deepseek-r1 4043.45 = the first reference "mean-output-tok-len" of
  language/deepseek-r1/README.md), and the same repository's llama3.1-405b table gives 9,428.6 input
  and 684.7 output tokens, MLCommons' stated 9,400 and 680 (llama3.1-405b keeps MLCommons' figure).
  mixtral-8x7b's mean is over its whole 15,000-sample mix (5,000 each of OpenOrca, GSM8K and MBXP).
Output lengths against MLCommons' reference figures (mlcommons/inference tools/submission/
submission_checker/constants.py, which bounds TOKENS_PER_SAMPLE to about 90-110% of them): every
row's lies inside those bounds (llama2-70b 270-302 vs 294.45, mixtral-8x7b 143-147 vs 144.84 and
145.9, deepseek-r1 3,624-3,818 vs 3,886.2, llama3.1-405b 626-661 vs 684.68; gpt-oss-120b's
1,307-1,379 within 10% of the TEST09 performance-set mean 1,278.20); llama3.1-8b has no token figure
(GEN_LEN counts characters), its 128.0-129.0 sit at the reference's 128-token cap
(language/llama3.1-8b/SUT_VLLM.py `max_tokens`).
Offline rows keep both lengths but get no concurrency. spec_decoding: "none" where the round's
rules forbid speculative decoding (v4.1 and v5.1: in the closed division's disallowed techniques,
inference_rules.adoc at c58dbd6, 2024-07-01, and later; v6.0:
allowed only for deepseek-r1 Interactive, mlcommons/inference_policies inference_rules.adoc at
6dc0528, 2026-03-27); for deepseek-r1 Interactive "mtp" where the submitter's config for that
system says `'decoding_type': 'MTP'`, else empty. disaggregated stays empty: no result states it.

Left out, and counted on stderr: results of other divisions and suites; benchmarks that are not
LLMs (the importer's list: whisper, vision, diffusion, recommenders, ...); results without a token
rate (qwen3-vl-235b-a22b reports samples/s only); results of CPU-only systems (no accelerator, so
no per-chip figure); systems of several chip kinds (AMD's MI300X + MI325X (+ MI355X) clusters: a
per-chip figure would mix chips); and chips tpubench cannot name yet (at this writing RTX PRO 4500
and Intel's Arc Pro B50/B60/B70; v4.1's GH200 Grace Hopper Superchip): a shipped row carries a
canonical chip name, so those rows come in on the next regeneration once hardware.accelerators has
a pattern for the chip. Not read, for want of a git copy the snapshot fetch can make: MLPerf
Inference v5.0 (mlcommons/inference_results_v5.0 and its forks: too many files), v4.0 (1.4 GB)
and v6.1 (mlcommons/inference_results_v6.1 is indexed but has no snapshot); add one to REPOS and
VERSIONS once it can be copied.
"""

from __future__ import annotations

import io
import json
import math
import posixpath
import re
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
from git_mirror import Mirror, open_mirror
from mlperf_dtypes import stated_dtypes
from mlperf_tree import tree_records

from tpubench.hardware.accelerators import normalize_accelerator

# The user-facing importer's own key tables, so both read a LoadGen log alike.
from tpubench.output.published.mlperf import _LATENCY_KEYS, _NOT_LLM, _NS, _float, parse_summary, split_framework
from tpubench.output.published.rows import interactivity_from_tpot, published_frame

REPOS = {
    # v4.1 has no summary_results.json: its records are built from the tree (mlperf_tree).
    "mlcommons/inference_results_v4.1": "198fc46799b3328b36ee4bcbdebfa2db5a8e6183",   # archived, 2025-07-24
    "mlcommons/inference_results_v5.1": "965182b03376a00fcae415c54e560e1c83937932",
    # A fork carrying MLPerf Inference v6.0; this commit is upstream's own last one (mlcommons/
    # inference_results_v6.0 PR #3, 2026-04-03): the fork's later commits touch only its open/ folder.
    "gbeezybez/inference_results_v6.0": "4d3916ac9cf474b679cdfcf492d43a0559418ad1",
    # Per-sample token counts of MLCommons' LLM data sets (TOKEN_TABLES); main, 2026-07-30 (the tables
    # last changed on 2025-11-20).
    "openshift-psap/performance-dashboard": "71007029fb5bced1d79808e7e64dc4c2af82ea55",
}
# The results repositories of REPOS: round and publication date (MLCommons' announcement: v4.1 on
# 2024-08-28, v5.1 on 2025-09-09, v6.0 on 2026-04-01).
VERSIONS = {
    "mlcommons/inference_results_v4.1": ("v4.1", "2024-08-28"),
    "mlcommons/inference_results_v5.1": ("v5.1", "2025-09-09"),
    "gbeezybez/inference_results_v6.0": ("v6.0", "2026-04-01"),
}
# Benchmark -> the Hugging Face id of the model it runs.
MODELS = {
    "llama2-70b-99": "meta-llama/Llama-2-70b-chat-hf",
    "llama2-70b-99.9": "meta-llama/Llama-2-70b-chat-hf",
    "llama3.1-8b": "meta-llama/Llama-3.1-8B-Instruct",
    "llama3.1-405b": "meta-llama/Llama-3.1-405B-Instruct",
    "deepseek-r1": "deepseek-ai/DeepSeek-R1",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "gpt-oss-120b": "openai/gpt-oss-120b",
    "qwen3-vl-235b-a22b": "Qwen/Qwen3-VL-235B-A22B-Instruct",
}
# Mean input tokens of a benchmark's (performance) data set, as MLCommons publishes it.
INPUT_MEAN = {
    "llama3.1-405b": (9400, "MLCommons, mlcommons.org/2025/04/llm-inference-v5: mean input/output "
                            "context lengths of 9,400 and 680 tokens"),
    "gpt-oss-120b": (5000, "MLCommons, mlcommons.org/2026/03/mlperf-inference-gpt-oss: performance "
                           "data set mean input sequence length 5,000 tokens"),
}
# Benchmarks whose mean input is computed from a per-sample table of TABLES_REPO: (path, the data
# set's sample count, MLCommons' data set file, its column the table's input_length holds).
TABLES_REPO = "openshift-psap/performance-dashboard"
_LLAMA2 = ("mlperf-data/summaries/llama2-70b-99.csv", 24576,
           "open_orca_gpt4_tokenized_llama.sampled_24576.pkl", "tok_input_length")
TOKEN_TABLES = {
    "llama2-70b-99": _LLAMA2,
    "llama2-70b-99.9": _LLAMA2,
    "llama3.1-8b": ("mlperf-data/summaries/llama3-1-8b-datacenter.csv", 13368, "cnn_eval.json",
                    "len(tok_input)"),
    "mixtral-8x7b": ("mlperf-data/summaries/mixtral-8x7b.csv", 15000,
                     "09292024_mixtral_15k_mintoken2_v1.pkl", "tok_input_len"),
    "deepseek-r1": ("mlperf-data/summaries/deepseek-r1.csv", 4388,
                    "mlperf_deepseek_r1_dataset_4388_fp8_eval.pkl", "tok_input_len"),
}
# (round, benchmark, scenario) where the round's rules allow speculative decoding (MTP head only).
SPEC_ALLOWED = {("v6.0", "deepseek-r1", "Interactive")}
LITTLE = "Little's law: completed samples/s x mean latency"
_TOKENS_PER_SAMPLE = re.compile(r"TOKENS_PER_SAMPLE:\s*([0-9.]+)")


def build(mirrors: Path) -> dict[str, pd.DataFrame]:
    inputs = {**INPUT_MEAN, **table_means(open_mirror(mirrors, TABLES_REPO, REPOS[TABLES_REPO]))}
    out = {}
    for repo, (version, date) in VERSIONS.items():
        rows, skipped = version_rows(open_mirror(mirrors, repo, REPOS[repo]), version, date, inputs)
        notes = ", ".join(f"{n} {why}" for why, n in sorted(skipped.items()))
        print(f"mlperf {version}: {len(rows)} rows; left out: {notes or 'none'}", file=sys.stderr)
        out[f"mlperf-{version}.csv"] = published_frame(rows)
    return out


def table_means(mirror: Mirror) -> dict[str, tuple[float, str]]:
    """Benchmark -> (mean input tokens, source) from TOKEN_TABLES: each table must hold one positive
    integer input_length per sample of the data set, no more, no fewer."""
    out = {}
    for bench, (path, samples, dataset, column) in TOKEN_TABLES.items():
        table = pd.read_csv(io.StringIO(mirror.text(path)))
        lengths = table.get("input_length")
        if lengths is None or len(table) != samples or not pd.api.types.is_integer_dtype(lengths) or (lengths <= 0).any():
            raise SystemExit(f"MLPerf: {mirror.cite(path)} is not {samples} positive integer input lengths")
        out[bench] = (float(lengths.mean()), f"{mirror.cite(path)}: mean of the {samples:,} samples' input "
                                             f"tokens, {column} of MLCommons' {dataset}")
    return out


def version_rows(mirror: Mirror, version: str, date: str,
                 inputs: dict[str, tuple[float, str]]) -> tuple[list[dict], Counter]:
    """The round's closed datacenter LLM rows (sorted) and what was left out, by reason; `inputs`:
    benchmark -> (mean input tokens, source)."""
    rows, skipped, mismatches = [], Counter(), []
    records = (json.loads(mirror.text("summary_results.json")) if "summary_results.json" in mirror.files
               else tree_records(mirror))
    for rec in records:
        if rec["Category"] != "closed" or rec["Suite"] != "datacenter":
            continue
        if _NOT_LLM.match(rec["Model"]):
            skipped["non-LLM results"] += 1
            continue
        found = result_row(mirror, version, date, rec, inputs)
        if isinstance(found, str) and found.startswith("mismatch"):
            mismatches.append(found)
        elif isinstance(found, str):
            skipped[found] += 1
        else:
            rows.append(found)
    if mismatches:
        raise SystemExit(f"MLPerf {version}: log and summary_results.json disagree:\n" + "\n".join(mismatches))
    rows.sort(key=lambda r: (r["published_model"], r["scenario"], r["accelerator"], r["submitter"], r["reference"]))
    return rows, skipped


def result_row(mirror: Mirror, version: str, date: str, rec: dict,
               inputs: dict[str, tuple[float, str]]) -> dict | str:
    """One row, or why the record is left out ('mismatch ...' stops the build)."""
    result_dir = posixpath.normpath(rec["Location"]).removesuffix("/performance/run_1")
    log_path = f"{result_dir}/performance/run_1/mlperf_log_summary.txt"
    log = parse_summary(mirror.text(log_path))
    scenario, bench = rec["Scenario"], rec["Model"]
    rate = _float(log.get("tokens per second" if scenario == "Offline" else "completed tokens per second"))
    if not rate > 0:
        return "results without a token rate (samples/s only)"
    if rec["Performance_Result"] is None or not _agree(rate, float(rec["Performance_Result"])):
        return f"mismatch {rec['ID']} {log_path}: log {rate}, summary {rec['Performance_Result']}"
    division, submitter_dir, _, system = result_dir.split("/")[:4]
    nodes, chips = int(rec["Nodes"]), chip_count(rec)
    if not chips:
        return "results of CPU-only systems"
    chip, unnamed = accelerator(rec["Accelerator"])
    if chip is None:
        return unnamed
    sysdesc = json.loads(mirror.text(f"{division}/{submitter_dir}/systems/{system}.json"))
    if int(sysdesc["number_of_nodes"]) * int(sysdesc["accelerators_per_node"]) != chips:
        return f"mismatch {rec['ID']}: system JSON counts other chips than the summary's {chips}"
    if bench not in MODELS:
        raise SystemExit(f"MLPerf {version}: LLM benchmark {bench} has no Hugging Face id in MODELS")
    framework, framework_version = split_framework(sysdesc.get("framework"))
    latencies = {column: _float(next((log[k] for k in keys if k in log), None)) * _NS
                 for column, keys in _LATENCY_KEYS.items()}
    weights = weight_types(mirror, result_dir) or rec.get("weight_data_types") or None
    stated = stated_dtypes(mirror, result_dir, framework, sysdesc.get("sw_notes") or "")
    return {
        "publisher": f"MLPerf Inference {version}", "submitter": rec["Submitter"],
        "model": MODELS[bench], "published_model": bench, "scenario": scenario,
        "accelerator": chip, "chips": chips, "multinode": nodes > 1,
        "framework": framework, "framework_version": framework_version,
        "precision": weights, "weight_dtype": stated.get("weight_dtype", weights),
        "activation_dtype": stated.get("activation_dtype"), "kv_cache_dtype": stated.get("kv_cache_dtype"),
        "output_tokens_per_s_per_chip": rate / chips,
        "interactivity_tokens_per_s": interactivity_from_tpot(latencies["tpot_p50_s"]), **latencies,
        "e2e_p50_s": math.nan if scenario == "Offline" else _float(log.get("50.00 percentile latency (ns)")) * _NS,
        "valid": log.get("result is", "").upper() == "VALID", "date": date,
        "reference": (f"MLPerf Inference {version} {'result ' + rec['ID'] + ' ' if rec['ID'] else ''}({system}): "
                      f"{mirror.cite(log_path)}"),
        "spec_decoding": speculative(mirror, version, f"{division}/{submitter_dir}", system, bench, scenario),
        "disaggregated": None,
        **calibration_fields(rec, log, scenario, inputs),
    }


def calibration_fields(rec: dict, log: dict, scenario: str, inputs: dict[str, tuple[float, str]]) -> dict:
    """Lengths for every row, concurrency (Little's law) for Server and Interactive rows."""
    bench = rec["Model"]
    m = _TOKENS_PER_SAMPLE.search(rec.get("Accuracy") or "")
    if m:
        output, output_basis = float(m[1]), "accuracy run's TOKENS_PER_SAMPLE"
    else:  # the performance run's own mean: tokens/s over samples/s of the same log
        tokens, samples = (("tokens per second", "samples per second") if scenario == "Offline"
                           else ("completed tokens per second", "completed samples per second"))
        output = _float(log.get(tokens)) / _float(log.get(samples))
        output_basis = "performance run's tokens/s / samples/s"
    input_length, source = inputs.get(bench, (math.nan, None))
    basis = f"output: {output_basis}" + (f"; input: dataset mean ({source})" if source else "")
    fields = {"input_length": input_length, "output_length": output, "length_basis": basis}
    if scenario != "Offline":
        fields["concurrency"] = _float(log.get("completed samples per second")) * _float(log.get("mean latency (ns)")) * _NS
        fields["concurrency_basis"] = LITTLE
    return fields


def chip_count(rec: dict) -> int:
    """Accelerators of the system: v6.0's `Total Accelerators`, else accelerators per node x nodes
    (0 for a CPU-only system, whose `a#` is empty or 0)."""
    total = rec.get("Total Accelerators")
    if total not in (None, ""):
        return int(total)
    return int(rec["a#"] or 0) * int(rec["Nodes"])


def accelerator(name: str) -> tuple[str | None, str]:
    """tpubench's canonical chip name, or None and why not: a system of several chip kinds (MLPerf
    joins them with ',' or ' and '; the count suffix '(x8)' is not a kind), or a chip the patterns of
    hardware.accelerators don't know (a shipped row must carry a canonical name)."""
    kinds = {normalize_accelerator(part) for part in re.split(r",|\band\b", name)} - {None}
    if len(kinds) == 1:
        return kinds.pop(), ""
    return None, ("results of systems with several chip kinds" if kinds
                  else f"results on a chip tpubench cannot name ({name})")


def weight_types(mirror: Mirror, result_dir: str) -> str | None:
    """weight_data_types of the result's measurements JSON (v6.0 beside the result, v5.1 under
    measurements/<system>/<benchmark>/<scenario>/)."""
    division, submitter, _, system, bench, scenario = result_dir.split("/")[:6]
    paths = [f"{result_dir}/measurements.json"] + [
        p for p in mirror.glob(f"{division}/{submitter}/measurements/{system}/{bench}/*/*.json")
        if p.split("/")[-2].lower() == scenario.lower()]
    for path in paths:
        if path in mirror.files:
            value = json.loads(mirror.text(path)).get("weight_data_types")
            if isinstance(value, str) and value.strip():
                return value.strip()
    return None


def speculative(mirror: Mirror, version: str, submitter: str, system: str, bench: str, scenario: str) -> str | None:
    """'none' where the round's rules forbid speculative decoding; where they allow it, 'mtp' if the
    submitter's config for this system (configs/<system without _TRT>/<scenario>/<benchmark>.py)
    configures the MTP head, else None (not stated)."""
    if (version, bench, scenario) not in SPEC_ALLOWED:
        return "none"
    for path in mirror.glob(f"{submitter}/configs/*/{scenario}/{bench}.py"):
        folder = path.split("/")[-3]
        if (system == folder or system.startswith(folder + "_")) and "'decoding_type': 'MTP'" in mirror.text(path):
            return "mtp"
    return None


def _agree(log_rate: float, summary_rate: float) -> bool:
    """Equal to the digits both print: the summary's 6 significant digits, the log's 2 decimals."""
    ulp = 10 ** (math.floor(math.log10(abs(summary_rate))) - 5) if summary_rate else 0
    return abs(log_rate - summary_rate) <= 0.5 * ulp + 0.005
