"""Energy over exactly a point's timed window (docs/measurement.md#energy).

A sampler thread reads the point's energy source every `interval_s` from before the timed loop
starts until after it ends. The window [t0, t1] is the timed loop's, on the same clock. Per
device, energy is

- the counter's increase over the window where the source has a counter (interpolated linearly
  at both edges between the readings that bracket them), cross-checked against the integral of the
  power samples where it has both (more than `COUNTER_TOLERANCE` apart: `counter_mismatch`);
- else the trapezoid integral of the power samples, interpolated at both edges.

The figure is invalid, with a reason code, when two readings inside the window are more than
`GAP_LIMIT_S` apart (`sampling_gap_exceeded`), when no reading precedes t0 or follows t1
(`window_not_bracketed`), or when a reading does not cover the expected devices
(`device_count_mismatch`). An idle baseline (mean power per device over a short quiet spell before
the point) is reported apart, with the energy above it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from tpubench.hardware.energy_sources import MEASURED, EnergySource, Reading, find_source

GAP_LIMIT_S = 3.0
COUNTER_TOLERANCE = 0.05
DEFAULT_INTERVAL_S = 0.1
IDLE_S = 1.0

GAP = "sampling_gap_exceeded"
UNBRACKETED = "window_not_bracketed"
DEVICES = "device_count_mismatch"
COUNTER = "counter_mismatch"
NO_SOURCE = "no_source"
READ_FAILED = "source_read_failed"


class WindowProblem(ValueError):
    def __init__(self, code: str, detail: str):
        super().__init__(f"{code}: {detail}")
        self.code, self.detail = code, detail


def _bracket(times: np.ndarray, t0: float, t1: float) -> None:
    if times.size == 0 or times[0] > t0 or times[-1] < t1:
        first = f"{times[0] - t0:+.3f}" if times.size else "none"
        last = f"{times[-1] - t1:+.3f}" if times.size else "none"
        raise WindowProblem(UNBRACKETED, f"readings from {first} s of the window's start to {last} s of its end")
    inside = times[(times >= t0) & (times <= t1)]
    edges = np.concatenate([[times[times <= t0][-1]], inside, [times[times >= t1][0]]])
    gaps = np.diff(edges)
    if gaps.size and gaps.max() > GAP_LIMIT_S:
        raise WindowProblem(GAP, f"{gaps.max():.2f} s between readings (limit {GAP_LIMIT_S:g} s)")


def counter_delta(times: Sequence[float], joules: Sequence[float], t0: float, t1: float) -> float:
    """A cumulative counter's increase over [t0, t1], interpolated linearly at both edges."""
    t, e = np.asarray(times, dtype=float), np.asarray(joules, dtype=float)
    _bracket(t, t0, t1)
    return float(np.interp(t1, t, e) - np.interp(t0, t, e))


def integrate_power(times: Sequence[float], watts: Sequence[float], t0: float, t1: float) -> float:
    """The trapezoid integral of power samples over [t0, t1], with the power interpolated linearly
    at both edges (samples outside the window count only through that interpolation)."""
    t, p = np.asarray(times, dtype=float), np.asarray(watts, dtype=float)
    _bracket(t, t0, t1)
    inside = (t > t0) & (t < t1)
    ts = np.concatenate([[t0], t[inside], [t1]])
    ps = np.concatenate([[np.interp(t0, t, p)], p[inside], [np.interp(t1, t, p)]])
    return float(np.sum((ps[1:] + ps[:-1]) / 2 * np.diff(ts)))


