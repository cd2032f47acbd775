"""The chips a server tpubench started uses, read from how it was started (docs/chips-prices-pairs.md#chips-of-a-server).

A server is priced as the chips it occupies, not as tpubench's own device: vLLM launched with
`--tensor-parallel-size 8` holds 8 GPUs, and a CPU server pinned with `taskset` holds its CPUs.

- Accelerator servers: the product of the parallel flags in the command (vLLM
  `--tensor-parallel-size`/`-tp`, `--pipeline-parallel-size`/`-pp`, `--data-parallel-size`/`-dp`;
  SGLang `--tp-size`/`--tp`, `--pp-size`/`--pp`, `--dp-size`/`--dp`, where `--enable-dp-attention`
  runs the data-parallel ranks inside the tensor-parallel ones), defaults 1 for vLLM and SGLang;
  a vLLM `--config` YAML is read for the same keys. `transformers serve` spreads a model over every
  visible GPU (device_map "auto") unless `--device` names one. A command whose stack is unknown
  uses the visible-device variable (CUDA_VISIBLE_DEVICES, TPU_VISIBLE_CHIPS,
  NEURON_RT_VISIBLE_CORES) when it is set; otherwise its chips are unknown (unpriced, with why).
- Cross-checked against what the host has (tpubench/hardware/host_accelerators.py) and what is visible to
  the server: a command that asks for more chips than that is warned about (other nodes), and
  priced as what it asks for.
- On Neuron, the parallel sizes and NEURON_RT_VISIBLE_CORES count logical NeuronCores: chips =
  cores / logical cores per chip, by the same rule as a run on Neuron devices
  (environment.neuron_logical_cores_per_chip). Not yet confirmed on hardware.
- CPU servers (a host without accelerators, `--device cpu`, or an empty CUDA_VISIBLE_DEVICES):
  the CPUs the server's processes may run on (the union of os.sched_getaffinity over its process
  group), so a `taskset` pin is priced as pinned.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from tpubench.hardware.environment import NEURON_LNC_ENV, NEURON_UNCONFIRMED, neuron_logical_cores_per_chip
from tpubench.hardware.host_accelerators import HostAccelerators, host_accelerators
from tpubench.processes import live_group_members

# Flag spellings per parallel dimension (vLLM's and SGLang's, both accepted from any command).
_FLAGS = {
    "tensor": ("--tensor-parallel-size", "-tp", "--tp-size", "--tp"),
    "pipeline": ("--pipeline-parallel-size", "-pp", "--pp-size", "--pp"),
    "data": ("--data-parallel-size", "-dp", "--dp-size", "--dp"),
    "data_local": ("--data-parallel-size-local", "-dpl"),
}
_CONFIG_KEYS = {"tensor": "tensor_parallel_size", "pipeline": "pipeline_parallel_size",
                "data": "data_parallel_size", "data_local": "data_parallel_size_local"}
# Stacks whose parallel sizes default to 1 when no flag is given (so their chips are always known).
_DEFAULT_ONE = ("vllm", "sglang")
_VISIBLE_VARIABLE = {"cuda": "CUDA_VISIBLE_DEVICES", "tpu": "TPU_VISIBLE_CHIPS", "neuron": "NEURON_RT_VISIBLE_CORES"}


@dataclass(frozen=True)
class ServerChips:
    """What a started server runs on: `device` "cuda" | "tpu" | "neuron" | "cpu"; its chips
    (vCPUs on a CPU) or None when they cannot be known, with `reason`; `source` says how."""

    device: str
    accelerator_name: str | None
    chips: int | None
    source: str | None
    reason: str | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)


def server_chips(argv: list[str], env: dict, pid: int | None, stack: str,
                 host: HostAccelerators | None = None) -> ServerChips:
    """The chips of the server started with `argv` and `env` (its whole environment), running as
    process group `pid`; `stack` is its recorded name ("vllm", "sglang", "transformers serve", ...)."""
    host = host or host_accelerators()
    if not host.has_accelerator or _runs_on_cpu(argv, env, host, stack):
        return _cpu_chips(pid)
    per_chip = 1
    if host.kind == "neuron":
        per_chip, how = neuron_logical_cores_per_chip(host.name, env.get(NEURON_LNC_ENV))
        if per_chip is None:
            return ServerChips(host.kind, host.name, None, None, reason=how)
    visible = _visible(env, host, per_chip)
    flags = parallel_flags(argv)
    if flags.get("error"):
        return ServerChips(host.kind, host.name, None, None, reason=f"cannot read the command's {flags['error']}")
    if stack == "transformers serve" and not flags["given"]:
        return _transformers_chips(argv, host, visible)
    if not flags["given"] and not any(s in stack for s in _DEFAULT_ONE):
        if visible is not None:
            return _known(host, visible[0], visible[1], visible=None)
        return ServerChips(host.kind, host.name, None, None, reason=(
            f"cannot tell how many of this host's {host.count} {host.name or host.kind} chips the server uses: "
            f"its command has no parallel flag and {_VISIBLE_VARIABLE[host.kind]} is not set; declare "
            "server.hardware (accelerator, chips)"))
    world, local, text = _world(flags, stack)
    return _known(host, _to_chips(world, per_chip), text or f"{stack} default (1 chip)", visible=visible,
                  local_chips=_to_chips(local, per_chip))


def parallel_flags(argv: list[str]) -> dict:
    """The parallel sizes a command gives: {"tensor": n, ...} for those given, `given` (the flags
    as written), `dp_attention`, and `error` when a size is not a positive integer."""
    found: dict = {"given": [], "dp_attention": "--enable-dp-attention" in argv}
    config = _config_file(argv)
    for dim, key in _CONFIG_KEYS.items():
        value = config.get(key)
        if value is not None:
            found[dim] = value
            found["given"].append(f"{key}: {value} (--config)")
    for i, arg in enumerate(argv):
        name, _, inline = str(arg).partition("=")
        dim = next((d for d, spellings in _FLAGS.items() if name in spellings), None)
        if dim is None:
            continue
        value = inline if inline else (argv[i + 1] if i + 1 < len(argv) else None)
        found[dim] = value
        found["given"].append(f"{name} {value}")
    for dim in _FLAGS:
        if dim in found:
            try:
                found[dim] = int(str(found[dim]))
                if found[dim] < 1:
                    raise ValueError
            except ValueError:
                found["error"] = f"{dim}-parallel size {found[dim]!r} (not a positive integer)"
    return found


def _world(flags: dict, stack: str) -> tuple[int, int, str]:
    """(chips of the whole server, chips on this host, the flags read): tensor x pipeline x data;
    SGLang's data-parallel attention runs inside the tensor-parallel ranks."""
    tp, pp, dp = flags.get("tensor", 1), flags.get("pipeline", 1), flags.get("data", 1)
    if "sglang" in stack and flags["dp_attention"]:
        dp = 1
    world = tp * pp * dp
    local = tp * pp * flags["data_local"] if "data_local" in flags else world
    return world, local, ", ".join(flags["given"])


