"""How long to keep measuring, and reading the clock honestly.

Every clock read follows the backend's fence: without it an accelerator's queued kernels would
be timed as zero and the next step would be charged for them.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Sequence

from tpubench.measure.stats import relative_ci_half_width


def fenced_clock(fence: Callable[[], None]) -> Callable[[], float]:
    """A clock that waits for all queued device work before it reads perf_counter."""
    perf_counter = time.perf_counter

    def now() -> float:
        fence()
        return perf_counter()

    return now


def keep_measuring(iterations: int, elapsed_s: float, headline: Sequence[float], *, min_iterations: int,
                   min_seconds: float, max_seconds: float, target_ci: float | None) -> bool:
    """Repeat until min iterations AND min seconds are met, then (optionally) until the 95% CI
    half-width of the headline metric is within `target_ci` of its mean, never past max_seconds."""
    if iterations < min_iterations or elapsed_s < min_seconds:
        return elapsed_s < max_seconds or iterations < 2
    if target_ci is None:
        return False
    if elapsed_s >= max_seconds:
        return False
    return relative_ci_half_width(headline) > target_ci


def done_measuring(iterations: int, elapsed_s: float, headline: Sequence[float], measurement: dict,
                   fixed: int | None = None) -> bool:
    """The stopping rule of a timed loop: the count a world agreed on before the loop (`fixed`),
    else keep_measuring's rules with the point's measurement settings."""
    if fixed is not None:
        return iterations >= fixed
    m = measurement
    return not keep_measuring(iterations, elapsed_s, headline, min_iterations=m["min_iterations"],
                              min_seconds=m["min_seconds"], max_seconds=m["max_seconds"],
                              target_ci=m.get("target_ci"))


def planned_iterations(seconds_per_iteration: float, measurement: dict) -> int:
    """The timed loop's length in a world of ranks, agreed before it: iterations that meet
    min_iterations and min_seconds at this pace, within max_seconds (target_ci cannot be used:
    it would need the ranks to agree inside the timed loop)."""
    pace = max(seconds_per_iteration, 1e-9)
    wanted = max(measurement["min_iterations"], math.ceil(measurement["min_seconds"] / pace))
    affordable = max(2, int(measurement["max_seconds"] / pace))
    return max(1, min(wanted, affordable))


def achieved_ci(headline: Sequence[float]) -> float:
    value = relative_ci_half_width(headline)
    return value if math.isfinite(value) else math.nan


class NoFallbackWatch:
    """For sessions whose stack has no per-op CPU fallback (the JAX twin, scripted test sessions)."""

    def __init__(self):
        self.ops: list[str] = []

    def __enter__(self) -> "NoFallbackWatch":
        return self

    def __exit__(self, *exc) -> None:
        return None


def fallback_watch(session):
    """The session's watch for ops that fall back to the CPU (backends.torch.FallbackWatch), as a
    context manager whose `ops` lists them once it ends."""
    watch = getattr(session, "watch_fallbacks", None)
    return watch() if watch is not None else NoFallbackWatch()


def merge_rank_compiles(compiles: list[dict]) -> dict:
    """What every rank's compile accounting says about the point: a recompile, a recompile-limit
    hit, a graph break or a CPU fallback on any rank counts (the most any rank saw; the union of
    the ops that fell back)."""
    merged = {key: max(c.get(key, 0) for c in compiles)
              for key in ("recompiles_timed", "recompile_limit_hits", "graph_breaks")}
    for key in ("cpu_fallback_ops_timed", "cpu_fallback_ops_untimed"):
        merged[key] = sorted({op for c in compiles for op in c.get(key, [])})
    return merged
