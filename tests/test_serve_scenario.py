"""Scenario `serve` end to end through the CLI: a real `transformers serve` started by tpubench on
127.0.0.1 (tiny random model built here), a running scripted server by URL, and the faults: an
unreachable URL, a non-OpenAI server, a server that never becomes ready, one that dies mid-run,
HTTP errors. Every started server is gone afterwards."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from helpers_cli import run_cli as cli

from tpubench import load_requests, load_results
from tpubench.records.result import read_result

pytest.importorskip("aiohttp")
from scripted_server import Script, ScriptedServer, script_prompt  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent


def serve_workload(tmp_path: Path, **changes) -> Path:
    """serve_local with 2 concurrencies and a few short requests."""
    data = yaml.safe_load((REPO / "workloads" / "serve_local.yaml").read_text())
    scenario = data["scenario"]
    scenario.update(input_length=24, output_length=6,
                    load={"concurrency": [1, 2], "num_requests": 6, "warmup_requests": 1})
    for key, value in changes.items():
        scenario[key] = value
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _scripted_launch(tmp_path: Path, lifetime_s: float | None = None, **script) -> dict:
    """`server.launch` of a scripted server on the port tpubench gives it (a server on this host);
    with `lifetime_s`, one that exits hard that long after it started."""
    path = tmp_path / "scripted_launch.py"
    path.write_text(textwrap.dedent(f"""
        import os, socket, sys, time
        sys.path.insert(0, {str(TESTS)!r})
        import scripted_server
        def bound(host="127.0.0.1"):
            sock = socket.socket(); sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, int(sys.argv[1]))); sock.listen(64); return sock
        scripted_server._listening_socket = bound
        scripted_server.ScriptedServer(scripted_server.Script(**{script!r})).start()
        time.sleep({lifetime_s if lifetime_s is not None else 10**6})
        os._exit(1)
    """))
    return {"launch": {"preset": "custom", "command": [sys.executable, str(path), "{port}"], "startup_timeout_s": 20}}


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" in status.read_text()


@pytest.mark.slow
def test_transformers_serve_end_to_end(tmp_path, monkeypatch, capsys):
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    workload = serve_workload(tmp_path)
    code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--out", str(tmp_path / "r"))
    assert code == 0, err + out
    assert "c1 in24 out6 completions" in out and "c2 in24 out6 completions" in out

    results = [read_result(f) for f in sorted((tmp_path / "r").glob("*.json"))]
    assert len(results) == 2 and all(r.status == "ok" for r in results), [r.error for r in results]
    # On a busy 2-vCPU machine the client's own event-loop lag can pass its 5 ms limit (the point
    # is then rightly invalid: the client, not the server, was timed; priced for reference only and
    # marked in the run's cost table); nothing else may fail.
    lagged = [r for r in results if not r.validity.valid]
    for r in lagged:
        others = [reason for reason in r.validity.reasons if "client event-loop lag" not in reason]
        assert not others, f"invalid for more than the client's lag: {r.validity.reasons}"
    assert "$/Mtok" in out    # priced as this machine's CPU
    assert out.count("its cost is for reference only") == len(lagged)
    for r in results:
        assert r.point["scenario_kind"] == "serve"
        assert r.environment["server_name"] == "transformers serve"
        assert r.environment["server"]["command"][1:3] == ["serve", r.environment["server"]["command"][2]]
        assert r.metrics["requests_ok"] == 6 and r.metrics["failure_rate"] == 0
        assert r.metrics["output_tokens_per_s"] > 0 and r.metrics["ttft_p50_s"] > 0
        # Token counts as asked, checked against the server's own usage.
        assert {(q["prompt_tokens"], q["completion_tokens"]) for q in r.requests} == {(24, 6)}
        assert len(r.warmup_requests) == 1
        # A CPU server is priced by the CPUs its processes may use (it inherits ours here).
        assert r.environment["server_device"] == "cpu" and "sched_getaffinity" in r.environment["chips_source"]
        assert r.environment["chips"] == len(os.sched_getaffinity(0))
        assert r.environment["prefix_cache_reset"] is None     # transformers serve offers no reset
        pid = r.environment["server"]["pid"]
    assert gone(pid), "the server outlived the run"

    requests = load_requests(tmp_path / "r")
    assert len(requests) == 12 and set(requests["concurrency"]) == {1, 2}
    df = load_results(tmp_path / "r")
    assert set(df["scenario_kind"]) == {"serve"} and set(df["server_name"]) == {"transformers serve"}

    # --resume: nothing is measured twice.
    code, out, _ = cli(monkeypatch, capsys, "run", str(workload), "--out", str(tmp_path / "r"), "--resume")
    assert code == 0 and out.count("already measured") == 2


@pytest.mark.slow
def test_running_server_by_url_with_declared_hardware(tmp_path, monkeypatch, capsys):
    workload = serve_workload(tmp_path, server={"url": "http://127.0.0.1:9", "model": "scripted",
                                                "hardware": {"accelerator": "H100", "chips": 8}})
    with ScriptedServer(Script(ttft_ms=30, itl_ms=5)) as srv:
        code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--server-url", srv.url,
                             "--out", str(tmp_path / "r"))
    assert code == 0, err + out
    results = [read_result(f) for f in (tmp_path / "r").glob("*.json")]
    assert len(results) == 2 and all(r.status == "ok" for r in results)
    r = results[0]
    assert r.environment["accelerator_name"] == "H100" and r.environment["chips"] == 8
    # The scripted deadlines are floors (how close the client comes is benchmarks/serve_client.py's to
    # measure): the first token 30 ms and the last (6th) 30 + 5 x 5 ms after the server has the
    # request; a busy machine only adds to them. (Not TPOT: the server keeps to deadlines from
    # arrival, so a late first token is followed by quicker ones.)
    assert r.metrics["ttft_p50_s"] >= 0.029 and r.metrics["e2e_p50_s"] >= 0.055 - 0.001
    df = load_results(tmp_path / "r")
    assert (df["chips"] == 8).all()


@pytest.mark.slow   # subprocess CLIs
def test_unreachable_and_non_openai_servers_are_one_line_errors(tmp_path, monkeypatch, capsys):
    workload = serve_workload(tmp_path, server={"url": "http://127.0.0.1:9"})
    code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--out", str(tmp_path / "r"))
    assert code == 2 and "cannot reach http://127.0.0.1:9" in err and err.count("\n") == 1
    web = subprocess.Popen([sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    try:
        line = web.stdout.readline()
        port = int(line.split("port ")[1].split()[0])
        code, _, err = cli(monkeypatch, capsys, "run", str(workload), "--server-url", f"http://127.0.0.1:{port}",
                           "--out", str(tmp_path / "r"))
    finally:
        web.kill()
        web.wait()
    assert code == 2 and "not an OpenAI-compatible server" in err
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").glob("*.json"))


@pytest.mark.slow
def test_server_that_never_becomes_ready(tmp_path, monkeypatch, capsys):
    command = [sys.executable, "-c", "import time; time.sleep(120)"]
    workload = serve_workload(tmp_path, server={"launch": {"preset": "custom", "command": command,
                                                           "startup_timeout_s": 2}})
    code, _, err = cli(monkeypatch, capsys, "run", str(workload), "--out", str(tmp_path / "r"))
    assert code == 2 and "not ready within 2 s" in err   # its start-up timeout, not the 120 s sleep


@pytest.mark.slow
def test_server_that_dies_mid_run_fails_its_points(tmp_path, monkeypatch, capsys):
    # A scripted server on the port tpubench gives it, which exits hard after 4 seconds: ready long
    # before; each request takes 1.5 s, the points need about 9 s each.
    workload = serve_workload(tmp_path, server=_scripted_launch(tmp_path, lifetime_s=4, ttft_ms=500, itl_ms=200))
    code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--out", str(tmp_path / "r"))
    assert code == 1, err + out   # every point failed
    results = [read_result(f) for f in (tmp_path / "r").glob("*.json")]
    assert len(results) == 2 and all(r.status == "failed" for r in results)
    assert any("the server died during the point" in r.error for r in results), [r.error for r in results]


@pytest.mark.slow
def test_http_errors_are_recorded_per_request(tmp_path, monkeypatch, capsys):
    workload = serve_workload(tmp_path, server={"url": "http://127.0.0.1:9"})
    with ScriptedServer(Script(fault="500")) as srv:
        code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--server-url", srv.url,
                             "--out", str(tmp_path / "r"))
    assert code == 1
    results = [read_result(f) for f in (tmp_path / "r").glob("*.json")]
    assert all(r.status == "failed" and "every request failed: HTTP 500" in r.error for r in results)


@pytest.mark.slow
def test_some_failed_requests_make_the_point_invalid(tmp_path, monkeypatch, capsys):
    from tpubench.scenarios.serve import measure as serve_scenario

    # Every third prompt asks the scripted server for an HTTP 422 (as transformers serve answers
    # ignore_eos): the point is measured, and invalid with the failures named.
    original = serve_scenario._prompt
    calls = itertools.count()
    monkeypatch.setattr(serve_scenario, "_prompt", lambda tok, n, seed: script_prompt(fault="422")
                        if next(calls) % 3 == 0 else original(tok, n, seed))
    workload = serve_workload(tmp_path, server={"url": "http://127.0.0.1:9"})
    with ScriptedServer(Script(ttft_ms=5, itl_ms=1)) as srv:
        code, _, err = cli(monkeypatch, capsys, "run", str(workload), "--server-url", srv.url,
                           "--out", str(tmp_path / "r"))
    assert code == 0, err
    results = [read_result(f) for f in (tmp_path / "r").glob("*.json")]
    assert results and all(r.status == "ok" and not r.validity.valid for r in results)
    assert any("HTTP 422" in reason for r in results for reason in r.validity.reasons)
    statuses = {q["status"] for r in results for q in r.requests}
    assert 422 in statuses and 200 in statuses


# ----------------------------------------------------------------------------- chips and cold points

H100_NAME = "NVIDIA H100 80GB HBM3"


def _fake_host_tools(folder: Path, gpus: int) -> Path:
    """A folder with an `nvidia-smi` that lists `gpus` H100s, and a `vllm` that serves the scripted
    server on its --port (whatever else its command says), as a launched vLLM would."""
    folder.mkdir()
    smi = folder / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + "".join(f"echo 'GPU {i}: {H100_NAME} (UUID: GPU-{i})'\n" for i in range(gpus)))
    vllm = folder / "vllm"
    vllm.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import socket, sys, time
        sys.path.insert(0, {str(TESTS)!r})
        import scripted_server
        port = int(sys.argv[sys.argv.index("--port") + 1])
        def bound(host="127.0.0.1"):
            sock = socket.socket(); sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port)); sock.listen(64); return sock
        scripted_server._listening_socket = bound
        scripted_server.ScriptedServer(scripted_server.Script(ttft_ms=2, itl_ms=1)).start()
        while True:
            time.sleep(1)
    """))
    for tool in (smi, vllm):
        tool.chmod(0o755)
    return folder


