"""Summary statistics, confidence intervals and outlier detection: pure functions over samples.

Everything here takes plain sequences of floats (seconds, tokens/s, ...) and returns plain
dicts or floats, so it is tested on hand-computed cases and shared by every backend.

Times, rates and costs cannot be negative, so their intervals are made where they cannot cross
zero: the Student t interval of the mean is taken in log space (`positive_mean_ci95`), which keeps
its relative half-width (t x standard error / mean, what `relative_ci_half_width` returns and the
stopping rule compares with target_ci) and never reaches zero however few or noisy the samples. The CI of a
cost carried from the CI of a time or a throughput (`cost_ci_from_*`) also takes numpy/pandas
arrays: the scenarios' cost bases and money use it over whole result tables.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

PERCENTILES = (50, 90, 95, 99)

# Two-sided 95% Student-t critical values t(0.975, df) for df = 1..30.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)
_Z975 = 1.959963984540054


def t_critical_95(df: int) -> float:
    """t(0.975, df); a table up to 30, then the Cornish-Fisher expansion (error < 1e-4)."""
    if df < 1:
        return math.nan
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    return (z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3))


def mean_ci95(samples: Sequence[float]) -> tuple[float, float, float]:
    """Mean and the 95% confidence interval of the mean (Student t). NaN bounds under 2 samples."""
    x = np.asarray(samples, dtype=float)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    m = float(x.mean())
    if x.size < 2:
        return m, math.nan, math.nan
    half = t_critical_95(x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return m, m - half, m + half


def relative_ci_half_width(samples: Sequence[float]) -> float:
    """Half-width of the 95% CI of the mean divided by the mean (inf when undefined): t x standard
    error / |mean|, which is also the half-width of positive_mean_ci95's interval in log space."""
    m, lo, hi = mean_ci95(samples)
    if not math.isfinite(lo) or m == 0:
        return math.inf
    return (hi - lo) / 2 / abs(m)


def positive_mean_ci95(samples: Sequence[float]) -> tuple[float, float, float]:
    """Mean and a 95% CI of the mean that stays above zero, for samples that cannot be negative
    (seconds, tokens/s): the t interval carried to log space by the delta method,
    mean x exp(-/+ t x se / mean), where se is the standard error. Its log half-width equals the
    linear interval's relative half-width, so the two agree to first order when the spread is small;
    with 5 samples and a CV of 100% the linear interval reaches -0.24x the mean, this one 0.29x-3.5x.
    (The log-transformed interval of a positive estimate, e.g. Kalbfleisch & Prentice, The Statistical
    Analysis of Failure Time Data, 2nd ed., section 1.3.) Samples with a negative value, or a mean of
    zero, get the plain t interval."""
    x = np.asarray(samples, dtype=float)
    m, lo, hi = mean_ci95(x)
    if not math.isfinite(lo) or m <= 0 or bool((x < 0).any()):
        return m, lo, hi
    log_half = (hi - lo) / 2 / m
    return m, m * math.exp(-log_half), m * math.exp(log_half)


def summarize(samples: Sequence[float]) -> dict[str, float]:
    """mean, stdev (n-1), cv, min, max, p50/p90/p95/p99 (linear interpolation), ci95 bounds, n.
    The CI of samples that are all >= 0 is positive_mean_ci95's (above zero); of others, mean_ci95's."""
    x = np.asarray(samples, dtype=float)
    n = int(x.size)
    if n == 0:
        keys = ["mean", "stdev", "cv", "min", "max", *(f"p{p}" for p in PERCENTILES), "ci95_low", "ci95_high"]
        return {**{k: math.nan for k in keys}, "n": 0}
    m, lo, hi = positive_mean_ci95(x)
    sd = float(x.std(ddof=1)) if n > 1 else 0.0
    out = {
        "mean": m,
        "stdev": sd,
        "cv": sd / m if m else math.nan,
        "min": float(x.min()),
        "max": float(x.max()),
    }
    for p, v in zip(PERCENTILES, np.percentile(x, PERCENTILES)):
        out[f"p{p}"] = float(v)
    out["ci95_low"] = lo
    out["ci95_high"] = hi
    out["n"] = n
    return out


def mad_outliers(samples: Sequence[float], threshold: float = 3.5) -> list[int]:
    """Indices whose modified z-score 0.6745*(x - median)/MAD exceeds `threshold` (Iglewicz-Hoaglin)."""
    x = np.asarray(samples, dtype=float)
    if x.size < 3:
        return []
    med = np.median(x)
    mad = np.median(np.abs(x - med))
    if mad == 0:
        # More than half the samples are identical: fall back to the mean absolute deviation.
        meanad = np.mean(np.abs(x - med))
        if meanad == 0:
            return []
        z = (x - med) / (1.253314 * meanad)
    else:
        z = 0.6745 * (x - med) / mad
    return [int(i) for i in np.flatnonzero(np.abs(z) > threshold)]


def drift(samples: Sequence[float]) -> float:
    """Relative change of the mean between the first and last third of the run (thermal drift)."""
    x = np.asarray(samples, dtype=float)
    if x.size < 6:
        return 0.0
    third = x.size // 3
    first, last = x[:third].mean(), x[-third:].mean()
    return float((last - first) / first) if first else 0.0


def ratio_with_uncertainty(a_mean: float, a_half: float, b_mean: float, b_half: float) -> tuple[float, float]:
    """a/b and its 95% half-width, propagating independent relative errors in quadrature."""
    if b_mean == 0:
        return math.nan, math.nan
    r = a_mean / b_mean
    rel = math.sqrt((a_half / a_mean) ** 2 + (b_half / b_mean) ** 2) if a_mean else math.nan
    return r, abs(r) * rel


def verdict(ratio: float, half_width: float, higher_is_better: bool = True,
            words: tuple[str, str] = ("faster", "slower")) -> str:
    """'faster' / 'slower' / 'tie within noise' for a ratio a/b whose 95% interval is ratio ± half."""
    if not math.isfinite(ratio):
        return "unknown"
    lo, hi = ratio - (half_width if math.isfinite(half_width) else 0), ratio + (half_width if math.isfinite(half_width) else 0)
    if lo <= 1.0 <= hi:
        return "tie within noise"
    better = (lo > 1.0) == higher_is_better
    return words[0] if better else words[1]


def cost_ci_from_time_ci(cost, time_mean, time_low, time_high):
    """(low, high) of a cost proportional to a time whose 95% CI is [time_low, time_high]. A time's
    lower bound below zero (a result file written before intervals were taken in log space) says no
    more than zero: the cost's lower bound is then 0, never a negative price."""
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.divide(cost, time_mean)
        low = np.multiply(scale, np.maximum(time_low, 0.0))
        high = np.multiply(scale, time_high)
    if np.ndim(low) == 0:
        return float(low), float(high)
    return low, high


def cost_ci_from_throughput_ci(cost, throughput_mean, throughput_low, throughput_high):
    """(low, high) of a cost proportional to 1/throughput: the low cost bound comes from the high
    throughput bound; a throughput CI reaching zero leaves the cost unbounded above."""
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.multiply(cost, throughput_mean)
        low = np.divide(scaled, throughput_high)
        high = np.where(np.asarray(throughput_low) > 0, np.divide(scaled, throughput_low), np.inf)
    if np.ndim(high) == 0:
        return float(low), float(high)
    return low, high