@dataclass
class WindowEnergy:
    """What a point's energy figure is and how it was made (a result's `energy`)."""

    source: str
    method: str
    detail: str
    devices: int
    window_s: float = 0.0
    energy_j: float | None = None
    per_device_j: list[float] = field(default_factory=list)
    idle_power_w: list[float] | None = None
    energy_above_idle_j: float | None = None
    valid: bool = True
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # How the readings were taken: the sampling interval, how many readings the sampling took, and
    # the sampler thread's own CPU seconds over it (what metering cost the host).
    interval_s: float | None = None
    readings: int = 0
    sampler_cpu_s: float | None = None

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def window_energy(readings: Sequence[Reading], t0: float, t1: float, source: EnergySource,
                  idle_power_w: Sequence[float] | None = None) -> WindowEnergy:
    """The energy of every device over [t0, t1] from a source's readings, by the rules above."""
    out = WindowEnergy(source.name, source.method, source.detail, source.devices, window_s=t1 - t0,
                       idle_power_w=list(idle_power_w) if idle_power_w is not None else None)
    wrong = [r for r in readings if len(r.watts or r.joules or ()) != source.devices]
    if wrong:
        out.valid, out.reasons = False, [DEVICES]
        out.notes.append(f"a reading covered {len(wrong[0].watts or wrong[0].joules or ())} devices, "
                         f"expected {source.devices}")
        return out
    times = [r.t for r in readings]
    try:
        for d in range(source.devices):
            watts = [r.watts[d] for r in readings] if readings and readings[0].watts is not None else None
            joules = [r.joules[d] for r in readings] if readings and readings[0].joules is not None else None
            if joules is not None:
                energy = counter_delta(times, joules, t0, t1)
                if watts is not None:
                    integral = integrate_power(times, watts, t0, t1)
                    if energy > 0 and abs(integral - energy) / energy > COUNTER_TOLERANCE:
                        out.valid = False
                        out.reasons.append(COUNTER)
                        out.notes.append(f"device {d}: counter {energy:.3f} J, power integral {integral:.3f} J "
                                         f"(over {COUNTER_TOLERANCE:.0%} apart)")
            elif watts is not None:
                energy = integrate_power(times, watts, t0, t1)
            else:
                raise WindowProblem(UNBRACKETED, "no readings")
            if not np.isfinite(energy):
                raise WindowProblem(READ_FAILED, f"device {d}: a reading inside the window was missing")
            out.per_device_j.append(energy)
    except WindowProblem as problem:
        out.valid = False
        out.reasons.append(problem.code)
        out.notes.append(problem.detail)
        out.per_device_j = []
        return out
    out.energy_j = float(sum(out.per_device_j))
    if idle_power_w is not None:
        out.energy_above_idle_j = out.energy_j - float(sum(idle_power_w)) * out.window_s
    return out


class Sampler:
    """Reads a source every `interval_s` on a thread of its own; `readings` holds them all. A read
    that fails stops the sampling and is kept in `error`: energy is never why a point fails."""

    def __init__(self, source: EnergySource, interval_s: float = DEFAULT_INTERVAL_S):
        self.source, self.interval_s = source, interval_s
        self.readings: list[Reading] = []
        self.error: str | None = None
        self.cpu_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tpubench-energy", daemon=True)

    def _read(self) -> bool:
        try:
            self.readings.append(self.source.read())
            return True
        except Exception as exc:   # a driver gone away, a counter that cannot be read
            self.error = self.error or f"{type(exc).__name__}: {exc}"
            return False

    def _run(self) -> None:
        start = time.thread_time()
        try:
            while not self._stop.wait(self.interval_s):
                if not self._read():
                    return
        finally:
            self.cpu_s = time.thread_time() - start   # the sampler's own cost (benchmarks/energy_overhead.py)

    def __enter__(self) -> "Sampler":
        if self._read():
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self.error is None:
            self._read()   # the reading after the window's end


def idle_power(source: EnergySource, seconds: float = IDLE_S, interval_s: float = DEFAULT_INTERVAL_S) -> list[float] | None:
    """Mean power per device over `seconds` with nothing running (None when it cannot be read)."""
    with Sampler(source, interval_s) as sampler:
        time.sleep(seconds)
    readings = sampler.readings
    if sampler.error is not None:
        return None
    try:
        energy = window_energy(readings, readings[0].t, readings[-1].t, source)
    except IndexError:
        return None
    if not energy.valid or energy.window_s <= 0:
        return None
    return [e / energy.window_s for e in energy.per_device_j]


class EnergyMeter:
    """A point's energy: `with meter.window():` around its timed loop; `meter.result` after it.
    The sampler runs a little beyond both ends of the window so that readings bracket it."""

    def __init__(self, source: EnergySource, interval_s: float = DEFAULT_INTERVAL_S, idle_s: float = IDLE_S,
                 idle: list[float] | None = None):
        self.source, self.interval_s = source, interval_s
        # A model has no idle to measure: its idle is the model's own floor, where it has one (a
        # TPU's: hardware/energy_sources.py). A world's rank 0 is given the idle its parent measured
        # before the world started (nothing was running then).
        measure_idle = idle is None and idle_s > 0 and source.method == MEASURED
        modelled_idle = getattr(source, "idle_power_w", None) if source.method != MEASURED else None
        self.idle = idle_power(source, idle_s, interval_s) if measure_idle else idle if idle is not None else modelled_idle
        self.result: WindowEnergy | None = None
        self._sampler: Sampler | None = None

    @contextlib.contextmanager
    def window(self):
        with self.sampling():
            t0 = time.perf_counter()
            try:
                yield
            finally:
                t1 = time.perf_counter()   # the sampler's __exit__ reads once more, after t1
        self.measure(t0, t1)

    @contextlib.contextmanager
    def sampling(self):
        """Readings over a stretch that holds a window known only afterwards (a serve point's
        first send to last reply, inside its warm-up and drain); then `measure(t0, t1)`."""
        with Sampler(self.source, self.interval_s) as sampler:
            yield
        self._sampler = sampler

    def measure(self, t0: float, t1: float) -> WindowEnergy:
        """`result`: the energy over [t0, t1] (time.perf_counter seconds) from the last sampling."""
        sampler = self._sampler
        if sampler.error is not None:
            self.result = WindowEnergy(self.source.name, self.source.method, self.source.detail, self.source.devices,
                                       window_s=t1 - t0, valid=False, reasons=[READ_FAILED], notes=[sampler.error])
        else:
            self.result = window_energy(sampler.readings, t0, t1, self.source, self.idle)
        self.result.interval_s, self.result.readings = self.interval_s, len(sampler.readings)
        self.result.sampler_cpu_s = sampler.cpu_s
        return self.result


