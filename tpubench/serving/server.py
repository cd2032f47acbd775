"""The server a `serve` workload measures (docs/scenarios/serve.md): a running one at a URL, checked to
speak OpenAI, or one tpubench starts here, waits for, and always stops.

    with open_server(point.params["server"], workload_model=model, workdir=tmp) as server:
        server.base_url, server.model, server.extra_body(256), server.log_tail()

A started server runs in its own process group (a new session), its output in a log file in the
work folder. On leaving the context, on any exception, on Ctrl-C and on SIGTERM to tpubench, the
group gets SIGTERM, a grace period, then SIGKILL. Nothing is ever killed by name.

Preset commands ({model}, {host}, {port} are filled in; `launch.args` are appended; a given
`launch.command` replaces the preset's, with the same placeholders):

  transformers  transformers serve {model} --host {host} --port {port} --continuous-batching
                [--cb-max-memory-percent 0.05 on a host without an accelerator, unless args size the
                KV cache: by default it takes 90% of free host memory, ~19 GB and 20 s here]
                Checked on this machine with transformers 5.24 on the CPU: a tiny model is ready
                in about 4-8 s; streams /v1/completions with usage in the last chunk (sent whether
                or not stream_options asks); answers HTTP 422 to ignore_eos, so exact output
                lengths come from a model without EOS (demo_model.py). Run as the `transformers`
                console script next to sys.executable (else `python -m transformers.cli.transformers`)
                so the environment running tpubench serves.
  vllm          vllm serve {model} --host {host} --port {port}
                Source: vLLM docs, "vllm serve" CLI reference (docs.vllm.ai, configuration/serve_args).
                Exact lengths: ignore_eos and min_tokens, both vLLM extra sampling parameters of
                /v1/completions and /v1/chat/completions. GET /version answers {"version": ...}.
                Started on a loopback host with VLLM_SERVER_DEV_MODE=1 (unless launch.env sets it),
                the only way vLLM serves POST /reset_prefix_cache (a cold cache for every point).
  vllm-tpu      vllm serve {model} --host {host} --port {port}
                Source: tpu-inference quickstart (docs.vllm.ai/projects/tpu, `pip install vllm-tpu`,
                then plain `vllm serve ... --tensor-parallel-size N --max-model-len L`). ASSUMPTION:
                the TPU platform plugin (tpu_inference, or vllm_torchtpu for the PyTorch-native
                TorchTPU backend `pip install vllm-torchtpu`) is picked by vLLM's plugin discovery,
                with no extra flag; not run here (no TPU).
  vllm-neuron   vllm serve {model} --host {host} --port {port}
                Source: AWS Neuron docs, "vLLM Neuron" online serving quickstart (plain `vllm serve`
                with --tensor-parallel-size, --max-model-len, --max-num-seqs; the plugin is
                discovered by vLLM). ASSUMPTION: the plugin's module is `vllm_neuron`; install is
                `pip install vllm-neuron --extra-index-url https://pip.repos.neuron.amazonaws.com`
                (the docs also install it from its GitHub source). Neuron compiles at start-up:
                raise startup_timeout_s (the docs set VLLM_NEURON_COMPILATION_TIMEOUT=1200). Not run
                here (no Trainium).
  sglang        python -m sglang.launch_server --model-path {model} --host {host} --port {port}
                Source: SGLang docs (docs.sglang.io, server arguments, native API). Exact lengths:
                ignore_eos and min_tokens, extra parameters of its OpenAI CompletionRequest.
                GET /get_server_info reports "version". ASSUMPTION: /v1/models (the default
                ready_path) answering 200 means ready; SGLang may still run its own warm-up request
                then (ready_path: /health_generate waits for that too).
  custom        launch.command only; its stack is guessed from the command (vllm, sglang,
                transformers serve) for the exact-length fields and the version, else "unknown".
"""

from __future__ import annotations

