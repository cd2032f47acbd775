"""Device detection, the JAX backend end to end, cross-backend parity, and compile accounting."""

import importlib.util
import math

import pytest

from tpubench.backends import all_availability, get_backend, require_available
from tpubench.errors import UserError
from tpubench.measure.numerics import compare_numerics
from tpubench.records.result import read_results
from tpubench.run.runner import run_sweep

HAS_JAX = importlib.util.find_spec("jax") is not None


@pytest.mark.slow   # asks torch and JAX for their devices (imports both)
def test_every_device_is_listed_with_a_reason():
    rows = {(a.backend, a.device): a for a in all_availability()}
    assert rows[("torch", "cpu")].available
    for device in ("cuda", "tpu", "neuron", "xla", "mps"):
        row = rows[("torch", device)]
        assert row.detail, device          # available or not, it says why
    assert not rows[("torch", "tpu")].available or rows[("torch", "tpu")].detail


def test_absent_device_errors_name_the_package_or_hardware(monkeypatch):
    with pytest.raises(UserError, match="torch_tpu is missing.*tpubench\\[tpu\\]"):
        require_available(get_backend("torch", "tpu"))
    with pytest.raises(UserError, match="torch_neuronx is missing.*neuron"):
        require_available(get_backend("torch", "neuron"))
    # the package installed but no chip on the bus: a different message, still no CPU fallback
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "torch_tpu" else real_find_spec(name, *a))
    with pytest.raises(UserError, match="torch_tpu is installed but no tpu device is present"):
        require_available(get_backend("torch", "tpu"))
    with pytest.raises(UserError, match="unknown device"):
        get_backend("torch", "gpu")


@pytest.mark.skipif(not HAS_JAX, reason="jax extra not installed")
@pytest.mark.slow
def test_jax_backend_runs_and_matches_torch(tmp_path, tiny_workload):
    out = tmp_path / "r"
    (torch_o,) = run_sweep(tiny_workload, out_dir=out)
    (jax_o,) = run_sweep(tiny_workload, backend="jax", out_dir=out)
    t, j = torch_o.result, jax_o.result
    assert j.status == "ok", j.error
    assert j.backend == "jax" and j.device == "cpu" and j.environment["jax"]
    assert j.metrics["output_tokens_per_s"] > 0 and len(j.samples["ttft_s"]) >= 3
    # compile time is measured apart (ahead of time) and nothing recompiles while timed
    assert j.compile["aot_prefill_compile_s"] > 0 and j.compile["aot_decode_compile_s"] > 0
    assert j.compile["recompiles_timed"] == 0 and j.validity.valid
    parity = compare_numerics(t, j)
    assert parity.verdict == "agree", parity.detail
    assert parity.max_abs_delta <= 1e-3 and parity.token_agreement == 1.0
    assert len(read_results(out)) == 2


@pytest.mark.slow
def test_torch_compile_counts_graphs_and_no_timed_recompiles(tmp_path, tiny_workload):
    # grouped_mm experts trace without graph breaks; the eager experts loop breaks the graph and
    # exhausts dynamo's recompile limit, which validity rejects (test_validity covers that rule).
    text = (tiny_workload.read_text().replace("experts_implementation: eager", "experts_implementation: grouped_mm")
            + "execution:\n  mode: compile\n")
    path = tmp_path / "compiled.yaml"
    path.write_text(text)
    (o,) = run_sweep(path, out_dir=tmp_path / "r")
    r = o.result
    assert r.status == "ok", r.error
    assert r.compile["mode"] == "compile"
    assert r.compile["graphs_compiled_first_call"] >= 1
    assert r.compile["recompiles_timed"] == 0
    assert r.compile["graph_breaks"] == 0 and r.compile["recompile_limit_hits"] == 0
    assert r.timing["compile_s"] > 0 and math.isfinite(r.timing["compile_s"])
    assert r.validity.valid, r.validity.reasons


def test_tpu_name_from_the_vm_when_the_runtime_gives_none(monkeypatch):
    from tpubench.backends.torch import TorchBackend
    from tpubench.hardware.accelerators import normalize_accelerator

    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v5litepod-8")
    name = TorchBackend("tpu").accelerator_name()
    assert name == "TPU v5litepod" and normalize_accelerator(name, "tpu") == "TPU v5e"
    monkeypatch.delenv("TPU_ACCELERATOR_TYPE")
    assert TorchBackend("neuron").accelerator_name() == "NEURON"
