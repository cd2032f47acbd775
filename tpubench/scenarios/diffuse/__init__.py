"""Scenario `diffuse`: images from a Diffusers pipeline (Flux, SD3, SDXL architectures), each call
cut into fenced stages and priced per image (docs/scenarios/diffuse.md).

This module describes the scenario without importing torch or diffusers: the component configs
are data (families.json); the measurement (measure.py) and the pipeline builder (build.py) are
imported only when points run.
"""

from __future__ import annotations

from tpubench.scenarios.diffuse import sweep
from tpubench.scenarios.diffuse.schema import DiffuseSection
from tpubench.workload_spec.sections import FULL_SCALE


class Diffuse:
    kind = "diffuse"
    calibrates_estimate = False
    schema = DiffuseSection
    builds_model = False      # its model is the pipeline in the scenario section, not a transformers `model`
    meters_energy = True      # the pipeline runs here, on this host's chip
    layout = ()
    measurement = "tpubench.scenarios.diffuse.measure:DiffuseRun"
    cost_basis = "tpubench.scenarios.diffuse.cost:chip_seconds"
    launch_extras = ("diffusion",)
    report_kind = "diffusion"
    warn_once = False
    options = ()

    def with_option(self, workload, name, value):
        raise KeyError(name)   # it has no options

    def check_workload(self, workload, scale, config):
        """Every scale (the loader calls this for the full one only: there is no `model` block)."""
        from tpubench.scenarios.diffuse.checks import check_scale

        for name in [FULL_SCALE, *workload.scales]:
            check_scale(workload, name)

    sweep_axes = staticmethod(sweep.sweep_axes)
    points = staticmethod(sweep.points)
    label = staticmethod(sweep.label)
    pair_label = staticmethod(sweep.pair_label)
    row_label = staticmethod(sweep.row_label)

    def estimate_loads(self, section):
        return None

    def weight_shards(self, point):
        return 1

    def check_launch(self, points, source):
        pass

    def run_table(self, outcomes):
        # Imported here: rich is for the terminal after a run, not for `validate` or start-up.
        from tpubench.scenarios.diffuse.table import diffuse_table

        return diffuse_table(outcomes, self.label)

