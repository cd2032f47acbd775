"""Scenario `serve`: an OpenAI-compatible server, running or started by tpubench, measured under
load (docs/scenarios/serve.md)."""

from __future__ import annotations

from dataclasses import dataclass

from tpubench.errors import UserError
from tpubench.scenarios import FieldProblem, Scenario
from tpubench.scenarios.serve import sweep
from tpubench.scenarios.serve.sweep import check_kv_cache
from tpubench.scenarios.token_unit import TOKENS
from tpubench.workload_spec.vocabulary import FULL_SCALE, as_list


@dataclass(frozen=True, kw_only=True)
class Serve(Scenario):
    kind: str = "serve"
    schema: str = "tpubench.scenarios.serve.schema:ServeSection"
    measurement: str = "tpubench.scenarios.serve.measure:ServeRun"
    cost_basis: str = "tpubench.scenarios.serve.cost:chip_seconds"
    report_kind: str = "serve"
    units: tuple = (TOKENS,)
    builds_model: bool = False    # the server's; a `model` block, if any, is what a launched server builds
    # meters_energy: a server tpubench launches runs on this host's chips (energy_here)
    # layout: none, a served model is sharded by its server (its own launch flags)
    launch_extras: tuple = ("serve",)   # the streaming client and `transformers serve`
    warn_once: bool = True        # a server's caveats hold for every load point
    options: tuple = ("server_url",)
    kv_cache_dtypes: bool = True  # model.quantization: kv_fp8 -> the launched engine's --kv-cache-dtype

    def check_workload(self, workload, scale, config):
        """A launched server told to serve model 'build' serves the workload's model: without a
        model block there is nothing to build, and that is known before any server starts. Request and
        point sizes are bounded by the model's context and the serve bounds, and the files of a
        traffic section are read whole once (bad rows: file:line errors)."""
        if scale == FULL_SCALE:
            workload.scenario.check_against_model(config)
        launch = workload.scenario.server.launch
        if workload.model is not None:
            check_kv_cache(as_list(workload.model.quantization), launch)
        if workload.model is None and launch is not None and launch.model == "build":
            raise FieldProblem(("scenario", "server", "launch", "model"),
                               "'build' serves the workload's model, but the workload has no model block: "
                               "add one, or name the model to serve (a Hub id or a local path)")
        if launch is not None and launch.command is None:
            # The args a preset appends, against its engine's own parser (stored; the presets' own
            # flags are checked against it by tests/test_engine_flags.py).
            from tpubench.serving.engine_flags import refusal

            why = refusal(launch.preset, launch.args)
            if why:
                raise FieldProblem(("scenario", "server", "launch", "args"), why)

    def subject(self, workload) -> str:
        """A serve workload may leave the model to its server."""
        return workload.model.family if workload.model is not None else "the server's model"

    def energy_here(self, workload) -> str | None:
        """Metered over the serve window only when tpubench launched the server on this host."""
        if workload.scenario.server.launch is None:
            return "the server is at a URL: its chips may be on another host (give server.launch to meter it)"
        return None

    sweep_axes = staticmethod(sweep.sweep_axes)
    points = staticmethod(sweep.points)
    label = staticmethod(sweep.label)
    pair_label = staticmethod(sweep.pair_label)
    row_label = staticmethod(sweep.row_label)

    def estimate_loads(self, section):
        return None if section.load.concurrency is None else as_list(section.load.concurrency)

    def weight_shards(self, point):
        return None   # the server shards its own model

    def check_launch(self, points, source):
        if any(p.params["server"].get("url") for p in points):
            raise UserError("a server at a URL is not on the launched machine: give scenario.server.launch so "
                            "tpubench starts the server there", where=source, field="scenario.server.url")

    def run_table(self, outcomes):
        # Imported here: rich is for the terminal after a run, not for `validate` or start-up.
        from tpubench.scenarios.serve.table import serve_table

        return serve_table(outcomes, self.label)

    def with_option(self, workload, name, value):
        """`--server-url`: the workload pointed at a running server, its launch block dropped."""
        # Imported here: it rebuilds the section (pydantic), which describing the kind never needs.
        from tpubench.scenarios.serve.options import with_server_url

        return with_server_url(workload, value)
