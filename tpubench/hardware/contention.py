"""Is this host busy? What else competes with a measurement for the CPUs and the accelerator.

A point measured while other processes use the CPUs, or while a hypervisor steals them, runs slower
and varies more. tpubench still measures it (it is then noisy, never invalid: records/usable.py)
and says why: one line at the start of `run`, and `environment.contention` in every result.

What is read (psutil's readings of /proc on Linux; what the OS offers elsewhere):

- load: the 1-minute load average against the CPUs this process may run on (its affinity mask,
  environment.cpu_chips). The load counts runnable tasks, this one included, over the whole host,
  so it decides only where the usable CPUs are all the host's.
- steal: the share of the usable CPUs' time over the window that the hypervisor gave to other
  guests (the `steal` column of /proc/stat's per-CPU lines, proc(5)); 0 on bare metal.
- others: CPUs' worth of work done on the usable CPUs over the window by processes outside this
  process and its children (their busy time less this process tree's), and the processes using at
  least BUSY_SHARE of a CPU whose affinity overlaps this one's, by name.
- accelerator: processes other than this tree holding the point's GPUs (NVML's running compute and
  graphics processes), where nvidia-ml-py is installed and the device is CUDA.

A host is **busy** when the load exceeds the usable CPUs, steal is above STEAL_BUSY, others used
at least OTHERS_BUSY CPUs, or another process holds the device. The window of the sweep's reading is
the run's own start-up (loading the workload, probing the host): no time is added to wait for it
unless that start-up took less than MIN_WINDOW_S. Each point's own window is its measurement.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from tpubench.hardware.environment import cpu_chips

BUSY_SHARE = 0.05      # a process using a twentieth of a CPU or more is recorded (the busiest named)
OTHERS_BUSY = 0.5      # CPUs' worth of others' work that makes a host busy
STEAL_BUSY = 0.05      # 5% of CPU time stolen by the hypervisor
MIN_WINDOW_S = 0.25    # the shortest window the sweep's reading is taken over
NAMED = 5              # busy processes named in the one line


@dataclass
class Counters:
    """What the CPUs and this process tree had done by `wall_s` (seconds of CPU time)."""

    wall_s: float
    busy_s: float          # all CPUs: time not idle (steal excluded)
    steal_s: float
    total_s: float         # all CPUs: every column of /proc/stat's cpu line
    ours_s: float          # this process and its children, living and reaped
    per_process: dict[int, tuple[str, float, bool]] = field(default_factory=dict)   # pid -> (name, cpu s, competes)


@dataclass
class Reading:
    """Contention over one window; `as_dict` is what a result's environment records."""

    usable_cpus: int
    window_s: float
    host_cpus: int = 0
    load_1m: float | None = None
    steal_share: float | None = None
    others_cpus: float | None = None
    busy_processes: list[dict] = field(default_factory=list)      # {"pid", "name", "cpu_share"}
    device_processes: list[dict] = field(default_factory=list)    # {"pid", "name", "device", "memory_bytes"}

    def why_busy(self) -> list[str]:
        """What makes the host busy, in words; [] when it is quiet."""
        why = []
        # The load average is the whole host's: it speaks for the usable CPUs where they are all of them.
        if self.load_1m is not None and self.load_1m > self.usable_cpus >= self.host_cpus:
            why.append(f"load {self.load_1m:.1f} on {self.usable_cpus} usable CPU(s)")
        if self.others_cpus is not None and self.others_cpus >= OTHERS_BUSY:
            why.append(f"other processes used {self.others_cpus:.1f} CPU(s)" + _named(self.busy_processes))
        if self.steal_share is not None and self.steal_share > STEAL_BUSY:
            why.append(f"the hypervisor stole {self.steal_share:.0%} of CPU time")
        if self.device_processes:
            names = ", ".join(f"{p['name']} (pid {p['pid']})" for p in self.device_processes[:NAMED])
            why.append(f"{len(self.device_processes)} other process(es) on the accelerator: {names}")
        return why

    def as_dict(self) -> dict[str, Any]:
        return {"busy": bool(self.why_busy()), "why": self.why_busy(), "usable_cpus": self.usable_cpus,
                "host_cpus": self.host_cpus, "window_s": self.window_s, "load_1m": self.load_1m, "steal_share": self.steal_share,
                "others_cpus": self.others_cpus, "busy_processes": self.busy_processes,
                "device_processes": self.device_processes}