@pytest.mark.slow
def test_launched_eight_way_server_is_recorded_as_eight_chips(tmp_path, monkeypatch, capsys):
    tools = _fake_host_tools(tmp_path / "bin", gpus=8)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    command = [str(tools / "vllm"), "serve", "some-model", "--port", "{port}", "--tensor-parallel-size", "8"]
    workload = serve_workload(tmp_path, server={"launch": {"preset": "custom", "command": command,
                                                           "startup_timeout_s": 30}})
    code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--out", str(tmp_path / "r"))
    assert code == 0, err + out
    results = [read_result(f) for f in sorted((tmp_path / "r").glob("*.json"))]
    assert len(results) == 2 and all(r.status == "ok" for r in results), [r.error for r in results]
    for r in results:
        env = r.environment
        assert env["chips"] == 8 and env["accelerator_name"] == H100_NAME and env["server_device"] == "cuda"
        assert "--tensor-parallel-size 8" in env["chips_source"] and "nvidia-smi -L" in env["chips_source"]
        assert env["prefix_cache_reset"] is True and env["prefix_cache_reset_note"] == "POST /reset_prefix_cache"
    df = load_results(tmp_path / "r")
    assert (df["chips"] == 8).all()


@pytest.mark.slow
def test_every_load_point_meets_a_cold_server(tmp_path, monkeypatch, capsys):
    from tpubench.serving.demo_model import build_tokenizer

    build_tokenizer(4096).save_pretrained(tmp_path / "tokenizer")
    workload = serve_workload(tmp_path, server={"url": "http://127.0.0.1:9", "model": "scripted",
                                                "tokenizer": str(tmp_path / "tokenizer")},
                              input_length=[16, 32], load={"concurrency": [1, 2], "num_requests": 4,
                                                            "warmup_requests": 1})
    with ScriptedServer(Script(ttft_ms=1, itl_ms=1)) as srv:
        code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--server-url", srv.url,
                             "--out", str(tmp_path / "r"))
        log, resets = list(srv.log), list(srv.app.cache_resets)
    assert code == 0, err + out
    # Four points (2 loads x 2 lengths) of 1 warm-up + 4 requests: 20 prompts, all different, and
    # no shorter prompt is the beginning of a longer one (a prefix cache would serve it).
    prompts = [entry["body"]["prompt"].split() for entry in log]
    assert len(prompts) == 20 and len({" ".join(p) for p in prompts}) == 20
    assert {len(p) for p in prompts} == {16, 32}
    for a in prompts:
        for b in prompts:
            assert a is b or b[:len(a)] != a
    # The cache was reset before each point: one reset, then that point's requests.
    assert len(resets) == 4
    times = sorted([(r["received"], "reset") for r in resets] + [(e["received"], "request") for e in log])
    kinds = [kind for _, kind in times]
    assert kinds == (["reset"] + ["request"] * 5) * 4
    results = [read_result(f) for f in (tmp_path / "r").glob("*.json")]
    assert len(results) == 4 and all(r.environment["prefix_cache_reset"] is True for r in results)