import http.client
import importlib.metadata
import importlib.util
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tpubench.errors import UserError
from tpubench.processes import start_in_new_group, stop_group
from tpubench.serving.server_chips import ServerChips, server_chips, transformers_serve_on_cpu

PhaseCallback = Callable[[str, float, float], None]

URL_CHECK_TIMEOUT_S = 5.0      # a running server must answer GET /v1/models within this
POLL_INTERVAL_S = 0.25         # readiness polling of a started server
STOP_GRACE_S = 15.0            # SIGTERM to SIGKILL
LOG_TAIL_IN_ERRORS = 600       # characters of the log quoted in a start-up error
CPU_KV_CACHE_SHARE = "0.05"    # transformers serve on the CPU: share of free host memory for its KV cache
RESET_TIMEOUT_S = URL_CHECK_TIMEOUT_S   # a prefix-cache reset between load points (as `_why` words it)
# The prefix-cache reset of each stack (by a part of its recorded name).
_RESET_PATHS = (("vllm", "/reset_prefix_cache"), ("sglang", "/flush_cache"))
_LOOPBACK = ("127.0.0.1", "::1", "localhost")

# Serving stacks: the name recorded in results, the Python module that must be importable (and
# whose distribution's version is recorded), plugins that must also be there (any one of them),
# the install hint, and the body fields for exact output lengths.
_EXACT_VLLM = ("ignore_eos", "min_tokens")


@dataclass(frozen=True)
class _Preset:
    name: str
    argv: tuple[str, ...]
    modules: tuple[str, ...] = ()
    plugins: tuple[str, ...] = ()
    install: str = ""
    exact_output_fields: tuple[str, ...] = ()
    version_module: str | None = None


PRESETS: dict[str, _Preset] = {
    "transformers": _Preset(
        "transformers serve",
        ("{transformers}", "serve", "{model}", "--host", "{host}", "--port", "{port}", "--continuous-batching"),
        modules=("transformers", "fastapi", "uvicorn", "openai"),
        install="pip install 'tpubench[serve]'  (transformers serve needs fastapi, uvicorn and openai)",
        version_module="transformers"),
    "vllm": _Preset(
        "vllm", ("{vllm}", "serve", "{model}", "--host", "{host}", "--port", "{port}"),
        modules=("vllm",), install="pip install vllm", exact_output_fields=_EXACT_VLLM, version_module="vllm"),
    "vllm-tpu": _Preset(
        "vllm (TPU)", ("{vllm}", "serve", "{model}", "--host", "{host}", "--port", "{port}"),
        modules=("vllm",), plugins=("tpu_inference", "vllm_torchtpu"),
        install="pip install vllm-tpu  (tpu-inference; or vllm-torchtpu for the TorchTPU backend)",
        exact_output_fields=_EXACT_VLLM, version_module="vllm"),
    "vllm-neuron": _Preset(
        "vllm (Neuron)", ("{vllm}", "serve", "{model}", "--host", "{host}", "--port", "{port}"),
        modules=("vllm",), plugins=("vllm_neuron",),
        install="pip install vllm-neuron --extra-index-url https://pip.repos.neuron.amazonaws.com",
        exact_output_fields=_EXACT_VLLM, version_module="vllm"),
    "sglang": _Preset(
        "sglang", ("{python}", "-m", "sglang.launch_server", "--model-path", "{model}", "--host", "{host}",
                   "--port", "{port}"),
        modules=("sglang",), install="pip install sglang", exact_output_fields=_EXACT_VLLM,
        version_module="sglang"),
}
# A stack told apart by its name (a custom command, or what a running server's /v1/models says).
_BY_NAME = {"vllm": PRESETS["vllm"], "sglang": PRESETS["sglang"], "transformers serve": PRESETS["transformers"]}


