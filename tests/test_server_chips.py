"""What a server runs on, for its price: the host's accelerators counted without a vendor stack
(a fake `nvidia-smi` on PATH, a fake PCI tree), the chips a started server holds read from its
command, environment and CPU affinity, and a URL server's declared hardware priced as that
hardware even when the client that measured it had only a CPU (device "cpu", as a real run from
a laptop writes it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import date

import pytest
from helpers_synthetic import make_serve_result
from helpers_synthetic import results_frame as frame

from tpubench.hardware import host_accelerators as ha
from tpubench.hardware.accelerators import CPU_X86, normalize_accelerator
from tpubench.hardware.host_accelerators import HostAccelerators
from tpubench.money import cost, pricing
from tpubench.output.report import build_report, render
from tpubench.records.result import write_result
from tpubench.serving import server_chips as server_chips_module
from tpubench.serving.server_chips import parallel_flags, process_group_cpus, server_chips

TODAY = date(2026, 12, 2)
H100_NAME = "NVIDIA H100 80GB HBM3"
EIGHT_H100 = HostAccelerators("cuda", H100_NAME, 8, "nvidia-smi -L")


def fake_nvidia_smi(folder, gpus: int, name: str = H100_NAME) -> None:
    """An `nvidia-smi` that answers -L as the real one does (plus a MIG line, to be ignored)."""
    lines = [f"GPU {i}: {name} (UUID: GPU-{i:08d}-0000-0000-0000-000000000000)" for i in range(gpus)]
    lines.insert(1, "  MIG 1g.10gb     Device  0: (UUID: MIG-00000000)")
    script = folder / "nvidia-smi"
    # Shell built-ins only: PATH holds nothing but the fakes.
    script.write_text("#!/bin/sh\n" + "".join(f"echo '{line}'\n" for line in lines))
    script.chmod(0o755)


@pytest.fixture
def no_accelerator_tree(tmp_path, monkeypatch):
    """A host with nothing: empty /dev and PCI tree, no vendor tools on PATH."""
    (tmp_path / "dev").mkdir()
    (tmp_path / "pci").mkdir()
    (tmp_path / "bin").mkdir()
    monkeypatch.setattr(ha, "DEV", tmp_path / "dev")
    monkeypatch.setattr(ha, "PCI_DEVICES", tmp_path / "pci")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return tmp_path


# ----------------------------------------------------------------------------- the host's listing

def test_nvidia_gpus_counted_from_nvidia_smi(no_accelerator_tree):
    fake_nvidia_smi(no_accelerator_tree / "bin", 8)
    assert ha.host_accelerators() == HostAccelerators("cuda", H100_NAME, 8, "nvidia-smi -L")


def test_tpu_chips_counted_from_the_pci_bus(no_accelerator_tree):
    # Four v6e chips (device 0x006f), one function each, next to an unrelated device.
    for i, (vendor, device) in enumerate([("0x1ae0", "0x006f")] * 4 + [("0x8086", "0x1234")]):
        entry = no_accelerator_tree / "pci" / f"0000:00:0{i}.0"
        entry.mkdir()
        (entry / "vendor").write_text(vendor + "\n")
        (entry / "device").write_text(device + "\n")
        (entry / "subsystem_device").write_text("0x0000\n")
    found = ha.host_accelerators()
    assert (found.kind, found.name, found.count) == ("tpu", "TPU v6e", 4)
    assert normalize_accelerator(found.name, "cpu") == "TPU v6e"   # tpubench's own device may be cpu


def test_nothing_listed_is_a_cpu_host(no_accelerator_tree):
    found = ha.host_accelerators()
    assert found.kind == "cpu" and found.count == len(os.sched_getaffinity(0))


# ----------------------------------------------------------------------------- a started server's chips

def test_eight_way_vllm_is_eight_chips():
    argv = ["vllm", "serve", "m", "--port", "8000", "--tensor-parallel-size", "8"]
    chips = server_chips(argv, {}, os.getpid(), "vllm", host=EIGHT_H100)
    assert (chips.device, chips.accelerator_name, chips.chips) == ("cuda", H100_NAME, 8)
    assert "--tensor-parallel-size 8" in chips.source and "8 x NVIDIA H100" in chips.source
    assert not chips.warnings


@pytest.mark.parametrize("argv, stack, env, expected", [
    (["vllm", "serve", "m"], "vllm", {}, 1),                                           # vLLM's default
    (["vllm", "serve", "m", "-tp", "2", "-pp", "2"], "vllm", {}, 4),
    (["vllm", "serve", "m", "--tensor-parallel-size=2", "--data-parallel-size", "4"], "vllm", {}, 8),
    (["python", "-m", "sglang.launch_server", "--tp-size", "4", "--dp-size", "2"], "sglang", {}, 8),
    (["python", "-m", "sglang.launch_server", "--tp", "8", "--dp", "8", "--enable-dp-attention"], "sglang", {}, 8),
    (["my-server", "--port", "1"], "unknown", {"CUDA_VISIBLE_DEVICES": "0,1,2"}, 3),
    (["transformers", "serve", "m"], "transformers serve", {"CUDA_VISIBLE_DEVICES": "4-7"}, 4),
    (["transformers", "serve", "m", "--device", "cuda:1"], "transformers serve", {}, 1),
])
def test_chips_from_flags_and_visible_devices(argv, stack, env, expected, monkeypatch):
    # transformers serve runs on the GPUs only where the torch it runs on sees them.
    monkeypatch.setattr(server_chips_module, "torch_sees_accelerator", lambda: True)
    assert server_chips(argv, env, os.getpid(), stack, host=EIGHT_H100).chips == expected


def test_transformers_serve_on_a_gpu_host_with_a_cpu_torch_is_a_cpu_server(monkeypatch):
    monkeypatch.setattr(server_chips_module, "torch_sees_accelerator", lambda: False)
    chips = server_chips(["transformers", "serve", "m"], {}, os.getpid(), "transformers serve", host=EIGHT_H100)
    assert chips.device == "cpu" and chips.chips == len(os.sched_getaffinity(0))


def test_more_chips_than_visible_is_warned_and_priced_as_asked():
    chips = server_chips(["vllm", "serve", "m", "-tp", "8"], {"CUDA_VISIBLE_DEVICES": "0,1"}, os.getpid(), "vllm",
                         host=EIGHT_H100)
    assert chips.chips == 8
    assert "asks for 8" in chips.warnings[0] and "CUDA_VISIBLE_DEVICES=0,1 = 2" in chips.warnings[0]


def test_unknown_stack_without_flags_is_unknown_not_one():
    chips = server_chips(["my-server", "--port", "1"], {}, os.getpid(), "unknown", host=EIGHT_H100)
    assert chips.chips is None and "declare server.hardware" in chips.reason


def test_neuron_cores_become_chips():
    trn1 = HostAccelerators("neuron", "Trainium", 16, "/dev/neuron*")
    assert server_chips(["vllm", "serve", "m", "-tp", "32"], {}, os.getpid(), "vllm (Neuron)", host=trn1).chips == 16
    trn2 = HostAccelerators("neuron", "Trainium2", 16, "/dev/neuron*")
    assert server_chips(["vllm", "serve", "m", "-tp", "64"], {}, os.getpid(), "vllm (Neuron)", host=trn2).chips == 16


def test_bad_parallel_size_is_unknown():
    assert parallel_flags(["vllm", "-tp", "eight"])["error"]
    chips = server_chips(["vllm", "serve", "m", "-tp", "eight"], {}, os.getpid(), "vllm", host=EIGHT_H100)
    assert chips.chips is None and "not a positive integer" in chips.reason


def test_cpu_server_is_priced_by_its_own_affinity():
    # A server pinned to one CPU (as `taskset -c 0` would) in its own process group.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                             preexec_fn=lambda: os.sched_setaffinity(0, {0}), start_new_session=True)
    try:
        assert process_group_cpus(child.pid) == {0}
        cpu_host = HostAccelerators("cpu", None, len(os.sched_getaffinity(0)), "os.sched_getaffinity")
        chips = server_chips(["transformers", "serve", "m"], {}, child.pid, "transformers serve", host=cpu_host)
        assert (chips.device, chips.chips) == ("cpu", 1) and "sched_getaffinity" in chips.source
        # A CPU's name is a CPU even beside a GPU device (a CPU server started on a GPU host).
        assert normalize_accelerator("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz", "cuda") == CPU_X86
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()


# ----------------------------------------------------------------------------- declared hardware, CPU client

def _declared_h100_from_a_cpu_client():
    """A URL server declaring `hardware: {accelerator: H100, chips: 1}`, measured from a CPU-only
    machine: the result's device is the client's, "cpu", as `tpubench run` writes it."""
    result = make_serve_result(accelerator="H100", device="cpu", chips=1, backend="torch")
    result.environment.update(hardware_declared=True, chips_source="server.hardware (declared in the workload)")
    return result


def test_declared_h100_from_a_cpu_client_is_priced_as_an_h100():
    prices = pricing.load_prices(today=TODAY)
    priced, unpriced = cost.price_results(frame(_declared_h100_from_a_cpu_client()), prices, plans=["on_demand"],
                                          today=TODAY)
    assert unpriced.empty and not priced.empty
    assert set(priced["priced_accelerator"]) == {"H100"}
    h100 = prices[(prices["accelerator"] == "H100") & (prices["plan"] == "on_demand") & ~prices["flagged"]]
    assert priced["usd_per_chip_hour"].min() == pytest.approx(h100["usd_per_chip_hour"].min())   # not $0.05 of a vCPU
    assert priced["usd_per_chip_hour"].min() > 1.0


def test_declared_h100_from_a_cpu_client_is_an_h100_in_the_report(tmp_path):
    write_result(_declared_h100_from_a_cpu_client(), tmp_path)
    md = render(build_report(tmp_path, prices=pricing.load_prices(today=TODAY), today=TODAY), "markdown")
    assert "H100" in md and CPU_X86 not in md


def test_vllm_config_file_sizes_count_and_flags_win(tmp_path):
    config = tmp_path / "serve.yaml"
    config.write_text("tensor-parallel-size: 4\npipeline_parallel_size: 2\n")
    argv = ["vllm", "serve", "m", "--config", str(config)]
    assert server_chips(argv, {}, os.getpid(), "vllm", host=EIGHT_H100).chips == 8
    assert server_chips([*argv, "-pp", "1"], {}, os.getpid(), "vllm", host=EIGHT_H100).chips == 4
