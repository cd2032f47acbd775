"""The sweep of scenario `train`: batch, sequence length, execution and data-parallel axes; its
points and their labels."""

from __future__ import annotations

import itertools

from tpubench.workload_spec.point import RunPoint, layout_words, routing_label, shape_words
from tpubench.workload_spec.vocabulary import as_list


def sweep_axes(workload, scale: str) -> dict[str, list]:
    spec = workload.scale_spec(scale)
    scen = workload.scenario
    over = spec.overrides()
    return {"batch_size": as_list(over.batch_size or scen.batch_size),
            "input_length": as_list(over.sequence_length or scen.sequence_length),
            "routing": workload.model.routing_axis(),
            "execution_mode": as_list(workload.execution.mode),
            "matmul_precision": as_list(workload.execution.matmul_precision),
            "data_parallel": as_list(workload.parallel.data)}


def points(workload, scale: str, axes: dict, source: str) -> list[RunPoint]:
    scen = workload.scenario
    spec = workload.scale_spec(scale)
    config = {**workload.model.config, **spec.config}
    dtype = spec.dtype if spec.dtype is not None else workload.model.dtype
    params = {"gradient_accumulation": scen.gradient_accumulation, "optimizer": scen.optimizer.model_dump(),
              "activation_checkpointing": scen.activation_checkpointing, "precision": scen.precision,
              "fsdp": workload.parallel.fsdp}
    out = []
    for combo in itertools.product(*axes.values()):
        out.append(RunPoint(
            workload=workload.name, scale=scale, family=workload.model.family, hub_id=workload.model.hub_id,
            weights=workload.model.weights, trust_remote_code=workload.model.trust_remote_code,
            dtype=dtype if isinstance(dtype, str) else dtype[0],
            experts_implementation=as_list(workload.model.experts_implementation)[0],
            model_config=config, output_length=None, scenario_kind=workload.scenario.kind, params=params,
            compile_options=dict(workload.execution.compile_options),
            measurement=workload.measurement.model_dump(), **dict(zip(axes, combo))))
    return out


def label(point: RunPoint) -> str:
    parts = [f"b{point.batch_size}", f"seq{point.input_length}", point.params.get("precision", ""),
             point.execution_mode]
    if point.params.get("gradient_accumulation", 1) > 1:
        parts.append(f"accum{point.params['gradient_accumulation']}")
    if point.routing != "natural":
        parts.append(f"routing={routing_label(point.routing)}")
    if point.data_parallel > 1:
        parts.append(f"{'fsdp' if point.params.get('fsdp') else 'dp'}{point.data_parallel}")
    if point.matmul_precision not in (None, "highest"):
        parts.append(f"matmul={point.matmul_precision}")
    return " ".join(parts)


def pair_label(point: dict) -> str:
    return " ".join([str(point.get("workload")), str(point.get("scale")), "train", *shape_words(point),
                     *layout_words(point), str(point.get("dtype"))])


def row_label(row) -> str:
    return f"b{row['batch_size']} seq{row['input_length']} {row['device']}"