@pytest.mark.slow
def test_a_server_launched_here_is_metered_over_its_serve_window_and_one_at_a_url_is_not(tmp_path, monkeypatch,
                                                                                         capsys):
    """A fake NVML behind the energy source: a launched server's point carries the power of exactly
    its serve window (first send to last reply, not its warm-up), and its J per token; a server at a
    URL has no energy, and the run says why once."""
    from test_energy import _FakeNvml

    from tpubench.hardware import energy_sources
    from tpubench.run import runner

    real = energy_sources.find_source
    nvml = _FakeNvml()
    monkeypatch.setattr(energy_sources.time, "perf_counter", nvml.stamp)   # counters exact at their stamps
    monkeypatch.setattr(runner, "find_source",
                        lambda device, **kw: real("cuda", **{**kw, "chips": 1, "nvml": nvml, "env": {}}))
    workload = serve_workload(tmp_path, server=_scripted_launch(tmp_path, ttft_ms=30, itl_ms=10),
                              load={"concurrency": 2, "num_requests": 6, "warmup_requests": 2})
    code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--out", str(tmp_path / "r"))
    assert code == 0, err + out
    (r,) = [read_result(f) for f in (tmp_path / "r").glob("*.json")]
    assert r.status == "ok" and r.energy["valid"], r.energy
    assert r.energy["window_s"] == pytest.approx(r.timing["window_s"], rel=1e-6)
    assert r.metrics["energy_j"] == pytest.approx(250.0 * r.timing["window_s"], rel=1e-6)
    tokens = sum(q["prompt_tokens"] + q["completion_tokens"] for q in r.requests if q["ok"])
    assert r.metrics["joules_per_token"] == pytest.approx(r.metrics["energy_j"] / tokens)
    assert load_results(tmp_path / "r").iloc[0]["energy_method"] == "measured"

    with ScriptedServer(Script(ttft_ms=5, itl_ms=2)) as srv:
        code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--server-url", srv.url,
                             "--out", str(tmp_path / "u"))
    assert code == 0, err + out
    (u,) = [read_result(f) for f in (tmp_path / "u").glob("*.json")]
    assert u.status == "ok" and u.energy["verdict"] == "unavailable" and "energy_j" not in u.metrics
    assert u.energy["reason"].startswith("the server is at a URL")
    assert "energy: not measured (the server is at a URL" in out


