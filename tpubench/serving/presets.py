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

import importlib.metadata
import importlib.util
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from tpubench.errors import UserError
from tpubench.serving.server_chips import transformers_serve_on_cpu

CPU_KV_CACHE_SHARE = "0.05"    # transformers serve on the CPU: share of free host memory for its KV cache
# The prefix-cache reset of each stack (by a part of its recorded name).
RESET_PATHS = (("vllm", "/reset_prefix_cache"), ("sglang", "/flush_cache"))

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


PRESETS: dict[str, Preset] = {
    "transformers": Preset(
        "transformers serve",
        ("{transformers}", "serve", "{model}", "--host", "{host}", "--port", "{port}", "--continuous-batching"),
        modules=("transformers", "fastapi", "uvicorn", "openai"),
        install="pip install 'tpubench[serve]'  (transformers serve needs fastapi, uvicorn and openai)",
        version_module="transformers"),
    "vllm": Preset(
        "vllm", ("{vllm}", "serve", "{model}", "--host", "{host}", "--port", "{port}"),
        modules=("vllm",), install="pip install vllm", exact_output_fields=_EXACT_VLLM, version_module="vllm"),
    "vllm-tpu": Preset(
        "vllm (TPU)", ("{vllm}", "serve", "{model}", "--host", "{host}", "--port", "{port}"),
        modules=("vllm",), plugins=("tpu_inference", "vllm_torchtpu"),
        install="pip install vllm-tpu  (tpu-inference; or vllm-torchtpu for the TorchTPU backend)",
        exact_output_fields=_EXACT_VLLM, version_module="vllm"),
    "vllm-neuron": Preset(
        "vllm (Neuron)", ("{vllm}", "serve", "{model}", "--host", "{host}", "--port", "{port}"),
        modules=("vllm",), plugins=("vllm_neuron",),
        install="pip install vllm-neuron --extra-index-url https://pip.repos.neuron.amazonaws.com",
        exact_output_fields=_EXACT_VLLM, version_module="vllm"),
    "sglang": Preset(
        "sglang", ("{python}", "-m", "sglang.launch_server", "--model-path", "{model}", "--host", "{host}",
                   "--port", "{port}"),
        modules=("sglang",), install="pip install sglang", exact_output_fields=_EXACT_VLLM,
        version_module="sglang"),
}
# A stack told apart by its name (a custom command, or what a running server's /v1/models says).
BY_NAME = {"vllm": PRESETS["vllm"], "sglang": PRESETS["sglang"], "transformers serve": PRESETS["transformers"]}


def transformers_cpu_args(args: list[str]) -> list[str]:
    """On the CPU, `transformers serve --continuous-batching` sizes its KV cache to 90% of the
    host's free memory (measured: about 19 GB on a 23 GB host, 20 s to allocate on the first
    request). Unless the args size the cache themselves, it gets CPU_KV_CACHE_SHARE of it."""
    if any(str(a).startswith(("--cb-num-blocks", "--cb-max-memory-percent")) for a in args):
        return []
    return ["--cb-max-memory-percent", CPU_KV_CACHE_SHARE] if transformers_serve_on_cpu(args) else []


def check_packages(preset: Preset, key: str | None) -> None:
    missing = [m for m in preset.modules if importlib.util.find_spec(m) is None]
    if preset.plugins and not any(importlib.util.find_spec(p) for p in preset.plugins):
        missing.append(" or ".join(preset.plugins))
    if missing:
        raise UserError(f"preset '{key}' needs {', '.join(missing)}, not installed here: {preset.install}",
                        field="scenario.server.launch.preset")


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


def cli_argv(script: str, module: str) -> list[str]:
    """The console script next to this Python, else `python -m module` (same environment)."""
    candidate = Path(sys.executable).parent / script
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return [str(candidate)]
    return [sys.executable, "-m", module]


def split_command(command) -> list[str]:
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    if not argv:
        raise UserError("launch.command is empty", field="scenario.server.launch.command")
    return argv


def dist_version(module: str, with_name: bool = False) -> str | None:
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