class EnergyPlan:
    """A sweep's energy source, found once, and one meter for all its points (the idle baseline is
    measured once, when the first point asks). `why_not` says why there is none."""

    def __init__(self, source: EnergySource | None, why_not: str = "", interval_s: float = DEFAULT_INTERVAL_S,
                 idle_s: float = IDLE_S, settings: dict | None = None):
        self.source, self.why_not = source, why_not
        self.interval_s, self.idle_s = interval_s, idle_s
        # How the source was found (find_source's device and chip_power_w), for a world's rank 0 to
        # open the same kind of source over the world's chips.
        self.settings = settings
        self._meter: EnergyMeter | None = None

    def meter(self) -> EnergyMeter | None:
        if self.source is None:
            return None
        if self._meter is None:
            self._meter = EnergyMeter(self.source, self.interval_s, self.idle_s)
        return self._meter

    def close(self) -> None:
        if self.source is not None:
            self.source.close()

    def for_world(self) -> dict | None:
        """What a world of tpubench's own needs to meter its chips on its rank 0 (JSON), or None
        where this sweep meters nothing. The idle baseline is measured here first, in this process,
        while nothing runs."""
        meter = self.meter()
        if meter is None or self.settings is None:
            return None
        return {**self.settings, "interval_s": self.interval_s, "idle_power_w": meter.idle}


def world_meter(spec: dict, chips: float) -> tuple[EnergyPlan, EnergyMeter | None]:
    """Rank 0's energy plan and meter for a world's `chips`, from EnergyPlan.for_world's `spec`:
    the same kind of source the parent found (NVML: the first `chips` GPUs it may use; a model:
    the figure times the world's chips). The caller closes the plan. The parent's idle baseline is
    kept where it covers the same devices (a parent that metered fewer chips has none to give)."""
    source, why = find_source(spec["device"], chips=chips, chip_power_w=spec.get("chip_power_w"))
    plan = EnergyPlan(source, why, interval_s=spec["interval_s"], idle_s=0)
    if source is None:
        return plan, None
    idle = spec.get("idle_power_w")
    plan._meter = EnergyMeter(source, spec["interval_s"], idle_s=0,
                              idle=idle if idle is not None and len(idle) == source.devices else None)
    return plan, plan._meter


def energy_metrics(energy: WindowEnergy | None, tokens: float, token_name: str = "token") -> dict:
    """A result's energy metrics from its window: joules, the window, mean power, and joules per
    token of the window (`tokens` processed in it: input and output, or training tokens)."""
    if energy is None or energy.energy_j is None or not energy.valid:
        return {}   # an invalid figure stays in the result's `energy`, with its reasons, and nowhere else
    out = {"energy_j": energy.energy_j, "energy_window_s": energy.window_s,
           "power_mean_w": energy.energy_j / energy.window_s if energy.window_s > 0 else None,
           f"joules_per_{token_name}": energy.energy_j / tokens if tokens else None}
    if energy.energy_above_idle_j is not None:
        out["energy_above_idle_j"] = energy.energy_above_idle_j
    return out


def with_energy_ci(metrics: dict, name: str, time: str) -> dict:
    """`name`'s 95% CI from the CI of the time each unit takes (`time`: e2e or step): energy per
    token is mean power times time per token, and the window gives one power figure, so the
    interval is the time's; the power's own variation is not in it (docs/measurement.md#energy)."""
    value, mean = metrics.get(name), metrics.get(f"{time}_mean_s")
    low, high = metrics.get(f"{time}_ci95_low_s"), metrics.get(f"{time}_ci95_high_s")
    if None in (value, mean, low, high) or not mean:
        return {}
    return {f"{name}_ci95_low": value * low / mean, f"{name}_ci95_high": value * high / mean}
