"""A workload's sweep: its scales, the axes of each (the scenario's), the size check, and the run
points (the cartesian product of the axes, resolved by the scenario)."""

from __future__ import annotations

import math

from tpubench.errors import UserError
from tpubench.run.workload import Workload
from tpubench.scenarios.registry import SCENARIOS
from tpubench.workload_spec.point import RunPoint
from tpubench.workload_spec.sections import FULL_SCALE

# Sweeps above this many points are refused before any per-point work (`--max-points` raises it).
MAX_POINTS = 10_000


def scale_names(workload: Workload) -> list[str]:
    return [FULL_SCALE, *workload.scales]


def sweep_axes(workload: Workload, scale: str = FULL_SCALE, *, source: str = "") -> dict[str, list]:
    """Every sweep axis of one scale with its values (a scalar is an axis of one value)."""
    if scale != FULL_SCALE and scale not in workload.scales:
        known = ", ".join(scale_names(workload))
        raise UserError(f"unknown scale '{scale}' (this workload has: {known})", where=source or None, field="scales")
    return SCENARIOS[workload.scenario.kind].sweep_axes(workload, scale)


def check_sweep_size(workload: Workload, scale: str = FULL_SCALE, *, source: str = "",
                     max_points: int = MAX_POINTS) -> int:
    """The number of points of one scale; a UserError naming the axes when it exceeds `max_points`."""
    axes = sweep_axes(workload, scale, source=source)
    n = math.prod(len(v) for v in axes.values())
    if n > max_points:
        sizes = " x ".join(f"{name} {len(values)}" for name, values in axes.items() if len(values) > 1)
        raise UserError(f"the sweep of scale '{scale}' has {n:,} points ({sizes}), above the limit of "
                        f"{max_points:,}; shorten an axis or raise the limit with --max-points",
                        where=source or None, field="scenario")
    return n


def expand(workload: Workload, scale: str = FULL_SCALE, *, source: str = "",
           max_points: int = MAX_POINTS) -> list[RunPoint]:
    """Resolve a scale and expand every list-valued axis into run points (cartesian product)."""
    check_sweep_size(workload, scale, source=source, max_points=max_points)
    axes = sweep_axes(workload, scale, source=source)
    return SCENARIOS[workload.scenario.kind].points(workload, scale, axes, source)
