"""A busy host, detected and recorded (hardware/contention.py): hand-built counters, a scripted
psutil and a scripted NVML, so every figure is exact; then `run` saying it in its first line."""

from __future__ import annotations

from collections import namedtuple
from types import SimpleNamespace

import pytest

from tpubench.hardware import contention
from tpubench.hardware.contention import Counters, Reading, read_window

CpuTimes = namedtuple("CpuTimes", "user nice system idle iowait irq softirq steal guest guest_nice")
ProcTimes = namedtuple("ProcTimes", "user system children_user children_system")


def cpu(busy=0.0, idle=0.0, steal=0.0):
    return CpuTimes(busy, 0.0, 0.0, idle, 0.0, 0.0, 0.0, steal, 0.0, 0.0)


def test_two_hogs_on_two_cpus_make_a_busy_host():
    # Over 2 s on 2 CPUs: 3.9 CPU-seconds busy, 0.1 of them this process's: others did 3.8 s = 1.9 CPUs;
    # two other processes used 0.99 and 0.95 of a CPU, a third 0.03 (under BUSY_SHARE: not named).
    before = Counters(wall_s=10.0, busy_s=100.0, steal_s=1.0, total_s=500.0, ours_s=5.0,
                      per_process={11: ("python", 1.0, True), 12: ("python", 2.0, True), 13: ("sshd", 0.0, True),
                                   14: ("pinned", 0.0, False)})
    after = Counters(wall_s=12.0, busy_s=103.9, steal_s=1.0, total_s=504.0, ours_s=5.1,
                     per_process={11: ("python", 2.98, True), 12: ("python", 3.9, True), 13: ("sshd", 0.06, True),
                                  14: ("pinned", 2.0, False)})
    r = read_window(before, after, usable_cpus=2, loadavg=lambda: (4.1, 3.0, 2.0))
    assert r.others_cpus == pytest.approx(1.9) and r.steal_share == 0.0 and r.window_s == pytest.approx(2.0)
    # The process pinned to other CPUs does not compete for ours and is not named.
    assert [(p["pid"], p["cpu_share"]) for p in r.busy_processes] == [(11, 0.99), (12, 0.95)]
    r.host_cpus = 2
    assert r.why_busy() == ["load 4.1 on 2 usable CPU(s)",
                            "other processes used 1.9 CPU(s): python (pid 11) 99%, python (pid 12) 95%"]
    text = contention.line(r)
    assert text.startswith("host: busy (load 4.1 on 2 usable CPU(s); other processes used 1.9 CPU(s)")
    assert "marked noisy with its CV" in text
    recorded = r.as_dict()
    assert recorded["busy"] is True and recorded["others_cpus"] == pytest.approx(1.9) and recorded["load_1m"] == 4.1


def test_a_quiet_host_steal_and_a_big_hosts_load():
    before = Counters(0.0, 0.0, 0.0, 0.0, 0.0)
    quiet = read_window(before, Counters(1.0, 1.0, 0.0, 2.0, 0.95), usable_cpus=2, loadavg=lambda: (0.3, 0, 0))
    quiet.host_cpus = 2
    assert quiet.why_busy() == [] and quiet.others_cpus == pytest.approx(0.05)
    assert contention.line(quiet) == "host: quiet (load 0.3 on 2 usable CPU(s), others used 0.1 CPU(s), steal 0%)"
    # 12% of the usable CPUs' time stolen by the hypervisor
    stolen = read_window(before, Counters(1.0, 1.0, 0.24, 2.0, 1.0), usable_cpus=2, loadavg=lambda: (0.5, 0, 0))
    stolen.host_cpus = 2
    assert stolen.why_busy() == ["the hypervisor stole 12% of CPU time"]
    # On a 64-CPU host where this process may use 2, the host's load says nothing about those 2.
    big = Reading(usable_cpus=2, window_s=1.0, host_cpus=64, load_1m=30.0, others_cpus=0.0, steal_share=0.0)
    assert big.why_busy() == []


class FakeProcess:
    def __init__(self, pid, name, seconds, affinity=(0, 1), children=()):
        self.pid, self.info, self.seconds, self.affinity, self.kids = pid, {"pid": pid, "name": name}, seconds, affinity, children

    def cpu_times(self):
        return ProcTimes(self.seconds, 0.0, 0.5 if self.pid == 1 else 0.0, 0.0)

    def cpu_affinity(self):
        return list(self.affinity)

    def children(self, recursive=False):
        return list(self.kids)


