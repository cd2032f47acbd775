"""A fence that returns before deferred work has run is caught (issue 51).

TorchTPU's deferred eager mode (DEFER_AND_FUSE) runs ops only when a value that depends on them is
read, and the released torch-tpu's synchronize waits only for copies already launched. The stand-in
device below does exactly that, on a fake clock (tests/fakes.py): launching work costs the host a
little, and the work itself runs, advancing the clock by its cost, only when a value is read with
`.item()`. tpubench's own fence (backends.torch.TorchDevice.fence) and generate's whole point
measurement (measure_point: timed loop, read-back check, validity) run against it unchanged.
"""

from __future__ import annotations

import numpy as np
import pytest
from fakes import install_clock, make_point

from tpubench.backends import torch as torch_backend
from tpubench.backends.torch import TorchDevice
from tpubench.measure.fence import check_fence, fence_reason
from tpubench.scenarios.generate import measure as generate

HOST_S = 0.0001      # what queuing one step costs the host
PREFILL_S = 0.010    # what the device takes for a prefill once it runs
DECODE_S = 0.002     # ... and for a decode step


class DeferredDevice:
    """Work is queued; it runs (on the fake clock) only when a value that depends on it is read."""

    def __init__(self, clock):
        self.clock = clock
        self.pending: list[float] = []
        self.ran = 0

    def launch(self, seconds: float, batch: int) -> "Deferred":
        self.clock.t += HOST_S
        self.pending.append(seconds)
        return Deferred(self, (batch, 10))

    def run_pending(self) -> None:
        self.clock.t += sum(self.pending)
        self.ran += len(self.pending)
        self.pending.clear()

    def synchronize(self) -> None:
        """As torch-tpu 0.2.0's: waits for launched device-to-host copies; deferred ops stay queued."""


class Deferred:
    """A device value whose step (and every step before it: each reads the cache the last wrote)
    has not run yet."""

    def __init__(self, device: DeferredDevice, shape: tuple):
        self.device, self.shape = device, shape

    def sum(self):          # one more deferred op (a reduction), free here
        return Deferred(self.device, ())

    def argmax(self, dim):  # the greedy tokens [B], deferred too
        return Deferred(self.device, self.shape[:1])

    def item(self) -> float:
        self.device.run_pending()
        return 0.0


class DeferredSession(TorchDevice):
    """generate's session on the stand-in device: TorchDevice's fence, read-back and peaks, in the
    deferred mode TorchTPU reports for eager_fused."""

    identical_weights = True

    def __init__(self, device: DeferredDevice, batch: int, vocab: int = 10):
        super().__init__("tpu")
        self.deferred = True          # torch.tpu.eager_mode == DEFER_AND_FUSE on a TPU
        self.stand_in, self.batch, self.vocab = device, batch, vocab
        self.last_logits = None

    def _step(self, seconds: float):
        self.last_logits = self.stand_in.launch(seconds, self.batch)
        self.depends_on(self.last_logits)   # as TorchSession.prefill/decode do
        return self.last_logits.argmax(-1)

    def prefill(self):
        return self._step(PREFILL_S)

    def decode(self, tokens, step):
        return self._step(DECODE_S)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def reset(self):
        pass

    def compile_count(self):
        return 0

    def peak_memory_bytes(self):
        return None

    def reset_peak_memory(self):
        pass

    def on_requested_device(self):
        return True

    def tokens_to_host(self, tokens):
        return [[0] * len(tokens) for _ in range(self.batch)]

    def logits_to_host(self, logits):
        return np.zeros((self.batch, self.vocab), dtype=np.float32)


class Backend:
    device = "tpu"

    def __init__(self, session):
        self._session = session

    def session(self, built, point, prompt):
        return self._session


class Reporter:
    def phase(self, *args):
        pass


def _measure(monkeypatch, materialise: bool):
    clock = install_clock(monkeypatch)
    device = DeferredDevice(clock)
    monkeypatch.setattr(torch_backend, "_synchronize", device.synchronize)
    monkeypatch.setattr(generate, "_vocab_size", lambda point: 10)
    session = DeferredSession(device, batch=2)
    if not materialise:   # a fence that only synchronizes: what tpubench did before issue 51
        session.deferred = False
    point = make_point(batch_size=2, input_length=8, output_length=5, warmup=1, min_iterations=4)
    base = {"point": point.to_dict(), "point_key": point.key(), "backend": "torch", "device": "tpu",
            "environment": {}}
    result = generate.measure_point(Backend(session), None, point, base, 0.0, Reporter(), None)
    return result, device


def test_the_fence_runs_deferred_work_so_the_timed_loop_times_it(monkeypatch):
    result, device = _measure(monkeypatch, materialise=True)
    assert result.validity.valid, result.validity.reasons
    assert not device.pending   # nothing was left queued past a fence
    # Each clock read followed the work: TTFT is the prefill's device time (plus the host's queuing),
    # each TPOT a decode step's.
    assert result.metrics["ttft_p50_s"] == pytest.approx(PREFILL_S + HOST_S)
    assert result.metrics["tpot_p50_s"] == pytest.approx(DECODE_S + HOST_S)
    assert result.timing["fence_read_back_s"] == 0.0


def test_a_fence_that_returns_before_deferred_work_ran_makes_the_point_invalid_not_fast(monkeypatch):
    result, device = _measure(monkeypatch, materialise=False)
    # Without the read-back the loop timed only the host's queuing: 100x too fast...
    assert result.metrics["ttft_p50_s"] == pytest.approx(HOST_S)
    # ...and the check after the timed loop caught it: the read-back ran the queued work.
    assert not result.validity.valid
    assert any(r.startswith("the fence returned before the device work ran") for r in result.validity.reasons), \
        result.validity.reasons
    assert result.timing["fence_read_back_s"] > 100 * HOST_S


def test_fence_reason_is_a_share_of_the_iteration_with_a_floor():
    iteration = 0.100
    assert fence_reason(None, iteration) is None
    assert fence_reason({"read_back_after_fence_s": 0.049}, iteration) is None
    assert "the median timed iteration (100.0 ms)" in fence_reason({"read_back_after_fence_s": 0.051}, iteration)
    # a short iteration: a few milliseconds of copy latency are not a late fence
    assert fence_reason({"read_back_after_fence_s": 0.004}, 0.001) is None
    assert fence_reason({"read_back_after_fence_s": 0.006}, 0.001) is not None
    assert fence_reason({"read_back_after_fence_s": 0.006}, 0.0) is not None


def test_sessions_with_nothing_to_read_back_are_not_checked():
    class Cpu(TorchDevice):
        pass

    cpu = Cpu("cpu")
    cpu.depends_on(object())
    assert check_fence(cpu) is None            # the CPU computes before a call returns
    xla = Cpu("xla")
    xla.depends_on(object())
    assert check_fence(xla) is None            # torch_xla's fence runs the graph; a reduction would compile one
    assert check_fence(object()) is None       # a session without read_back (the JAX twin, scripted fakes)
