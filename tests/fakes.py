"""A mock executor for the measurement loop (as hyperfine tests its own): a fake clock and a
scripted session whose calls take exactly the seconds they are told to."""

from __future__ import annotations

import numpy as np

from tpubench.measure import timing as measure
from tpubench.scenarios.generate import measure as generate
from tpubench.workload_spec.point import RunPoint


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def install_clock(monkeypatch) -> FakeClock:
    clock = FakeClock()
    monkeypatch.setattr(measure.time, "perf_counter", clock)
    monkeypatch.setattr(generate.time, "perf_counter", clock)
    return clock


class ScriptedSession:
    """Prefill call i takes prefill_s[i] seconds (the last value repeats); each decode step decode_s.

    Prefill call numbers in `compiling_calls` count as one compiled graph each.
    Prefill's greedy token is 9, decode step s yields s % vocab; first-step logits are 0..vocab-1.
    """

    identical_weights = True

    def __init__(self, clock, batch, prefill_s=(1.0, 0.1), decode_s=0.01, vocab=10, compiling_calls=(1,)):
        self.clock, self.batch, self.vocab = clock, batch, vocab
        self.compiling_calls = set(compiling_calls)   # prefill calls (1-based) that "compile" a graph
        self.prefill_s, self.decode_s = list(prefill_s), decode_s
        self.calls = 0
        self.fences = 0
        self.last_logits = None

    def reset(self):
        pass

    def prefill(self):
        self.clock.t += self.prefill_s[min(self.calls, len(self.prefill_s) - 1)]
        self.calls += 1
        self.last_logits = np.tile(np.arange(self.vocab, dtype=np.float32), (self.batch, 1))
        return np.full(self.batch, 9)

    def decode(self, tokens, step):
        self.clock.t += self.decode_s
        return np.full(self.batch, step % self.vocab)

    def fence(self):
        self.fences += 1

    def compile_count(self):
        return sum(1 for c in self.compiling_calls if c <= self.calls)

    def peak_memory_bytes(self):
        return 123

    def reset_peak_memory(self):
        pass

    def tokens_to_host(self, tokens):
        return np.stack(tokens, axis=1).tolist()

    def logits_to_host(self, logits):
        return logits


def make_point(batch_size=2, input_length=8, output_length=5, **measurement) -> RunPoint:
    m = dict(warmup=1, min_iterations=4, min_seconds=0.0, max_seconds=100.0, target_ci=None, max_cv=0.1, seed=0)
    m.update(measurement)
    return RunPoint(workload="w", scale="full", family="f", hub_id=None, weights="random", trust_remote_code=False,
                    dtype="float32", experts_implementation=None, model_config={}, batch_size=batch_size,
                    input_length=input_length, output_length=output_length, measurement=m)
