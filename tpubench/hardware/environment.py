"""Provenance: what software and hardware a number came from."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import socket
import subprocess
from importlib.metadata import PackageNotFoundError, version

from tpubench.hardware.accelerators import normalize_accelerator
from tpubench.version import __version__

_VERSIONED = ("torch", "transformers", "jax", "jaxlib", "numpy")


def package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def git_revision(cwd: str | None = None) -> str | None:
    """The checkout's commit (with '-dirty' when it has local changes), or None outside git."""
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, cwd=cwd)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=5, cwd=cwd)
        return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_environment() -> dict:
    env = {
        "tpubench": __version__,
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "cpu_model": cpu_model_name(),
        "cpu_count": os.cpu_count(),
        "hostname": socket.gethostname(),
        "git_revision": git_revision(),
    }
    for name in _VERSIONED:
        env.setdefault(name, package_version(name))
    return env


def environment_key(backend: str, device: str, env: dict) -> str:
    """What must match for an earlier result to stand in for a new one (used by --resume)."""
    keep = {k: env.get(k) for k in ("accelerator_name", "chips", "torch", "transformers", "jax", "jaxlib")}
    blob = json.dumps({"backend": backend, "device": device, **keep}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------- chips

# What `chips` means on a CPU, stated in every CPU result (`chips_source`).
CPU_CHIPS_RULE = ("CPU: chips = the vCPUs this process may run on (its CPU affinity mask, os.sched_getaffinity), "
                  "what a cloud bills for the compute it occupies; priced per vCPU whatever number of threads "
                  "the framework runs (torch_threads)")
# Neuron: a framework device is a logical NeuronCore; how many a chip holds depends on the chip and on
# the logical-NeuronCore (LNC) setting. Sources: AWS Neuron docs, "Logical NeuronCore configuration" and
# the PyTorch NeuronX developer guide ("On Trn1, each Trainium accelerator has two NeuronCores (default
# two Logical NeuronCores) ... On Trn2, each Trainium accelerator has 8 NeuronCores (default 4 Logical
# NeuronCores)"); trn1 (and inf2) support LNC=1 only; neuronx-cc defaults to LNC=2 on Trn2 and later.
NEURON_PHYSICAL_CORES_PER_CHIP = {"Trainium": 2, "Inferentia2": 2, "Trainium2": 8}
NEURON_DEFAULT_LNC = {"Trainium": 1, "Inferentia2": 1, "Trainium2": 2}
NEURON_SUPPORTED_LNC = {"Trainium": (1,), "Inferentia2": (1,), "Trainium2": (1, 2)}
NEURON_LNC_ENV = "NEURON_LOGICAL_NC_CONFIG"
NEURON_DOCS = "AWS Neuron docs: Logical NeuronCore configuration; PyTorch NeuronX developer guide"
NEURON_UNCONFIRMED = ("Neuron chips are derived from the logical-NeuronCore configuration (AWS Neuron docs); "
                      "not yet confirmed by tpubench on Trainium hardware")


def cpu_chips(pid: int = 0) -> int:
    """The vCPUs process `pid` (0: this one) may run on: its CPU affinity mask, or every CPU of the
    machine where the OS has no affinity call (macOS). The one rule for a CPU's `chips`."""
    try:
        return len(os.sched_getaffinity(pid))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def neuron_logical_cores_per_chip(accelerator: str | None, lnc_setting: str | None) -> tuple[int | None, str]:
    """(logical NeuronCores per chip, how that was found) for a canonical accelerator name
    ('Trainium', 'Trainium2', 'Inferentia2') and the NEURON_LOGICAL_NC_CONFIG value (None: unset).
    None when the chip or the setting is unknown or impossible (the reason says which)."""
    physical = NEURON_PHYSICAL_CORES_PER_CHIP.get(accelerator or "")
    if physical is None:
        return None, f"unknown Neuron chip {accelerator!r}: logical cores per chip unknown"
    if lnc_setting is None or not str(lnc_setting).strip():
        lnc = NEURON_DEFAULT_LNC[accelerator]
        said = f"{NEURON_LNC_ENV} unset, default LNC={lnc}"
    else:
        try:
            lnc = int(str(lnc_setting).strip())
        except ValueError:
            return None, f"{NEURON_LNC_ENV}={lnc_setting!r} is not a number"
        said = f"{NEURON_LNC_ENV}={lnc}"
    if lnc not in NEURON_SUPPORTED_LNC[accelerator]:
        allowed = " or ".join(str(n) for n in NEURON_SUPPORTED_LNC[accelerator])
        return None, f"{said} is not supported on {accelerator} (LNC {allowed})"
    per_chip = physical // lnc
    return per_chip, f"{said} -> {per_chip} logical cores per {accelerator} chip ({NEURON_DOCS})"


def neuron_chips(devices: int, accelerator: str | None, lnc_setting: str | None) -> tuple[float | None, str]:
    """(chips, source) of `devices` framework devices (logical NeuronCores) on a Neuron chip:
    devices / logical cores per chip, so one device at LNC=2 on Trainium2 is a quarter chip."""
    per_chip, source = neuron_logical_cores_per_chip(accelerator, lnc_setting)
    if per_chip is None:
        return None, source
    return devices / per_chip, f"{devices} device(s) / {source}"


def device_chips(device: str, devices: int, accelerator_name: str | None) -> dict:
    """`chips` for a run on `devices` framework devices, with `chips_source` (and, where the rule
    is not yet checked on hardware, `chips_warning`): the one place that decides what a chip is.

    CPU: cpu_chips() whatever `devices` (all ranks of a CPU world share the process's mask);
    Neuron: devices / logical NeuronCores per chip; every other accelerator: one chip per device."""
    if device == "cpu":
        return {"chips": cpu_chips(), "chips_source": CPU_CHIPS_RULE}
    canonical = normalize_accelerator(accelerator_name, device)
    if device == "neuron" or canonical in NEURON_PHYSICAL_CORES_PER_CHIP:
        chips, source = neuron_chips(devices, canonical, os.environ.get(NEURON_LNC_ENV))
        return {"chips": chips, "chips_source": source, "chips_warning": NEURON_UNCONFIRMED}
    return {"chips": devices, "chips_source": "one chip per framework device"}
