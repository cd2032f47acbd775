"""The sweep of scenario `generate`: its axes, its points and their labels."""

from __future__ import annotations

import itertools

from tpubench.scenarios import whole_lengths
from tpubench.workload_spec.point import RunPoint, layout_words, lengths_words, routing_label, shape_words
from tpubench.workload_spec.precision import precision_of
from tpubench.workload_spec.vocabulary import as_list


def sweep_axes(workload, scale: str) -> dict[str, list]:
    spec = workload.scale_spec(scale)
    scen = workload.scenario
    dtypes = spec.dtype if spec.dtype is not None else workload.model.dtype
    over = spec.overrides()
    for name in ("input_length", "output_length"):
        whole_lengths(getattr(over, name) or getattr(scen, name), ("scenario", name), scale)
    return {
        "dtype": as_list(dtypes),
        "experts_implementation": as_list(workload.model.experts_implementation),
        "routing": workload.model.routing_axis(),
        "quantization": as_list(workload.model.quantization),
        "batch_size": as_list(over.batch_size or scen.batch_size),
        "input_length": as_list(over.input_length or scen.input_length),
        "output_length": as_list(over.output_length or scen.output_length),
        "execution_mode": as_list(workload.execution.mode),
        "matmul_precision": as_list(workload.execution.matmul_precision),
        "tensor_parallel": as_list(workload.parallel.tensor),
        "expert_parallel": as_list(workload.parallel.expert),
        "decode_loop": as_list(scen.decode_loop),
    }


def points(workload, scale: str, axes: dict, source: str) -> list[RunPoint]:
    spec = workload.scale_spec(scale)
    config = {**workload.model.config, **spec.config}
    out = []
    for combo in itertools.product(*axes.values()):
        values = dict(zip(axes, combo))
        loop = values.pop("decode_loop", "tpubench")
        # The gate travels only with a quantised point: an unquantised one keeps its key.
        quality = workload.model.quality.model_dump() if values.get("quantization", "none") != "none" else {}
        # In params only when not tpubench's own loop: points measured before the axis keep their key.
        params = {"decode_loop": loop} if loop != "tpubench" else {}
        out.append(RunPoint(
            workload=workload.name, scale=scale, family=workload.model.family, hub_id=workload.model.hub_id,
            weights=workload.model.weights, trust_remote_code=workload.model.trust_remote_code,
            model_config=config, scenario_kind=workload.scenario.kind,
            compile_options=dict(workload.execution.compile_options),
            measurement=workload.measurement.model_dump(), params=params, quality=quality, **values))
    return out


def label(point: RunPoint) -> str:
    parts = [f"b{point.batch_size}", f"in{point.input_length}", f"out{point.output_length}", point.dtype,
             point.execution_mode]
    if point.quantization != "none":
        parts.append(f"q={point.quantization}")
    if point.experts_implementation:
        parts.append(f"experts={point.experts_implementation}")
    if point.routing != "natural":
        parts.append(f"routing={routing_label(point.routing)}")
    if point.tensor_parallel > 1:
        parts.append(f"tp{point.tensor_parallel}")
    if point.expert_parallel > 1:
        parts.append(f"ep{point.expert_parallel}")
    if point.matmul_precision not in (None, "highest"):
        parts.append(f"matmul={point.matmul_precision}")
    if point.params.get("decode_loop"):
        parts.append("loop=generate()")
    return " ".join(parts)


def pair_label(point: dict) -> str:
    return " ".join([str(point.get("workload")), str(point.get("scale")), *shape_words(point),
                     *layout_words(point), str(point.get("dtype")),
                     *([f"q={point['quantization']}"] if point.get("quantization", "none") != "none" else [])])


def row_label(row) -> str:
    """The row in a few words; the arm (experts implementation, generate() loop, routing) when the
    row has one, so rows of a kernel A/B read apart."""
    parts = [f"b{row['batch_size']}", lengths_words(row), str(row["device"])]
    if _present(row.get("quantization")) and row["quantization"] != "none":
        parts.append(precision_words(row))
    if _present(row.get("experts_implementation")):
        parts.append(f"experts={row['experts_implementation']}")
    if _present(row.get("decode_loop")):
        parts.append("loop=generate()")
    if _present(row.get("routing")) and row["routing"] != "natural":
        parts.append(f"routing={row['routing']}")
    return " ".join(parts)


def precision_words(row) -> str:
    """'int8_dynamic (w int8 / a int8 / kv f32)': a quantised row's quantisation and its dtypes."""
    return f"{row['quantization']} ({precision_of(str(row['dtype']), row['quantization']).label()})"


def _present(value) -> bool:
    """A cell with a value (a frame's missing cells are None or NaN)."""
    return value is not None and value == value
