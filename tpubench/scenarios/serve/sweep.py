"""The sweep of scenario `serve`: load levels and request lengths (or the user's traffic), its
points and their labels."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import TYPE_CHECKING

from tpubench.errors import UserError
from tpubench.scenarios import FieldProblem, whole_lengths
from tpubench.scenarios.serve.capacity import search_slo
from tpubench.serving.presets import kv_cache_args
from tpubench.serving.traffic import traffic_words
from tpubench.workload_spec.point import RunPoint, layout_words, lengths_words, shape_words
from tpubench.workload_spec.precision import kv_cache_quantization
from tpubench.workload_spec.vocabulary import FULL_SCALE

if TYPE_CHECKING:   # the section's models, for annotations: the sweep and its labels import no pydantic
    from tpubench.scenarios.serve.schema import Lengths, Load


def sweep_axes(workload, scale: str) -> dict[str, list]:
    scen = workload.scenario
    for name in ("input_length", "output_length"):
        whole_lengths(getattr(scen, name), ("scenario", name), scale)
    trace = scen.traffic.trace if scen.traffic else None
    if trace is not None:
        # A replay's load is the trace's own clock, scaled: time_scale is the axis.
        scales = trace.time_scale if isinstance(trace.time_scale, list) else [trace.time_scale]
        load = [{"replay": True, "time_scale": t, "max_concurrency": scen.load.max_concurrency} for t in scales]
    else:
        load = load_axis(scen.load)
    return {"load": load, "input_length": length_axis(scen.input_length) if scen.input_length is not None else [None],
            "output_length": length_axis(scen.output_length) if scen.output_length is not None else [None]}


def check_kv_cache(quantizations: list[str], launch) -> list[str]:
    """The flag that makes the launched engine hold its KV cache as model.quantization says
    ('kv_fp8'; none for 'none'); FieldProblem where no server tpubench starts can be told so."""
    kvs = [kv_cache_quantization(q) for q in quantizations]
    if not any(kvs):
        return []
    here = ("model", "quantization")
    if len(kvs) > 1:
        raise FieldProblem(here, "a serve workload starts one server: give one KV-cache dtype, not a list")
    if launch is None:
        raise FieldProblem(here, f"a server at a URL keeps the cache dtype it was started with: kv_{kvs[0]} needs "
                                 "scenario.server.launch (tpubench starts it with the engine's flag)")
    try:
        return kv_cache_args(launch.preset, kvs[0], launch.args)
    except ValueError as exc:
        raise FieldProblem(here, str(exc)) from None


def points(workload, scale: str, axes: dict, source: str) -> list[RunPoint]:
    """The model is the server's; a point is a load level and the request lengths."""
    scen = workload.scenario
    model = workload.model
    config = {**model.config, **workload.scales[scale].config} if model and scale != FULL_SCALE else (
        dict(model.config) if model else {})
    quantization = model.quantization if model and isinstance(model.quantization, str) else "none"
    server = scen.server.model_dump()
    try:
        kv_args = check_kv_cache([quantization], scen.server.launch)
    except FieldProblem as exc:   # --server-url took the launch away after the file was checked
        raise UserError(exc.message, where=source or None, field="model.quantization") from None
    if kv_args:
        server["launch"]["args"] = [*server["launch"]["args"], *kv_args]
    common = scen.model_dump(include={"endpoint", "exact_output", "request_timeout_s", "seed"})
    common.update(server=server, slo=scen.slo.model_dump(),
                  num_requests=scen.load.num_requests, duration_s=scen.load.duration_s,
                  warmup_requests=scen.load.warmup_requests, workload_dir=str(Path(source).parent) if source else "")
    if scen.traffic is not None:
        traffic = scen.traffic.model_dump(exclude_none=True)
        if "trace" in traffic:
            traffic["trace"].pop("time_scale")      # the load axis holds it
            if "num_requests" not in scen.load.model_fields_set:
                common["num_requests"] = None       # a replay sends the whole trace unless told otherwise
        common["traffic"] = traffic
    out = []
    for load, inputs, outputs in itertools.product(axes["load"], axes["input_length"], axes["output_length"]):
        out.append(RunPoint(
            workload=workload.name, scale=scale,
            family=model.family if model else None, hub_id=model.hub_id if model else None,
            weights=model.weights if model else "server", trust_remote_code=False,
            dtype=(model.dtype if model and isinstance(model.dtype, str) else "server"),
            experts_implementation=None, model_config=config,
            batch_size=None,   # a server batches as it likes; the load is params["load"]
            input_length=inputs if isinstance(inputs, int) else None,
            output_length=outputs if isinstance(outputs, int) else None,
            execution_mode="serve", scenario_kind=workload.scenario.kind, quantization=quantization,
            params={**common, "load": load, "input_lengths": inputs, "output_lengths": outputs,
                    **search_slo(load)},
            measurement=workload.measurement.model_dump(),
        ))
    return out