def line(reading: Reading) -> str:
    """The one line `run` starts with."""
    why = reading.why_busy()
    if why:
        return ("host: busy (" + "; ".join(why) + "): expect noisy points; each keeps sampling until its 95% CI "
                "is within measurement.target_ci or max_seconds runs out, and is marked noisy with its CV")
    load = f"load {reading.load_1m:.1f}" if reading.load_1m is not None else "load unknown"
    others = f"others used {reading.others_cpus:.1f} CPU(s)" if reading.others_cpus is not None else ""
    steal = f"steal {reading.steal_share:.0%}" if reading.steal_share is not None else ""
    return "host: quiet (" + ", ".join(x for x in (f"{load} on {reading.usable_cpus} usable CPU(s)", others, steal)
                                      if x) + ")"


def _named(processes: list[dict]) -> str:
    if not processes:
        return ""
    top = sorted(processes, key=lambda p: -p["cpu_share"])[:NAMED]
    return ": " + ", ".join(f"{p['name']} (pid {p['pid']}) {p['cpu_share']:.0%}" for p in top)


# ----------------------------------------------------------------------------- reading

def counters(psutil=None, *, with_processes: bool = False, exclude: set[int] = frozenset()) -> Counters:
    """The counters of the CPUs this process may run on, now; with `with_processes`, every other
    process's CPU seconds too. The processes in `exclude` (a torchrun world's other ranks) count as ours."""
    psutil = psutil or _psutil()
    me = psutil.Process()
    allowed = _affinity(me)
    per_cpu = psutil.cpu_times(percpu=True)
    mine = [t for i, t in enumerate(per_cpu) if allowed is None or i in allowed] or per_cpu
    total = sum(_total(t) for t in mine)
    idle = sum(t.idle + getattr(t, "iowait", 0.0) for t in mine)
    steal = sum(getattr(t, "steal", 0.0) for t in mine)
    tree = _tree(me) + _processes(psutil, set(exclude))
    ours = sum(_cpu_seconds(p, with_children=p is me) or 0.0 for p in tree)
    out = Counters(time.perf_counter(), total - idle - steal, steal, total, ours)
    if with_processes:
        skip = {p.pid for p in tree} | {0}
        for p in psutil.process_iter(["pid", "name"]):
            seconds = None if p.pid in skip else _cpu_seconds(p)
            if seconds is not None:
                out.per_process[p.pid] = (p.info.get("name") or f"pid {p.pid}", seconds, _competes(p, allowed))
    return out


def _total(t) -> float:
    """Every column of a /proc/stat cpu line but guest time, which `user` already holds."""
    return sum(getattr(t, name) for name in t._fields if name not in ("guest", "guest_nice"))


def read_window(before: Counters, after: Counters, *, usable_cpus: int | None = None, loadavg=None,
                device_processes: list[dict] | None = None) -> Reading:
    """The contention between two Counters (pure but for the load average, which is read now)."""
    wall = max(after.wall_s - before.wall_s, 1e-9)
    total = after.total_s - before.total_s
    reading = Reading(usable_cpus=usable_cpus or cpu_chips(), window_s=wall, host_cpus=os.cpu_count() or 0,
                      load_1m=_load(loadavg), device_processes=device_processes or [])
    if total > 0:
        reading.steal_share = max(0.0, (after.steal_s - before.steal_s) / total)
    reading.others_cpus = max(0.0, ((after.busy_s - before.busy_s) - (after.ours_s - before.ours_s)) / wall)
    for pid, (name, seconds, competes) in after.per_process.items():
        if pid in before.per_process and competes:
            share = (seconds - before.per_process[pid][1]) / wall
            if share >= BUSY_SHARE:
                reading.busy_processes.append({"pid": pid, "name": name, "cpu_share": round(share, 3)})
    return reading


class SweepReading:
    """The sweep's reading, over the run's start-up: `start()` at the top of a run, `finish(device)`
    before the first point (it waits out what is left of MIN_WINDOW_S)."""

    def __init__(self, exclude: set[int] = frozenset(), sleep: Callable[[float], None] = time.sleep, nvml=None):
        self.exclude, self.sleep, self.nvml = set(exclude), sleep, nvml
        self.before: Counters | None = None

    def start(self) -> "SweepReading":
        self.before = _safely(lambda: counters(with_processes=True, exclude=self.exclude))
        return self

    def finish(self, device: str) -> Reading | None:
        if self.before is None:
            return None
        left = MIN_WINDOW_S - (time.perf_counter() - self.before.wall_s)
        if left > 0:
            self.sleep(left)
        after = _safely(lambda: counters(with_processes=True, exclude=self.exclude))
        if after is None:
            return None
        return read_window(self.before, after, device_processes=device_processes(device, self.exclude, self.nvml))


