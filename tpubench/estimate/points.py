"""A workload file's operating points for the estimate: its model (the full architecture, not a
smaller scale) and each batch size (generate) or concurrency (serve) with its lengths."""

from __future__ import annotations

import itertools
from pathlib import Path

from tpubench.errors import UserError
from tpubench.estimate.features import Point
from tpubench.estimate.models import cache_bytes, compute_precision, precision_bytes
from tpubench.hardware.model_shape import ModelShape
from tpubench.workload_spec.sections import as_list


def workload_points(path: str | Path) -> tuple[str, bool, list[Point]]:
    """(workload name, serving?, points on one chip: the command sets each target's chips). A
    workload without a model, or a serve workload without closed-loop concurrency and fixed
    lengths, is refused with why."""
    from tpubench.run.workload import load_workload
    from tpubench.scenarios.registry import scenario_of

    wl = load_workload(path)
    if wl.model is None:
        raise UserError("the estimate needs the model's architecture: this workload has no model section",
                        where=str(path), field="model")
    dtype = as_list(wl.model.dtype)[0]
    weight_bytes = precision_bytes(dtype)
    shape = ModelShape.from_config(wl.model.family, wl.model.config)
    sc = wl.scenario
    scenario = scenario_of(sc.kind)
    loads = scenario.estimate_loads(sc)
    if not loads:
        raise UserError(f"the estimate needs a load of concurrent sequences (generate: batch_size; serve: "
                        f"load.concurrency); this {sc.kind} scenario gives none", where=str(path), field="scenario")
    serving = not scenario.builds_model   # a server (not tpubench) holds the model: it prefills request by request
    inputs, outputs = as_list(sc.input_length), as_list(sc.output_length)
    if not all(isinstance(v, int) for v in [*inputs, *outputs]):
        raise UserError("the estimate needs fixed input and output lengths", where=str(path), field="scenario")
    points = [Point(shape=shape, weight_bytes=weight_bytes, kv_bytes=cache_bytes(dtype),
                    compute_precision=compute_precision(dtype), chips=1,
                    concurrency=float(c), input_len=float(i), output_len=float(o))
              for c, i, o in itertools.product(loads, inputs, outputs)]
    return wl.name, serving, points


__all__ = ["workload_points"]
