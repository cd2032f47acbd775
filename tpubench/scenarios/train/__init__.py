"""Scenario `train`: training steps (forward, backward, optimizer step) on seeded random token
batches, on one chip or data-parallel over a world of chips (docs/scenarios/train.md)."""

from __future__ import annotations

from dataclasses import dataclass

from tpubench.scenarios import Scenario
from tpubench.scenarios.train import sweep
from tpubench.scenarios.train.unit import TRAINING_TOKENS


@dataclass(frozen=True, kw_only=True)
class Train(Scenario):
    kind: str = "train"
    schema: str = "tpubench.scenarios.train.schema:TrainSection"
    measurement: str = "tpubench.scenarios.train.measure:TrainRun"
    cost_basis: str = "tpubench.scenarios.train.cost:chip_seconds"
    report_kind: str = "train"
    units: tuple = (TRAINING_TOKENS,)
    layout: tuple = ("data", "fsdp")

    def check_workload(self, workload, scale, config):
        """A training sequence longer than the model's positions, or a batch or step too large, is
        refused before anything is built (schema.check_scale)."""
        # Imported here: the schema (pydantic) is for loading a workload, not for describing the kind.
        from tpubench.scenarios.train.schema import check_scale

        check_scale(workload, scale, config)

    sweep_axes = staticmethod(sweep.sweep_axes)
    points = staticmethod(sweep.points)
    label = staticmethod(sweep.label)
    pair_label = staticmethod(sweep.pair_label)
    row_label = staticmethod(sweep.row_label)

    def weight_shards(self, point):
        """Data-parallel ranks each hold the whole model unless FSDP shards it."""
        return point.world_size if point.params.get("fsdp") else 1

    def run_table(self, outcomes):
        # Imported here: rich is for the terminal after a run, not for `validate` or start-up.
        from tpubench.scenarios.train.table import train_table

        return train_table(outcomes, self.label)
