"""The accelerators this host has, counted without importing any vendor stack into tpubench.

A server tpubench starts brings its own stack (vLLM-TPU brings its TPU runtime, a CUDA build of
vLLM its CUDA), while tpubench's own environment may have none of it: on a TPU VM without
`torch_tpu` tpubench's device is `cpu`. So what a started server runs on is read from the host
itself, never from tpubench's torch device:

- NVIDIA GPUs: `nvidia-smi -L` (one `GPU n: <name> (UUID: ...)` line per GPU; MIG lines ignored).
- Google TPUs: the PCI functions of vendor 0x1ae0 under /sys/bus/pci/devices, their device id
  naming the generation (ids as in Google's `tpu-info`, device.py: 0x005e v4, 0x0063 v5e,
  0x0062 v5p, 0x006f v6e, 0x0076 TPU7x, 0x0027 v2/v3 by subsystem id; v2, v3 and 7x have two
  functions per chip); failing that, /dev/accel* (v2-v4) or /dev/vfio/<n> (v5e and later) counted
  as chips of an unknown generation.
- AWS Neuron: /dev/neuron<n> (one per Neuron device, i.e. chip), or `neuron-ls --json-output`;
  the generation from the instance type (DMI product name, e.g. trn1.32xlarge).

    listing = host_accelerators()    # HostAccelerators(kind="cuda", name="NVIDIA H100 80GB HBM3", count=8, ...)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tpubench.hardware.accelerators import normalize_accelerator
from tpubench.hardware.environment import cpu_chips

# Where the listings are read: module attributes, so a test can point them at a fake tree.
DEV = Path("/dev")
PCI_DEVICES = Path("/sys/bus/pci/devices")
DMI_PRODUCT = Path("/sys/devices/virtual/dmi/id/product_name")
COMMAND_TIMEOUT_S = 15.0

GOOGLE_PCI_VENDOR = "0x1ae0"
# PCI device id -> (generation name as the price table's patterns read it, PCI functions per chip).
_TPU_DEVICE_IDS = {"0x005e": ("TPU v4", 1), "0x0063": ("TPU v5e", 1), "0x0062": ("TPU v5p", 1),
                   "0x006f": ("TPU v6e", 1), "0x0076": ("TPU7x", 2)}
_TPU_V2_V3 = {"0x004e": ("TPU v2", 2), "0x004f": ("TPU v3", 2)}   # device 0x0027, told apart by subsystem
_NVIDIA_LINE = re.compile(r"^GPU\s+\d+:\s*(?P<name>.+?)\s*(\(UUID:.*\))?\s*$")
# The Neuron generations an instance type (trn1.32xlarge, trn2.48xlarge, inf2.xlarge) can name.
NEURON_CHIPS = ("Trainium", "Trainium2", "Inferentia2")


@dataclass(frozen=True)
class HostAccelerators:
    """What the host has: `kind` "cuda" | "tpu" | "neuron" | "cpu"; `name` the chip's name (the
    first GPU's, a TPU generation, a Neuron generation; None when it cannot be told); `count` the
    chips (vCPUs this process may use for "cpu"); `source` how that was read."""

    kind: str
    name: str | None
    count: int
    source: str

    @property
    def has_accelerator(self) -> bool:
        return self.kind != "cpu"


def host_accelerators() -> HostAccelerators:
    """The first of NVIDIA GPUs, TPUs, Neuron devices the host has; else its CPUs."""
    for probe in (nvidia_gpus, tpu_chips, neuron_devices):
        found = probe()
        if found is not None and found.count > 0:
            return found
    return HostAccelerators("cpu", None, cpu_chips(), "os.sched_getaffinity")


def nvidia_gpus() -> HostAccelerators | None:
    """GPUs listed by `nvidia-smi -L` (found on PATH), or None without the tool or on its failure."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    text = _run([exe, "-L"])
    if text is None:
        return None
    names = [m.group("name") for line in text.splitlines() if (m := _NVIDIA_LINE.match(line.strip()))]
    if not names:
        return None
    return HostAccelerators("cuda", names[0], len(names), "nvidia-smi -L")


def tpu_chips() -> HostAccelerators | None:
    """Google TPU chips from the PCI bus, else from /dev/accel* or /dev/vfio/<n>."""
    functions: dict[str, int] = {}
    per_chip: dict[str, int] = {}
    for entry in _listdir(PCI_DEVICES):
        if _read(entry / "vendor") != GOOGLE_PCI_VENDOR:
            continue
        device = _read(entry / "device")
        known = _TPU_V2_V3.get(_read(entry / "subsystem_device") or "") if device == "0x0027" \
            else _TPU_DEVICE_IDS.get(device or "")
        name, functions_per_chip = known or ("TPU", 1)
        functions[name] = functions.get(name, 0) + 1
        per_chip[name] = functions_per_chip
    if functions:
        name = max(functions, key=functions.get)
        chips = -(-functions[name] // per_chip[name])
        return HostAccelerators("tpu", None if name == "TPU" else name, chips,
                                f"PCI vendor {GOOGLE_PCI_VENDOR} under {PCI_DEVICES}")
    accel = [p for p in _listdir(DEV) if re.fullmatch(r"accel\d+", p.name)]
    if accel:
        return HostAccelerators("tpu", _tpu_name_from_env(), len(accel), f"{DEV}/accel*")
    # /dev/vfio/<n> is any VFIO group: only a TPU on a host whose environment says it is a TPU VM.
    vfio = [p for p in _listdir(DEV / "vfio") if p.name.isdigit()]
    if vfio and _tpu_name_from_env(default=None) is not None:
        return HostAccelerators("tpu", _tpu_name_from_env(), len(vfio), f"{DEV}/vfio/<n>")
    return None


def neuron_devices() -> HostAccelerators | None:
    """AWS Neuron devices (chips): /dev/neuron<n>, else `neuron-ls --json-output`."""
    name = _neuron_name()
    nodes = [p for p in _listdir(DEV) if re.fullmatch(r"neuron\d+", p.name)]
    if nodes:
        return HostAccelerators("neuron", name, len(nodes), f"{DEV}/neuron*")
    exe = shutil.which("neuron-ls")
    if exe is None:
        return None
    text = _run([exe, "--json-output"])
    try:
        listing = json.loads(text) if text else None
    except ValueError:
        return None
    if isinstance(listing, dict):   # some versions wrap the device list
        listing = next((v for v in listing.values() if isinstance(v, list)), None)
    if not isinstance(listing, list) or not listing:
        return None
    return HostAccelerators("neuron", name, len(listing), "neuron-ls --json-output")


def _tpu_name_from_env(default: str | None = "TPU") -> str | None:
    """TPU VMs export the slice's type (e.g. "v6e-8"); the generation is what precedes the dash."""
    raw = os.environ.get("TPU_ACCELERATOR_TYPE") or os.environ.get("ACCELERATOR_TYPE")
    if not raw:
        return default
    return normalize_accelerator(f"TPU {raw.split('-')[0]}") or default


def ec2_instance_type() -> str:
    """The EC2 instance type a Nitro instance names in DMI (trn1.32xlarge, trn2.48xlarge), or ""."""
    return _read(DMI_PRODUCT) or ""


def _neuron_name() -> str | None:
    name = normalize_accelerator(ec2_instance_type())
    return name if name in NEURON_CHIPS else None


def _run(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _listdir(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError:
        return []


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip().lower()
    except OSError:
        return None
