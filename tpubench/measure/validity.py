"""Validity rules (in the spirit of MLPerf's), noise, and warnings with hints: pure functions.

`assess` says what is wrong with a point (it is then not used: records/usable.py); `noise` says
why its figures are noisy (it is still used, marked noisy with its CV). A busy host makes a point
noisy, never invalid.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from tpubench.measure.stats import drift, mad_outliers, relative_ci_half_width

DRIFT_WARN = 0.05          # 5% change between the first and last third of the timed phase
SLOW_FIRST_FACTOR = 1.5    # a warm-up iteration this much slower than steady state


def assess(*, recompiles: int, generated_tokens: int, expected_tokens: int, on_device: bool = True,
           exceeds_peak: bool = False, recompile_limit_hits: int = 0,
           fallback_ops: Sequence[str] = ()) -> tuple[bool, list[str]]:
    """(valid, reasons): a run is valid only when every rule holds. How much was measured and how
    much it varied are noise (`noise`), never invalidity."""
    reasons = []
    if recompiles:
        reasons.append(f"{recompiles} recompilation(s) during the timed phase")
    if recompile_limit_hits:
        reasons.append("torch.compile hit its recompile limit and runs part of the model eager: "
                       "not a compiled measurement")
    if generated_tokens != expected_tokens:
        reasons.append(f"generated {generated_tokens} tokens, expected {expected_tokens}")
    if not on_device:
        reasons.append("model parameters are on the CPU: the device fell back to the host")
    if fallback_ops:
        reasons.append(f"{len(fallback_ops)} op(s) fell back to the CPU while timed: {', '.join(fallback_ops[:10])}")
    if exceeds_peak:
        reasons.append("a timing implies more than the chip's peak FLOP/s or bandwidth: a timing bug")
    return not reasons, reasons


def noise(throughput: Sequence[float], *, iterations: int, measure_s: float, measurement: dict) -> list[str]:
    """Why a point's headline (`throughput`, per timed iteration) is noisy; [] when it is not: its
    CV above max_cv, its 95% CI still wider than target_ci when the loop stopped (max_seconds ran
    out, or a world's agreed count), fewer than min_iterations in max_seconds, or a timed phase
    shorter than min_seconds (a world's count agreed from a warm-up pace that did not last)."""
    out = []
    if iterations < measurement["min_iterations"]:
        out.append(f"only {iterations} timed iterations, fewer than min_iterations={measurement['min_iterations']}"
                   f" (max_seconds={measurement['max_seconds']:g} reached)")
    if measure_s < measurement["min_seconds"]:
        out.append(f"timed phase lasted {measure_s:.2f} s, under min_seconds={measurement['min_seconds']:g}")
    cv = _cv(throughput)
    if math.isfinite(cv) and cv > measurement["max_cv"]:
        out.append(f"throughput CV {cv:.1%} above max_cv={measurement['max_cv']:.0%}")
    target, achieved = measurement.get("target_ci"), relative_ci_half_width(throughput)
    if target and math.isfinite(achieved) and achieved > target:
        out.append(f"95% CI ±{achieved:.1%} still wider than target_ci={target:.0%} when the timed loop stopped")
    return out


def verdict_record(reasons: list[str], throughput: Sequence[float], *, iterations: int, measure_s: float,
                   measurement: dict) -> dict:
    """A result's `validity` (records.result.Validity): what is wrong (`reasons`, from assess and a
    scenario's own rules; valid when there is none), and how noisy the headline `throughput` is."""
    cv = _cv(throughput)
    return {"valid": not reasons, "reasons": reasons,
            "noise": noise(throughput, iterations=iterations, measure_s=measure_s, measurement=measurement),
            "cv": cv if math.isfinite(cv) else None}


def warnings_for(throughput: Sequence[float], warmup_e2e: Sequence[float], e2e: Sequence[float],
                 max_cv: float, graph_breaks: int = 0, untimed_fallback_ops: Sequence[str] = ()) -> list[str]:
    """Flag, don't hide: outliers, high variation, slow first iterations, drift, graph breaks, CPU
    fallbacks seen before the timed phase."""
    out = []
    if untimed_fallback_ops:
        out.append(f"op(s) fell back to the CPU in the first call or warm-up: {', '.join(untimed_fallback_ops[:10])} "
                   "(stacks often report an op only the first time: it may run on the CPU in every step)")
    if graph_breaks:
        out.append(f"{graph_breaks} torch.compile graph break(s): those parts run eager "
                   "(TORCH_LOGS=graph_breaks shows where)")
    outliers = mad_outliers(throughput)
    if outliers:
        out.append(f"{len(outliers)} outlier iteration(s) by modified z-score (MAD) at {outliers[:5]}: "
                   "check for other load on the machine")
    cv = _cv(throughput)
    if math.isfinite(cv) and max_cv / 2 < cv <= max_cv:   # above max_cv the point is marked noisy
        out.append(f"high variation: throughput CV {cv:.1%}; pin the process, or quiet the host")
    if warmup_e2e and e2e:
        steady = float(np.median(e2e))
        if steady > 0 and warmup_e2e[0] > SLOW_FIRST_FACTOR * steady:
            out.append(f"first warm-up iteration {warmup_e2e[0] / steady:.1f}x slower than steady state: "
                       "raise measurement.warmup if later iterations are slow too")
    d = drift(throughput)
    if abs(d) > DRIFT_WARN:
        out.append(f"throughput drifted {d:+.1%} from the first to the last third of the run "
                   "(thermal throttling or background load?)")
    return out


def _cv(values: Sequence[float]) -> float:
    x = np.asarray(values, dtype=float)
    if x.size < 2 or x.mean() == 0:
        return math.nan
    return float(x.std(ddof=1) / x.mean())
