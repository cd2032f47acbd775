"""The measurement loop against a mock session on a fake clock: exact, deterministic figures."""

import pytest
from fakes import ScriptedSession
from fakes import make_point as point

from tpubench.measure import timing as measure
from tpubench.scenarios.generate import measure as generate


def test_generate_metrics_exact(clock):
    session = ScriptedSession(clock, batch=2)
    m = generate.measure_generate(session, point())
    # steady state: TTFT 0.1 s; 4 decode steps of 0.01 s -> E2E 0.14 s, TPOT 0.01 s
    assert m.measure_iterations == 4
    assert m.samples["ttft_s"] == pytest.approx([0.1] * 4)
    assert m.samples["e2e_s"] == pytest.approx([0.14] * 4)
    assert m.samples["tpot_s"] == pytest.approx([0.01] * 4)
    assert m.samples["itl_s"] == pytest.approx([0.01] * 16)
    # B*O / E2E = 2*5/0.14; B*I / TTFT = 16/0.1; B*(O-1)/(E2E-TTFT) = 8/0.04
    assert m.samples["output_tokens_per_s"] == pytest.approx([10 / 0.14] * 4)
    assert m.samples["prefill_tokens_per_s"] == pytest.approx([160.0] * 4)
    assert m.samples["decode_tokens_per_s"] == pytest.approx([200.0] * 4)
    # the first call's extra 0.9 s is compile time, kept out of steady state
    assert m.compile["prefill_compile_s"] == pytest.approx(0.9)
    assert m.timing["compile_s"] == pytest.approx(0.9)
    assert m.compile["recompiles_timed"] == 0
    assert m.generated_tokens == m.expected_tokens == 10
    assert m.numerics["greedy_tokens"] == [9, 0, 1, 2, 3]
    assert m.numerics["top_ids"][0] == 9 and m.numerics["top_values"][0] == 9.0
    # a fence before every clock read: (1 + O) reads per iteration, 1 + 1 + 4 iterations
    assert session.fences == 6 * (1 + 5)


def test_summarize_samples_names_carry_units(clock):
    m = generate.measure_generate(ScriptedSession(clock, batch=2), point())
    flat = generate.summarize_samples(m.samples)
    assert flat["ttft_p50_s"] == pytest.approx(0.1)
    assert flat["tpot_p99_s"] == pytest.approx(0.01)
    assert flat["output_tokens_per_s"] == pytest.approx(10 / 0.14)
    assert "output_tokens_per_s_ci95_low" in flat and "ttft_cv" in flat and "e2e_mean_s" in flat
    assert not any(k.endswith("_s_s") for k in flat)


def test_min_seconds_extends_iterations(clock):
    m = generate.measure_generate(ScriptedSession(clock, batch=2), point(min_iterations=2, min_seconds=1.0))
    # 0.14 s per iteration: 1.0 s needs 8 iterations (7 * 0.14 = 0.98 < 1.0)
    assert m.measure_iterations == 8


def test_keep_measuring_rules():
    kw = dict(min_iterations=3, min_seconds=1.0, max_seconds=10.0, target_ci=None)
    assert measure.keep_measuring(2, 5.0, [1, 1], **kw)          # too few iterations
    assert measure.keep_measuring(5, 0.5, [1] * 5, **kw)         # too short
    assert not measure.keep_measuring(3, 1.0, [1] * 3, **kw)     # both met
    assert not measure.keep_measuring(2, 11.0, [1, 1], **kw)     # max_seconds caps everything
    ci = dict(kw, target_ci=0.02)
    assert measure.keep_measuring(3, 1.0, [1.0, 1.5, 0.5], **ci)  # CI far too wide
    assert not measure.keep_measuring(3, 1.0, [1.0, 1.001, 0.999], **ci)
    assert not measure.keep_measuring(3, 10.0, [1.0, 1.5, 0.5], **ci)  # gave up at max_seconds


def test_warmup_compile_counted_only_when_warmup_compiles(clock):
    # second call (the warm-up) takes 0.5 s instead of 0.1 s: E2E 0.54 s against 0.14 s steady
    recompiling = generate.measure_generate(
        ScriptedSession(clock, batch=2, prefill_s=[1.0, 0.5, 0.1], compiling_calls=(1, 2)), point())
    assert recompiling.compile["graphs_compiled_warmup"] == 1
    assert recompiling.compile["warmup_compile_s"] == pytest.approx(0.4)
    assert recompiling.timing["compile_s"] == pytest.approx(0.9 + 0.4)
    noisy = generate.measure_generate(ScriptedSession(clock, batch=2, prefill_s=[1.0, 0.5, 0.1]), point())
    assert noisy.compile["graphs_compiled_warmup"] == 0 and noisy.compile["warmup_compile_s"] == 0.0
