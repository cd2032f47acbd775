"""Scenario `generate`: offline batched prefill and decode on a model tpubench builds, on one chip or
sharded over a world of chips (docs/scenarios/generate.md)."""

from __future__ import annotations

from tpubench.scenarios.generate import sweep
from tpubench.scenarios.generate.schema import GenerateSection, check_scale
from tpubench.workload_spec.sections import as_list


class Generate:
    kind = "generate"
    calibrates_estimate = True
    schema = GenerateSection
    builds_model = True
    meters_energy = True
    layout = ("tensor", "expert")
    measurement = "tpubench.scenarios.generate.measure:GenerateRun"
    cost_basis = "tpubench.scenarios.generate.cost:chip_seconds"
    launch_extras = ()
    report_kind = "offline"
    warn_once = False
    options = ()

    def with_option(self, workload, name, value):
        raise KeyError(name)   # it has no options

    def check_workload(self, workload, scale, config):
        """Lengths within the model's context, batches within their tokens (schema.check_scale)."""
        check_scale(workload, scale, config)

    sweep_axes = staticmethod(sweep.sweep_axes)
    points = staticmethod(sweep.points)
    label = staticmethod(sweep.label)
    pair_label = staticmethod(sweep.pair_label)
    row_label = staticmethod(sweep.row_label)

    def estimate_loads(self, section):
        return as_list(section.batch_size)

    def weight_shards(self, point):
        return point.world_size

    def check_launch(self, points, source):
        pass

    def run_table(self, outcomes):
        # Imported here: rich is for the terminal after a run, not for `validate` or start-up.
        from tpubench.scenarios.generate.table import generate_table

        return generate_table(outcomes, self.label)
