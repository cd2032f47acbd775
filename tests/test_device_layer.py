"""One device layer (backends.torch.TorchDevice): training fences, counts compilations, reads
memory and watches CPU fallbacks through the same object generate's session is, so a torch_xla
compilation counts in a training result as it does in a generate result."""

import ast
import sys
import types
from pathlib import Path

from fakes import make_point
from helpers_source import parsed

import tpubench
from tpubench.backends.torch import TorchDevice, TorchSession


def fake_torch_xla(monkeypatch) -> dict:
    """A torch_xla stand-in: a no-op fence, no fallback counters, and a CompileTime metric whose
    count the test raises as 'XLA compiles' (torch_xla.debug.metrics.metric_data returns
    (count, total, samples), or None before the first compilation)."""
    compiled = {"n": 0}
    metrics = types.ModuleType("torch_xla.debug.metrics")
    metrics.metric_data = lambda name: (compiled["n"], 0.0, []) if name == "CompileTime" and compiled["n"] else None
    metrics.counter_names = lambda: []
    metrics.counter_value = lambda name: 0
    debug = types.ModuleType("torch_xla.debug")
    debug.metrics = metrics
    xla = types.ModuleType("torch_xla")
    xla.sync = lambda wait=False: None
    xla.debug = debug
    for name, module in (("torch_xla", xla), ("torch_xla.debug", debug), ("torch_xla.debug.metrics", metrics)):
        monkeypatch.setitem(sys.modules, name, module)
    return compiled


def test_training_counts_xla_compilations_like_a_generate_session(monkeypatch):
    import torch

    from tpubench.scenarios.train.steps import measure_training

    compiled = fake_torch_xla(monkeypatch)

    class Step:
        """XLA compiles the step's graph on the first call and again on the third (a recompile
        while timed: warm-up is 0 steps, so steps 2 and on are timed)."""
        calls = 0

        def step(self):
            self.calls += 1
            if self.calls in (1, 3):
                compiled["n"] += 1
            return torch.tensor(1.0)

    point = make_point(warmup=0, min_iterations=3)
    point = type(point)(**{**point.to_dict(), "scenario_kind": "train"})
    m = measure_training(Step(), point, "xla")
    assert m.compile["graphs_compiled_first_call"] == 1
    assert m.compile["recompiles_timed"] == 1
    assert m.peak_memory_bytes is None   # torch_xla reports no peak; never a made-up figure


def test_the_session_is_the_device_layer():
    assert issubclass(TorchSession, TorchDevice)
    options = {"backend": "eager", "fullgraph": True}
    assert TorchDevice("cuda").compile_backend(options) == ("eager", {"fullgraph": True})
    assert TorchDevice("tpu").compile_backend({"mode": "max-autotune"}) == ("tpu", {"mode": "max-autotune"})


def test_no_module_imports_another_modules_private_names():
    root = Path(tpubench.__file__).parent
    private = []
    for path in root.rglob("*.py"):
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tpubench"):
                private += [f"{path.relative_to(root)}: {node.module}.{a.name}" for a in node.names
                            if a.name.startswith("_") and not a.name.startswith("__")]
    assert private == []
