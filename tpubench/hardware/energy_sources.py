"""Where a point's energy comes from: one small interface over the sources a host may have, each
saying whether it measures or models and what it reads (docs/measurement.md#energy).

- NVML (NVIDIA GPUs, `nvidia-ml-py`): the total-energy counter (millijoules since the driver
  loaded), the most exact reading there is, and the instantaneous power for the curve.
- Linux RAPL powercap (CPU packages and their DRAM, `/sys/class/powercap/intel-rapl:*`): energy
  counters in microjoules that wrap at `max_energy_range_uj`.
- A model, labelled `modelled` wherever it appears: a per-chip power figure with its source (the
  user's `--chip-power-w`), times the chip's duty cycle where a reader for it is given (a TPU VM
  reports duty cycle, not power), else the figure itself.

A host without any of them has no source: that is a note on the sweep, never an error. Readings
are stamped with time.perf_counter, the clock the timed loops use.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol, Sequence

MEASURED = "measured"
MODELLED = "modelled"
POWERCAP_ROOT = Path("/sys/class/powercap")


@dataclass(frozen=True)
class Reading:
    """One reading of every device of a source at time `t` (perf_counter seconds): instantaneous
    power in watts and/or a cumulative energy counter in joules (from an arbitrary origin)."""

    t: float
    watts: tuple[float, ...] | None = None
    joules: tuple[float, ...] | None = None


class EnergySource(Protocol):
    name: str        # "nvml", "rapl", "model"
    method: str      # MEASURED or MODELLED
    detail: str      # what it reads, for the result ("NVML total energy, GPUs 0,1")
    devices: int     # how many devices each reading covers

    def read(self) -> Reading: ...

    def close(self) -> None: ...


class NvmlSource:
    """NVIDIA GPUs through NVML: power in milliwatts, total energy in millijoules."""

    name, method = "nvml", MEASURED

    def __init__(self, nvml, indices: Sequence[int]):
        self._nvml = nvml
        self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in indices]
        self.devices = len(self._handles)
        self._counter = all(self._energy_of(h) is not None for h in self._handles)
        what = "total-energy counter and power" if self._counter else "power"
        self.detail = f"NVML {what}, GPU {','.join(map(str, indices))}"

    def _energy_of(self, handle):
        try:
            return self._nvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1e3
        except self._nvml.NVMLError:
            return None   # older GPUs have no energy counter: power samples only

    def read(self) -> Reading:
        t = time.perf_counter()
        watts = tuple(self._nvml.nvmlDeviceGetPowerUsage(h) / 1e3 for h in self._handles)
        joules = tuple(self._energy_of(h) for h in self._handles) if self._counter else None
        return Reading(t, watts=watts, joules=joules)

    def close(self) -> None:
        self._nvml.nvmlShutdown()


class RaplSource:
    """CPU packages (and their DRAM subzones) through the powercap interface: counters only."""

    name, method = "rapl", MEASURED

    def __init__(self, zones: Sequence[Path]):
        self._zones = list(zones)
        self._ranges = [int((z / "max_energy_range_uj").read_text()) for z in self._zones]
        self._last = [self._raw(z) for z in self._zones]
        self._total = [0] * len(self._zones)
        self.devices = len(self._zones)
        self.detail = "RAPL powercap " + ", ".join((z / "name").read_text().strip() + f" ({z.name})" for z in self._zones)

    @staticmethod
    def _raw(zone: Path) -> int:
        return int((zone / "energy_uj").read_text())

    def read(self) -> Reading:
        t = time.perf_counter()
        for k, zone in enumerate(self._zones):
            raw = self._raw(zone)
            # The counter wraps at max_energy_range_uj; read often enough that it wraps at most once.
            self._total[k] += raw - self._last[k] if raw >= self._last[k] else raw + self._ranges[k] - self._last[k]
            self._last[k] = raw
        return Reading(t, joules=tuple(uj / 1e6 for uj in self._total))

    def close(self) -> None:
        pass


class ModelledSource:
    """A per-chip power figure (watts, with its source) for the point's `chips` (tpubench's chips:
    a CPU point's vCPUs, a fraction of a Trainium chip for one logical core): one reading of the
    figure times the chips, or, where a duty-cycle reader is given (`duty()` -> one fraction per
    chip, a whole number of chips), one reading per chip of the figure times its duty cycle."""

    name, method = "model", MODELLED

    def __init__(self, chip_power_w: float, chips: float, source: str,
                 duty: Callable[[], Sequence[float]] | None = None):
        self._power, self._chips, self._duty = chip_power_w, chips, duty
        self.devices = max(1, round(chips)) if duty is not None else 1
        self.detail = (f"modelled: {chip_power_w:g} W per chip x {chips:g} chip(s) ({source})"
                       + (" x duty cycle (libtpu duty_cycle_pct)" if duty is not None else ", busy for the whole window"))

    def read(self) -> Reading:
        t = time.perf_counter()
        if self._duty is None:
            return Reading(t, watts=(self._power * self._chips,))
        return Reading(t, watts=tuple(self._power * d for d in self._duty()))

    def close(self) -> None:
        pass


def rapl_zones(root: Path = POWERCAP_ROOT) -> list[Path]:
    """The package zones (intel-rapl:N) and their DRAM subzones (intel-rapl:N:M named 'dram')
    whose counters this process can read."""
    zones = []
    for zone in sorted(root.glob("intel-rapl:*")):
        name = (zone / "name").read_text().strip() if (zone / "name").is_file() else ""
        top = zone.name.count(":") == 1
        if (top and name.startswith("package")) or (not top and name == "dram"):
            if os.access(zone / "energy_uj", os.R_OK):
                zones.append(zone)
    return zones


def tpu_duty_reader(chips: int, tpumonitoring=None) -> Callable[[], list[float]] | None:
    """Each TPU chip's duty cycle (0..1) from libtpu's monitoring library (`duty_cycle_pct`: one
    percentage per chip of this host, as strings), or None where libtpu does not offer it."""
    try:
        if tpumonitoring is None:
            from libtpu.sdk import tpumonitoring
        if "duty_cycle_pct" not in tpumonitoring.list_supported_metrics():
            return None
    except Exception:   # no libtpu, or one without the monitoring SDK
        return None

    def duty() -> list[float]:
        values = [float(v) / 100 for v in tpumonitoring.get_metric("duty_cycle_pct").data()]
        return values[:chips]

    return duty


class UnknownGpus(ValueError):
    """NVML cannot be told which GPUs the point runs on."""


def _nvml_indices(env) -> list[int] | None:
    """The NVML indices of the GPUs a CUDA point may use: CUDA_VISIBLE_DEVICES where it lists
    indices, else None (all of them, in order). NVML numbers GPUs in PCI bus order; CUDA does too
    with CUDA_DEVICE_ORDER=PCI_BUS_ID, and otherwise fastest first, the same order on a host of
    one GPU model, which is what a host that measures one chip type has."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return None
    try:
        return [int(v) for v in visible.split(",") if v.strip()]
    except ValueError:
        # UUIDs or MIG ids: reading GPU 0 instead could charge the point another GPU's power.
        raise UnknownGpus(f"CUDA_VISIBLE_DEVICES={visible!r} names GPUs by UUID or MIG id; list them "
                          "by index for energy to be read") from None