def label(point: RunPoint) -> str:
    traffic = traffic_words(point.params.get("traffic"))
    if traffic:
        lengths = [] if point.output_length is None else [f"out{point.output_length}"]
        return " ".join([load_label(point.params["load"]), traffic, *lengths, f"{point.params['endpoint']}"])
    lengths = [f"{name}{v if v is not None else '~'}" for name, v in
               (("in", point.input_length), ("out", point.output_length))]
    return " ".join([load_label(point.params["load"]), *lengths, f"{point.params['endpoint']}"])


def pair_label(point: dict) -> str:
    load = (point.get("params") or {}).get("load")
    known = isinstance(load, dict) and (isinstance(load.get("concurrency"), int)
                                        or isinstance(load.get("request_rate"), (int, float))
                                        or isinstance(load.get("time_scale"), (int, float)))
    words = _traffic_words((point.get("params") or {}).get("traffic"))
    return " ".join([str(point.get("workload")), str(point.get("scale")),
                     load_label(load) if known else "load unknown", *words, *shape_words(point), *layout_words(point)])


def _traffic_words(traffic) -> list[str]:
    """A stored point's traffic in words; nothing for a point without one (or one from elsewhere
    that does not read as a traffic section)."""
    try:
        return [traffic_words(traffic)] if isinstance(traffic, dict) and traffic else []
    except (ValueError, KeyError, TypeError):
        return ["traffic unknown"]


def row_label(row) -> str:
    rate = row.get("request_rate")
    concurrency = row.get("concurrency")
    offered = row.get("offered_request_rate")     # a replay's: the trace's own rate
    load = f"c{int(concurrency)}" if concurrency == concurrency and concurrency is not None else \
        f"rate {rate:g}/s" if rate is not None and rate == rate else \
        f"replay {offered:.3g}/s" if offered is not None and offered == offered else "?"
    return f"{load} {lengths_words(row)} {row.get('server_name') or 'server'}"


def load_axis(load: Load) -> list[dict]:
    """The load points of a sweep: one dict per concurrency or request rate."""
    if load.concurrency is not None:
        values = load.concurrency if isinstance(load.concurrency, list) else [load.concurrency]
        return [{"concurrency": c} for c in values]
    if load.find_capacity is not None:   # the search's first probe; the others follow its results
        search = load.find_capacity.model_dump()
        return [{"request_rate": search["min_rate"], "burstiness": load.burstiness,
                 "max_concurrency": load.max_concurrency, "capacity": "probe", "find_capacity": search}]
    values = load.request_rate if isinstance(load.request_rate, list) else [load.request_rate]
    return [{"request_rate": r, "burstiness": load.burstiness, "max_concurrency": load.max_concurrency,
             **({} if load.stop_at_saturation else {"stop_at_saturation": False})} for r in values]


def length_axis(lengths: Lengths) -> list:
    """Fixed lengths sweep; a drawn distribution is one value of the axis."""
    if isinstance(lengths, list):
        return list(lengths)
    if hasattr(lengths, "model_dump"):   # uniform or CSV lengths (the section's models)
        return [lengths.model_dump()]
    return [lengths]


def load_label(load: dict) -> str:
    if "time_scale" in load:     # a trace replayed on its own clock, scaled
        return f"replay x{load['time_scale']:g}"
    if "concurrency" in load:
        return f"c{load['concurrency']}"
    rate = load["request_rate"]
    words = {"probe": "capacity probe ", "point": "capacity "}.get(load.get("capacity"), "")
    return f"{words}rate {'inf' if math.isinf(rate) else f'{rate:g}'}/s"
