"""Whether each point fits on its chips, checked before anything is built: the memory a point needs
per chip of its parallel layout against what the device has free, and, for one that does not fit,
the smallest layout that would."""

from __future__ import annotations

from dataclasses import replace

from tpubench.errors import UserError
from tpubench.workload_spec.point import RunPoint

GiB = 1 << 30


def check_fit(be, points: list[RunPoint], source: str) -> tuple[dict[str, str], dict[str, str]]:
    """(points that cannot fit, with the reason; points that fit only sharded, with a note), per
    chip of each point's layout. The whole run is refused when no point can fit."""
    too_big: dict[str, str] = {}
    notes: dict[str, str] = {}
    for point in points:
        needed, available = _per_chip(be, point, source)
        if available is None:
            continue
        if needed > 0.9 * available:
            layout = _smallest_layout(be, point, source)
            hint = f"; the smallest layout that fits is {layout}" if layout else ""
            too_big[point.key()] = (f"does not fit: needs about {needed / GiB:.1f} GiB per chip "
                                    f"({point.dtype} weights, KV cache, activations), {available / GiB:.1f} GiB free "
                                    f"on {be.device}{hint}")
        elif point.world_size > 1:
            one, free = _per_chip(be, replace(point, tensor_parallel=1, expert_parallel=1), source)
            if free is not None and one > 0.9 * free:
                notes[point.key()] = (f"fits on {point.world_size} chips (about {needed / GiB:.1f} GiB per chip) but not "
                                      f"on one (about {one / GiB:.1f} GiB, {free / GiB:.1f} GiB free)")
    if too_big and len(too_big) == len(points):
        first = next(iter(too_big.values()))
        raise UserError(f"the model {first}; try a smaller --scale or a bigger device", where=source, field="model")
    return too_big, notes


def _per_chip(be, point: RunPoint, source: str) -> tuple[int, int | None]:
    try:
        needed, available = be.estimate_memory(point)
    except UserError as exc:  # an unknown family or a config transformers rejects
        exc.where = exc.where or source
        raise
    if available is not None and be.uses_host_memory():
        available //= point.world_size   # the ranks of a CPU world share the host's memory
    return needed, available


def _smallest_layout(be, point: RunPoint, source: str) -> str | None:
    """The layout with the fewest chips (tensor parallel first) that fits, as CLI flags."""
    from tpubench.models.config_check import ConfigProblem, check_model_config

    for n in (2, 4, 8, 16, 32, 64, 128):
        for flag, layout in (("--tensor-parallel", {"tensor_parallel": n, "expert_parallel": 1}),
                             ("--expert-parallel", {"tensor_parallel": 1, "expert_parallel": n})):
            try:
                check_model_config(point.family, point.model_config, tensor=(layout["tensor_parallel"],),
                                   expert=(layout["expert_parallel"],))
            except ConfigProblem:
                continue
            needed, available = _per_chip(be, replace(point, **layout), source)
            if available is not None and needed <= 0.9 * available:
                return f"{flag} {n} (about {needed / GiB:.1f} GiB per chip)"
    return None
