"""A workload file's operating points for the estimate: its model (the full architecture, not a
smaller scale) and each batch size (generate) or concurrency (serve) with its lengths."""

from __future__ import annotations

import itertools
from pathlib import Path

from tpubench.errors import UserError
from tpubench.estimate.features import Point
from tpubench.estimate.models import precision_bytes
from tpubench.hardware.model_shape import ModelShape
from tpubench.spec.sections import as_list


def workload_points(path: str | Path, chips: int) -> tuple[str, bool, list[Point]]:
    """(workload name, serving?, points on `chips` chips). A workload without a model, or a serve
    workload without closed-loop concurrency and fixed lengths, is refused with why."""
    from tpubench.run.workload import load_workload

    wl = load_workload(path)
    if wl.model is None:
        raise UserError("the estimate needs the model's architecture: this workload has no model section",
                        where=str(path), field="model")
    dtype = as_list(wl.model.dtype)[0]
    weight_bytes = precision_bytes(dtype)
    shape = ModelShape.from_config(wl.model.family, wl.model.config)
    sc = wl.scenario
    serving = sc.kind == "serve"
    if sc.kind == "generate":
        loads = as_list(sc.batch_size)
    elif serving and sc.load.concurrency is not None:
        loads = as_list(sc.load.concurrency)
    else:
        raise UserError(f"the estimate reads batch_size (generate) or load.concurrency (serve); scenario "
                        f"{sc.kind} gives neither", where=str(path), field="scenario")
    inputs, outputs = as_list(sc.input_length), as_list(sc.output_length)
    if not all(isinstance(v, int) for v in [*inputs, *outputs]):
        raise UserError("the estimate needs fixed input and output lengths", where=str(path), field="scenario")
    points = [Point(shape=shape, weight_bytes=weight_bytes, kv_bytes=weight_bytes, chips=chips,
                    concurrency=float(c), input_len=float(i), output_len=float(o))
              for c, i, o in itertools.product(loads, inputs, outputs)]
    return wl.name, serving, points


__all__ = ["workload_points"]
