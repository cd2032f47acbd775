"""The answer as a decision, piece by piece on hand-computed cases: an option's operating point at a
service level along its sweep (never extrapolated), a latency at a percentile, the stated default
service level, the workload's `slo:` and `volume:`, the estimate's sweep of loads, and the held-out
pairs that give two estimates' shared ratio interval."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from helpers_cli import run_cli

from tpubench.estimate.command import MAX_SWEEP_LOAD, load_sweep
from tpubench.estimate.features import Point
from tpubench.estimate.models import published_model
from tpubench.estimate.pairs import PairMisses, comparable_pairs
from tpubench.output.answer.operating_point import (
    AT_LEAST,
    INTERPOLATED,
    MEETS,
    MISSES,
    SweepPoint,
    operating_point,
)
from tpubench.output.answer.service_level import Slo, at_percentile, default_slo
from tpubench.output.answer.verdict import plans_disagree

SLO = Slo(ttft_s=1.0, tpot_s=0.05, percentile=99)


def _point(load, ttft, tpot, usd):
    return SweepPoint(load=load, ttft_s=ttft, tpot_s=tpot, usd_per_mtok=usd, usd_per_mtok_low=usd * 0.8,
                      usd_per_mtok_high=usd * 1.25, tokens_per_s_per_chip=100 * load)


# --- the operating point ---------------------------------------------------------------------------

def test_the_cheapest_load_that_meets_is_interpolated_up_to_the_binding_bound():
    # TPOT 40 ms at load 64 (meets), 80 ms at 128 (misses): in log(load) the 50 ms bound is crossed at
    # t = ln(50/40) / ln(80/40) = 0.3219 of the way, load 64 x 2^t, and every figure likewise.
    sweep = [_point(16, 0.2, 0.02, 0.4), _point(64, 0.3, 0.04, 0.2), _point(128, 0.5, 0.08, 0.1)]
    op = operating_point(sweep, SLO)
    t = math.log(50 / 40) / math.log(2)
    assert op.status == INTERPOLATED and op.binding == "TPOT" and op.ranked
    assert op.point.load == pytest.approx(64 * 2 ** t)
    assert op.point.tpot_s == pytest.approx(0.05)
    assert op.point.usd_per_mtok == pytest.approx(0.2 * 0.5 ** t)
    assert op.point.ttft_s == pytest.approx(0.3 * (0.5 / 0.3) ** t)
    assert op.tokens_per_s_per_user == pytest.approx(20)
    assert "interpolated: TPOT at its bound" in op.words()


def test_the_tighter_bound_binds():
    # TTFT crosses 1 s a quarter of the way (0.5 -> 16: ln 2 / ln 32 = 0.2), TPOT half way: TTFT binds.
    sweep = [_point(8, 0.5, 0.025, 0.2), _point(16, 16.0, 0.1, 0.1)]
    op = operating_point(sweep, SLO)
    assert op.binding == "TTFT" and op.point.ttft_s == pytest.approx(1.0) and op.point.load == pytest.approx(8 * 2 ** 0.2)


def test_a_sweep_that_meets_at_its_top_is_at_least_that_cheap_never_extrapolated():
    sweep = [_point(1, 0.1, 0.01, 1.0), _point(8, 0.2, 0.02, 0.3)]
    op = operating_point(sweep, SLO)
    assert op.status == AT_LEAST and op.point.load == 8 and op.point.usd_per_mtok == 0.3
    assert "at least this cheap" in op.words()


def test_a_sweep_that_misses_at_every_load_says_by_how_much_at_its_nearest():
    sweep = [_point(1, 0.3, 0.062, 1.0), _point(8, 0.4, 0.09, 0.3)]
    op = operating_point(sweep, SLO)
    assert op.status == MISSES and not op.ranked and op.point.load == 1
    assert op.miss == "TPOT p99 62 ms > 50 ms at load 1 (1.24x)"


def test_a_figure_a_point_does_not_give_cannot_meet_its_bound():
    op = operating_point([_point(4, math.nan, 0.02, 0.5)], SLO)
    assert op.status == MISSES and op.miss == "no TTFT p99 given"
    # Without bounds (no service level known), the cheapest point.
    free = operating_point([_point(1, math.nan, 0.2, 0.5), _point(4, math.nan, 0.3, 0.2)], Slo(None, None))
    assert free.status == AT_LEAST and free.point.load == 4


def test_a_meeting_point_whose_next_load_is_dearer_is_taken_as_measured():
    sweep = [_point(8, 0.2, 0.02, 0.3), _point(16, 0.2, 0.08, 0.5)]     # the next load misses and costs more
    assert operating_point(sweep, SLO).status == MEETS


# --- a latency at a percentile, and the service level ---------------------------------------------

def test_a_percentile_between_the_median_and_the_99th_reads_a_lognormal():
    assert at_percentile(0.1, 0.4, 50) == 0.1 and at_percentile(0.1, 0.4, 99) == 0.4
    # z(0.9) / z(0.99) = 1.2816 / 2.3263: 0.1 x 4^0.5509.
    assert at_percentile(0.1, 0.4, 90) == pytest.approx(0.1 * 4 ** (1.2815516 / 2.3263479), rel=1e-6)
    assert math.isnan(at_percentile(0.1, math.nan, 95)) and math.isnan(at_percentile(math.nan, math.nan, 99))


def test_the_default_service_level_is_the_nearest_mlperf_model_s_server_constraint():
    qwen3_moe = published_model("Qwen/Qwen3-30B-A3B")[1]          # mixture-of-experts, 30.5B / 3.3B active
    slo = default_slo(qwen3_moe)
    assert (slo.ttft_s, slo.tpot_s, slo.percentile, slo.default) == (2.0, 0.2, 99, True)
    assert "mixtral-8x7b" in slo.source and "mlperf.conf" in slo.source and "set `slo:`" in slo.source
    dense_8b = published_model("meta-llama/Llama-3.1-8B-Instruct")[1]
    assert (default_slo(dense_8b).ttft_s, default_slo(dense_8b).tpot_s) == (2.0, 0.1)
    assert SLO.words() == "TTFT p99 ≤ 1 s, TPOT p99 ≤ 50 ms (20 tok/s per user)"


def test_the_plans_disagreement_is_said_first():
    assert plans_disagree({"on-demand": "A", "spot": "A"}) is None
    assert plans_disagree({"on-demand": "A", "spot": "B", "1-year commitment": "B", "reservation": ""}) == \
        "The answer turns on the plan: A on on-demand; B on spot, 1-year commitment"


@pytest.mark.parametrize("slo, words", [
    ("{ttft_s: 2, tpot_s: 0.05, output_tokens_per_s_per_user: 20}", "give tpot_s or output_tokens_per_s_per_user"),
    ("{percentile: 99}", "an slo needs a bound"),
    ("{tpot_s: 0.05, percentile: 97}", "slo.percentile"),
    ("{tpot_s: -1}", "slo.tpot_s"),
    ("{tpot_s: 0.05, percentle: 99}", "did you mean 'percentile'"),
])
def test_a_bad_slo_is_a_one_line_error(tmp_path, monkeypatch, capsys, slo, words):
    spec = tmp_path / "w.yaml"
    spec.write_text("name: w\nmodel: {family: qwen3, config: {hidden_size: 64, num_hidden_layers: 1, "
                    "num_attention_heads: 2, num_key_value_heads: 1, head_dim: 32, intermediate_size: 128, "
                    f"vocab_size: 256}}}}\nscenario: {{batch_size: 1, input_length: 8, output_length: 4}}\nslo: {slo}\n")
    code, _, err = run_cli(monkeypatch, capsys, "validate", str(spec))
    assert code == 2 and err.count("\n") == 1 and str(spec) in err and words in err


def test_output_tokens_per_user_is_one_over_tpot_and_a_volume_is_read(tmp_path):
    from tpubench.estimate.points import workload_points
    from tpubench.output.answer.service_level import slo_of

    text = open("workloads/qwen3_moe.yaml").read()
    spec = tmp_path / "w.yaml"
    spec.write_text(text.replace("slo: {ttft_s: 2.0, tpot_s: 0.05, percentile: 99}",
                                 "slo: {output_tokens_per_s_per_user: 25, percentile: 90}"))
    wl = workload_points(spec)
    slo = slo_of(wl, str(spec))
    assert (slo.ttft_s, slo.tpot_s, slo.percentile, slo.default) == (None, 0.04, 90, False)
    assert wl.volume.tokens_per_day == 1e9 and wl.volume.peak_factor == 1.0


# --- the estimate's own sweep ----------------------------------------------------------------------

def test_the_estimate_sweeps_powers_of_two_up_to_what_fits_and_that_most():
    from tpubench.estimate.chips import chip

    shape = published_model("Qwen/Qwen3-30B-A3B")[1]
    point = Point(shape=shape, weight_bytes=2.0, kv_bytes=2.0, compute_precision="bf16", chips=8, concurrency=1,
                  input_len=1024, output_len=256)
    loads = load_sweep(point, chip("H100", "bf16"))
    from tpubench.estimate.features import sequences_that_fit

    top = math.floor(sequences_that_fit(point, chip("H100", "bf16").memory_bytes))
    assert loads[:4] == [1, 2, 4, 8] and loads[-1] == top and all(b == 2 * a for a, b in zip(loads[:-2], loads[1:-1]))
    assert load_sweep(point, None)[-1] == MAX_SWEEP_LOAD           # memory unknown: bounded
    huge = Point(shape=published_model("deepseek-ai/DeepSeek-R1")[1], weight_bytes=2.0, kv_bytes=2.0,
                 compute_precision="bf16", chips=1, concurrency=1, input_len=1024, output_len=256)
    assert load_sweep(huge, chip("H100", "bf16")) == [1.0]          # the weights alone do not fit: refused later


# --- two estimates' shared errors ------------------------------------------------------------------

def _pair_rows():
    return pd.DataFrame([
        {"model": "m", "arrival": "closed loop", "family": "A", "input_length": 1000, "output_length": 1000, "concurrency": 8},
        {"model": "m", "arrival": "closed loop", "family": "B", "input_length": 1050, "output_length": 1000, "concurrency": 10},
        {"model": "m", "arrival": "closed loop", "family": "B", "input_length": 1000, "output_length": 1000, "concurrency": 64},
        {"model": "m", "arrival": "static batch", "family": "B", "input_length": 1000, "output_length": 1000, "concurrency": 8},
        {"model": "n", "arrival": "closed loop", "family": "B", "input_length": 1000, "output_length": 1000, "concurrency": 8},
        {"model": "m", "arrival": "closed loop", "family": "A", "input_length": 1000, "output_length": 1000, "concurrency": 9},
    ])


def test_a_pair_is_one_model_on_two_families_at_comparable_points():
    # Rows 0 and 5 share a family; row 2's load is 8x away; row 3 arrives otherwise; row 4 is another model.
    assert comparable_pairs(_pair_rows()).tolist() == [[0, 1], [1, 5]]


def test_the_ratio_half_width_is_the_conformal_quantile_of_the_pairs_misses():
    n = 20
    rows = pd.DataFrame([{"model": f"m{k}", "arrival": "closed loop", "family": fam, "input_length": 1000,
                          "output_length": 1000, "concurrency": 8} for k in range(n) for fam in ("A", "B")])
    errors = np.array([0.01 * k for k in range(n)])
    loo = np.ravel([[e, -e / 2] for e in errors])          # each model's pair misses by e + e/2 = 1.5 e
    pairs = PairMisses.of(rows, loo)
    q, basis = pairs.halfwidth("B", "A")
    assert q == pytest.approx(np.sort(1.5 * errors)[math.ceil((n + 1) * 0.9) - 1]) and "20 held-out pairs" in basis
    assert pairs.halfwidth("A", "C") is None               # no pairs: the caller takes the errors as independent
    few = PairMisses.of(rows.head(10), loo[:10])            # 5 pairs: fewer than 90% needs
    assert few.halfwidth("A", "B") is None
    # Twenty pairs of two models: one model's many pairs do not stand for every model.
    two = rows.assign(model=["m0" if k < 20 else "m1" for k in range(2 * n)], input_length=[
        1000 + 10 * (k // 2) for k in range(2 * n)])
    assert len(comparable_pairs(two)) >= 9 and PairMisses.of(two, loo).halfwidth("A", "B") is None
