"""The sweep of scenario `diffuse`: resolution, steps, images per prompt, guidance, scheduler,
dtype and execution axes; its points and their labels.

A point's `model_config` is {component: config} of the scale (families.resolve_components); its
`batch_size` is the images one call makes; the image-specific values are in `params`.
"""

from __future__ import annotations

import itertools

from tpubench.scenarios.diffuse import families
from tpubench.workload_spec.point import RunPoint
from tpubench.workload_spec.vocabulary import FULL_SCALE, as_list


def scale_config(workload, scale: str) -> dict:
    return dict(workload.scales[scale].config) if scale != FULL_SCALE and scale in workload.scales else {}


def preset(workload, scale: str) -> str:
    return scale_config(workload, scale).get("preset", "full")


def sweep_axes(workload, scale: str) -> dict[str, list]:
    spec = workload.scale_spec(scale)
    scen = workload.scenario
    own = scale_config(workload, scale)
    over = spec.scenario
    return {"resolution": as_list(own.get("resolution", scen.resolution)),
            "steps": as_list(own.get("steps", scen.steps)),
            "batch_size": as_list((over and over.batch_size) or scen.images_per_prompt),
            "guidance": as_list(own.get("guidance", scen.guidance)),
            "scheduler": as_list(scen.scheduler),
            "dtype": as_list(spec.dtype if spec.dtype is not None else scen.dtype),
            "execution_mode": as_list(workload.execution.mode)}


def components(workload, scale: str) -> dict[str, dict]:
    """{component: config} of a scale: the family's preset, the workload's `components`, then the
    scale's own per-component overrides."""
    own = scale_config(workload, scale)
    merged = {comp: {**workload.scenario.components.get(comp, {}), **own.get(comp, {})}
              for comp in families.component_names(workload.scenario.pipeline)}
    return families.resolve_components(workload.scenario.pipeline, preset(workload, scale), merged)


def points(workload, scale: str, axes: dict, source: str) -> list[RunPoint]:
    scen = workload.scenario
    own = scale_config(workload, scale)
    lengths = families.tokenizer_lengths(scen.pipeline, preset(workload, scale))
    max_seq = own.get("max_sequence_length", scen.max_sequence_length)
    if max_seq is not None:   # the T5 slot (the last, longest one) takes the prompt length asked for
        longest = max(lengths, key=lambda s: lengths[s])
        lengths[longest] = int(max_seq)
    config = components(workload, scale)
    out = []
    for combo in itertools.product(*axes.values()):
        values = dict(zip(axes, combo))
        params = {"pipeline": scen.pipeline, "resolution": values.pop("resolution"), "steps": values.pop("steps"),
                  "guidance": float(values.pop("guidance")), "scheduler": values.pop("scheduler"),
                  "prompt_words": scen.prompt_words, "tokenizer_lengths": lengths,
                  "preset": preset(workload, scale)}
        out.append(RunPoint(
            workload=workload.name, scale=scale, family=scen.pipeline, hub_id=scen.hub_id, weights=scen.weights,
            trust_remote_code=False, experts_implementation=None, model_config=config, input_length=1,
            output_length=None, scenario_kind=scen.kind, params=params, matmul_precision="highest",
            compile_options=dict(workload.execution.compile_options),
            measurement=workload.measurement.model_dump(), **values))
    return out


def _words(p: dict, batch, dtype, mode) -> list[str]:
    parts = [f"{p.get('resolution')}px", f"{p.get('steps')}steps", f"x{batch}", f"cfg{p.get('guidance'):g}"]
    if p.get("scheduler") not in (None, "default"):
        parts.append(str(p["scheduler"]))
    return parts + [str(dtype), str(mode)]


def label(point: RunPoint) -> str:
    return " ".join(_words(point.params, point.batch_size, point.dtype, point.execution_mode))


def pair_label(point: dict) -> str:
    p = point.get("params") or {}
    return " ".join([str(point.get("workload")), str(point.get("scale")), str(point.get("family")),
                     *_words(p, point.get("batch_size"), point.get("dtype"), point.get("execution_mode"))])


def row_label(row) -> str:
    return f"{row.get('family')} {_px(row.get('resolution_px'))} x{row['batch_size']} {row['device']}"


def _px(value) -> str:
    try:
        return f"{int(value)}px"
    except (TypeError, ValueError):
        return "?px"
