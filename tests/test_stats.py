import math

import pytest

from tpubench.measure import stats


def test_summarize_hand_computed():
    # x = 1, 2, 3, 4: mean 2.5; sample variance = (2.25+0.25+0.25+2.25)/3 = 5/3; sd = 1.2910
    s = stats.summarize([1, 2, 3, 4])
    assert s["mean"] == 2.5
    assert s["stdev"] == pytest.approx(math.sqrt(5 / 3))
    assert s["cv"] == pytest.approx(math.sqrt(5 / 3) / 2.5)
    assert (s["min"], s["max"], s["n"]) == (1, 4, 4)
    # linear interpolation: p50 at rank 1.5 -> 2.5; p90 at rank 2.7 -> 3.7
    assert s["p50"] == 2.5
    assert s["p90"] == pytest.approx(3.7)
    assert s["p99"] == pytest.approx(3.97)
    # CI: t(0.975, 3) = 3.182; half = 3.182 * 1.2910 / 2 = 2.0540, relative 2.0540 / 2.5 = 0.8216,
    # taken in log space (positive samples): 2.5 * exp(-/+0.8216) = 1.0993 .. 5.6855
    assert stats.mean_ci95([1, 2, 3, 4])[1:] == (pytest.approx(2.5 - 2.0540, abs=1e-3),
                                                 pytest.approx(2.5 + 2.0540, abs=1e-3))
    assert s["ci95_low"] == pytest.approx(1.0993, abs=1e-3)
    assert s["ci95_high"] == pytest.approx(5.6855, abs=1e-3)


def test_positive_interval_of_a_tiny_noisy_sample():
    """Three seconds-long samples with a CV over 100% (a busy host): the plain t interval of the mean
    reaches below zero, the interval of a positive quantity does not, and neither do the throughput
    and cost intervals carried from it."""
    x = [0.05, 0.5, 0.06]
    # mean 0.20333; sd 0.25697; se 0.14836; t(0.975, 2) = 4.303 -> half 0.63841, relative 3.1397
    m, lo, hi = stats.mean_ci95(x)
    assert m == pytest.approx(0.20333, abs=1e-5) and lo == pytest.approx(0.20333 - 0.63841, abs=1e-4) and lo < 0
    s = stats.summarize(x)
    assert s["ci95_low"] == pytest.approx(0.20333 * math.exp(-3.1397), rel=1e-3)     # 0.008806
    assert s["ci95_high"] == pytest.approx(0.20333 * math.exp(3.1397), rel=1e-3)     # 4.695
    assert 0 < s["ci95_low"] < min(x) and s["ci95_high"] > max(x)
    assert stats.relative_ci_half_width(x) == pytest.approx(math.log(s["ci95_high"] / s["mean"]))
    # 4 tokens in each: tokens/s and a cost per token (proportional to the time) stay positive and finite
    rate_low, rate_high = 4 / s["ci95_high"], 4 / s["ci95_low"]
    assert 0 < rate_low < 4 / s["mean"] < rate_high < math.inf
    cost_low, cost_high = stats.cost_ci_from_throughput_ci(1.0, 4 / s["mean"], rate_low, rate_high)
    assert 0 < cost_low < 1.0 < cost_high < math.inf
    assert 0 < stats.cost_ci_from_time_ci(1.0, s["mean"], s["ci95_low"], s["ci95_high"])[0] < 1.0
    # An old file's linear interval below zero carries to a cost bound of 0, never a negative price.
    assert stats.cost_ci_from_time_ci(1.0, m, lo, hi) == (0.0, pytest.approx(hi / m))
    # Signed samples (a difference) keep the plain t interval.
    assert stats.summarize([-1.0, 1.0, 3.0])["ci95_low"] == pytest.approx(stats.mean_ci95([-1.0, 1.0, 3.0])[1])


def test_summarize_single_and_empty():
    one = stats.summarize([5.0])
    assert one["mean"] == 5.0 and one["stdev"] == 0.0 and math.isnan(one["ci95_low"])
    assert stats.summarize([])["n"] == 0


def test_t_critical_matches_table_and_expansion():
    assert stats.t_critical_95(1) == 12.706
    assert stats.t_critical_95(30) == 2.042
    # exact values: t(0.975, 40) = 2.0211, t(0.975, 120) = 1.9799
    assert stats.t_critical_95(40) == pytest.approx(2.0211, abs=2e-4)
    assert stats.t_critical_95(120) == pytest.approx(1.9799, abs=2e-4)


def test_relative_ci_half_width():
    # 10, 12: mean 11, sd sqrt(2), half = 12.706 * 1.4142 / sqrt(2) = 12.706 -> rel 1.155
    assert stats.relative_ci_half_width([10, 12]) == pytest.approx(12.706 / 11)
    assert stats.relative_ci_half_width([10]) == math.inf


def test_mad_outliers():
    # median 10, |dev| = 0,0,0.1,0.1,0.1,10 -> MAD 0.1; z(20) = 0.6745*10/0.1 = 67 -> outlier
    assert stats.mad_outliers([10, 10, 10.1, 9.9, 10.1, 20]) == [5]
    assert stats.mad_outliers([1, 2, 3, 4, 5]) == []
    assert stats.mad_outliers([5, 5, 5, 5, 9]) == [4]   # MAD 0: mean absolute deviation fallback


def test_drift():
    assert stats.drift([10] * 3 + [10] * 3 + [11] * 3) == pytest.approx(0.1)
    assert stats.drift([1, 2]) == 0.0


def test_ratio_and_verdict():
    r, half = stats.ratio_with_uncertainty(110, 2.2, 100, 2.0)
    # rel errors 0.02 and 0.02 -> sqrt(0.0008) = 0.028284; half = 1.1 * 0.028284
    assert r == pytest.approx(1.1)
    assert half == pytest.approx(1.1 * math.sqrt(0.0008))
    assert stats.verdict(r, half) == "faster"
    assert stats.verdict(0.9, 0.01) == "slower"
    assert stats.verdict(1.01, 0.05) == "tie within noise"
    assert stats.verdict(0.9, 0.01, higher_is_better=False, words=("cheaper", "dearer")) == "cheaper"


# Intervals of quantities that may be negative: a trend (a TTFT that shrinks over a window), a difference.
_SIGNED = ("slope", "delta", "drift", "energy_above_idle", "offset")


def test_no_interval_below_zero_in_the_committed_results_or_what_they_price():
    """examples/results/ (the repository's committed results) and every interval a report prices from them,
    estimates and published rows included: no lower bound below zero."""
    import json
    from datetime import date
    from pathlib import Path

    from tpubench.output.report.data import build_report
    from tpubench.records.files import iter_result_files

    root = Path(__file__).resolve().parent.parent / "examples" / "results"
    files = list(iter_result_files([root]))
    assert files
    for f in files:
        metrics = json.loads(Path(f).read_text()).get("metrics") or {}
        below = {k: v for k, v in metrics.items() if "ci95_low" in k and not any(s in k for s in _SIGNED)
                 and isinstance(v, (int, float)) and v < 0}
        assert not below, (f, below)
    data = build_report(root, today=date(2026, 12, 7), warn=lambda _: None)
    frames = [data.priced_rows.frame(), data.summary, data.answer.options]
    for frame in frames:
        lows = [c for c in frame.columns if (c.endswith("_low") or "_ci95_low" in c) and not any(s in c for s in _SIGNED)]
        assert lows, list(frame.columns)[:20]
        for c in lows:
            values = frame[c].apply(lambda v: v if isinstance(v, (int, float)) else float("nan"))
            assert not (values < 0).any(), (c, frame.loc[values < 0, c].tolist())