class FakePsutil:
    """Two CPUs (this process may use CPU 1 only) and four processes: this one (pid 1) with a child
    (pid 2), a hog on CPU 1 (pid 3) and a hog pinned to CPU 0 (pid 4)."""

    def __init__(self, t):
        child = FakeProcess(2, "rank", 0.4 * t)
        self.me = FakeProcess(1, "tpubench", 0.5 * t, affinity=(1,), children=[child])
        self.others = [FakeProcess(3, "hog", 10 + 0.9 * t, affinity=(0, 1)), FakeProcess(4, "pinned", 1.0 * t, (0,))]
        self.t = t

    def cpu_times(self, percpu=False):
        assert percpu
        return [cpu(busy=10.0 * self.t, idle=0.0), cpu(busy=1.9 * self.t + 5, idle=0.1 * self.t, steal=0.0)]

    def Process(self, pid=None):
        return self.me

    def process_iter(self, attrs):
        return [self.me, *self.me.kids, *self.others]


def test_counters_read_the_usable_cpus_and_name_competing_processes(monkeypatch):
    monkeypatch.setattr(contention.time, "perf_counter", lambda: 0.0)
    before = contention.counters(FakePsutil(0.0), with_processes=True)
    monkeypatch.setattr(contention.time, "perf_counter", lambda: 1.0)
    after = contention.counters(FakePsutil(1.0), with_processes=True)
    # CPU 1 only: 1.9 s busy of 2.0; ours = 0.5 (this process) + 0.4 (its child; reaped children: no change)
    assert (after.busy_s - before.busy_s, after.total_s - before.total_s) == (pytest.approx(1.9), pytest.approx(2.0))
    assert after.ours_s - before.ours_s == pytest.approx(0.9)
    assert set(after.per_process) == {3, 4} and after.per_process[4][2] is False
    r = read_window(before, after, usable_cpus=1, loadavg=lambda: (1.0, 0, 0))
    assert r.others_cpus == pytest.approx(1.0)
    assert [p["name"] for p in r.busy_processes] == ["hog"] and r.busy_processes[0]["cpu_share"] == 0.9


class FakeNvml:
    def __init__(self, procs):
        self.procs, self.shut = procs, 0

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        self.shut += 1

    def nvmlDeviceGetCount(self):
        return len(self.procs)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [SimpleNamespace(pid=pid, usedGpuMemory=mem) for pid, mem in self.procs[handle]]


def test_other_processes_on_the_gpu_are_named_by_nvml():
    ours = contention._ours(set())
    me = next(iter(ours))
    nvml = FakeNvml([[(me, 1 << 30), (987654321, 2 << 30)], [(987654322, None)]])
    found = contention.device_processes("cuda", nvml=nvml, env={"CUDA_VISIBLE_DEVICES": "0"})
    assert found == [{"pid": 987654321, "name": "pid 987654321", "device": 0, "memory_bytes": 2 << 30}]
    assert nvml.shut == 1
    assert len(contention.device_processes("cuda", nvml=nvml, env={})) == 2          # every GPU when none is named
    assert contention.device_processes("cpu", nvml=nvml) == []
    busy = Reading(usable_cpus=2, window_s=1.0, host_cpus=2, device_processes=found)
    assert busy.why_busy() == ["1 other process(es) on the accelerator: pid 987654321 (pid 987654321)"]


@pytest.mark.slow   # runs a sweep: builds a tiny model
def test_run_says_it_in_its_first_line_and_records_it(tmp_path, tiny_workload, monkeypatch):
    from tpubench.records.result import read_result
    from tpubench.run.runner import run_sweep

    busy = Reading(usable_cpus=2, window_s=0.3, host_cpus=2, load_1m=4.2, others_cpus=1.9, steal_share=0.0,
                   busy_processes=[{"pid": 11, "name": "python", "cpu_share": 0.99}])
    monkeypatch.setattr(contention.SweepReading, "finish", lambda self, device: busy)
    events = []

    class Events:
        def note(self, message):
            events.append(message)

        def sweep_started(self, points):
            events.append("sweep started")

        def __getattr__(self, name):
            return lambda *a: None

    outcomes = run_sweep(tiny_workload, out_dir=tmp_path, reporter=Events(), energy=False)
    said = [e for e in events if e.startswith("host:")]
    assert said == [contention.line(busy)] and events.index(said[0]) < events.index("sweep started")
    assert said[0].startswith("host: busy (load 4.2 on 2 usable CPU(s); other processes used 1.9 CPU(s)")
    for outcome in outcomes:
        recorded = read_result(outcome.path).environment["contention"]
        assert recorded["busy"] is True and recorded["busy_processes"][0]["name"] == "python"
        assert set(recorded["point"]) >= {"busy", "window_s", "others_cpus", "steal_share", "load_1m"}
        assert recorded["point"]["window_s"] > 0