def _known(host: HostAccelerators, chips: int, how: str, *, visible: tuple[int, str] | None,
           local_chips: int | None = None) -> ServerChips:
    """Chips read from the command, cross-checked against what the server can see on this host."""
    warnings = []
    here = local_chips if local_chips is not None else chips
    available = visible[0] if visible else host.count
    seen = f"{visible[1]} = {available}" if visible else f"{host.count} on the host"
    if here > available:
        warnings.append(f"the server's command asks for {here} {host.name or host.kind} chips but {seen}: the rest "
                        f"must be on other nodes; priced as {chips}")
    if host.kind == "neuron":
        warnings.append(NEURON_UNCONFIRMED)
    if host.name is None:
        warnings.append(f"this host's {host.kind} chips are of a generation tpubench cannot read ({host.source}): "
                        "declare server.hardware (accelerator, chips) to price the server")
    source = f"{how} (launch command); host: {host.count} x {host.name or host.kind} ({host.source})"
    return ServerChips(host.kind, host.name, chips, source, warnings=tuple(warnings))


def _transformers_chips(argv: list[str], host: HostAccelerators, visible: tuple[int, str] | None) -> ServerChips:
    device = _option(argv, "--device") or "auto"
    if device != "auto":          # one device: "cuda", "cuda:0", "0" (device_map puts it all there)
        return _known(host, 1, f"--device {device}", visible=visible)
    count = visible[0] if visible else host.count
    how = visible[1] if visible else "every GPU on the host"
    return _known(host, count, f"transformers serve --device {device} spreads the model over {how}", visible=visible)


