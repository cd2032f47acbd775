"""Each device as its package defines it (issue 51, docs/measurement.md#device-sources): peak
memory is never a 0, TorchNeuron's is read after a synchronize and from torch_neuronx where it has
the call, TorchNeuron's profile leaves out the device mode that takes 5 GB of HBM, and every result
names where its device's figures come from."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from tpubench.backends import TORCH_DEVICES
from tpubench.backends import torch as torch_backend
from tpubench.backends.torch import DEVICE_SOURCES, TorchBackend, TorchDevice, profiler_setup


@pytest.mark.parametrize("device", ["cuda", "tpu", "mps"])
def test_a_peak_memory_of_zero_is_unknown_not_a_measurement(monkeypatch, device):
    monkeypatch.setattr(torch.accelerator.memory, "max_memory_allocated", lambda *a: 0)
    assert TorchDevice(device).peak_memory_bytes() is None
    monkeypatch.setattr(torch.accelerator.memory, "max_memory_allocated", lambda *a: 5 << 30)
    assert TorchDevice(device).peak_memory_bytes() == 5 << 30


def test_torch_neuron_memory_is_read_after_a_synchronize_from_its_own_call(monkeypatch):
    calls = []
    fake = types.ModuleType("torch_neuronx")
    fake.max_memory_allocated = lambda: calls.append("read") or 7 << 30
    monkeypatch.setitem(sys.modules, "torch_neuronx", fake)
    monkeypatch.setattr(torch_backend, "_synchronize", lambda: calls.append("synchronize"))
    assert TorchDevice("neuron").peak_memory_bytes() == 7 << 30
    assert calls == ["synchronize", "read"]
    fake.max_memory_allocated = lambda: 0
    assert TorchDevice("neuron").peak_memory_bytes() is None


def test_torch_neuron_profiles_the_runtime_without_the_device_mode(monkeypatch, tmp_path):
    from torch.profiler import ProfilerActivity

    made = {}

    class NeuronConfig:
        def __init__(self, modes, output_dir):
            made.update(modes=modes, output_dir=output_dir)

    profiler = types.ModuleType("torch_neuronx.profiler")
    profiler.NeuronConfig = NeuronConfig
    profiler.ProfileMode = types.SimpleNamespace(DEVICE="device", RUNTIME="runtime")
    monkeypatch.setitem(sys.modules, "torch_neuronx", types.ModuleType("torch_neuronx"))
    monkeypatch.setitem(sys.modules, "torch_neuronx.profiler", profiler)
    monkeypatch.setattr(torch.profiler, "supported_activities", lambda: {ProfilerActivity.CPU, ProfilerActivity.PrivateUse1})
    monkeypatch.setattr(torch._C, "_get_privateuse1_backend_name", lambda: "neuron")
    extra, options, note = profiler_setup("neuron", tmp_path)
    assert extra == [ProfilerActivity.PrivateUse1] and isinstance(options["experimental_config"], NeuronConfig)
    assert made == {"modes": ["runtime"], "output_dir": str(tmp_path)} and "5 GB" in note
    # Where the device registered no profiler here, nothing extra (the host's view).
    monkeypatch.setattr(torch._C, "_get_privateuse1_backend_name", lambda: "privateuseone")
    assert profiler_setup("neuron", tmp_path) == ([], {}, "")


def test_every_torch_device_says_where_its_figures_come_from():
    assert set(TORCH_DEVICES) <= set(DEVICE_SOURCES)
    assert all({"fence", "memory", "profiler"} <= set(v) for v in DEVICE_SOURCES.values())
    env = TorchBackend("cpu").environment()["device_sources"]
    assert env["compile_backend"] == "inductor" and env["process_group"] == "gloo" and "ru_maxrss" in env["memory"]


def test_only_a_deferred_eager_mode_makes_the_fence_read_back(monkeypatch):
    read = []

    class Value:
        def sum(self):
            return self

        def item(self):
            read.append(1)
            return 0.0

    monkeypatch.setattr(torch_backend, "_synchronize", lambda: None)
    dev = TorchDevice("tpu")
    assert not dev.deferred          # no TorchTPU here: not in DEFER_AND_FUSE
    dev.depends_on(Value())
    dev.fence()
    assert read == []
    dev.deferred = True
    dev.fence()
    assert read == [1]
