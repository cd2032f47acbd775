"""Validity rules (in the spirit of MLPerf's) and warnings with hints: pure functions."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from tpubench.measure.stats import drift, mad_outliers

DRIFT_WARN = 0.05          # 5% change between the first and last third of the timed phase
SLOW_FIRST_FACTOR = 1.5    # a warm-up iteration this much slower than steady state


def assess(*, iterations: int, measure_s: float, measurement: dict, recompiles: int, generated_tokens: int,
           expected_tokens: int, throughput: Sequence[float], on_device: bool = True,
           exceeds_peak: bool = False, recompile_limit_hits: int = 0,
           fallback_ops: Sequence[str] = ()) -> tuple[bool, list[str]]:
    """(valid, reasons): a run is valid only when every rule holds."""
    reasons = []
    if iterations < measurement["min_iterations"]:
        reasons.append(f"only {iterations} timed iterations, fewer than min_iterations={measurement['min_iterations']}"
                       f" (max_seconds={measurement['max_seconds']:g} reached)")
    if measure_s < measurement["min_seconds"]:
        reasons.append(f"timed phase lasted {measure_s:.2f} s, under min_seconds={measurement['min_seconds']:g}")
    if recompiles:
        reasons.append(f"{recompiles} recompilation(s) during the timed phase")
    if recompile_limit_hits:
        reasons.append("torch.compile hit its recompile limit and runs part of the model eager: "
                       "not a compiled measurement")
    if generated_tokens != expected_tokens:
        reasons.append(f"generated {generated_tokens} tokens, expected {expected_tokens}")
    cv = _cv(throughput)
    if math.isfinite(cv) and cv > measurement["max_cv"]:
        reasons.append(f"throughput CV {cv:.1%} above max_cv={measurement['max_cv']:.0%}")
    if not on_device:
        reasons.append("model parameters are on the CPU: the device fell back to the host")
    if fallback_ops:
        reasons.append(f"{len(fallback_ops)} op(s) fell back to the CPU while timed: {', '.join(fallback_ops[:10])}")
    if exceeds_peak:
        reasons.append("a timing implies more than the chip's peak FLOP/s or bandwidth: a timing bug")
    return not reasons, reasons


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
    if math.isfinite(cv) and cv > max_cv / 2:
        out.append(f"high variation: throughput CV {cv:.1%}; pin the process, raise min_seconds or set target_ci")
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
