"""The server side of scenario `serve`: a real `transformers serve` started, measured once and
stopped; running servers checked; every way a start can fail; Ctrl-C. 127.0.0.1 only, and every
process a test starts is gone (asserted by PID) when it ends."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from tpubench.errors import UserError
from tpubench.scenarios.serve.schema import Server
from tpubench.serving import presets, server_chips
from tpubench.serving import server as srv
from tpubench.serving.server import RunningServer, free_port, open_server

FIXTURES = Path(__file__).parent / "fixtures"
SERVE_DEPS = ("fastapi", "uvicorn", "openai")


def _tiny_model() -> dict:
    return yaml.safe_load((FIXTURES / "tiny_moe.yaml").read_text())["model"]


def _spec(**server) -> dict:
    """A server block as the runner hands it over: validated by the schema, then dumped."""
    return Server(**server).model_dump()


def _enter(spec: dict, **kwargs) -> None:
    """Open a server and leave at once (for the start-up faults)."""
    with open_server(spec, **kwargs):
        pass


def _gone(pid: int) -> bool:
    """No such process, or only a zombie left for an init that does not reap (containers)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2:].split()[0] in ("Z", "X")


def _wait_listening(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port}")


@pytest.fixture
def http_server(tmp_path):
    """A plain `python -m http.server` (not OpenAI): its URL. Stopped by its PID afterwards."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                             "--directory", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_listening(port)
        yield f"http://127.0.0.1:{port}", port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert _gone(proc.pid)


# A server for custom commands: answers 200 on every GET, ignores SIGTERM (so SIGKILL must come)
# and leaves a child in its process group, also ignoring SIGTERM; writes both PIDs to the cwd.
_STUBBORN = r"""
import http.server, os, signal, subprocess, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen(["sleep", "300"])
open("pids.txt", "w").write(f"{os.getpid()} {child.pid}")
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"object": "list", "data": [{"id": "stub", "object": "model", "owned_by": "me"}]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.HTTPServer((sys.argv[1], int(sys.argv[2])), Ok).serve_forever()
"""


def _stream_completion(base_url: str, model: str, prompt: str, max_tokens: int) -> list[dict]:
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True,
            "stream_options": {"include_usage": True}}
    request = urllib.request.Request(f"{base_url}/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    chunks = []
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 200
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data:"):
                continue
            payload = line[len("data:"):].strip()
            if payload == "[DONE]":
                break
            chunks.append(json.loads(payload))
    return chunks


# ----------------------------------------------------------------------------- a real server

@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in SERVE_DEPS),
                    reason="transformers serve needs fastapi, uvicorn and openai (pip install 'tpubench[serve]')")
@pytest.mark.slow
def test_transformers_serve_end_to_end(tmp_path):
    from tpubench.serving.demo_model import load_tokenizer, prompt_of_length

    phases = []
    with open_server(_spec(launch={"preset": "transformers", "startup_timeout_s": 120}),
                     workload_model=_tiny_model(), workdir=tmp_path,
                     on_phase=lambda name, done, total: phases.append(name)) as server:
        pid = server.pid
        assert server.started_by_tpubench and server.alive() and not _gone(pid)
        assert server.name == "transformers serve" and server.version == importlib.metadata.version("transformers")
        assert server.base_url.startswith("http://127.0.0.1:") and not server.base_url.endswith("/")
        assert server.command[1:3] == ["serve", server.model] and "--continuous-batching" in server.command
        assert server.extra_body(8) == {}          # transformers serve answers 422 to ignore_eos
        assert server.startup_s > 0 and server.tokenizer == server.model
        listed = json.loads(urllib.request.urlopen(f"{server.base_url}/v1/models", timeout=10).read())
        assert server.model in [m["id"] for m in listed["data"]]

        tokenizer = load_tokenizer(server.tokenizer)
        prompt = prompt_of_length(tokenizer, 11, seed=1)
        chunks = _stream_completion(server.base_url, server.model, prompt, max_tokens=7)
        usage = chunks[-1]["usage"]
        assert usage["prompt_tokens"] == 11 and usage["completion_tokens"] == 7
        # Streamed: text arrives in several events, one a token unless a busy server (transformers
        # 5.25 under CI's load) sends two tokens' text in one event; usage counts every token.
        assert 2 <= sum(1 for c in chunks if c["choices"] and c["choices"][0].get("text")) <= 7

        # The same server seen as a running one, at its URL.
        with open_server(_spec(url=server.base_url + "/"), workload_model=None, workdir=tmp_path) as running:
            assert (running.model, running.started_by_tpubench, running.pid, running.command) == \
                (server.model, False, None, None)
            assert running.alive() and running.log_tail() == ""
        assert "Uvicorn running on" in server.log_tail()
        assert server.command[-2:] == ["--cb-max-memory-percent", presets.CPU_KV_CACHE_SHARE] or \
            server_chips.torch_sees_accelerator()
    assert _gone(pid), "the server outlived its context"
    assert not server.alive()
    assert phases[0] == "building the model" and "starting the server" in phases and phases[-1] == "stopping the server"


@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in SERVE_DEPS),
                    reason="transformers serve needs fastapi, uvicorn and openai (pip install 'tpubench[serve]')")
@pytest.mark.slow
def test_served_model_check_on_transformers_serve(tmp_path):
    """The served-model check on a real transformers serve (it gives no logprobs: greedy tokens
    only): it passes on the weights served and fails on other weights."""
    from tpubench.measure.numerics import tolerance
    from tpubench.serving.demo_model import build_demo_model
    from tpubench.serving.served_model_check import check_served_model, served_dtype

    model = {**_tiny_model(), "config": {**_tiny_model()["config"], "vocab_size": 512}}
    with open_server(_spec(launch={"preset": "transformers", "startup_timeout_s": 120}), workload_model=model,
                     workdir=tmp_path) as server:
        assert server.weights_path == server.model and server.cpu_split is None   # not pinned by default
        dtype = served_dtype(server.command, server.name, "float32")
        right = check_served_model(server.base_url, server.model, server.weights_path, dtype=dtype,
                                   tolerance=tolerance)
        other = build_demo_model({**model, "seed": 1}, tmp_path / "other")
        wrong = check_served_model(server.base_url, server.model, str(other), dtype=dtype, tolerance=tolerance)
    assert right["status"] == "pass" and "tokens only" in right["detail"] and right["max_greedy_gap"] <= 2e-3, right
    assert wrong["status"] == "fail" and "generated tokens are not the reference's greedy choice" in wrong["detail"]


# ----------------------------------------------------------------------------- running servers

def test_unreachable_url_is_one_line():
    port = free_port()
    with pytest.raises(UserError) as err:
        _enter(_spec(url=f"http://127.0.0.1:{port}"), workload_model=None, workdir=Path("."))
    message = str(err.value)
    assert f"cannot reach http://127.0.0.1:{port}: connection refused" in message and "\n" not in message


def test_non_openai_server_is_refused(http_server, tmp_path):
    url, port = http_server
    with pytest.raises(UserError, match=r"is not an OpenAI-compatible server: GET /v1/models answered 404 text/html"):
        _enter(_spec(url=url), workload_model=None, workdir=tmp_path)
    # A port where something already listens is refused before starting anything on it.
    with pytest.raises(UserError, match=f"port {port} on 127.0.0.1 is already in use"):
        _enter(_spec(launch={"preset": "custom", "command": "sleep 30", "port": port}),
               workload_model=None, workdir=tmp_path)
    assert not (tmp_path / "server.log").exists()


# ----------------------------------------------------------------------------- start-up faults

@pytest.mark.slow
def test_never_ready_times_out_and_is_stopped(tmp_path):
    command = ["sh", "-c", "echo $$ > sleeper.pid; echo waiting-forever; exec sleep 300"]
    with pytest.raises(UserError) as err:
        _enter(_spec(launch={"preset": "custom", "command": command, "startup_timeout_s": 2}),
               workload_model=None, workdir=tmp_path)
    message = str(err.value)   # its start-up timeout ended it, not the sleep of 300 s
    assert "the server was not ready within 2 s; log tail:" in message and "waiting-forever" in message
    assert "\n" not in message
    assert _gone(int((tmp_path / "sleeper.pid").read_text()))


def test_exit_during_startup_quotes_the_log(tmp_path):
    with pytest.raises(UserError) as err:
        _enter(_spec(launch={"preset": "custom", "command": "sh -c 'echo bad flag --frobnicate >&2; exit 3'"}),
               workload_model=None, workdir=tmp_path)
    message = str(err.value)
    assert "the server exited with code 3 during start-up; log tail: bad flag --frobnicate" in message
    assert "\n" not in message


def test_missing_executable_is_one_line(tmp_path):
    with pytest.raises(UserError, match="cannot start the server: 'no-such-server-binary' not found"):
        _enter(_spec(launch={"preset": "custom", "command": "no-such-server-binary --port {port}"}),
               workload_model=None, workdir=tmp_path)


def test_missing_package_names_the_install(monkeypatch, tmp_path):
    monkeypatch.delenv(presets.VLLM_PYTHON_ENV, raising=False)   # this Python serves (CI sets a vLLM venv)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name.split(".")[0] in
                        ("vllm", "fastapi") else real(name, *a))
    with pytest.raises(UserError, match=r"preset 'vllm' needs vllm, not installed here: pip install vllm"):
        _enter(_spec(launch={"preset": "vllm", "model": "Qwen/Qwen3-0.6B"}), workload_model=None,
               workdir=tmp_path)
    with pytest.raises(UserError, match=r"needs fastapi, not installed here: pip install 'tpubench\[serve\]'"):
        _enter(_spec(launch={"preset": "transformers"}), workload_model=_tiny_model(), workdir=tmp_path)
    with pytest.raises(UserError, match=r"launch.model 'build' makes the workload's model, but the workload has no model"):
        _enter(_spec(launch={"preset": "custom", "command": "true {model}"}), workload_model=None,
               workdir=tmp_path)


# ----------------------------------------------------------------------------- stopping

@pytest.mark.slow
def test_ctrl_c_stops_the_whole_group(monkeypatch, tmp_path):
    monkeypatch.setattr(srv, "STOP_GRACE_S", 1.0)
    command = [sys.executable, "-c", _STUBBORN, "{host}", "{port}"]
    spec = _spec(model=None, launch={"preset": "custom", "command": command, "model": "stub",
                                     "args": ["--json", '{"a": {"b": 1}}']})
    with pytest.raises(KeyboardInterrupt), open_server(spec, workload_model=None, workdir=tmp_path) as server:
        main_pid, child_pid = map(int, (tmp_path / "pids.txt").read_text().split())
        assert server.pid == main_pid and server.model == "stub" and server.name == "unknown"
        assert server.command[-2:] == ["--json", '{"a": {"b": 1}}'] and str(server.command[-3]).isdigit()
        raise KeyboardInterrupt
    assert _gone(main_pid) and _gone(child_pid)


@pytest.mark.slow
def test_sigterm_to_tpubench_stops_the_server(tmp_path):
    """SIGTERM to the process holding the context unwinds it, so the server goes too."""
    script = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from tpubench.serving.server import open_server\n"
        "spec = {'url': None, 'model': None, 'hardware': None, 'tokenizer': None, 'launch': {\n"
        "  'preset': 'custom', 'model': 'x', 'command': ['sh', '-c', 'echo $$ > srv.pid; exec sleep 300'],\n"
        "  'args': [], 'host': '127.0.0.1', 'port': None, 'ready_path': '/', 'startup_timeout_s': 60, 'env': {}}}\n"
        "with open_server(spec, workload_model=None, workdir=Path(sys.argv[1])):\n"
        "    pass\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid_file = tmp_path / "srv.pid"
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists() or not pid_file.read_text().strip():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        server_pid = int(pid_file.read_text())
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _gone(server_pid)


# ----------------------------------------------------------------------------- small parts

def test_extra_body_per_stack():
    assert RunningServer("http://h:1", "m", "vllm", exact_output_fields=presets.PRESETS["vllm"].exact_output_fields
                         ).extra_body(9) == {"ignore_eos": True, "min_tokens": 9}
    assert presets.PRESETS["sglang"].exact_output_fields == ("ignore_eos", "min_tokens")
    assert RunningServer("http://h:1", "m", "transformers serve").extra_body(9) == {}
    assert presets.guess_stack(["/x/bin/vllm", "serve", "m"]).name == "vllm"
    assert presets.guess_stack(["python3", "-m", "sglang.launch_server"]).name == "sglang"
    assert presets.guess_stack(["sleep", "1"]) is None


def test_free_port_is_free():
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_demo_model_has_exact_prompts_and_no_eos(tmp_path):
    from transformers import AutoConfig, GenerationConfig

    from tpubench.serving.demo_model import (
        build_demo_model,
        load_tokenizer,
        prompt_of_length,
    )

    folder = build_demo_model(_tiny_model(), tmp_path / "m")
    config = AutoConfig.from_pretrained(folder)
    assert config.eos_token_id is None and GenerationConfig.from_pretrained(folder).eos_token_id is None
    tokenizer = load_tokenizer(str(folder))
    assert len(tokenizer) == config.vocab_size == 64 and tokenizer.eos_token is None
    for n in (1, 2, 17, 100):
        prompt = prompt_of_length(tokenizer, n, seed=n)
        assert len(tokenizer(prompt)["input_ids"]) == n and prompt == prompt_of_length(tokenizer, n, seed=n)
    chat = tokenizer.apply_chat_template([{"role": "user", "content": prompt_of_length(tokenizer, 5, 0)}],
                                         tokenize=False, add_generation_prompt=True)
    assert len(tokenizer(chat)["input_ids"]) == 5
    # Built again with the same spec: reused as it is.
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert build_demo_model(_tiny_model(), tmp_path / "m") == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp


def test_exact_prompts_with_a_byte_level_bpe_and_a_bos():
    """Prompts of exact lengths for a GPT-style tokenizer too (a server's own, such as vLLM's)."""
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    from tpubench.serving.demo_model import prompt_of_length

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator(["the quick brown fox jumps over the lazy dog " * 20], trainer)
    backend.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>")
    for n in (1, 2, 9, 300):
        assert len(tokenizer(prompt_of_length(tokenizer, n, seed=n))["input_ids"]) == n
    with pytest.raises(ValueError, match="fewer than the 1 special"):
        prompt_of_length(tokenizer, 0, seed=0)


def test_prompts_of_two_points_share_no_prefix():
    """A 2048-token prompt does not begin with a 1024-token one (it did when every length drew its
    words in the same order from the scenario's seed), and every request's prompt is its own."""
    from tpubench.scenarios.serve.measure import prompt_seed
    from tpubench.serving.demo_model import build_tokenizer, prompt_of_length

    tokenizer = build_tokenizer(4096)
    prompts = [prompt_of_length(tokenizer, n, prompt_seed(key, k))
               for key, n in (("point-a", 1024), ("point-b", 2048)) for k in range(3)]
    ids = [tokenizer(p)["input_ids"] for p in prompts]
    assert [len(i) for i in ids] == [1024] * 3 + [2048] * 3
    for a in ids:
        for b in ids:
            assert a is b or b[:len(a)] != a


def test_prefix_cache_reset_per_stack(http_server):
    pytest.importorskip("aiohttp")
    sys.path.insert(0, str(Path(__file__).parent))
    from scripted_server import ScriptedServer

    with ScriptedServer() as scripted:
        assert RunningServer(scripted.url, "m", "sglang").reset_prefix_cache() == (True, "POST /flush_cache")
        assert RunningServer(scripted.url, "m", "vllm").reset_prefix_cache() == (True, "POST /reset_prefix_cache")
        assert RunningServer(scripted.url, "m", "unknown").reset_prefix_cache() == (True, "POST /reset_prefix_cache")
        assert [r["path"] for r in scripted.app.cache_resets] == ["/flush_cache", "/reset_prefix_cache",
                                                                  "/reset_prefix_cache"]
    # vLLM without dev mode has no such route: not reset, and the result says how to allow it.
    done, why = RunningServer(http_server[0], "m", "vllm").reset_prefix_cache()
    assert done is False and "VLLM_SERVER_DEV_MODE=1" in why
    assert RunningServer(http_server[0], "m", "transformers serve").reset_prefix_cache()[0] is None


def test_duration_points_get_prompts_for_what_they_send():
    from tpubench.scenarios.serve.measure import DURATION_PROMPTS, prompts_for_duration

    assert prompts_for_duration({"request_rate": 50.0}, 60.0) == 3750          # 50/s x 60 s x 1.25
    assert prompts_for_duration({"concurrency": 16}, 60.0) == 16 * 4 * 60 * 1.25
    assert prompts_for_duration({"request_rate": 0.1}, 10.0) == DURATION_PROMPTS