@pytest.mark.slow
def test_a_launched_engine_gets_the_cache_dtype_and_the_result_records_it(tmp_path, monkeypatch, capsys):
    # An SGLang launch whose command is the scripted server: tpubench appends the engine's flag for
    # model.quantization: kv_fp8, and records the cache's dtype beside the model's.
    launch = _scripted_launch(tmp_path, ttft_ms=2, itl_ms=1)["launch"]
    workload = serve_workload(tmp_path, server={"launch": {**launch, "preset": "sglang"}})
    data = yaml.safe_load(workload.read_text())
    data["model"]["quantization"] = "kv_fp8"
    workload.write_text(yaml.safe_dump(data, sort_keys=False))
    code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--out", str(tmp_path / "r"))
    assert code == 0, err + out
    results = [read_result(f) for f in sorted((tmp_path / "r").glob("*.json"))]
    assert len(results) == 2 and all(r.status == "ok" for r in results), [r.error for r in results]
    for r in results:
        assert r.environment["server"]["command"][-2:] == ["--kv-cache-dtype", "fp8_e4m3"]
        assert r.point["quantization"] == "kv_fp8"
        assert r.precision == {"weight_dtype": "float32", "activation_dtype": "float32",
                               "kv_cache_dtype": "float8_e4m3fn"}
    df = load_results(tmp_path / "r")
    assert set(df["kv_cache_dtype"]) == {"float8_e4m3fn"} and set(df["quantization"]) == {"kv_fp8"}
