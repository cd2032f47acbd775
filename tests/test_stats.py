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
    # CI: t(0.975, 3) = 3.182; half = 3.182 * 1.2910 / 2 = 2.0540
    assert s["ci95_low"] == pytest.approx(2.5 - 2.0540, abs=1e-3)
    assert s["ci95_high"] == pytest.approx(2.5 + 2.0540, abs=1e-3)


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
