"""What is installed and what the host has, read without importing a framework, and exactly what
to install where the two disagree."""

from __future__ import annotations

import importlib.util
import platform
from importlib.metadata import PackageNotFoundError, version

from tpubench.doctor.verdicts import Check
from tpubench.hardware.host_accelerators import HostAccelerators, host_accelerators

# The distributions a measurement's stack is made of (recorded in the summary, where installed).
DISTRIBUTIONS = ("tpubench", "torch", "transformers", "numpy", "torch-tpu", "libtpu", "torch-neuronx", "torch-xla",
                 "nvidia-ml-py", "jax", "jaxlib", "vllm")
# The torch device of each kind of host, the module that must be importable for it, and how to get it.
DEVICE_OF_HOST = {"cuda": "cuda", "tpu": "tpu", "neuron": "neuron", "cpu": "cpu"}
INSTALL = {
    "tpu": ("torch_tpu", "pip install torch==2.13.0 && pip install 'tpubench[tpu]'   (torch-tpu 0.2.0 with libtpu; "
                         "it needs torch 2.11-2.15)"),
    "neuron": ("torch_neuronx", "pip install 'tpubench[neuron]' --extra-index-url https://pip.repos.neuron.amazonaws.com"
                                "   (torch-neuronx 2.14.* with torch 2.14, on a Neuron DLAMI with the Neuron driver)"),
    "cuda": ("torch", "pip install torch 'tpubench[cuda]'   (PyPI's Linux x86_64 torch is the CUDA build; "
                      "nvidia-ml-py reads energy)"),
}


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for dist in DISTRIBUTIONS:
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


def host() -> HostAccelerators:
    return host_accelerators()


def stack_checks(found: HostAccelerators, device: str, installed: dict[str, str | None]) -> list[Check]:
    """The host's chips, and the package its device needs: ok, or a fail naming what to install."""
    chips = Check("chips", "ok" if found.has_accelerator or device == "cpu" else "fail",
                  f"{found.count} x {found.name or found.kind} ({found.source})" if found.has_accelerator
                  else f"no accelerator on this host ({found.count} CPUs)")
    if device != "cpu" and not found.has_accelerator:
        chips.fix = f"--device {device} needs its chips: run this on the {device} machine"
    checks = [chips]
    if importlib.util.find_spec("torch") is None:
        checks.append(Check("torch", "fail", "torch is not installed", fix=INSTALL.get(device, ("", "pip install torch"))[1]))
        return checks
    if device in INSTALL and device != "cuda" and importlib.util.find_spec(INSTALL[device][0]) is None:
        checks.append(Check(f"{device} package", "fail", f"{INSTALL[device][0]} is not installed", fix=INSTALL[device][1]))
    elif device in INSTALL:
        dist = {"tpu": "torch-tpu", "neuron": "torch-neuronx", "cuda": "torch"}[device]
        checks.append(Check(f"{device} package", "ok", f"{dist} {installed.get(dist)}"))
    if device == "cuda" and not installed.get("nvidia-ml-py"):
        checks.append(Check("energy (NVML)", "fail", "nvidia-ml-py is not installed: no joules per token",
                            fix="pip install 'tpubench[cuda]'"))
    return checks


def default_device(found: HostAccelerators) -> str:
    """The device the host's chips are used through (torch)."""
    return DEVICE_OF_HOST.get(found.kind, "cpu")
