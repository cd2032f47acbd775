"""Scenarios: what a run point measures, behind one small Protocol (docs/extending/scenario.md).

The runner expands the sweep, writes results and survives failures; it does not know what a
scenario does inside. A scenario says which points cannot run here (before anything runs), opens
what its points share (a model, saved weights, a server) for the length of the sweep, always
releasing it, and measures one point into a RunResult. Adding a kind is one module and one line
in SCENARIOS; every result carries its kind (`point.scenario_kind`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Protocol

from tpubench.results import RunResult
from tpubench.scenarios.generate import GenerateScenario
from tpubench.scenarios.serve import ServeScenario
from tpubench.scenarios.train import TrainScenario
from tpubench.workload import RunPoint

# Measures one point; `base` holds the identity fields of its RunResult (point, environment, ...).
MeasurePoint = Callable[[RunPoint, dict], RunResult]


@dataclass
class SweepContext:
    """What a scenario may use of the sweep it runs in."""

    backend: Any                  # the Backend that measures (torch or jax), with its device
    source: str                   # the workload file, for error messages
    peaks: dict                   # roofline peaks per dtype (efficiency.peaks_for)
    reporter: Any                 # runner.Reporter: progress phases
    collective_timeout_s: float   # multi-chip worlds (workload `parallel`)
    user_world: bool              # running under a torchrun the user started


class Scenario(Protocol):
    kind: str

    def check(self, ctx: SweepContext, points: list[RunPoint]) -> tuple[dict[str, str], dict[str, str]]:
        """Before anything runs: (point key -> why it cannot run here, point key -> a note for its
        result). Raises UserError when no point can run at all."""
        ...

    def open(self, ctx: SweepContext, points: list[RunPoint]) -> ContextManager[MeasurePoint]:
        """What the sweep's points share, held while the sweep runs and always released."""
        ...

    # A scenario whose points can run on a world of chips (parallel.run_point_in_world) also has
    # `in_world(be, point, base, checkpoint, peaks, reporter, world_start_s=None) -> RunResult`:
    # one rank's part of a point, called by each rank of the world.


SCENARIOS: dict[str, Scenario] = {GenerateScenario.kind: GenerateScenario(), ServeScenario.kind: ServeScenario(),
                                   TrainScenario.kind: TrainScenario()}
