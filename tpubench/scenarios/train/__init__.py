"""Scenario `train`: training steps (forward, backward, optimizer step) on seeded random token
batches, on one chip or data-parallel over a world of chips (docs/scenarios/train.md)."""

from __future__ import annotations

from tpubench.scenarios.train import sweep
from tpubench.scenarios.train.schema import TrainSection, check_scale


class Train:
    kind = "train"
    calibrates_estimate = False
    schema = TrainSection
    builds_model = True
    meters_energy = True
    layout = ("data", "fsdp")
    measurement = "tpubench.scenarios.train.measure:TrainRun"
    cost_basis = "tpubench.scenarios.train.cost:chip_seconds"
    launch_extras = ()
    report_kind = "train"
    warn_once = False
    options = ()

    def with_option(self, workload, name, value):
        raise KeyError(name)   # it has no options

    def check_workload(self, workload, scale, config):
        """A training sequence longer than the model's positions, or a batch or step too large, is
        refused before anything is built (schema.check_scale)."""
        check_scale(workload, scale, config)

    sweep_axes = staticmethod(sweep.sweep_axes)
    points = staticmethod(sweep.points)
    label = staticmethod(sweep.label)
    pair_label = staticmethod(sweep.pair_label)
    row_label = staticmethod(sweep.row_label)

    def estimate_loads(self, section):
        return None

    def weight_shards(self, point):
        """Data-parallel ranks each hold the whole model unless FSDP shards it."""
        return point.world_size if point.params.get("fsdp") else 1

    def check_launch(self, points, source):
        pass

    def run_table(self, outcomes):
        # Imported here: rich is for the terminal after a run, not for `validate` or start-up.
        from tpubench.scenarios.train.table import train_table

        return train_table(outcomes, self.label)
