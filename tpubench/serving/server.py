"""The server a `serve` workload measures (docs/scenarios/serve.md): a running one at a URL, checked to
speak OpenAI, or one tpubench starts here, waits for, and always stops.

    with open_server(point.params["server"], workload_model=model, workdir=tmp) as server:
        server.base_url, server.model, server.extra_body(256), server.log_tail()

A started server runs in its own process group (a new session), its output in a log file in the
work folder. On leaving the context, on any exception, on Ctrl-C and on SIGTERM to tpubench, the
group gets SIGTERM, a grace period, then SIGKILL. Nothing is ever killed by name.

The serving stacks it can start (presets, their commands and sources) are in serving/presets.py;
the requests it makes to a server outside the measured load are in serving/server_api.py.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tpubench.errors import UserError
from tpubench.processes import start_in_new_group, stop_group
from tpubench.serving.cpu_pinning import CpuSplit, cpu_list, own_cpus, process_on, split_cpus, this_thread_on
from tpubench.serving.presets import (
    BY_NAME,
    PRESETS,
    VLLM_CPU_HEAD_DIMS,
    Preset,
    check_packages,
    cli_argv,
    dist_version,
    guess_stack,
    serving_python,
    split_command,
    transformers_cpu_args,
    vllm_cpu_args,
)
from tpubench.serving.server_api import ask_version, first_model, get, models_listing, reset_prefix_cache_at
from tpubench.serving.server_chips import ServerChips, server_chips, server_on_cpu

PhaseCallback = Callable[[str, float, float], None]

POLL_INTERVAL_S = 0.25         # readiness polling of a started server
STOP_GRACE_S = 15.0            # SIGTERM to SIGKILL
LOG_TAIL_IN_ERRORS = 600       # characters of the log quoted in a start-up error
_LOOPBACK = ("127.0.0.1", "::1", "localhost")


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
    # The server's and tpubench's client's CPUs when tpubench pinned them apart (cpu_pinning.py).
    cpu_split: CpuSplit | None = None
    # The local folder of the served weights (a built model or a local path), for the served-model
    # check; None for a Hub id or a server at a URL.
    weights_path: str | None = None
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
        """Empty the engine's prefix cache so the next load point meets a cold server: (True, the
        endpoint), (False, why) or (None, why) for a stack with no reset (serving/server_api.py)."""
        return reset_prefix_cache_at(self.base_url, self.name)

    def alive(self) -> bool:
        """A started server: its process still runs. A running one: it answers GET /v1/models."""
        if self._process is not None:
            return self._process.poll() is None
        try:
            status, _, _ = get(f"{self.base_url}/v1/models", timeout=2.0)
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
                "hardware": asdict(self.hardware) if self.hardware else None,
                "cpu_pinning": self.cpu_split.describe() if self.cpu_split else None}


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
    preset, argv_template = _preset_and_argv(launch)
    python = serving_python(launch, preset)
    if not launch.get("command"):
        check_packages(preset, launch.get("preset"), python)
    # A command that has no {model} serves what it says: nothing is built for it.
    uses_model = any("{model}" in str(a) for a in [*argv_template, *(launch.get("args") or [])])
    host, port, connect_host = _listen_address(launch)
    cpu_preset = _cpu_preset_launch(launch, preset, _fill_argv(argv_template, launch, model="build", host=host,
                                                               port=port, python=python))
    if cpu_preset:   # before the model is built (minutes for a large config), not after
        _check_cpu_head_dim(launch, workload_model)
    model = _model_to_serve(launch, workload_model, workdir, on_phase) if uses_model else launch.get("model")
    argv = _fill_argv(argv_template, launch, model=model, host=host, port=port, python=python)
    env, split = _server_environment(launch, preset, argv, connect_host, cpu_preset)
    base_url = f"http://{_url_host(connect_host)}:{port}"
    ready_path = launch.get("ready_path") or "/v1/models"
    if not ready_path.startswith("/"):
        ready_path = "/" + ready_path
    timeout_s = float(launch.get("startup_timeout_s") or 180.0)
    log_path = _new_log(workdir)

    process: subprocess.Popen | None = None
    with _sigterm_as_exit(), ExitStack() as pinned:
        try:
            # The server inherits its CPUs from this thread as it starts; tpubench keeps the rest.
            with this_thread_on(split.server) if split else nullcontext():
                process = _spawn(argv, env, log_path, cwd=workdir)
            if split:
                pinned.enter_context(process_on(split.client))
            t0 = time.monotonic()
            _wait_ready(process, base_url + ready_path, timeout_s, log_path, on_phase, t0)
            startup_s = time.monotonic() - t0
            served = server.get("model") or first_model(base_url) or (model if model != "build" else None)
            if not served:
                raise UserError("the server lists no model at /v1/models: give server.model", field="scenario.server.model")
            running = RunningServer(
                base_url=base_url, model=served, name=preset.name if preset else "unknown",
                version=_started_version(preset, base_url, python), command=argv, pid=process.pid,
                started_by_tpubench=True, startup_s=round(startup_s, 3),
                tokenizer=server.get("tokenizer") or (model if model != "build" else None) or served,
                exact_output_fields=preset.exact_output_fields if preset else (),
                log_path=log_path, cpu_split=split,
                weights_path=model if model and Path(model).is_dir() else None, _process=process)
            if not server.get("hardware"):   # declared hardware wins; else read what it runs on
                running.hardware = server_chips(argv, env, process.pid, running.name)
            yield running
        finally:
            if process is not None:
                on_phase("stopping the server", 0, 1)
                stop_group(process, STOP_GRACE_S)
                on_phase("stopping the server", 1, 1)


def _preset_and_argv(launch: dict) -> tuple:
    """(the stack's preset, None for a custom command that looks like no known stack; the command
    line with its {placeholders})."""
    preset = PRESETS.get(launch.get("preset") or "transformers")
    if launch.get("command"):
        argv_template = split_command(launch["command"])
        if preset is None:      # custom: the stack is what the command looks like
            preset = guess_stack(argv_template)
    elif preset is None:
        raise UserError("preset 'custom' needs a command", field="scenario.server.launch.command")
    else:
        argv_template = list(preset.argv)
    return preset, argv_template


def _listen_address(launch: dict) -> tuple[str, int, str]:
    """(host the server listens on, its port: a free one unless given, the host to connect to)."""
    host = launch.get("host") or "127.0.0.1"
    port = launch.get("port")
    connect_host = _connect_host(host)
    if port is None:
        port = free_port()
    elif _port_in_use(connect_host, int(port)):
        raise UserError(f"port {port} on {host} is already in use: another server answers there",
                        field="scenario.server.launch.port")
    return host, port, connect_host


def _fill_argv(argv_template: list[str], launch: dict, *, model, host: str, port, python: str) -> list[str]:
    """The command line with its placeholders filled and the launch's own args after it (and, for
    the default transformers preset, the arguments it needs on a CPU)."""
    values = {"{model}": model or "", "{host}": host, "{port}": str(port), "{python}": python,
              "{transformers}": cli_argv("transformers", "transformers.cli.transformers", python),
              "{vllm}": cli_argv("vllm", "vllm.entrypoints.cli.main", python)}
    argv: list[str] = []
    for arg in [*argv_template, *(launch.get("args") or [])]:
        if arg in ("{transformers}", "{vllm}"):
            argv.extend(values[arg])      # a console script, or python -m its module
            continue
        for key in ("{model}", "{host}", "{port}", "{python}"):
            arg = arg.replace(key, values[key])   # not str.format: JSON arguments have braces
        argv.append(arg)

    if launch.get("preset") in (None, "transformers") and not launch.get("command"):
        argv.extend(transformers_cpu_args(launch.get("args") or []))
    return argv


def _server_environment(launch: dict, preset, argv: list[str], connect_host: str,
                        cpu_preset: bool) -> tuple[dict, CpuSplit | None]:
    """(the server process's environment, how the host's CPUs are split between it and tpubench, or
    None). A vLLM preset on a CPU (`cpu_preset`, _cpu_preset_launch) gets its CPU arguments appended
    to `argv`."""
    env = _launch_env(launch)
    if preset is not None and preset.name.startswith("vllm") and connect_host in _LOOPBACK:
        # vLLM serves POST /reset_prefix_cache (a cold cache for every load point) only in dev
        # mode, whose other routes are no one's business on a server only this host can reach.
        env.setdefault("VLLM_SERVER_DEV_MODE", "1")
        env.setdefault("VLLM_HOST_IP", "127.0.0.1")   # else vLLM looks for the host's outward address
    split = _cpu_split(launch, preset, argv, env)
    if split is not None and preset is not None and preset.pin_on_cpu:
        # vLLM's CPU backend binds its OpenMP threads to these CPUs and reserves none for itself.
        env.setdefault("VLLM_CPU_OMP_THREADS_BIND", cpu_list(split.server))
        env.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
    if cpu_preset:
        argv.extend(vllm_cpu_args(launch.get("args") or [], env))
    return env, split


def _launch_env(launch: dict) -> dict:
    """This process's environment with the launch's own variables over it."""
    return {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1",
            **{str(k): str(v) for k, v in (launch.get("env") or {}).items()}}


def _cpu_preset_launch(launch: dict, preset, argv: list[str]) -> bool:
    """Whether a preset that takes arguments of its own on a CPU (vLLM's) starts here, on this
    host's CPUs, with `argv` and the launch's environment (the model in `argv` does not matter)."""
    return preset is not None and preset.pin_on_cpu and not launch.get("command") and \
        server_on_cpu(argv, _launch_env(launch), preset.name)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now, from the kernel (bound on `host`, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


# ----------------------------------------------------------------------------- a running server

def _connect(server: dict) -> RunningServer:
    url = (server.get("url") or "").rstrip("/")
    url = url.removesuffix("/v1")     # the OpenAI base URL given instead of the server's
    data = models_listing(url)
    ids = [m.get("id") for m in data if isinstance(m, dict) and m.get("id")]
    model = server.get("model") or (ids[0] if ids else None)
    if not model:
        raise UserError(f"{url} lists no model at /v1/models: give server.model", field="scenario.server.model")
    owners = {m.get("owned_by") for m in data if isinstance(m, dict)}
    stack = BY_NAME.get("vllm") if "vllm" in owners else BY_NAME.get("sglang") if "sglang" in owners else None
    return RunningServer(
        base_url=url, model=model, name=stack.name if stack else "unknown",
        version=ask_version(url), command=None, pid=None, started_by_tpubench=False, startup_s=None,
        tokenizer=server.get("tokenizer") or model,
        exact_output_fields=stack.exact_output_fields if stack else ())


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
            status, _, _ = get(ready_url, timeout=max(0.5, min(2.0, timeout_s - waited)))
            if status == 200:
                return
        except OSError:
            pass
        time.sleep(POLL_INTERVAL_S)


def _check_cpu_head_dim(launch: dict, workload_model: dict | None) -> None:
    """A model tpubench builds for vLLM's CPU backend must have a head size it takes: else the
    server starts (a minute) and exits on the first request."""
    if (launch.get("model") or "build") != "build" or not workload_model:
        return
    config = workload_model.get("config") or {}
    head_dim = config.get("head_dim")
    if head_dim is None and config.get("hidden_size") and config.get("num_attention_heads"):
        head_dim = config["hidden_size"] // config["num_attention_heads"]
    if head_dim is not None and int(head_dim) not in VLLM_CPU_HEAD_DIMS:
        raise UserError(f"vLLM's CPU attention takes head_dim {', '.join(map(str, VLLM_CPU_HEAD_DIMS))}, "
                        f"not {head_dim}", field="model.config.head_dim")


def _cpu_split(launch: dict, preset: Preset | None, argv: list[str], env: dict) -> CpuSplit | None:
    """The server's and the client's CPUs (cpu_pinning.py), or None for no pinning: launch.cpus
    pins any stack ("none": never); by default a stack that busy-polls (vLLM) is pinned when it
    runs on this host's CPUs."""
    cpus = (launch.get("cpus") or "").strip()
    if cpus == "none":
        return None
    if cpus:
        return split_cpus(own_cpus(), cpus)
    if preset is None or not preset.pin_on_cpu or not server_on_cpu(argv, env, preset.name):
        return None
    return split_cpus(own_cpus())


def _started_version(preset: Preset | None, base_url: str, python: str | None = None) -> str | None:
    """The stack's version from the Python environment that serves, else the server's."""
    version = dist_version(preset.version_module, python=python) if preset and preset.version_module else None
    if version and preset:
        for plugin in preset.plugins:
            extra = dist_version(plugin, with_name=True, python=python)
            if extra:
                version += f" + {extra}"
    return version or ask_version(base_url)


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


