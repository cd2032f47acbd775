"""A workload's sweep: its scales, the axes of each (the scenario's), the size check, and the run
points (the cartesian product of the axes, resolved by the scenario)."""

from __future__ import annotations

import math

from tpubench.errors import UserError
from tpubench.run.workload import Workload
from tpubench.scenarios import FieldProblem
from tpubench.scenarios.registry import SCENARIOS
from tpubench.workload_spec.point import RunPoint
from tpubench.workload_spec.precision import kv_cache_quantization
from tpubench.workload_spec.sections import FULL_SCALE, as_list

# Sweeps above this many points are refused before any per-point work (`--max-points` raises it).
MAX_POINTS = 10_000


def scale_names(workload: Workload) -> list[str]:
    return [FULL_SCALE, *workload.scales]


def sweep_axes(workload: Workload, scale: str = FULL_SCALE, *, source: str = "") -> dict[str, list]:
    """Every sweep axis of one scale with its values (a scalar is an axis of one value)."""
    if scale != FULL_SCALE and scale not in workload.scales:
        known = ", ".join(scale_names(workload))
        raise UserError(f"unknown scale '{scale}' (this workload has: {known})", where=source or None, field="scales")
    scenario = SCENARIOS[workload.scenario.kind]
    try:
        _check_kv_cache(workload, scenario)
        return scenario.sweep_axes(workload, scale)
    except FieldProblem as exc:   # a value the estimate reads that this kind cannot run (a mean length)
        raise UserError(exc.message, where=source or None, field=".".join(map(str, exc.loc))) from None


def _check_kv_cache(workload: Workload, scenario) -> None:
    """A KV-cache dtype (model.quantization's `kv_fp8`) is measured only where the kind can set it
    (serve: the engine it launches); `tpubench estimate` reads it from any workload."""
    if workload.model is None or scenario.kv_cache_dtypes:
        return
    for quantization in as_list(workload.model.quantization):
        if kv_cache_quantization(quantization) is not None:
            takes = ", ".join(sorted(s.kind for s in SCENARIOS.values() if s.kv_cache_dtypes))
            raise FieldProblem(("model", "quantization"),
                               f"scenario {scenario.kind} keeps the KV cache in the model dtype "
                               f"({scenario.kv_cache_note}), so '{quantization}' cannot be measured: estimate it "
                               f"(tpubench estimate --on H100:8@{quantization}) or measure a server with it "
                               f"(scenario {takes})")


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
