"""What a chip is (environment.device_chips): one rule for CPUs on every backend, logical
NeuronCores per chip on Trainium, stated in the result."""

import importlib.util
import os

import pytest

from tpubench.backends import get_backend
from tpubench.hardware.environment import (
    CPU_CHIPS_RULE,
    NEURON_LNC_ENV,
    NEURON_UNCONFIRMED,
    cpu_chips,
    device_chips,
    neuron_chips,
    neuron_logical_cores_per_chip,
)

HAS_JAX = importlib.util.find_spec("jax") is not None


@pytest.mark.skipif(not HAS_JAX, reason="jax extra not installed")
def test_torch_and_jax_cpu_runs_count_the_same_chips():
    import torch

    mask = len(os.sched_getaffinity(0))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # torch's thread count must not change what the host bills
    try:
        torch_env = get_backend("torch", "cpu").environment()
    finally:
        torch.set_num_threads(threads)
    jax_env = get_backend("jax").environment()
    assert torch_env["chips"] == jax_env["chips"] == cpu_chips() == mask
    assert torch_env["chips_source"] == jax_env["chips_source"] == CPU_CHIPS_RULE
    assert torch_env["torch_threads"] == 1


def test_cpu_world_counts_the_hosts_vcpus_not_its_threads():
    from tpubench.measure.world import world_environment

    class CpuBackend:
        device = "cpu"

        def process_group_backend(self):
            return "gloo"

        def process_group_source(self):
            return "test"

    class Point:
        world_size, tensor_parallel, expert_parallel = 2, 2, 1

    env = world_environment(CpuBackend(), Point(), {"accelerator_name": "Intel Xeon"})
    assert env["chips"] == cpu_chips() and env["chips_source"] == CPU_CHIPS_RULE and env["world_size"] == 2


@pytest.mark.parametrize("devices, chip, lnc, chips", [
    (8, "Trainium2", "2", 2.0),      # 8 physical cores / LNC 2 = 4 logical per chip
    (1, "Trainium2", None, 0.25),    # LNC unset: Trainium2's default is 2
    (8, "Trainium2", "1", 1.0),      # LNC 1: every physical core is a device
    (64, "Trainium2", "2", 16.0),    # a trn2.48xlarge: 16 chips
    (32, "Trainium", None, 16.0),    # a trn1.32xlarge: 16 chips of 2 NeuronCore-v2
    (2, "Inferentia2", "1", 1.0),
])
def test_neuron_chips_from_the_logical_core_configuration(devices, chip, lnc, chips):
    got, source = neuron_chips(devices, chip, lnc)
    assert got == chips and chip in source


@pytest.mark.parametrize("chip, lnc, words", [
    ("Trainium", "2", "not supported"),           # trn1 supports LNC=1 only
    ("Trainium2", "3", "not supported"),
    ("Trainium2", "two", "not a number"),
    (None, "2", "unknown Neuron chip"),
])
def test_neuron_chips_unknown_is_never_a_guess(chip, lnc, words):
    per_chip, reason = neuron_logical_cores_per_chip(chip, lnc)
    assert per_chip is None and words in reason
    assert neuron_chips(8, chip, lnc)[0] is None


def test_neuron_result_states_the_source_and_that_it_is_unconfirmed(monkeypatch):
    monkeypatch.setenv(NEURON_LNC_ENV, "2")
    env = device_chips("neuron", 8, "AWS trn2.48xlarge")
    assert env["chips"] == 2.0
    assert f"{NEURON_LNC_ENV}=2 -> 4 logical cores per Trainium2 chip" in env["chips_source"]
    assert env["chips_warning"] == NEURON_UNCONFIRMED and "not yet confirmed" in NEURON_UNCONFIRMED
    # Other accelerators: one chip per device, as before.
    assert device_chips("cuda", 8, "NVIDIA H100 80GB HBM3")["chips"] == 8


def test_neuron_generation_from_the_ec2_instance_type(monkeypatch, tmp_path):
    from tpubench.hardware import host_accelerators

    monkeypatch.setattr(host_accelerators, "DMI_PRODUCT", tmp_path / "absent")
    assert host_accelerators.ec2_instance_type() == ""
    product = tmp_path / "product_name"
    product.write_text("trn2.48xlarge\n")
    monkeypatch.setattr(host_accelerators, "DMI_PRODUCT", product)
    assert host_accelerators.ec2_instance_type() == "trn2.48xlarge"
    name = get_backend("torch", "neuron").accelerator_name()
    assert name == "AWS trn2.48xlarge" and device_chips("neuron", 4, name)["chips"] == 1.0


def test_neuron_roofline_judges_a_device_against_its_share_of_the_chip(monkeypatch):
    from tpubench.measure.efficiency import peaks_for

    monkeypatch.setenv(NEURON_LNC_ENV, "2")
    device = peaks_for("neuron", "AWS trn2.48xlarge", "bfloat16")
    monkeypatch.setenv(NEURON_LNC_ENV, "1")
    physical = peaks_for("neuron", "AWS trn2.48xlarge", "bfloat16")
    # Trainium2: 667 dense bf16 TFLOP/s and 2.9 TB/s per chip, 4 logical cores at LNC=2, 8 at LNC=1.
    assert device["peak_flops"] == pytest.approx(667e12 / 4) and physical["peak_flops"] == pytest.approx(667e12 / 8)
    assert device["peak_bytes_per_s"] == pytest.approx(2.9e12 / 4)
    assert "4 logical cores per Trainium2 chip" in device["source"]
    monkeypatch.setenv(NEURON_LNC_ENV, "3")
    assert peaks_for("neuron", "AWS trn2.48xlarge", "bfloat16") is None   # unknown share: no roofline


@pytest.mark.slow
def test_a_result_priced_by_an_unconfirmed_rule_says_so(tmp_path, tiny_workload, monkeypatch):
    from tpubench.backends import torch as torch_backend
    from tpubench.run.runner import run_sweep

    # A CPU run standing in for a Trainium one: its chips come with the "not yet confirmed" warning.
    monkeypatch.setattr(torch_backend, "device_chips",
                        lambda device, devices, name: {"chips": 0.25, "chips_source": "test",
                                                       "chips_warning": NEURON_UNCONFIRMED})
    (outcome,) = run_sweep(tiny_workload, scale="small", out_dir=tmp_path / "r")
    assert outcome.result.environment["chips"] == 0.25
    assert NEURON_UNCONFIRMED in outcome.result.warnings
