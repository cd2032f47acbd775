"""An option's operating point at a service level (DESIGN s25): pure, over one sweep of loads.

A sweep is one chip, stack, precision and pair of lengths measured (or estimated, or published) at
several loads c1 < c2 < ...; along it TTFT and TPOT grow with the load while the cost per token
falls. The operating point is the cheapest load that meets every bound of the SLO: where the next
load misses, the point between them where the binding bound is met exactly, every figure
interpolated linearly in log(load) (labelled interpolated). A sweep is never extrapolated: one that
still meets the SLO at its top load is "at least" that cheap; one whose every load misses does not
meet it, and says by how much at its nearest load.

A latency a point does not give (a published row without a TTFT) cannot meet its bound: the miss
names it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

from tpubench.output.answer.service_level import Slo
from tpubench.units import duration, number, sig

MEETS, INTERPOLATED, AT_LEAST, MISSES = "meets", "interpolated", "at least", "misses"
_NAMES = {"ttft_s": "TTFT", "tpot_s": "TPOT"}


@dataclass(frozen=True)
class SweepPoint:
    load: float
    ttft_s: float                 # at the SLO's percentile; NaN where not given
    tpot_s: float
    usd_per_mtok: float
    usd_per_mtok_low: float
    usd_per_mtok_high: float
    tokens_per_s_per_chip: float
    position: int = 0             # which row of the caller's it is


@dataclass(frozen=True)
class OperatingPoint:
    status: str                   # MEETS, INTERPOLATED, AT_LEAST or MISSES
    point: SweepPoint             # its figures (interpolated ones at an interpolated load)
    binding: str = ""             # the bound met exactly (interpolated) or missed most (misses)
    miss: str = ""                # by how much, where it misses

    @property
    def ranked(self) -> bool:
        """Whether it meets the SLO (and so may be ranked)."""
        return self.status != MISSES

    @property
    def tokens_per_s_per_user(self) -> float:
        tpot = self.point.tpot_s
        return 1.0 / tpot if tpot > 0 and math.isfinite(tpot) else math.nan

    def words(self) -> str:
        """'load 256', 'load 181 (interpolated: TPOT at its bound)', 'load 512 (the sweep's top: at
        least this cheap)', 'misses: TPOT p99 62 ms > 50 ms at load 1'."""
        load = f"load {_load(self.point.load)}"
        if self.status == INTERPOLATED:
            return f"{load} (interpolated: {self.binding} at its bound)"
        if self.status == AT_LEAST:
            return f"{load} (the sweep's top: at least this cheap)"
        if self.status == MISSES:
            return f"misses: {self.miss}"
        return load


def _load(value: float) -> str:
    return number(value) if math.isfinite(value) and value == round(value) else sig(value)


def ratios(point: SweepPoint, slo: Slo) -> dict[str, float]:
    """Each bound's figure over its bound (<= 1 meets it); NaN where the point gives no figure."""
    return {name: getattr(point, name) / bound for name, bound in slo.bounds().items()}


def _worst(point: SweepPoint, bounds: tuple[tuple[str, float], ...]) -> float:
    """The point's highest figure over its bound (`bounds`: Slo.bounds' items), inf for a figure it
    lacks, 0 without bounds."""
    if not bounds:
        return 0.0
    return max((r if math.isfinite(r) else math.inf) for r in (getattr(point, name) / b for name, b in bounds))


def operating_point(points: Sequence[SweepPoint], slo: Slo) -> OperatingPoint | None:
    """The sweep's operating point at `slo` (module notes); None for an empty sweep."""
    ordered = sorted(points, key=lambda p: p.load)
    if not ordered:
        return None
    bounds = tuple(slo.bounds().items())     # asked once a sweep, not once a point (30,000 in a large report)
    worst = [_worst(p, bounds) for p in ordered]
    meeting = [i for i, w in enumerate(worst) if w <= 1]
    if not meeting:
        nearest = min(range(len(ordered)), key=lambda i: worst[i])
        return OperatingPoint(MISSES, ordered[nearest], *_miss(ordered[nearest], slo))
    k = min(meeting, key=lambda i: (ordered[i].usd_per_mtok, -ordered[i].load))
    if k == len(ordered) - 1:
        return OperatingPoint(AT_LEAST, ordered[k])
    between = _between(ordered[k], ordered[k + 1], slo) if worst[k + 1] > 1 else None
    if between is None:
        return OperatingPoint(MEETS, ordered[k])
    point, binding = between
    return OperatingPoint(INTERPOLATED, point, binding=binding)


def better(op: OperatingPoint, than: OperatingPoint | None) -> bool:
    """Whether `op` is the better of two sweeps' operating points for one option: one that meets the
    SLO before one that misses, then the cheaper."""
    if than is None:
        return True
    if op.ranked != than.ranked:
        return op.ranked
    return op.point.usd_per_mtok < than.point.usd_per_mtok


def _between(low: SweepPoint, high: SweepPoint, slo: Slo) -> tuple[SweepPoint, str] | None:
    """The point between a load that meets and the next, which misses, where the binding bound is
    met exactly: every figure linear in log(load); None where the binding figure is not known at
    both, or the interpolated point is no cheaper than `low`."""
    r0, r1 = ratios(low, slo), ratios(high, slo)
    crossings = {}
    for name in r0:
        a, b = r0[name], r1[name]
        if not (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)):
            if not math.isfinite(b):
                return None
            continue
        if b > 1:
            crossings[name] = -math.log(a) / (math.log(b) - math.log(a)) if b != a else 0.0
    if not crossings:
        return None
    binding = min(crossings, key=crossings.get)
    t = crossings[binding]

    def at(name: str) -> float:
        a, b = getattr(low, name), getattr(high, name)
        if not (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)):
            return a if t == 0 else math.nan
        return math.exp(math.log(a) + t * (math.log(b) - math.log(a)))

    point = replace(low, **{name: at(name) for name in ("load", "ttft_s", "tpot_s", "usd_per_mtok", "usd_per_mtok_low",
                                                        "usd_per_mtok_high", "tokens_per_s_per_chip")})
    if not point.usd_per_mtok < low.usd_per_mtok:
        return None
    return point, _NAMES[binding]


def _miss(point: SweepPoint, slo: Slo) -> tuple[str, str]:
    """(the bound missed most, 'TPOT p99 62 ms > 50 ms at load 1 (1.24x)')."""
    p = f"p{slo.percentile}"
    found = ratios(point, slo)
    unknown = [name for name, r in found.items() if not math.isfinite(r)]
    if unknown:
        return _NAMES[unknown[0]], f"no {_NAMES[unknown[0]]} {p} given"
    name = max(found, key=found.get)
    value, bound = getattr(point, name), slo.bounds()[name]
    return _NAMES[name], (f"{_NAMES[name]} {p} {duration(value)} > {duration(bound)} at load {_load(point.load)} "
                          f"({found[name]:.2f}x)")


__all__ = ["AT_LEAST", "INTERPOLATED", "MEETS", "MISSES", "OperatingPoint", "SweepPoint", "better", "operating_point",
           "ratios"]