@dataclass
class RunningServer:
    """A server ready to take requests, running or started here."""

    base_url: str                        # http://host:port, no trailing slash, no /v1
    model: str                           # the served model's name, for the requests' "model"
    name: str                            # serving stack: "transformers serve", "vllm", ..., "unknown"
    version: str | None = None
    command: list[str] | None = None     # argv of a started server
    pid: int | None = None
    started_by_tpubench: bool = False
    startup_s: float | None = None       # launch to ready (started servers)
    tokenizer: str | None = None         # a local path or Hub id to make exact-length prompts with
    # Body fields this server takes for an exact output length (see extra_body); empty: none.
    exact_output_fields: tuple[str, ...] = ()
    log_path: Path | None = None
    # What a started server runs on, read from its command, environment and the host's listing
    # (serving/server_chips.py); None for a server tpubench did not start.
    hardware: ServerChips | None = None
    _process: subprocess.Popen | None = field(default=None, repr=False, compare=False)

    def extra_body(self, output_tokens: int) -> dict:
        """Fields to add to a request's body so the server generates exactly `output_tokens`
        tokens (besides max_tokens): vLLM and SGLang `{"ignore_eos": True, "min_tokens": n}`;
        `{}` for a server that takes neither (transformers serve answers 422 to ignore_eos)."""
        body: dict = {}
        if "ignore_eos" in self.exact_output_fields:
            body["ignore_eos"] = True
        if "min_tokens" in self.exact_output_fields:
            body["min_tokens"] = int(output_tokens)
        return body

    def reset_prefix_cache(self) -> tuple[bool | None, str]:
        """Empty the engine's prefix cache so the next load point meets a cold server.

        vLLM: POST /reset_prefix_cache, served only under VLLM_SERVER_DEV_MODE=1 (tpubench sets it
        on the vLLM servers it starts on a loopback host) and answering 200 with `"success": false`
        when it refuses; SGLang: POST /flush_cache, 400 while requests run (sources: vLLM's
        api_server dev endpoints, SGLang's native API docs). A stack not known tries both.
        Returns (True, the endpoint) when the engine says it did, (False, why) when it refused or
        lacks the endpoint, (None, why) when the stack offers no reset (transformers serve)."""
        if self.name == "transformers serve":
            return None, "transformers serve offers no prefix-cache reset"
        paths = [p for stack, p in _RESET_PATHS if stack in self.name] or [p for _, p in _RESET_PATHS]
        answers = []
        for path in paths:
            try:
                status, _, body = _post(self.base_url + path, timeout=RESET_TIMEOUT_S)
            except OSError as exc:   # no answer: a server that hangs is not asked twice
                return False, f"POST {path}: {_why(exc)}"
            if 200 <= status < 300 and _claims_success(body):
                return True, f"POST {path}"
            answers.append(f"POST {path} answered {status}" + (" (success: false)" if status < 300 else ""))
        hint = ("; vLLM serves it only with VLLM_SERVER_DEV_MODE=1 in the server's environment"
                if "vllm" in self.name or self.name == "unknown" else "")
        if self.name == "unknown" and all(" answered 404" in a or " answered 405" in a for a in answers):
            return None, "the server offers no known prefix-cache reset (" + "; ".join(answers) + ")"
        return False, "; ".join(answers) + hint

    def alive(self) -> bool:
        """A started server: its process still runs. A running one: it answers GET /v1/models."""
        if self._process is not None:
            return self._process.poll() is None
        try:
            status, _, _ = _get(f"{self.base_url}/v1/models", timeout=2.0)
        except OSError:
            return False
        return status == 200

    def log_tail(self, chars: int = 4000) -> str:
        """The end of a started server's output ("" for a server tpubench did not start)."""
        return _tail(self.log_path, chars) if self.log_path else ""

    def describe(self) -> dict:
        """What a result records about the server (JSON-ready)."""
        return {"name": self.name, "version": self.version, "base_url": self.base_url, "model": self.model,
                "command": self.command, "pid": self.pid, "started_by_tpubench": self.started_by_tpubench,
                "startup_s": self.startup_s, "tokenizer": self.tokenizer,
                "exact_output_fields": list(self.exact_output_fields),
                "hardware": asdict(self.hardware) if self.hardware else None}


