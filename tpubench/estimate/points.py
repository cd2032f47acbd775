"""A workload file's operating points for the estimate: its model (the full architecture, not a
smaller scale) at each precision it sweeps (model.dtype and model.quantization, the KV cache's
included), and each batch size (generate) or concurrency (serve) with its lengths. A length is read
as a mean: a fractional one (a published 505.6 tokens) is estimated as written, though a measured
batch's lengths are whole tokens (scenarios/generate/sweep.py refuses it there)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from pathlib import Path

from tpubench.errors import UserError
from tpubench.estimate.features import Point
from tpubench.estimate.models import PointPrecision
from tpubench.hardware.model_shape import ModelShape
from tpubench.workload_spec.precision import precision_of
from tpubench.workload_spec.sections import as_list
from tpubench.workload_spec.service_level import ServiceLevel, Volume


@dataclass(frozen=True)
class WorkloadPoints:
    name: str
    serving: bool              # a server (not tpubench) holds the model: it prefills request by request
    points: list[Point]        # on one chip: the command sets each target's chips
    dtype: str                 # the model's dtype (a target's quantisation applies to it)
    compare_on: tuple[str, ...] = ()   # the chips the workload is being decided between
    hub_id: str | None = None  # the model's Hugging Face id, where the workload names one
    slo: ServiceLevel | None = None    # the workload's service level and volume (workload_spec/service_level.py)
    volume: Volume | None = None


def point_precision(dtype: str, quantization: str | None) -> PointPrecision:
    """The precision of the model in `dtype` quantised by `quantization`."""
    p = precision_of(dtype, quantization)
    return PointPrecision.of(p.weight_dtype, p.activation_dtype, p.kv_cache_dtype)


def with_precision(point: Point, precision: PointPrecision) -> Point:
    return replace(point, weight_bytes=precision.weight_bytes, kv_bytes=precision.kv_bytes,
                   compute_precision=precision.compute, precision=precision.label)


def workload_points(path: str | Path) -> WorkloadPoints:
    """The workload's points (module notes). A workload without a model, or a serve workload
    without closed-loop concurrency and fixed lengths, is refused with why."""
    from tpubench.run.workload import load_workload
    from tpubench.scenarios.registry import scenario_of

    wl = load_workload(path)
    if wl.model is None:
        raise UserError("the estimate needs the model's architecture: this workload has no model section",
                        where=str(path), field="model")
    dtype = as_list(wl.model.dtype)[0]
    shape = ModelShape.from_config(wl.model.family, wl.model.config)
    sc = wl.scenario
    scenario = scenario_of(sc.kind)
    loads = scenario.estimate_loads(sc)
    if not loads:
        raise UserError(f"the estimate needs a load of concurrent sequences (generate: batch_size; serve: "
                        f"load.concurrency); this {sc.kind} scenario gives none", where=str(path), field="scenario")
    inputs, outputs = as_list(sc.input_length), as_list(sc.output_length)
    # A length here is a mean (a published 505.6 tokens reads as it is); a drawn distribution is not one.
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in [*inputs, *outputs]):
        raise UserError("the estimate needs input and output lengths as numbers of tokens (a mean may be "
                        "fractional), not a distribution", where=str(path), field="scenario")
    precisions = [point_precision(dtype, q) for q in as_list(wl.model.quantization)]
    points = [with_precision(Point(shape=shape, weight_bytes=0.0, kv_bytes=0.0, compute_precision="", chips=1,
                                   concurrency=float(c), input_len=float(i), output_len=float(o)), p)
              for p, c, i, o in itertools.product(precisions, loads, inputs, outputs)]
    return WorkloadPoints(name=wl.name, serving=not scenario.builds_model, points=points, dtype=dtype,
                          compare_on=tuple(wl.compare_on), hub_id=wl.model.hub_id, slo=wl.slo, volume=wl.volume)


__all__ = ["WorkloadPoints", "point_precision", "with_precision", "workload_points"]
