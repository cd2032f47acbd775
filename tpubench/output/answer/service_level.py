"""The service level an answer is decided at (DESIGN s25), and a latency at a percentile.

A workload's own `slo:` (workload_spec/service_level.py) where it gives one; else a stated default:
the MLPerf Inference Server constraint (TTFT and TPOT at the 99th percentile) of the MLPerf model
nearest the workload's (of the same kind, dense or mixture-of-experts, by active and total
parameters: estimate.models.model_distance), from tpubench/data/service_levels.csv, which names
where each constraint is written. The answer says which it used.

A latency at a percentile other than the two a source gives (its median and its 99th) is read off a
lognormal through them: p_q = p50 x (p99 / p50)^(z_q / z_99), z the standard normal quantile.
"""

from __future__ import annotations

import csv
import functools
import math
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

from tpubench.estimate.models import model_distance, published_model
from tpubench.units import duration

SERVICE_LEVELS = Path(__file__).resolve().parent.parent.parent / "data" / "service_levels.csv"


@dataclass(frozen=True)
class Slo:
    ttft_s: float | None
    tpot_s: float | None
    percentile: int = 99
    source: str = ""            # where the bounds come from, in words
    default: bool = False       # not the workload's own

    def words(self) -> str:
        """'TTFT p99 ≤ 2 s, TPOT p99 ≤ 50 ms (20 tok/s per user)'."""
        p = f"p{self.percentile}"
        parts = []
        if self.ttft_s is not None:
            parts.append(f"TTFT {p} ≤ {duration(self.ttft_s)}")
        if self.tpot_s is not None:
            parts.append(f"TPOT {p} ≤ {duration(self.tpot_s)} ({1 / self.tpot_s:.3g} tok/s per user)")
        return ", ".join(parts)

    def bounds(self) -> dict[str, float]:
        """{'ttft_s': bound, 'tpot_s': bound} for the bounds set."""
        return {k: v for k, v in (("ttft_s", self.ttft_s), ("tpot_s", self.tpot_s)) if v is not None}


@functools.lru_cache(maxsize=1)
def _constraints() -> tuple[dict, ...]:
    with SERVICE_LEVELS.open(encoding="utf-8", newline="") as f:
        return tuple(csv.DictReader(f))


def default_slo(shape) -> Slo:
    """The MLPerf Server constraint of the MLPerf model nearest `shape` (module notes)."""
    best, distance = None, math.inf
    for row in _constraints():
        if row["scenario"] != "Server":
            continue
        hit = published_model(row["model"])
        d = model_distance(hit[1], shape) if hit else math.inf
        if d < distance:
            best, distance = row, d
    if best is None:      # no MLPerf model of the same kind: the loosest Server constraint there is
        best = max((r for r in _constraints() if r["scenario"] == "Server"), key=lambda r: float(r["tpot_s"]))
    return Slo(ttft_s=float(best["ttft_s"]), tpot_s=float(best["tpot_s"]), percentile=int(best["percentile"]),
               default=True, source=(f"default: MLPerf Inference's Server constraint for {best['benchmark']}, the "
                                     f"MLPerf model nearest this one ({best['source']}); set `slo:` in the workload "
                                     "to decide at your own"))


def slo_of(workload_points, workload_file: str = "") -> Slo:
    """The service level of a workload (estimate.points.WorkloadPoints): its own `slo:`, else the
    default for its model (module notes)."""
    own = workload_points.slo
    if own is None:
        return default_slo(workload_points.points[0].shape)
    where = f"{workload_file}'s slo" if workload_file else "the workload's slo"
    return Slo(ttft_s=own.ttft_s, tpot_s=own.tpot_bound_s, percentile=int(own.percentile), source=where)


_Z99 = NormalDist().inv_cdf(0.99)


def at_percentile(median: float, p99: float, percentile: float) -> float:
    """A latency at `percentile` from its median and 99th percentile (module notes); the median where
    the 99th is unknown and the percentile is 50, else NaN."""
    if percentile == 50:
        return median
    if percentile == 99:
        return p99
    if not (median > 0 and p99 > 0 and math.isfinite(median) and math.isfinite(p99)):
        return math.nan
    z = NormalDist().inv_cdf(percentile / 100)
    return median * (p99 / median) ** (z / _Z99)


__all__ = ["SERVICE_LEVELS", "Slo", "at_percentile", "default_slo", "slo_of"]