def find_source(device: str, *, chips: float = 1, chip_power_w: float | None = None,
                chip_power_source: str = "--chip-power-w", env=os.environ,
                powercap_root: Path = POWERCAP_ROOT, nvml=None, tpumonitoring=None) -> tuple[EnergySource | None, str]:
    """The source for a point on `device` (a torch device name or 'cpu'), or None and why there
    is none. A user's per-chip figure (`chip_power_w`) is used, labelled modelled, only where
    nothing measures; on a TPU it is scaled by each chip's duty cycle where libtpu reports it."""
    reasons = []
    if device == "cuda":
        try:
            if nvml is None:
                import pynvml as nvml   # nvidia-ml-py
            nvml.nvmlInit()
            indices = _nvml_indices(env)
            if indices is None:
                indices = list(range(nvml.nvmlDeviceGetCount()))
            try:
                return NvmlSource(nvml, indices[:max(1, round(chips))]), ""
            except Exception:
                nvml.nvmlShutdown()   # the library was initialised for a source that failed
                raise
        except ImportError:
            reasons.append("NVML not installed (pip install nvidia-ml-py)")
        except UnknownGpus as exc:
            nvml.nvmlShutdown()
            reasons.append(str(exc))
        except Exception as exc:   # the library is present but the driver is not answering
            reasons.append(f"NVML unavailable ({type(exc).__name__}: {exc})")
    elif device == "cpu":
        if not powercap_root.is_dir():
            reasons.append(f"no RAPL powercap ({powercap_root} does not exist on this host)")
        else:
            zones = rapl_zones(powercap_root)
            if zones:
                return RaplSource(zones), ""
            reasons.append(f"no readable RAPL package counter under {powercap_root}")
    elif device == "tpu":
        reasons.append("a TPU VM reports no power (libtpu has duty cycle, not watts): give --chip-power-w "
                       "to model it")
        if chip_power_w is not None:
            duty = tpu_duty_reader(max(1, round(chips)), tpumonitoring)
            return ModelledSource(chip_power_w, chips, chip_power_source, duty=duty), ""
    else:
        reasons.append(f"this version reads no power sensor for {device}")
    if chip_power_w is not None:
        return ModelledSource(chip_power_w, chips, chip_power_source), ""
    return None, "; ".join(reasons)
