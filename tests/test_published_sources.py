"""The source modules of scripts/published/ added for issue 47: MLPerf rounds read from their
submission tree (v4.1) with the KV-cache dtype their submitters state, TensorRT-LLM's performance
tables, optimum-neuron's guidellm runs. Each is run on a small tree committed to a throw-away git
repository (the script reads sources only through git), shaped as the public repositories are; the
rebuild of the real sources byte for byte is test_published_regeneration's (TPUBENCH_MIRRORS)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "published"))

import mlperf  # noqa: E402
import mlperf_dtypes  # noqa: E402
import optimum_neuron  # noqa: E402
import trtllm  # noqa: E402
from git_mirror import Mirror  # noqa: E402
from mlperf_tree import tree_records  # noqa: E402


def _commit(root: Path, files: dict[str, str]) -> Mirror:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "tree", "--date=2024-08-28T00:00:00"], check=True,
                   env={"GIT_COMMITTER_DATE": "2024-08-28T00:00:00", "PATH": "/usr/bin:/bin"})
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    return Mirror(repo="test/results", git_dir=root / ".git", commit=head)


# --- KV-cache dtype statements --------------------------------------------------------------------

@pytest.mark.parametrize("text, dtype", [
    ("'kv_cache_dtype': 'fp8',", "fp8"),                         # NVIDIA harness config
    ("  kv_cache_dtype: fp8", "fp8"),                           # vLLM harness YAML
    ("python quantize.py --qformat fp8 --kv_cache_dtype fp8 --tp_size 1", "fp8"),
    ('"--kv_cache_dtype=fp8",', "fp8"),                          # a builder's flag list
    ("vllm serve m --kv-cache-dtype fp8_e4m3", "fp8_e4m3"),
    ('if kv_cache_dtype == "fp8":', None),                        # a comparison states nothing
    ("self.kv_cache_dtype in ['fp8']", None),                     # nor an attribute
    ("kv_cache_dtype: str = 'auto'", None),                       # nor a parameter's type or default
])
def test_a_kv_cache_dtype_is_read_only_where_a_setting_states_it(text, dtype):
    assert mlperf_dtypes._one(mlperf_dtypes._KV.findall(text)) == dtype


def test_two_different_kv_dtypes_in_one_submission_state_none():
    assert mlperf_dtypes._one(["fp8", "FP8"]) == "fp8"
    assert mlperf_dtypes._one(["fp8", "bf16"]) is None and mlperf_dtypes._one([]) is None


# --- an MLPerf round without summary_results.json (v4.1) ------------------------------------------

_RUN = "closed/Sub/results/Box_H100x8_TRT/llama2-70b-99/Server"
_SUMMARY = """================================================
MLPerf Results Summary
================================================
SUT name : llama2-70b-Server-SUT-LoadGen
Scenario : Server
Mode     : PerformanceOnly
Completed samples per second    : 75.78
Completed tokens per second: 21986.02
Result is : VALID
Mean latency (ns)               : 49407817067
50.00 percentile latency (ns)   : 42805466769
50.00 percentile first token latency (ns)   : 307084099
50.00 percentile time to output token (ns)   : 173667671
"""


def _v41_tree(detail_rate: str = "21986") -> dict[str, str]:
    system = {"submitter": "Sub", "system_type": "datacenter", "number_of_nodes": 1, "accelerators_per_node": 8,
              "accelerator_model_name": "NVIDIA H100-SXM-80GB", "framework": "TensorRT 10.2.0, CUDA 12.4"}
    edge = {**system, "system_type": "edge", "accelerators_per_node": 1, "accelerator_model_name": "NVIDIA L4"}
    return {
        "closed/Sub/systems/Box_H100x8_TRT.json": json.dumps(system),
        "closed/Sub/systems/Edge_L4x1_TRT.json": json.dumps(edge),
        f"{_RUN}/performance/run_1/mlperf_log_summary.txt": _SUMMARY,
        f"{_RUN}/performance/run_1/mlperf_log_detail.txt":
            f':::MLLOG {{"key": "result_completed_tokens_per_second", "value": {detail_rate}, "time_ms": 1}}\n',
        f"{_RUN}/accuracy/accuracy.txt": "{'rouge1': 44.6, 'gen_num': 24576, 'tokens_per_sample': 290.1}\n",
        "closed/Sub/measurements/Box_H100x8_TRT/llama2-70b-99/Server/Box_H100x8_TRT_Server.json":
            json.dumps({"weight_data_types": "fp16"}),
        # The submitter's code: the README's quantisation command and a builder that loads only fp8.
        "closed/Sub/code/llama2-70b/tensorrt/README.md":
            "python quantize.py --dtype float16 --qformat fp8 --kv_cache_dtype fp8 --output_dir=x\n",
        "closed/Sub/code/llama2-70b/tensorrt/builder.py":
            'flags = ["--dtype=float16", "--qformat=fp8"]\nraise NotImplementedError("Only fp8 supported as of now.")\n',
        # Not records: a SingleStream result, and an edge system's.
        "closed/Sub/results/Box_H100x8_TRT/llama2-70b-99/SingleStream/performance/run_1/mlperf_log_summary.txt": _SUMMARY,
        "closed/Sub/results/Edge_L4x1_TRT/resnet50/offline/performance/run_1/mlperf_log_summary.txt": "x : 1\n",
    }


def test_a_round_without_a_summary_table_is_read_from_its_tree(tmp_path):
    mirror = _commit(tmp_path, _v41_tree())
    records = tree_records(mirror)
    assert [(r["Model"], r["Scenario"], r["Suite"]) for r in records] == [
        ("llama2-70b-99", "Server", "datacenter"), ("resnet50", "Offline", "edge")]
    rec = records[0]
    assert rec["Performance_Result"] == 21986.0 and rec["Accuracy"] == "TOKENS_PER_SAMPLE: 290.1"
    assert (rec["Nodes"], rec["a#"], rec["Accelerator"]) == (1, 8, "NVIDIA H100-SXM-80GB")

    rows, skipped = mlperf.version_rows(mirror, "v4.1", "2024-08-28", {"llama2-70b-99": (222.33, "table mean")})
    row, = rows
    assert not skipped                                         # the edge result is not the datacenter suite's
    assert (row["accelerator"], row["chips"], row["output_length"]) == ("H100", 8, 290.1)
    assert row["output_tokens_per_s_per_chip"] == pytest.approx(21986.02 / 8)
    assert row["concurrency"] == pytest.approx(75.78 * 49.407817067)          # Little's law
    assert row["spec_decoding"] == "none" and row["valid"]
    # As stated: fp16 in the measurements JSON; fp8 weights and KV cache in the submitter's code.
    assert (row["precision"], row["weight_dtype"], row["kv_cache_dtype"]) == ("fp16", "fp8", "fp8")
    log = mirror.cite(f"{_RUN}/performance/run_1/mlperf_log_summary.txt")
    assert row["reference"] == f"MLPerf Inference v4.1 (Box_H100x8_TRT): {log}"


def test_a_tree_log_that_disagrees_with_its_detail_log_stops_the_build(tmp_path):
    mirror = _commit(tmp_path, _v41_tree(detail_rate="25000"))
    with pytest.raises(SystemExit, match="log and summary_results.json disagree"):
        mlperf.version_rows(mirror, "v4.1", "2024-08-28", {})


# --- TensorRT-LLM's performance page ----------------------------------------------------------------

_PAGE = """# Performance of TensorRT-LLM

