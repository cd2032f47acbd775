"""Energy over a point's timed window: the integration and window rules on synthetic readings with
hand-computed energy, the sources (RAPL on a fake powercap tree, NVML through a fake library, the
model), and this machine's missing source."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tpubench.hardware.energy_sources import MODELLED, ModelledSource, NvmlSource, RaplSource, Reading, find_source
from tpubench.measure.energy import (
    COUNTER,
    DEVICES,
    GAP,
    UNBRACKETED,
    EnergyMeter,
    WindowProblem,
    counter_delta,
    integrate_power,
    window_energy,
)


def test_trapezoid_with_both_edges_interpolated():
    # Power rising 10 W/s from 100 W at t=0, read at t=1, 3, 5, 7: the window [2, 6] holds
    # 120 W -> 160 W, a mean of 140 W, whatever the readings' grid.
    times, watts = [1, 3, 5, 7], [110, 130, 150, 170]
    assert integrate_power(times, watts, 2, 6) == pytest.approx(4 * 140)
    # Constant power: energy is power x time whatever the sample grid.
    assert integrate_power([0, 0.3, 1.1, 2], [50, 50, 50, 50], 0.5, 1.5) == pytest.approx(50.0)


def test_counter_interpolated_at_both_edges():
    # A counter rising 10 J/s: the window [1.5, 3.25] gains 17.5 J.
    assert counter_delta([0, 1, 2, 3, 4], [0, 10, 20, 30, 40], 1.5, 3.25) == pytest.approx(17.5)


def test_a_gap_or_an_open_window_is_refused_with_its_code():
    with pytest.raises(WindowProblem) as gap:
        integrate_power([0, 1, 5, 6], [1, 1, 1, 1], 0.5, 5.5)
    assert gap.value.code == GAP
    with pytest.raises(WindowProblem) as open_end:
        integrate_power([0, 1, 2], [1, 1, 1], 0.5, 2.5)
    assert open_end.value.code == UNBRACKETED


class _Source:
    name, method, detail = "fake", "measured", "fake"

    def __init__(self, devices):
        self.devices = devices


def test_counter_and_power_agree_within_five_percent_or_the_figure_is_invalid():
    source = _Source(1)
    agree = [Reading(t, watts=(100.0,), joules=(100.0 * t,)) for t in (0, 1, 2, 3)]
    good = window_energy(agree, 0.5, 2.5, source, idle_power_w=[40.0])
    assert good.valid and good.energy_j == pytest.approx(200.0)
    assert good.energy_above_idle_j == pytest.approx(200.0 - 40.0 * 2.0)
    disagree = [Reading(t, watts=(100.0,), joules=(110.0 * t,)) for t in (0, 1, 2, 3)]
    bad = window_energy(disagree, 0.5, 2.5, source)
    assert not bad.valid and bad.reasons == [COUNTER]


def test_a_reading_missing_a_device_invalidates_the_figure():
    readings = [Reading(0.0, watts=(1.0, 1.0)), Reading(1.0, watts=(1.0,)), Reading(2.0, watts=(1.0, 1.0))]
    energy = window_energy(readings, 0.5, 1.5, _Source(2))
    assert not energy.valid and energy.reasons == [DEVICES] and energy.energy_j is None


def test_an_invalid_figure_stays_out_of_the_metrics():
    from tpubench.measure.energy import energy_metrics

    disagree = [Reading(t, watts=(100.0,), joules=(200.0 * t,)) for t in (0, 1, 2, 3)]
    energy = window_energy(disagree, 0.2, 2.2, _Source(1))
    assert not energy.valid and energy.energy_j == pytest.approx(400.0)   # kept for diagnosis
    assert energy_metrics(energy, tokens=1000) == {}


def test_two_devices_add_up():
    readings = [Reading(t, watts=(100.0, 300.0)) for t in (0, 1, 2)]
    energy = window_energy(readings, 0.0, 2.0, _Source(2))
    assert energy.per_device_j == pytest.approx([200.0, 600.0]) and energy.energy_j == pytest.approx(800.0)


def _powercap(root, packages):
    for k, (uj, top) in enumerate(packages):
        zone = root / f"intel-rapl:{k}"
        zone.mkdir(parents=True)
        (zone / "name").write_text(f"package-{k}\n")
        (zone / "energy_uj").write_text(str(uj))
        (zone / "max_energy_range_uj").write_text(str(top))
    return root


def test_rapl_reads_packages_and_survives_a_wrap(tmp_path):
    root = _powercap(tmp_path / "powercap", [(999_000_000, 1_000_000_000)])
    (root / "intel-rapl:0:0").mkdir()
    (root / "intel-rapl:0:0" / "name").write_text("dram\n")
    (root / "intel-rapl:0:0" / "energy_uj").write_text("5000000")
    (root / "intel-rapl:0:0" / "max_energy_range_uj").write_text("1000000000")
    (root / "intel-rapl:0:1").mkdir()
    (root / "intel-rapl:0:1" / "name").write_text("core\n")   # inside the package figure: not read
    source, why = find_source("cpu", powercap_root=root)
    assert isinstance(source, RaplSource) and source.devices == 2 and why == ""
    first = source.read()
    (root / "intel-rapl:0" / "energy_uj").write_text("1000000")         # wrapped: +2 J
    (root / "intel-rapl:0:0" / "energy_uj").write_text("5500000")       # +0.5 J
    second = source.read()
    source.close()
    assert [b - a for a, b in zip(first.joules, second.joules)] == pytest.approx([2.0, 0.5])


def test_no_powercap_is_a_reason_not_an_error(tmp_path):
    source, why = find_source("cpu", powercap_root=tmp_path / "absent")
    assert source is None and "no RAPL powercap" in why
    modelled, _ = find_source("cpu", chips=2, chip_power_w=150.0, chip_power_source="vendor sheet",
                              powercap_root=tmp_path / "absent")
    assert isinstance(modelled, ModelledSource) and modelled.method == MODELLED
    # The figure is per chip: two chips draw twice it (one reading; a fraction of a chip, a fraction).
    assert modelled.read().watts == (300.0,) and "vendor sheet" in modelled.detail
    half, _ = find_source("neuron", chips=0.5, chip_power_w=150.0)
    assert half.read().watts == (75.0,)


_PERF_COUNTER = time.perf_counter   # the real clock, for a test that stands in its own stamping one


class _FakeNvml:
    """pynvml's calls tpubench makes: two GPUs at 250 W and 350 W, energy counters in mJ. A counter
    read goes with the time its reading was stamped (`stamp`, the NvmlSource's clock), so the
    energy it gives is exact however late a busy machine runs the read after its stamp."""

    class NVMLError(Exception):
        pass

    def __init__(self):
        self.t0 = time.perf_counter()
        self.stamps = threading.local()

    def stamp(self) -> float:
        t = _PERF_COUNTER()
        self.stamps.t = t
        return t

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetPowerUsage(self, h):
        return (250_000, 350_000)[h]

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        t = getattr(self.stamps, "t", None) or _PERF_COUNTER()
        return (250_000, 350_000)[h] * (t - self.t0)     # mJ; a float keeps it exact


def test_nvml_counter_and_power_over_a_real_window(monkeypatch):
    from tpubench.hardware import energy_sources

    nvml = _FakeNvml()
    # The clock every reading is stamped with (time.perf_counter, the module's), remembering each stamp.
    monkeypatch.setattr(energy_sources.time, "perf_counter", nvml.stamp)
    source, why = find_source("cuda", chips=2, nvml=nvml, env={})
    assert isinstance(source, NvmlSource) and source.devices == 2 and "counter" in source.detail
    meter = EnergyMeter(source, interval_s=0.02, idle_s=0.1)
    with meter.window():
        time.sleep(0.3)
    e = meter.result
    assert e.valid, e.notes
    assert e.energy_j == pytest.approx(600.0 * e.window_s, rel=1e-6)
    assert e.idle_power_w == pytest.approx([250.0, 350.0], rel=1e-6)
    # How it was sampled: the interval, readings that bracket the window, the sampler's own CPU.
    # How many readings a busy machine lets the thread take, and their cost, are
    # benchmarks/energy_overhead.py's to measure.
    assert e.interval_s == 0.02 and e.readings >= 2 and e.sampler_cpu_s >= 0


def test_cuda_visible_devices_picks_the_gpus_read():
    source, _ = find_source("cuda", chips=1, nvml=_FakeNvml(), env={"CUDA_VISIBLE_DEVICES": "1"})
    assert source.detail.endswith("GPU 1") and source.read().watts == (350.0,)
    # By UUID, NVML cannot be told which GPU the point has: not measured, rather than GPU 0's power.
    source, why = find_source("cuda", chips=1, nvml=_FakeNvml(), env={"CUDA_VISIBLE_DEVICES": "GPU-8d1f"})
    assert source is None and "by UUID" in why


def test_this_machine_without_a_source_says_why():
    source, why = find_source("tpu")
    assert source is None and why


@pytest.mark.slow
def test_a_real_generate_point_carries_its_window_energy(tiny_workload, tmp_path, monkeypatch):
    """A tiny model measured with a fake NVML library behind the energy source: the result's energy
    is the sources' power over exactly the timed loop, and J per token is that over its tokens."""
    from tpubench.hardware import energy_sources
    from tpubench.output.frames import load_results
    from tpubench.run import runner

    real = energy_sources.find_source
    nvml = _FakeNvml()
    monkeypatch.setattr(energy_sources.time, "perf_counter", nvml.stamp)   # counters exact at their stamps
    # The fake's GPU 0 is the point's one chip (on this CPU host the point's chips are its vCPUs).
    monkeypatch.setattr(runner, "find_source",
                        lambda device, **kw: real("cuda", **{**kw, "chips": 1, "nvml": nvml, "env": {}}))
    (outcome,) = runner.run_sweep(tiny_workload, scale="small", out_dir=tmp_path / "r")
    r = outcome.result
    assert r.status == "ok" and r.energy["valid"], r.energy
    assert r.environment["energy_source"]["name"] == "nvml"
    # One GPU of the fake (the point's chip) at 250 W over the timed loop: the window holds every
    # timed iteration and lies within the timed phase (starting the sampler is not in it).
    assert r.energy["devices"] == 1
    assert sum(r.samples["e2e_s"]) <= r.energy["window_s"] <= r.timing["measure_s"]
    assert r.metrics["energy_j"] == pytest.approx(250.0 * r.energy["window_s"], rel=1e-6)
    assert r.energy["interval_s"] == 0.1 and r.energy["readings"] >= 2 and r.energy["sampler_cpu_s"] >= 0
    tokens = r.metrics["iterations"] * 1 * (8 + 4)
    assert r.metrics["joules_per_token"] == pytest.approx(r.metrics["energy_j"] / tokens)
    row = load_results(tmp_path / "r").iloc[0]
    assert row["energy_method"] == "measured" and "NVML" in row["energy_source"] and row["energy_valid"]


@pytest.mark.slow
def test_without_a_source_a_point_runs_and_says_why_once(tiny_workload, tmp_path, monkeypatch):
    from tpubench.run import runner

    notes = []

    class Notes(runner.SilentReporter):
        def note(self, message):
            notes.append(message)

    monkeypatch.setattr(runner, "find_source", lambda device, **kw: (None, "no sensor here"))
    outcomes = runner.run_sweep(tiny_workload, out_dir=tmp_path / "r", reporter=Notes())
    assert all(o.result.status == "ok" and o.result.energy == {"verdict": "unavailable", "reason": "no sensor here"}
               for o in outcomes)
    assert notes.count("energy: not measured (no sensor here)") == 1
    assert outcomes[0].result.environment["energy_source"] == {"name": None, "why_not": "no sensor here"}


@pytest.mark.slow
def test_a_real_training_point_carries_its_window_energy(tmp_path, monkeypatch):
    """The modelled source (a user's per-chip figure) through a real training point."""
    from tpubench.run import runner

    workload = tmp_path / "train.yaml"
    workload.write_text((Path(__file__).parent / "fixtures" / "tiny_moe.yaml").read_text().replace(
        "scenario:\n  batch_size: [1, 2]\n  input_length: 8\n  output_length: 4",
        "scenario:\n  kind: train\n  batch_size: 1\n  sequence_length: 8"))
    monkeypatch.setattr(runner, "find_source", lambda device, **kw: find_source(
        "cpu", **{**kw, "powercap_root": tmp_path / "absent"}))
    (outcome,) = runner.run_sweep(workload, scale="small", out_dir=tmp_path / "r", chip_power_w=80.0)
    r = outcome.result
    assert r.status == "ok" and r.energy["method"] == MODELLED and r.energy["valid"], (r.error, r.energy)
    # 80 W for each of the point's chips (on a CPU, the vCPUs it may run on).
    assert r.metrics["energy_j"] == pytest.approx(80.0 * r.environment["chips"] * r.energy["window_s"], rel=1e-6)
    tokens = r.metrics["iterations"] * 1 * 8
    assert r.metrics["joules_per_train_token"] == pytest.approx(r.metrics["energy_j"] / tokens)


@pytest.mark.slow
def test_the_run_table_shows_modelled_joules_and_the_missing_source(tiny_workload, tmp_path, monkeypatch, capsys):
    from helpers_cli import run_cli

    from tpubench.run import runner

    monkeypatch.setattr(runner, "find_source", lambda device, **kw: find_source(
        "cpu", **{**kw, "powercap_root": tmp_path / "absent"}))
    monkeypatch.setenv("COLUMNS", "250")
    code, out, _ = run_cli(monkeypatch, capsys, "run", str(tiny_workload), "--scale", "small", "--no-price",
                           "--out", str(tmp_path / "a"), "--chip-power-w", "50")
    assert code == 0 and "J/token" in out and "(modelled)" in out
    code, out, _ = run_cli(monkeypatch, capsys, "run", str(tiny_workload), "--scale", "small", "--no-price",
                           "--out", str(tmp_path / "b"))
    assert code == 0 and "energy: not measured (no RAPL powercap" in out and "J/token" not in out


class _FakeTpuMonitoring:
    """libtpu.sdk.tpumonitoring's calls: four chips' duty cycle in percent, as strings."""

    def list_supported_metrics(self):
        return ["duty_cycle_pct", "hbm_capacity_usage"]

    def get_metric(self, name):
        class Metric:
            def data(self):
                return ["50.0", "25.0", "100.0", "0.0"]
        return Metric()


def test_a_tpu_is_modelled_from_its_duty_cycle_or_says_why_not():
    source, why = find_source("tpu", chips=2, tpumonitoring=_FakeTpuMonitoring())
    assert source is None and "TPU VM reports no power" in why
    source, _ = find_source("tpu", chips=2, chip_power_w=200.0, tpumonitoring=_FakeTpuMonitoring())
    assert source.method == MODELLED and "duty cycle" in source.detail
    # An idle floor of 90/192 of the figure (Google's TPU v4 idle/max), the rest by duty cycle:
    # 200 * (0.46875 + 0.53125 * 0.5) and 200 * (0.46875 + 0.53125 * 0.25).
    assert source.read().watts == pytest.approx((146.875, 120.3125))
    assert source.idle_power_w == pytest.approx([93.75, 93.75]) and "TPU v4" in source.detail
    # Without libtpu's monitoring library: the figure itself, for the whole window.
    plain, _ = find_source("tpu", chips=1, chip_power_w=200.0, tpumonitoring=object())
    assert plain.read().watts == (200.0,) and "busy for the whole window" in plain.detail


def test_a_source_that_fails_to_read_leaves_the_point_alone():
    class Flaky(_Source):
        def __init__(self):
            super().__init__(1)
            self.calls = 0

        def read(self):
            self.calls += 1
            if self.calls > 2:
                raise OSError("driver went away")
            return Reading(time.perf_counter(), watts=(10.0,))

        def close(self):
            pass

    meter = EnergyMeter(Flaky(), interval_s=0.01, idle_s=0)
    with meter.window():
        time.sleep(0.1)
    assert not meter.result.valid and meter.result.reasons == ["source_read_failed"]
    assert "driver went away" in meter.result.notes[0] and meter.result.energy_j is None


def test_the_sweep_plan_meters_only_models_run_here_and_refuses_a_silly_power():
    from tpubench.backends import get_backend
    from tpubench.errors import UserError
    from tpubench.run.runner import _energy_plan

    def Cpu():
        return get_backend("torch", "cpu")

    serve = _energy_plan(Cpu(), True, 100.0, 2, "the server is at a URL: its chips may be on another host")
    assert serve.source is None and "server" in serve.why_not
    modelled = _energy_plan(Cpu(), True, 100.0, 2, None)
    assert modelled.source is not None and modelled.source.read().watts == (200.0,) or modelled.source.name == "rapl"
    with pytest.raises(UserError):
        _energy_plan(Cpu(), True, 0.0, 2, None)


class _FakeAmdSmi:
    """The amdsmi calls AmdSmiSource makes, for two GPUs; `old` uses the older accumulator key."""

    def __init__(self, old=False, counter=True):
        self.old, self.counter, self.ticks, self.shut = old, counter, 0, False

    def amdsmi_init(self):
        pass

    def amdsmi_get_processor_handles(self):
        return ["gpu0", "gpu1"]

    def amdsmi_get_energy_count(self, handle):
        if not self.counter:
            raise RuntimeError("AMDSMI_STATUS_NOT_SUPPORTED")   # a VM guest
        self.ticks += 1000
        return {("power" if self.old else "energy_accumulator"): self.ticks, "counter_resolution": 15.3,
                "timestamp": 0}

    def amdsmi_get_power_info(self, handle):
        return {"socket_power": "N/A", "current_socket_power": 550, "average_socket_power": "N/A"}

    def amdsmi_shut_down(self):
        self.shut = True


def test_an_amd_gpu_is_read_through_amd_smi_when_nvml_is_absent():
    class NoNvml:
        class NVMLError(Exception):
            pass

        def nvmlInit(self):
            raise ImportError("no pynvml")

    for old in (False, True):
        smi = _FakeAmdSmi(old=old)
        source, why = find_source("cuda", chips=1, env={"HIP_VISIBLE_DEVICES": "1"}, nvml=NoNvml(), amdsmi=smi)
        assert source.name == "amdsmi" and source.devices == 1 and why == ""
        assert "energy accumulator" in source.detail and "GPU 1" in source.detail
        reading = source.read()
        # Ticks of counter_resolution microjoules: 2000 ticks (two reads since the probe) x 15.3 uJ.
        assert reading.watts == (550.0,) and reading.joules == pytest.approx((2000 * 15.3e-6,))
        source.close()
        assert smi.shut
    # A VM guest has no accumulator: power samples only.
    power_only, _ = find_source("cuda", chips=2, env={}, nvml=NoNvml(), amdsmi=_FakeAmdSmi(counter=False))
    assert power_only.read().joules is None and power_only.read().watts == (550.0, 550.0)


def test_neuron_monitor_reports_give_each_chip_its_cores_mean_utilisation():
    from tpubench.hardware.energy_sources import neuron_chip_shares

    report = {"neuron_hardware_info": {"neuroncore_per_device_count": 2},
              "neuron_runtime_data": [{"report": {"neuroncore_counters": {"neuroncores_in_use": {
                  "0": {"neuroncore_utilization": 80.0}, "1": {"neuroncore_utilization": 40.0},
                  "2": {"neuroncore_utilization": 50.0}}}}}]}
    # Chip 0: cores 0 and 1 (60%); chip 1: core 2 busy 50%, core 3 absent (idle): 25%.
    assert neuron_chip_shares(report, 2) == pytest.approx([0.6, 0.25])
    assert neuron_chip_shares({"neuron_runtime_data": []}, 1) == [0.0]


def test_a_trainium_point_is_modelled_from_a_running_neuron_monitor_stopped_on_close(tmp_path):
    import json
    import os
    import sys

    report = {"neuron_hardware_info": {"neuroncore_per_device_count": 1},
              "neuron_runtime_data": [{"report": {"neuroncore_counters": {"neuroncores_in_use": {
                  "0": {"neuroncore_utilization": 50.0}}}}}]}
    monitor = tmp_path / "neuron-monitor"
    # A stand-in that prints one report every 20 ms until stopped, and records the config it was given.
    monitor.write_text(f"#!{sys.executable}\nimport json, sys, time, pathlib\n"
                       f"pathlib.Path({str(tmp_path / 'config')!r}).write_text(open(sys.argv[2]).read())\n"
                       f"while True:\n    print(json.dumps({report!r}), flush=True)\n    time.sleep(0.02)\n")
    monitor.chmod(0o755)
    source, why = find_source("neuron", chips=1, chip_power_w=400.0, neuron_monitor=str(monitor), env={})
    assert source.method == MODELLED and "neuron-monitor" in source.detail
    deadline = time.monotonic() + 60
    while source.read().watts != (200.0,) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert source.read().watts == (200.0,)
    config = json.loads((tmp_path / "config").read_text())
    assert config["neuron_runtimes"][0]["tag_filter"] == f"^{os.getpid()}$"
    process = source._duty._proc
    source.close()
    assert process.poll() is not None
    # Without a figure a Neuron point says why it is not metered.
    none, why = find_source("neuron", chips=1, neuron_monitor=str(monitor), env={})
    assert none is None and "utilisation, not power" in why