def server_on_cpu(argv: list[str], env: dict, stack: str, host: HostAccelerators | None = None) -> bool:
    """Whether a server started with `argv` and `env` runs on this host's CPUs (the same rule its
    price follows): a host without accelerators, `--device cpu`, or an empty visible-device list."""
    host = host or host_accelerators()
    return not host.has_accelerator or _runs_on_cpu(argv, env, host, stack)


def _runs_on_cpu(argv: list[str], env: dict, host: HostAccelerators, stack: str) -> bool:
    if _option(argv, "--device") == "cpu":
        return True
    variable = _VISIBLE_VARIABLE.get(host.kind)
    if variable and variable in env and str(env[variable]).strip() in ("", "-1"):
        return True
    return stack == "transformers serve" and transformers_serve_on_cpu(argv)


def transformers_serve_on_cpu(argv: list[str]) -> bool:
    """Whether `transformers serve` started with `argv` runs on the CPU: `--device cpu`, or the
    default `auto` where the torch it runs on (tpubench's own) sees no accelerator. The one
    decision that both its price and its CPU KV-cache setting follow."""
    device = _option(argv, "--device") or "auto"
    return device == "cpu" or (device == "auto" and not torch_sees_accelerator())


def torch_sees_accelerator() -> bool:
    try:
        import torch
    except ImportError:
        return False
    xpu = getattr(torch, "xpu", None)
    mps = getattr(torch.backends, "mps", None)
    return bool(torch.cuda.is_available() or (xpu is not None and xpu.is_available())
                or (mps is not None and mps.is_available()))


def _cpu_chips(pid: int | None) -> ServerChips:
    from tpubench.hardware.environment import cpu_model_name

    cpus = process_group_cpus(pid) if pid else None
    name = cpu_model_name()
    if not cpus:
        return ServerChips("cpu", name, None, None, reason="cannot read the CPU affinity of the server's processes")
    return ServerChips("cpu", name, len(cpus),
                       f"CPU affinity of the server's processes (os.sched_getaffinity): {len(cpus)} vCPUs")


def process_group_cpus(pgid: int) -> set[int] | None:
    """The CPUs any live process of group `pgid` may run on (a wrapper's child may be pinned
    differently from the wrapper); None when none can be read."""
    cpus: set[int] = set()
    for pid in live_group_members(pgid) or [pgid]:
        try:
            cpus |= os.sched_getaffinity(pid)
        except OSError:
            continue
    return cpus or None


def _visible(env: dict, host: HostAccelerators, per_chip: int) -> tuple[int, str] | None:
    """(chips, "VARIABLE=value") of the host kind's visible-device variable, when it is set."""
    variable = _VISIBLE_VARIABLE.get(host.kind)
    value = str(env.get(variable, "")).strip() if variable else ""
    if not value:
        return None
    count = 0
    for part in value.split(","):
        first, _, last = part.strip().partition("-")
        if first.isdigit() and last.isdigit():
            count += int(last) - int(first) + 1
        elif part.strip():
            count += 1          # an index or a UUID
    return _to_chips(count, per_chip), f"{variable}={value}"


def _to_chips(units: int, per_chip: int) -> float:
    """Chips from a count of devices (on Neuron, logical NeuronCores, `per_chip` to a chip: the
    same rule, and the same fractions, as a run on Neuron devices, environment.device_chips)."""
    return units if per_chip == 1 else units / per_chip


def _option(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return str(argv[i + 1])
        if str(arg).startswith(name + "="):
            return str(arg).split("=", 1)[1]
    return None


def _config_file(argv: list[str]) -> dict:
    """vLLM's `--config file.yaml` (its keys as CLI names without dashes); {} when absent or unreadable."""
    path = _option(argv, "--config")
    if not path:
        return {}
    try:
        import yaml

        data = yaml.safe_load(Path(path).read_text())
    except Exception:  # noqa: BLE001 - an unreadable config is the server's to report; its sizes stay unread
        return {}
    return {str(k).replace("-", "_"): v for k, v in data.items()} if isinstance(data, dict) else {}