## Peak Throughput

This data has been updated for v0.6.1, unless specified.

### H100 GPUs (FP8)

| Model                        | Batch Size | TP (1)    | Input Length | Output Length | Throughput (out tok/s/GPU) |
| :--------------------------- | :--------- | :-------- | :----------- | :------------ | -------------------------: |
| LLaMA 70B                    | 1024       | 2         | 128          | 128           |                      2,657 |
|                              |            |           |              |               |                            |
| LLaMA 7B                     | 48         | 1         | 2048         | 2048          |                      2,740 |

### L40S GPUs (FP8)<sup>*</sup>

<sup> * The following data is from TensorRT-LLM v0.5. </sup>

| Model                        | Batch Size | TP (1)    | Input Length | Output Length | Throughput (out tok/s) |
| :--------------------------- | :--------- | :-------- | :----------- | :------------ | ---------------------: |
| LLaMA 7B                     | 64         | 1         | 128          | 128           |                  3,240 |

### A100 GPUs (FP16)

| Model                        | Batch Size | TP (1)    | Input Length | Output Length | Throughput (out tok/s) |
| :--------------------------- | :--------- | :-------- | :----------- | :------------ | ---------------------: |
| LLaMA 7B                     | 384        | 1         | 128          | 128           |                  5,586 |

## Low Latency
"""


def test_the_tensorrt_page_gives_h100_and_l40s_rows_with_their_versions():
    rows = trtllm.page_rows(_PAGE)
    assert [(r["chip"], r["Model"], r["TP"], r["throughput"], r["per_gpu"], r["version"]) for r in rows] == [
        ("H100", "LLaMA 70B", "2", 2657.0, True, "0.6.1"), ("H100", "LLaMA 7B", "1", 2740.0, True, "0.6.1"),
        ("L40S", "LLaMA 7B", "1", 3240.0, False, "0.5")]          # A100: which one is not said
    assert trtllm.page_rows("# Performance\n\n## Methodology\n") == []


# --- optimum-neuron's guidellm runs -----------------------------------------------------------------

def test_a_guidellm_run_s_load_is_one_request_or_little_s_law_capped_by_the_server_batch():
    common = {"chips": 1}
    sync = optimum_neuron.run_row({"Input type": "synchronous", "Requests per Second": 0.2, "Request Latency (s)": 5.0,
                                   "Time-to-first-token (ms)": 200.0, "Inter Token Latency (ms)": 20.0,
                                   "Output Token Throughput (t/s)": 47.0}, common, batch=8)
    assert sync["concurrency"] == 1.0 and sync["running_batch"] is None and sync["output_length"] == pytest.approx(235)
    assert (sync["ttft_mean_s"], sync["tpot_mean_s"]) == (0.2, 0.02)
    busy = optimum_neuron.run_row({"Input type": "throughput", "Requests per Second": 2.0, "Request Latency (s)": 6.0,
                                   "Time-to-first-token (ms)": 900.0, "Inter Token Latency (ms)": 40.0,
                                   "Output Token Throughput (t/s)": 470.0}, common, batch=8)
    assert busy["concurrency"] == 12.0 and busy["running_batch"] == 8.0     # 12 in flight, 8 in the batch
