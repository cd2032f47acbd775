"""Run-time overrides of a workload (`tpubench run` flags): its parallel layout, and the options a
scenario takes of its own (e.g. --server-url), each checked against the workload's scenario."""

from __future__ import annotations

from tpubench.errors import UserError
from tpubench.run.sweep import scale_names
from tpubench.run.workload import Workload, layout_refusal
from tpubench.scenarios.registry import SCENARIOS
from tpubench.workload_spec.sections import FULL_SCALE, Parallel

LAYOUT_FLAGS = {"tensor": "--tensor-parallel", "expert": "--expert-parallel", "data": "--data-parallel",
                "fsdp": "--fsdp"}


def with_option(workload: Workload, name: str, value) -> Workload:
    """The workload with one scenario option set (`name` as the scenario's `options` list it, the
    flag is --name-with-dashes); unchanged for None."""
    if value is None:
        return workload
    scenario = SCENARIOS[workload.scenario.kind]
    flag = "--" + name.replace("_", "-")
    if name not in scenario.options:
        takers = ", ".join(s.kind for s in SCENARIOS.values() if name in s.options)
        raise UserError(f"{flag} needs a workload of scenario {takers} (this one's kind: {scenario.kind})", field=flag)
    return scenario.with_option(workload, name, value)


def with_layout(workload: Workload, tensor: int | None = None, expert: int | None = None,
                data: int | None = None, fsdp: bool | None = None) -> Workload:
    """The workload with its parallel layout replaced (`run --tensor-parallel/--expert-parallel`,
    and for training `--data-parallel/--fsdp`), where its scenario takes those fields."""
    from tpubench.models.config_check import ConfigProblem, check_model_config

    given = {k: v for k, v in (("tensor", tensor), ("expert", expert), ("data", data), ("fsdp", fsdp)) if v is not None}
    scenario = SCENARIOS[workload.scenario.kind]
    refused = [k for k in given if k not in scenario.layout]
    if refused:
        raise UserError(layout_refusal(scenario, refused, LAYOUT_FLAGS.get),
                        field=LAYOUT_FLAGS[refused[0]])
    if "data" in given or "fsdp" in given:
        update = {k: given[k] for k in ("data", "fsdp") if k in given}
        workload = workload.model_copy(update={"parallel": workload.parallel.model_copy(update=update)})
    if tensor is None and expert is None:
        return workload
    if (tensor or 1) > 1 and (expert or 1) > 1:
        raise UserError("tensor and expert parallel cannot be combined in one run yet", field="--expert-parallel")
    layout = {**workload.parallel.model_dump(), "tensor": tensor or 1, "expert": expert or 1}
    for scale in scale_names(workload):
        own = workload.scales[scale].config if scale != FULL_SCALE else {}
        try:
            check_model_config(workload.model.family, {**workload.model.config, **own},
                               tensor=(layout["tensor"],), expert=(layout["expert"],))
        except ConfigProblem as exc:
            flag = "--tensor-parallel" if exc.path[-1] == "tensor" else "--expert-parallel"
            raise UserError(f"{exc.message} (scale '{scale}')", field=flag) from None
    return workload.model_copy(update={"parallel": Parallel(**layout)})


def with_server_url(workload: Workload, url: str | None) -> Workload:
    """`tpubench run --server-url`: the workload measured against a running server."""
    return with_option(workload, "server_url", url)
