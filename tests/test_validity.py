"""Validity rules, noise, warnings with hints, and adaptive stopping on synthetic samples."""

import math

import numpy as np
import pytest
from fakes import ScriptedSession, make_point

from tpubench.measure import timing as measure
from tpubench.measure.validity import assess, noise, verdict_record, warnings_for
from tpubench.scenarios.generate import measure as generate

M = dict(min_iterations=5, min_seconds=1.0, max_seconds=60.0, max_cv=0.1, target_ci=0.05)
STEADY = [100, 101, 99, 100, 100]


def ok_kwargs(**kw):
    base = dict(recompiles=0, generated_tokens=32, expected_tokens=32)
    base.update(kw)
    return base


def test_valid_run():
    assert assess(**ok_kwargs()) == (True, [])
    assert noise(STEADY, iterations=10, measure_s=2.0, measurement=M) == []


@pytest.mark.parametrize("change, words", [
    (dict(recompiles=2), "2 recompilation(s) during the timed phase"),
    (dict(generated_tokens=31), "generated 31 tokens, expected 32"),
    (dict(on_device=False), "fell back to the host"),
    (dict(exceeds_peak=True), "more than the chip's peak"),
    (dict(recompile_limit_hits=1), "recompile limit"),
])
def test_each_rule_invalidates_with_its_reason(change, words):
    valid, reasons = assess(**ok_kwargs(**change))
    assert not valid and len(reasons) == 1 and words in reasons[0]


@pytest.mark.parametrize("change, words", [
    (dict(iterations=3), "only 3 timed iterations, fewer than min_iterations=5 (max_seconds=60 reached)"),
    (dict(measure_s=0.5), "timed phase lasted 0.50 s, under min_seconds=1"),
    # mean 82.6, sd 23.954: CV 29.0% (a busy host), above max_cv
    (dict(throughput=[100, 100, 60, 100, 53]), "throughput CV 29.0% above max_cv=10%"),
    # CV 1.136%, 5 samples: t 2.776 x 0.01136 / sqrt(5) = 1.41%, wider than a 1% target
    (dict(throughput=[100, 102, 99, 100, 101], measurement={**M, "target_ci": 0.01}),
     "95% CI ±1.4% still wider than target_ci=1%"),
])
def test_what_a_busy_host_does_is_noise_not_invalidity(change, words):
    kw = dict(throughput=STEADY, iterations=10, measure_s=2.0, measurement=M)
    kw.update(change)
    found = noise(kw.pop("throughput"), **kw)
    assert any(f.startswith(words) for f in found), found
    record = verdict_record([], [100, 100, 60, 100, 53], iterations=10, measure_s=2.0, measurement=M)
    assert record["valid"] and record["reasons"] == [] and record["cv"] == pytest.approx(0.2900, abs=1e-4)
    assert verdict_record(["generated 31 tokens, expected 32"], STEADY, iterations=10, measure_s=2.0,
                          measurement=M)["valid"] is False


def test_warnings_with_hints():
    steady = [100.0] * 9
    assert warnings_for(steady, [1.0], [1.0] * 9, 0.1) == []
    w = warnings_for(steady + [40.0], [3.0], [1.0] * 10, 0.1)
    assert any("outlier" in x for x in w)
    assert any("first warm-up iteration 3.0x slower" in x for x in w)
    drifting = list(np.linspace(100, 80, 12))
    assert any("drifted" in x for x in warnings_for(drifting, [], [], 0.5))
    # CV 22.4%: a warning between max_cv / 2 and max_cv; above max_cv the point is marked noisy instead
    assert any("high variation" in x for x in warnings_for([100, 130, 70, 110, 90], [], [], 0.3))
    assert not any("high variation" in x for x in warnings_for([100, 130, 70, 110, 90], [], [], 0.1))
    assert any("2 torch.compile graph break(s)" in x for x in warnings_for(steady, [], [], 0.1, graph_breaks=2))


def point(**m):
    return make_point(batch_size=1, input_length=4, output_length=2, **{"warmup": 0, "min_iterations": 3, **m})


def NoisySession(clock, prefill_s):
    return ScriptedSession(clock, batch=1, prefill_s=prefill_s)


def test_adaptive_stopping_reaches_target_ci(clock):
    # alternating 0.09 / 0.11 s prefill: relative CI half-width shrinks like t * 0.1 / sqrt(n)
    seq = [0.1] + [0.09, 0.11] * 200
    fixed = generate.measure_generate(NoisySession(clock, seq), point())
    assert fixed.measure_iterations == 3
    adaptive = generate.measure_generate(NoisySession(clock, seq), point(target_ci=0.02))
    n = adaptive.measure_iterations
    rel = measure.achieved_ci(adaptive.samples["output_tokens_per_s"])
    assert rel <= 0.02 and n > 3
    shorter = adaptive.samples["output_tokens_per_s"][:-1]
    assert measure.achieved_ci(shorter) > 0.02          # it stopped at the first iteration that met it


def test_adaptive_stopping_gives_up_at_max_seconds(clock):
    seq = [0.1] + [0.05, 0.5] * 200                     # far too noisy for 0.1%
    m = generate.measure_generate(NoisySession(clock, seq), point(target_ci=0.001, max_seconds=5.0))
    assert m.timing["measure_s"] >= 5.0 and m.timing["measure_s"] < 5.0 + 0.6
    assert math.isfinite(measure.achieved_ci(m.samples["output_tokens_per_s"]))
