"""CPU fallback seen per op (backends.torch.FallbackWatch): a stack's fallback warning, log record
or torch_xla `aten::` counter while timed makes the point invalid and names the op."""

import logging
import sys
import types
import warnings

import pytest
import yaml
from fakes import ScriptedSession, make_point

from tpubench.backends.torch import FallbackWatch, TorchSession, fallback_op
from tpubench.measure.validity import assess
from tpubench.run.runner import run_sweep
from tpubench.scenarios.generate import measure as generate

TORCHTPU_WARNING = "Falling back to CPU for op aten::foo"


def test_fallback_messages_name_their_op():
    assert fallback_op(TORCHTPU_WARNING) == "aten::foo"
    assert fallback_op("aten::_fused_rms_norm.default falls back to the CPU") == "aten::_fused_rms_norm.default"
    assert fallback_op("operator not lowered; falling back to host") == "operator not lowered; falling back to host"
    assert fallback_op("CPU_FALLBACK: aten::_unique2 ran on the host") == "aten::_unique2"
    assert fallback_op("TypedStorage is deprecated") is None


def test_watch_collects_warnings_and_logs_and_passes_others_on():
    with warnings.catch_warnings(record=True) as outer:
        warnings.simplefilter("always")
        with FallbackWatch("cpu") as watch:
            warnings.warn(TORCHTPU_WARNING)
            warnings.warn(TORCHTPU_WARNING)             # once in the list
            logging.getLogger("torch_neuronx").warning("falling back to CPU for aten::bar")
            warnings.warn("an unrelated warning", UserWarning)
    assert sorted(watch.ops) == ["aten::bar", "aten::foo"]
    assert [str(w.message) for w in outer] == ["an unrelated warning"]


def test_torch_xla_fallback_counters(monkeypatch):
    counters = {"aten::nonzero": 2, "CachedCompile": 5}
    metrics = types.SimpleNamespace(counter_names=lambda: list(counters), counter_value=counters.get)
    debug = types.ModuleType("torch_xla.debug")
    debug.metrics = metrics
    monkeypatch.setitem(sys.modules, "torch_xla", types.ModuleType("torch_xla"))
    monkeypatch.setitem(sys.modules, "torch_xla.debug", debug)
    monkeypatch.setitem(sys.modules, "torch_xla.debug.metrics", metrics)
    with FallbackWatch("xla") as watch:
        counters["aten::nonzero"] += 3          # ran on the CPU while watched
        counters["aten::_local_scalar_dense"] = 1   # `.item()`: a host read, not a fallback
        counters["CachedCompile"] += 1
    assert watch.ops == ["aten::nonzero"]
    with FallbackWatch("xla") as quiet:
        pass
    assert quiet.ops == []


class FallingBackSession(ScriptedSession):
    """Warns like TorchTPU on every decode step from prefill call `from_call` on."""

    def __init__(self, clock, batch, from_call, **kw):
        super().__init__(clock, batch, **kw)
        self.from_call = from_call

    def watch_fallbacks(self):
        return FallbackWatch("tpu")

    def decode(self, tokens, step):
        if self.calls >= self.from_call:
            warnings.warn(TORCHTPU_WARNING)
        return super().decode(tokens, step)


def test_fallback_while_timed_makes_the_point_invalid_naming_the_op(clock):
    point = make_point()   # first call, 1 warm-up, then timed from prefill call 3 on
    m = generate.measure_generate(FallingBackSession(clock, batch=2, from_call=3), point)
    assert m.fallback_ops_timed == ["aten::foo"] and m.fallback_ops_untimed == []
    valid, reasons = assess(recompiles=0, generated_tokens=10, expected_tokens=10, fallback_ops=m.fallback_ops_timed)
    assert not valid and reasons == ["1 op(s) fell back to the CPU while timed: aten::foo"]
    # Seen only in the first call: the point stays valid, with a warning naming the op.
    early = generate.measure_generate(_first_call_only(clock), point)
    assert early.fallback_ops_timed == [] and early.fallback_ops_untimed == ["aten::foo"]


def _first_call_only(clock):
    session = FallingBackSession(clock, batch=2, from_call=1)
    plain_decode = ScriptedSession.decode

    def decode(tokens, step):
        if session.calls == 1:
            warnings.warn(TORCHTPU_WARNING)
        return plain_decode(session, tokens, step)

    session.decode = decode
    return session


@pytest.mark.slow
def test_a_real_torch_run_with_an_op_falling_back(tmp_path, tiny_workload, monkeypatch):
    data = yaml.safe_load(tiny_workload.read_text())
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data))
    real_decode = TorchSession.decode

    def decode(self, tokens, step):
        warnings.warn(TORCHTPU_WARNING)   # as a stack whose op ran on the host would
        return real_decode(self, tokens, step)

    monkeypatch.setattr(TorchSession, "decode", decode)
    (outcome,) = run_sweep(path, scale="small", out_dir=tmp_path / "r")
    result = outcome.result
    assert result.status == "ok", result.error
    assert not result.validity.valid
    assert any("fell back to the CPU while timed: aten::foo" in r for r in result.validity.reasons)
    assert result.compile["cpu_fallback_ops_timed"] == ["aten::foo"]


@pytest.mark.parametrize("from_step, timed, untimed", [(0, ["aten::foo"], []), (99, [], [])])
def test_training_watches_its_timed_steps(from_step, timed, untimed):
    import torch

    from tpubench.scenarios.train.steps import measure_training

    class Step:
        calls = 0

        def step(self):
            self.calls += 1
            if self.calls > from_step:
                warnings.warn(TORCHTPU_WARNING)
            return torch.tensor(1.0)

    point = make_point()
    point = type(point)(**{**point.to_dict(), "scenario_kind": "train"})
    m = measure_training(Step(), point, "cpu")
    assert m.fallback_ops_timed == timed and m.fallback_ops_untimed == untimed
