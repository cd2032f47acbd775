"""Where a point's energy comes from: one small interface over the sources a host may have, each
saying whether it measures or models and what it reads (docs/measurement.md#energy).

- NVML (NVIDIA GPUs, `nvidia-ml-py`): the total-energy counter (millijoules since the driver
  loaded), the most exact reading there is, and the instantaneous power for the curve.
- AMD SMI (AMD Instinct GPUs, the `amdsmi` Python library that ships with ROCm): the energy
  accumulator (ticks of `counter_resolution` microjoules; not offered to a VM guest) and the socket
  power, the same two readings as NVML's.
- Linux RAPL powercap (CPU packages and their DRAM, `/sys/class/powercap/intel-rapl:*`): energy
  counters in microjoules that wrap at `max_energy_range_uj`.
- A model, labelled `modelled` wherever it appears: a per-chip power figure with its source (the
  user's `--chip-power-w`), times the chip's duty cycle where a reader for it is given (a TPU VM
  reports duty cycle, not power; neuron-monitor reports each NeuronCore's utilisation, not power),
  else the figure itself. A chip draws power when idle too: on a TPU the figure is read as the
  chip's maximum and an idle floor of TPU_IDLE_FRACTION of it is drawn at 0% duty cycle,
  power = P * (f + (1 - f) * duty). f = 90 W / 192 W, Google's published TPU v4 idle and maximum
  chip power (the only TPU power figures Google has published; 170 W mean), an assumption for
  any other TPU generation, stated in every modelled figure's `detail`.

A host without any of them has no source: that is a note on the sweep, never an error. Readings
are stamped with time.perf_counter, the clock the timed loops use.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol, Sequence

MEASURED = "measured"
MODELLED = "modelled"
# Idle over maximum chip power, from Google's TPU v4 figures: 90 W idle, 170 W mean, 192 W max
# (Jouppi et al., "TPU v4: An Optically Reconfigurable Supercomputer for Machine Learning with
# Hardware Support for Embeddings", ISCA 2023). Applied to every TPU generation as an assumption.
TPU_IDLE_W, TPU_MAX_W = 90.0, 192.0
TPU_IDLE_FRACTION = TPU_IDLE_W / TPU_MAX_W
TPU_IDLE_SOURCE = "idle floor 90/192 of it, Google's TPU v4 idle/max chip power"
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


class AmdSmiSource:
    """AMD GPUs through AMD SMI: socket power in watts and the energy accumulator. Key names follow
    the amdsmi Python interface (ROCm/amdsmi py-interface/amdsmi_interface.py): the accumulator is
    'energy_accumulator' in current releases and was 'power' in older ones; the power is
    'socket_power' from ROCm 7, 'current_socket_power' on MI300 and later, else
    'average_socket_power', any of which may be 'N/A'."""

    name, method = "amdsmi", MEASURED

    def __init__(self, amdsmi, indices: Sequence[int] | None):
        self._smi = amdsmi
        handles = amdsmi.amdsmi_get_processor_handles()
        self._handles = [handles[i] for i in indices] if indices is not None else list(handles)
        if not self._handles:
            raise ValueError("AMD SMI lists no GPU")
        self.devices = len(self._handles)
        self._counter = all(self._energy_of(h) is not None for h in self._handles)
        what = "energy accumulator and power" if self._counter else "power"
        shown = indices if indices is not None else range(self.devices)
        self.detail = f"AMD SMI {what}, GPU {','.join(map(str, shown))}"

    def _energy_of(self, handle):
        try:
            count = self._smi.amdsmi_get_energy_count(handle)
        except Exception:   # not supported on a VM guest or on older parts: power samples only
            return None
        ticks = count.get("energy_accumulator", count.get("power"))
        if not isinstance(ticks, (int, float)) or not isinstance(count.get("counter_resolution"), (int, float)):
            return None
        return ticks * count["counter_resolution"] / 1e6

    def _watts_of(self, handle) -> float:
        info = self._smi.amdsmi_get_power_info(handle)
        for key in ("socket_power", "current_socket_power", "average_socket_power"):
            if isinstance(info.get(key), (int, float)):
                return float(info[key])
        return math.nan

    def read(self) -> Reading:
        t = time.perf_counter()
        watts = tuple(self._watts_of(h) for h in self._handles)
        joules = tuple(self._energy_of(h) for h in self._handles) if self._counter else None
        return Reading(t, watts=None if any(math.isnan(w) for w in watts) else watts, joules=joules)

    def close(self) -> None:
        self._smi.amdsmi_shut_down()


class RaplSource:
    """CPU packages (and their DRAM subzones) through the powercap interface: counters only."""

    name, method = "rapl", MEASURED

    def __init__(self, zones: Sequence[Path]):
        self._zones = list(zones)
        self._ranges = [int((z / "max_energy_range_uj").read_text()) for z in self._zones]
        # Counters are read through descriptors kept open: one pread a reading instead of an open,
        # reads and a close, which halves the sampler's CPU per reading (benchmarks/energy_overhead.py).
        self._files = [os.open(z / "energy_uj", os.O_RDONLY) for z in self._zones]
        self._last = [self._raw(f) for f in self._files]
        self._total = [0] * len(self._zones)
        self.devices = len(self._zones)
        self.detail = "RAPL powercap " + ", ".join((z / "name").read_text().strip() + f" ({z.name})" for z in self._zones)

    @staticmethod
    def _raw(fd: int) -> int:
        return int(os.pread(fd, 32, 0))

    def read(self) -> Reading:
        t = time.perf_counter()
        for k, fd in enumerate(self._files):
            raw = self._raw(fd)
            # The counter wraps at max_energy_range_uj; read often enough that it wraps at most once.
            self._total[k] += raw - self._last[k] if raw >= self._last[k] else raw + self._ranges[k] - self._last[k]
            self._last[k] = raw
        return Reading(t, joules=tuple(uj / 1e6 for uj in self._total))

    def close(self) -> None:
        for fd in self._files:
            os.close(fd)
        self._files = []


class ModelledSource:
    """A per-chip power figure (watts, with its source) for the point's `chips` (tpubench's chips:
    a CPU point's vCPUs, a fraction of a Trainium chip for one logical core): one reading of the
    figure times the chips, or, where a duty-cycle reader is given (`duty()` -> one fraction per
    chip, a whole number of chips), one reading per chip of the figure times its duty cycle."""

    name, method = "model", MODELLED

    def __init__(self, chip_power_w: float, chips: float, source: str,
                 duty: Callable[[], Sequence[float]] | None = None, idle_fraction: float | None = None,
                 idle_source: str = ""):
        self._power, self._chips, self._duty = chip_power_w, chips, duty
        # With an idle floor f the figure is the chip's maximum: P * (f + (1 - f) * duty).
        self._floor = idle_fraction or 0.0
        self.devices = max(1, round(chips)) if duty is not None else 1
        self.detail = (f"modelled: {chip_power_w:g} W per chip x {chips:g} chip(s) ({source})"
                       + (f" x {getattr(duty, 'what', 'duty cycle (libtpu duty_cycle_pct)')}" if duty is not None
                          else ", busy for the whole window")
                       + (f"; {idle_source}" if idle_fraction is not None else ", no idle floor known"))
        # What the devices draw doing nothing (the meter's idle baseline; a budget's idle floor), or
        # None where no idle figure is known for this kind of chip.
        if idle_fraction is None:
            self.idle_power_w = None
        elif duty is not None:
            self.idle_power_w = [chip_power_w * idle_fraction] * self.devices
        else:
            self.idle_power_w = [chip_power_w * idle_fraction * chips]

    def read(self) -> Reading:
        t = time.perf_counter()
        if self._duty is None:
            return Reading(t, watts=(self._power * self._chips,))
        f = self._floor
        return Reading(t, watts=tuple(self._power * (f + (1 - f) * d) for d in self._duty()))

    def close(self) -> None:
        close = getattr(self._duty, "close", None)
        if close is not None:
            close()


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


class NeuronUtilisation:
    """Each Trainium/Inferentia chip's busy share (0..1), from `neuron-monitor`'s NeuronCore
    utilisation: neuron-monitor reports no power (its metric groups are NeuronCore counters, memory,
    vCPU, execution stats and ECC counters: AWS Neuron docs, "Neuron Monitor User Guide"), so a
    Neuron point is modelled like a TPU's. The monitor is a child process streaming one JSON report
    per period; it watches this process's runtime only (its tag: NEURON_PROCESS_TAG, else the PID)
    and is stopped by its process group on close. A chip's share is the mean of its NeuronCores'
    `neuroncore_utilization` percentages (`neuroncore_per_device_count` cores a chip); a chip whose
    cores do not appear in a report was idle for that period."""

    what = "utilisation (neuron-monitor neuroncore_utilization)"

    def __init__(self, chips: int, command: Sequence[str] | None = None, period_s: float = 1.0, env=os.environ):
        self._chips = chips
        self._latest = [0.0] * chips
        self._lock = threading.Lock()
        tag = env.get("NEURON_PROCESS_TAG") or str(os.getpid())
        config = {"period": f"{period_s:g}s",
                  "neuron_runtimes": [{"tag_filter": f"^{re.escape(tag)}$", "metrics": [{"type": "neuroncore_counters"}]}]}
        self._config = tempfile.NamedTemporaryFile("w", suffix=".json", prefix="tpubench-neuron-monitor-", delete=False)
        json.dump(config, self._config)
        self._config.close()
        argv = list(command or ["neuron-monitor"]) + ["-c", self._config.name]
        self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                      start_new_session=True)
        self._reader = threading.Thread(target=self._follow, name="neuron-monitor", daemon=True)
        self._reader.start()

    def _follow(self) -> None:
        for line in self._proc.stdout:
            try:
                shares = neuron_chip_shares(json.loads(line), self._chips)
            except (ValueError, TypeError, AttributeError):
                continue   # a partial or unexpected report: keep the last good one
            with self._lock:
                self._latest = shares

    def __call__(self) -> list[float]:
        with self._lock:
            return list(self._latest)

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGTERM)
                self._proc.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self._proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self._proc.wait()
        self._proc.stdout.close()
        Path(self._config.name).unlink(missing_ok=True)


def neuron_chip_shares(report: dict, chips: int) -> list[float]:
    """Per-chip busy shares (0..1) from one neuron-monitor JSON report (see NeuronUtilisation)."""
    per_chip = int(report.get("neuron_hardware_info", {}).get("neuroncore_per_device_count") or 1)
    busy = [0.0] * chips
    for runtime in report.get("neuron_runtime_data") or []:
        cores = (((runtime.get("report") or {}).get("neuroncore_counters") or {}).get("neuroncores_in_use") or {})
        for index, data in cores.items():
            chip = int(index) // per_chip
            if chip < chips:
                busy[chip] += float(data["neuroncore_utilization"]) / 100
    # Cores absent from the report were idle: the chip's share is over all its cores.
    return [min(1.0, b / per_chip) for b in busy]


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


def _amd_indices(env) -> list[int] | None:
    """The AMD SMI indices of the GPUs a ROCm point may use: the first of HIP_VISIBLE_DEVICES,
    ROCR_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES (ROCm honours all three) that lists indices."""
    for name in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        visible = env.get(name)
        if visible is not None:
            try:
                return [int(v) for v in visible.split(",") if v.strip()]
            except ValueError:
                raise UnknownGpus(f"{name}={visible!r} names GPUs by UUID; list them by index for energy "
                                  "to be read") from None
    return None


def _amdsmi_source(chips: float, env, amdsmi=None) -> tuple[EnergySource | None, str]:
    try:
        if amdsmi is None:
            import amdsmi
        amdsmi.amdsmi_init()
    except ImportError:
        return None, "no AMD SMI either (the amdsmi library ships with ROCm)"
    except Exception as exc:
        return None, f"AMD SMI unavailable ({type(exc).__name__}: {exc})"
    try:
        indices = _amd_indices(env)
        wanted = max(1, round(chips))
        return AmdSmiSource(amdsmi, indices[:wanted] if indices is not None else list(range(wanted))), ""
    except Exception as exc:
        amdsmi.amdsmi_shut_down()   # initialised for a source that failed
        return None, f"AMD SMI unavailable ({type(exc).__name__}: {exc})"


def find_source(device: str, *, chips: float = 1, chip_power_w: float | None = None,
                chip_power_source: str = "--chip-power-w", env=os.environ,
                powercap_root: Path = POWERCAP_ROOT, nvml=None, amdsmi=None, tpumonitoring=None,
                neuron_monitor: str | None = None) -> tuple[EnergySource | None, str]:
    """The source for a point on `device` (a torch device name or 'cpu'), or None and why there
    is none. A user's per-chip figure (`chip_power_w`) is used, labelled modelled, only where
    nothing measures; on a TPU it is scaled by each chip's duty cycle where libtpu reports it, on
    Trainium by each chip's utilisation where neuron-monitor is on the PATH."""
    reasons = []
    if device == "cuda":
        try:
            if nvml is None:
                import pynvml as nvml  # nvidia-ml-py
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
        # torch names a ROCm GPU "cuda" too: AMD SMI is its sensor.
        source, why = _amdsmi_source(chips, env, amdsmi)
        if source is not None:
            return source, ""
        reasons.append(why)
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
            return ModelledSource(chip_power_w, chips, chip_power_source, duty=duty,
                                  idle_fraction=TPU_IDLE_FRACTION, idle_source=TPU_IDLE_SOURCE), ""
    elif device == "neuron":
        reasons.append("neuron-monitor reports NeuronCore utilisation, not power: give --chip-power-w to "
                       "model it")
        if chip_power_w is not None:
            monitor = shutil.which("neuron-monitor") if neuron_monitor is None else neuron_monitor
            duty = NeuronUtilisation(max(1, round(chips)), command=[monitor], env=env) if monitor else None
            return ModelledSource(chip_power_w, chips, chip_power_source, duty=duty), ""
    else:
        reasons.append(f"this version reads no power sensor for {device}")
    if chip_power_w is not None:
        return ModelledSource(chip_power_w, chips, chip_power_source), ""
    return None, "; ".join(reasons)
