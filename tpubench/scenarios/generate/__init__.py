"""Scenario `generate`: offline batched prefill and decode on a model tpubench builds, on one chip or
sharded over a world of chips (docs/scenarios/generate.md)."""

from __future__ import annotations

from dataclasses import dataclass

from tpubench.scenarios import Scenario
from tpubench.scenarios.generate import sweep
from tpubench.scenarios.token_unit import TOKENS
from tpubench.workload_spec.vocabulary import as_list


@dataclass(frozen=True, kw_only=True)
class Generate(Scenario):
    kind: str = "generate"
    schema: str = "tpubench.scenarios.generate.schema:GenerateSection"
    measurement: str = "tpubench.scenarios.generate.measure:GenerateRun"
    cost_basis: str = "tpubench.scenarios.generate.cost:chip_seconds"
    report_kind: str = "offline"
    units: tuple = (TOKENS,)
    layout: tuple = ("tensor", "expert")
    calibrates_estimate: bool = True
    quantizes: bool = True
    # transformers' quantised caches are integer (optimum-quanto: 2 or 4 bits; HQQ), none fp8, and keep
    # the newest tokens unquantised: not what a serving engine's fp8 cache is, so none is measured.
    kv_cache_note: str = "transformers' generate has no fp8 KV cache"
    kernel_arms: bool = True

    def check_workload(self, workload, scale, config):
        """Lengths within the model's context, batches within their tokens (schema.check_scale)."""
        # Imported here: the schema (pydantic) is for loading a workload, not for describing the kind.
        from tpubench.scenarios.generate.schema import check_scale

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

    def run_table(self, outcomes):
        # Imported here: rich is for the terminal after a run, not for `validate` or start-up.
        from tpubench.scenarios.generate.table import generate_table

        return generate_table(outcomes, self.label)