# ----------------------------------------------------------------------------- entry point

@contextmanager
def open_server(server: dict, *, workload_model: dict | None, workdir: Path,
                on_phase: PhaseCallback = lambda name, done, total: None) -> Iterator[RunningServer]:
    """The server of `server` (`Server.model_dump()`), ready: a running one checked to speak
    OpenAI, or one started here (from `launch`) and stopped when the context ends, whatever ends it.

    Phases reported through `on_phase(name, done, total)`: "building the model" (0/1, 1/1),
    "starting the server" (seconds waited / startup_timeout_s), "stopping the server" (0/1, 1/1).
    Raises UserError (one line) for an unreachable or non-OpenAI URL, a missing package, a server
    that exits or is not ready in time.
    """
    if server.get("launch") is None:
        yield _connect(server)
        return
    launch = server["launch"]
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    preset = PRESETS.get(launch.get("preset") or "transformers")
    if launch.get("command"):
        argv_template = _split(launch["command"])
        if preset is None:      # custom: the stack is what the command looks like
            preset = _guess_stack(argv_template)
    elif preset is None:
        raise UserError("preset 'custom' needs a command", field="scenario.server.launch.command")
    else:
        _check_packages(preset, launch.get("preset"))
        argv_template = list(preset.argv)
    # A command that has no {model} serves what it says: nothing is built for it.
    uses_model = any("{model}" in str(a) for a in [*argv_template, *(launch.get("args") or [])])
    model = _model_to_serve(launch, workload_model, workdir, on_phase) if uses_model else launch.get("model")

    host = launch.get("host") or "127.0.0.1"
    port = launch.get("port")
    connect_host = _connect_host(host)
    if port is None:
        port = free_port()
    elif _port_in_use(connect_host, int(port)):
        raise UserError(f"port {port} on {host} is already in use: another server answers there",
                        field="scenario.server.launch.port")
    values = {"{model}": model or "", "{host}": host, "{port}": str(port), "{python}": sys.executable,
              "{transformers}": _cli("transformers", "transformers.cli.transformers"),
              "{vllm}": _cli("vllm", "vllm.entrypoints.cli.main")}
    argv: list[str] = []
    for arg in [*argv_template, *(launch.get("args") or [])]:
        if arg in ("{transformers}", "{vllm}"):
            argv.extend(values[arg])      # a console script, or python -m its module
            continue
        for key in ("{model}", "{host}", "{port}", "{python}"):
            arg = arg.replace(key, values[key])   # not str.format: JSON arguments have braces
        argv.append(arg)

    if launch.get("preset") in (None, "transformers") and not launch.get("command"):
        argv.extend(_transformers_cpu_args(launch.get("args") or []))

    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1",
           **{str(k): str(v) for k, v in (launch.get("env") or {}).items()}}
    if preset is not None and preset.name.startswith("vllm") and connect_host in _LOOPBACK:
        # vLLM serves POST /reset_prefix_cache (a cold cache for every load point) only in dev
        # mode, whose other routes are no one's business on a server only this host can reach.
        env.setdefault("VLLM_SERVER_DEV_MODE", "1")
    base_url = f"http://{_url_host(connect_host)}:{port}"
    ready_path = launch.get("ready_path") or "/v1/models"
    if not ready_path.startswith("/"):
        ready_path = "/" + ready_path
    timeout_s = float(launch.get("startup_timeout_s") or 180.0)
    log_path = _new_log(workdir)

    process: subprocess.Popen | None = None
    with _sigterm_as_exit():
        try:
            process = _spawn(argv, env, log_path, cwd=workdir)
            t0 = time.monotonic()
            _wait_ready(process, base_url + ready_path, timeout_s, log_path, on_phase, t0)
            startup_s = time.monotonic() - t0
            served = server.get("model") or _first_model(base_url) or (model if model != "build" else None)
            if not served:
                raise UserError("the server lists no model at /v1/models: give server.model", field="scenario.server.model")
            running = RunningServer(
                base_url=base_url, model=served, name=preset.name if preset else "unknown",
                version=_started_version(preset, base_url), command=argv, pid=process.pid,
                started_by_tpubench=True, startup_s=round(startup_s, 3),
                tokenizer=server.get("tokenizer") or (model if model != "build" else None) or served,
                exact_output_fields=preset.exact_output_fields if preset else (),
                log_path=log_path, _process=process)
            if not server.get("hardware"):   # declared hardware wins; else read what it runs on
                running.hardware = server_chips(argv, env, process.pid, running.name)
            yield running
        finally:
            if process is not None:
                on_phase("stopping the server", 0, 1)
                stop_group(process, STOP_GRACE_S)
                on_phase("stopping the server", 1, 1)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now, from the kernel (bound on `host`, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


# ----------------------------------------------------------------------------- a running server

def _connect(server: dict) -> RunningServer:
    url = (server.get("url") or "").rstrip("/")
    url = url.removesuffix("/v1")     # the OpenAI base URL given instead of the server's
    data = _models_listing(url)
    ids = [m.get("id") for m in data if isinstance(m, dict) and m.get("id")]
    model = server.get("model") or (ids[0] if ids else None)
    if not model:
        raise UserError(f"{url} lists no model at /v1/models: give server.model", field="scenario.server.model")
    owners = {m.get("owned_by") for m in data if isinstance(m, dict)}
    stack = _BY_NAME.get("vllm") if "vllm" in owners else _BY_NAME.get("sglang") if "sglang" in owners else None
    return RunningServer(
        base_url=url, model=model, name=stack.name if stack else "unknown",
        version=_ask_version(url), command=None, pid=None, started_by_tpubench=False, startup_s=None,
        tokenizer=server.get("tokenizer") or model,
        exact_output_fields=stack.exact_output_fields if stack else ())


def _models_listing(url: str) -> list:
    """GET {url}/v1/models: its `data` list, or a one-line UserError saying what went wrong."""
    target = f"{url}/v1/models"
    try:
        status, ctype, body = _get(target, timeout=URL_CHECK_TIMEOUT_S)
    except OSError as exc:
        raise UserError(f"cannot reach {url}: {_why(exc)}", field="scenario.server.url") from None
    kind = (ctype or "no content type").split(";")[0].strip()
    if status != 200:
        hint = ": it wants an API key" if status in (401, 403) else ""
        raise UserError(f"{url} is not an OpenAI-compatible server: GET /v1/models answered {status} {kind}{hint}",
                        field="scenario.server.url")
    try:
        listing = json.loads(body)
    except ValueError:
        listing = None
    if not isinstance(listing, dict) or not isinstance(listing.get("data"), list):
        raise UserError(f"{url} is not an OpenAI-compatible server: GET /v1/models answered {status} {kind}, "
                        "not JSON with a data list", field="scenario.server.url")
    return listing["data"]


def _first_model(base_url: str) -> str | None:
    try:
        status, _, body = _get(f"{base_url}/v1/models", timeout=URL_CHECK_TIMEOUT_S)
        data = json.loads(body).get("data") if status == 200 else None
    except (OSError, ValueError, AttributeError):
        return None
    for item in data or []:
        if isinstance(item, dict) and item.get("id"):
            return str(item["id"])
    return None


def _ask_version(base_url: str) -> str | None:
    """The version a server reports, if it does: vLLM's GET /version, SGLang's /get_server_info."""
    for path in ("/version", "/get_server_info"):
        try:
            status, _, body = _get(base_url + path, timeout=2.0)
            if status == 200:
                version = json.loads(body).get("version")
                if isinstance(version, str) and version:
                    return version
        except (OSError, ValueError, AttributeError):
            continue
    return None


# ----------------------------------------------------------------------------- a started server

def _model_to_serve(launch: dict, workload_model: dict | None, workdir: Path, on_phase: PhaseCallback) -> str:
    model = launch.get("model") or "build"
    if model != "build":
        return model
    if not workload_model:
        raise UserError("launch.model 'build' makes the workload's model, but the workload has no model block",
                        field="scenario.server.launch.model")
    if workload_model.get("weights") == "pretrained" and workload_model.get("hub_id"):
        return str(workload_model["hub_id"])
    from tpubench.serving.demo_model import build_demo_model

    on_phase("building the model", 0, 1)
    folder = build_demo_model(workload_model, workdir / "demo_model")
    on_phase("building the model", 1, 1)
    return str(folder)


def _spawn(argv: list[str], env: dict, log_path: Path, cwd: Path) -> subprocess.Popen:
    # The child keeps its own copy of the log's descriptor; ours closes on leaving.
    with open(log_path, "ab") as log:
        try:
            return start_in_new_group(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                      env=env, cwd=str(cwd), close_fds=True)
        except FileNotFoundError:
            raise UserError(f"cannot start the server: {argv[0]!r} not found",
                            field="scenario.server.launch.command") from None
        except PermissionError:
            raise UserError(f"cannot start the server: {argv[0]!r} is not executable",
                            field="scenario.server.launch.command") from None


def _wait_ready(process: subprocess.Popen, ready_url: str, timeout_s: float, log_path: Path,
                on_phase: PhaseCallback, t0: float) -> None:
    while True:
        waited = time.monotonic() - t0
        on_phase("starting the server", min(waited, timeout_s), timeout_s)
        code = process.poll()
        if code is not None:
            how = f"was killed by signal {_signal_name(-code)}" if code < 0 else f"exited with code {code}"
            raise UserError(f"the server {how} during start-up; log tail: {_tail(log_path, LOG_TAIL_IN_ERRORS)}")
        if waited >= timeout_s:
            raise UserError(f"the server was not ready within {timeout_s:g} s; log tail: "
                            f"{_tail(log_path, LOG_TAIL_IN_ERRORS)}", field="scenario.server.launch.startup_timeout_s")
        try:
            status, _, _ = _get(ready_url, timeout=max(0.5, min(2.0, timeout_s - waited)))
            if status == 200:
                return
        except OSError:
            pass
        time.sleep(POLL_INTERVAL_S)


def _started_version(preset: _Preset | None, base_url: str) -> str | None:
    """The stack's version from this Python environment (the one that serves), else the server's."""
    version = _dist_version(preset.version_module) if preset and preset.version_module else None
    if version and preset:
        for plugin in preset.plugins:
            extra = _dist_version(plugin, with_name=True)
            if extra:
                version += f" + {extra}"
    return version or _ask_version(base_url)


def _transformers_cpu_args(args: list[str]) -> list[str]:
    """On the CPU, `transformers serve --continuous-batching` sizes its KV cache to 90% of the
    host's free memory (measured: about 19 GB on a 23 GB host, 20 s to allocate on the first
    request). Unless the args size the cache themselves, it gets CPU_KV_CACHE_SHARE of it."""
    if any(str(a).startswith(("--cb-num-blocks", "--cb-max-memory-percent")) for a in args):
        return []
    return ["--cb-max-memory-percent", CPU_KV_CACHE_SHARE] if transformers_serve_on_cpu(args) else []


def _check_packages(preset: _Preset, key: str | None) -> None:
    missing = [m for m in preset.modules if importlib.util.find_spec(m) is None]
    if preset.plugins and not any(importlib.util.find_spec(p) for p in preset.plugins):
        missing.append(" or ".join(preset.plugins))
    if missing:
        raise UserError(f"preset '{key}' needs {', '.join(missing)}, not installed here: {preset.install}",
                        field="scenario.server.launch.preset")


def _guess_stack(argv: list[str]) -> _Preset | None:
    words = [Path(a).name for a in argv[:4]]
    joined = " ".join(argv[:4])
    if "vllm" in words or "vllm.entrypoints" in joined:
        return _BY_NAME["vllm"]
    if "sglang.launch_server" in joined:
        return _BY_NAME["sglang"]
    if ("transformers" in words or "transformers.cli.transformers" in joined) and "serve" in argv[:4]:
        return _BY_NAME["transformers serve"]
    return None


def _cli(script: str, module: str) -> list[str]:
    """The console script next to this Python, else `python -m module` (same environment)."""
    candidate = Path(sys.executable).parent / script
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return [str(candidate)]
    return [sys.executable, "-m", module]


def _split(command) -> list[str]:
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    if not argv:
        raise UserError("launch.command is empty", field="scenario.server.launch.command")
    return argv


def _new_log(workdir: Path) -> Path:
    for i in range(1, 10_000):
        path = workdir / ("server.log" if i == 1 else f"server-{i}.log")
        if not path.exists():
            path.touch()
            return path
    raise UserError(f"too many server logs in {workdir}")  # pragma: no cover


@contextmanager
def _sigterm_as_exit():
    """While a server runs, SIGTERM to tpubench unwinds (so the server is stopped) instead of
    ending the process at once; only where Python's default handler is in place."""
    swapped = False
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.getsignal(signal.SIGTERM)
        if previous is signal.SIG_DFL:
            def _raise(signum, frame):
                raise SystemExit(128 + signum)
            signal.signal(signal.SIGTERM, _raise)
            swapped = True
    try:
        yield
    finally:
        if swapped:
            signal.signal(signal.SIGTERM, previous)


# ----------------------------------------------------------------------------- small helpers

def _get(url: str, timeout: float) -> tuple[int, str, bytes]:
    """(status, content type, first 1 MiB of the body) of a GET; OSError when nothing answers."""
    return _request(url, timeout, urllib.request.Request(url, headers={"Accept": "application/json"}))


def _post(url: str, timeout: float) -> tuple[int, str, bytes]:
    """The same for an empty-bodied POST (a cache reset)."""
    return _request(url, timeout, urllib.request.Request(url, data=b"", method="POST",
                                                         headers={"Accept": "application/json"}))


def _request(url: str, timeout: float, request: urllib.request.Request) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read(1 << 20)
    except urllib.error.HTTPError as exc:
        try:
            body = exc.read(1 << 20)
        except OSError:
            body = b""
        return exc.code, exc.headers.get("Content-Type", "") if exc.headers else "", body
    except urllib.error.URLError as exc:
        reason = exc.reason
        raise reason if isinstance(reason, OSError) else OSError(str(reason)) from None
    except (ValueError, http.client.HTTPException) as exc:   # a malformed URL or a garbled answer
        raise OSError(str(exc) or type(exc).__name__) from None


def _claims_success(body: bytes) -> bool:
    """A 2xx reset answer is taken at its word unless its JSON says `"success": false` (vLLM)."""
    try:
        data = json.loads(body)
    except ValueError:
        return True
    return not (isinstance(data, dict) and data.get("success") is False)


def _why(exc: OSError) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return f"no answer within {URL_CHECK_TIMEOUT_S:g} s"
    if isinstance(exc, socket.gaierror):
        return f"unknown host ({exc.strerror or exc})"
    if isinstance(exc, ConnectionResetError):
        return "connection reset"
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return text


def _connect_host(host: str) -> str:
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _port_in_use(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _tail(path: Path | None, chars: int) -> str:
    if path is None:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - chars))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return text


def _dist_version(module: str, with_name: bool = False) -> str | None:
    """The version of the distribution that installs `module` (e.g. vllm from `vllm-tpu`)."""
    if importlib.util.find_spec(module) is None:
        return None
    dists = importlib.metadata.packages_distributions().get(module) or [module]
    for dist in dists:
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        if with_name:
            return f"{dist} {version}"
        return version if dist.replace("_", "-").lower() == module.replace("_", "-").lower() else f"{version} ({dist})"
    return None