class PointWindow:
    """Contention while one point ran: `with PointWindow() as w: ...`, then `w.figures()`."""

    def __init__(self, exclude: set[int] = frozenset()):
        self.exclude = set(exclude)
        self.before = self.after = None

    def __enter__(self) -> "PointWindow":
        self.before = _safely(lambda: counters(exclude=self.exclude))
        return self

    def __exit__(self, *exc) -> None:
        self.after = _safely(lambda: counters(exclude=self.exclude))

    def figures(self) -> dict[str, Any]:
        if self.before is None or self.after is None:
            return {}
        r = read_window(self.before, self.after)
        return {"busy": bool(r.why_busy()), "why": r.why_busy(), "window_s": r.window_s, "load_1m": r.load_1m,
                "steal_share": r.steal_share, "others_cpus": r.others_cpus}


def device_processes(device: str, exclude: set[int] = frozenset(), nvml=None, env=os.environ) -> list[dict]:
    """Processes other than this tree on the CUDA GPUs this process may use, by NVML; [] where NVML
    is absent or the device is not CUDA (a TPU, Trainium or CPU: nothing to read here)."""
    if device != "cuda":
        return []
    try:
        if nvml is None:
            import pynvml as nvml  # nvidia-ml-py
        nvml.nvmlInit()
    except Exception:   # not installed, or no driver answering: nothing known
        return []
    try:
        return _nvml_others(nvml, _visible(env), _ours(exclude))
    except Exception:
        return []
    finally:
        nvml.nvmlShutdown()


def _nvml_others(nvml, visible: list[int] | None, ours: set[int]) -> list[dict]:
    found = []
    for index in visible if visible is not None else range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        listed = list(nvml.nvmlDeviceGetComputeRunningProcesses(handle))
        listed += list(getattr(nvml, "nvmlDeviceGetGraphicsRunningProcesses", lambda h: [])(handle))
        for proc in listed:
            if proc.pid in ours or any(f["pid"] == proc.pid and f["device"] == index for f in found):
                continue
            memory = getattr(proc, "usedGpuMemory", None)
            found.append({"pid": proc.pid, "name": _name_of(proc.pid), "device": index,
                          "memory_bytes": memory if isinstance(memory, int) else None})
    return found


def _visible(env) -> list[int] | None:
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return None
    try:
        return [int(v) for v in visible.split(",") if v.strip()]
    except ValueError:   # UUIDs or MIG ids: every GPU is read (a process elsewhere is still named)
        return None


def _ours(exclude: set[int]) -> set[int]:
    try:
        return {p.pid for p in _tree(_psutil().Process())} | set(exclude)
    except Exception:
        return {os.getpid(), *exclude}


def _name_of(pid: int) -> str:
    try:
        return _psutil().Process(pid).name()
    except Exception:   # another container's process: NVML knows its pid, the OS here does not
        return f"pid {pid}"


def siblings() -> set[int]:
    """The other children of this process's parent: under torchrun, the world's other ranks."""
    try:
        me = _psutil().Process()
        return {p.pid for p in me.parent().children()} - {me.pid}
    except Exception:
        return set()


# ----------------------------------------------------------------------------- psutil helpers

def _psutil():
    import psutil

    return psutil


def _tree(me) -> list:
    try:
        return [me, *me.children(recursive=True)]
    except Exception:
        return [me]


def _processes(psutil, pids: set[int]) -> list:
    out = []
    for pid in pids:
        try:
            out.append(psutil.Process(pid))
        except Exception:
            continue
    return out


def _cpu_seconds(p, with_children: bool = False) -> float | None:
    try:
        t = p.cpu_times()
    except Exception:   # gone, or not ours to read
        return None
    seconds = t.user + t.system
    if with_children:   # reaped children (a world's ranks that finished) count as ours
        seconds += getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
    return seconds


def _affinity(p) -> set[int] | None:
    try:
        return set(p.cpu_affinity())
    except Exception:   # macOS has none: every process competes
        return None


def _competes(p, allowed: set[int] | None) -> bool:
    """Whether process `p` may run on a CPU this process may run on."""
    if allowed is None:
        return True
    theirs = _affinity(p)
    return theirs is None or bool(theirs & allowed)


def _load(loadavg=None) -> float | None:
    try:
        return float((loadavg or os.getloadavg)()[0])
    except (AttributeError, OSError):
        return None


def _safely(read: Callable[[], Counters]) -> Counters | None:
    """A reading, or None where the OS lets nothing be read (a sandbox without /proc)."""
    try:
        return read()
    except Exception:
        return None
