"""Scenario `diffuse`: images from a Diffusers pipeline (Flux, SD3, SDXL architectures), each call
cut into fenced stages and priced per image (docs/scenarios/diffuse.md).

This module describes the scenario without importing torch or diffusers: the component configs
are data (families.json); the measurement (measure.py) and the pipeline builder (build.py) are
imported only when points run.
"""

from __future__ import annotations

from dataclasses import dataclass

from tpubench.scenarios import Scenario
from tpubench.scenarios.diffuse import sweep
from tpubench.scenarios.diffuse.unit import IMAGES
from tpubench.workload_spec.vocabulary import FULL_SCALE


@dataclass(frozen=True, kw_only=True)
class Diffuse(Scenario):
    kind: str = "diffuse"
    schema: str = "tpubench.scenarios.diffuse.schema:DiffuseSection"
    measurement: str = "tpubench.scenarios.diffuse.measure:DiffuseRun"
    cost_basis: str = "tpubench.scenarios.diffuse.cost:chip_seconds"
    report_kind: str = "diffusion"
    units: tuple = (IMAGES,)
    builds_model: bool = False   # its model is the pipeline in the scenario section, not a transformers `model`
    launch_extras: tuple = ("diffusion",)   # meters_energy: the pipeline runs here, on this host's chip

    def check_workload(self, workload, scale, config):
        """Every scale (the loader calls this for the full one only: there is no `model` block)."""
        from tpubench.scenarios.diffuse.checks import check_scale

        for name in [FULL_SCALE, *workload.scales]:
            check_scale(workload, name)

    def subject(self, workload) -> str:
        """A diffusion workload names a pipeline, not a model family."""
        return f"{workload.scenario.pipeline} pipeline"

    sweep_axes = staticmethod(sweep.sweep_axes)
    points = staticmethod(sweep.points)
    label = staticmethod(sweep.label)
    pair_label = staticmethod(sweep.pair_label)
    row_label = staticmethod(sweep.row_label)

    def run_table(self, outcomes):
        # Imported here: rich is for the terminal after a run, not for `validate` or start-up.
        from tpubench.scenarios.diffuse.table import diffuse_table

        return diffuse_table(outcomes, self.label)

