"""Scenarios: what a run point measures, each kind one package behind the `Scenario` below
(docs/extending/scenario.md), all of them listed once in `tpubench.scenarios.registry`.

`Scenario` is a frozen dataclass with defaults: a scenario package states only what differs. Its
`units` (output_units.OutputUnit) say what its rows are priced per; cost, energy, the console and
reports loop over the registry's units and never name one.

A scenario package holds everything of its kind: its workload section (`schema`), the checks of a
workload no schema can express, its sweep axes and points, the label of a point, the columns of
its run table, and, in the module named by `measurement`, how a point is measured. Shared code
(workload loading, the runner, the console, cost, reports, compare, launch) asks the registry for
the scenario of a point or row and calls its members; it never names a kind.

The description (everything but `schema`, `measurement` and `cost_basis`) imports no framework and
no pydantic: the cost and report layers use it. Those three are named, "module:Name", and imported
by the registry only when used: the schema (pydantic) when a workload is loaded, the measurement
module when points run, the cost basis module (pandas) when results are priced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Mapping, Protocol

from tpubench.scenarios.output_units import OutputUnit
from tpubench.workload_spec.point import RunPoint

if TYPE_CHECKING:   # the result model is not built to describe a scenario: `validate` never needs it
    from tpubench.records.result import RunResult

# Measures one point; `base` holds the identity fields of its RunResult (point, environment, ...).
MeasurePoint = Callable[[RunPoint, dict], "RunResult"]

# The `split_method` of a priced row whose cost basis has a blended figure only (no input/output
# split, `split_note` says why): a budget sized on the split leaves such points out.
SPLIT_BLENDED_ONLY = "blended only"


class FieldProblem(ValueError):
    """A workload value a scenario refuses after the schema accepted it: `loc` is the value's path
    in the file (the loader turns it into file:line and field), `message` says why."""

    def __init__(self, loc: tuple, message: str):
        super().__init__(message)
        self.loc, self.message = loc, message


def whole_lengths(lengths, loc: tuple, scale: str) -> None:
    """A measured point's prompt and answer lengths are whole tokens: a mean length (505.6, which
    `tpubench estimate` reads as written) cannot be run. FieldProblem at `loc` otherwise."""
    for value in lengths if isinstance(lengths, list) else [lengths]:
        if isinstance(value, float):
            raise FieldProblem(loc, f"{value:g} tokens is a mean, not a length a request or batch can have: a "
                                    f"measured point needs whole tokens (scale '{scale}'; tpubench estimate "
                                    "reads a mean)")


@dataclass
class SweepContext:
    """What a scenario may use of the sweep it runs in."""

    backend: Any                  # the Backend that measures (torch or jax), with its device
    source: str                   # the workload file, for error messages
    peaks: dict                   # roofline peaks per dtype (measure.efficiency.peaks_for)
    reporter: Any                 # run.runner.Reporter: progress phases
    collective_timeout_s: float   # multi-chip worlds (workload `parallel`)
    user_world: bool              # running under a torchrun the user started
    energy: Any = None            # measure.energy.EnergyPlan: the sweep's energy source, or why there is none
    profile_dir: Any = None       # run --profile: where profiled passes write their traces (the results
                                  # folder), None without it (measure/profile.py)


class Measurement(Protocol):
    """The module a scenario's `measurement` names."""

    def check(self, ctx: SweepContext, points: list[RunPoint]) -> tuple[dict[str, str], dict[str, str]]:
        """Before anything runs: (point key -> why it cannot run here: a reason, recorded as a
        failed result, or an errors.Unavailable, recorded as skipped; point key -> a note for its
        result). Raises UserError when no point can run at all."""
        ...

    def open(self, ctx: SweepContext, points: list[RunPoint]) -> ContextManager[MeasurePoint]:
        """What the sweep's points share (a model, saved weights, a server), held while the sweep
        runs and always released."""
        ...

    # A scenario whose sweep depends on what its points measure also has `steering(points) ->
    # Steering`: the runner tells it every finished point (measured now or earlier, --resume).

    # A scenario whose points can run on a world of chips (measure.world.run_point_in_world) also
    # has `in_world(be, point, base, checkpoint, peaks, reporter, world_start_s=None, energy=None) -> RunResult`:
    # one rank's part of a point, called by each rank of the world.


class Steering(Protocol):
    """A sweep that follows its measurements (Measurement.steering; serve's capacity search)."""

    def after(self, point: RunPoint, result: RunResult) -> tuple[list[RunPoint], dict[str, str]]:
        """A point finished (measured now, or earlier under --resume; `result` may be amended
        before it is written): the points to run next, in order, and {pending point key: why it is
        skipped}."""
        ...


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """A scenario kind: a frozen dataclass whose defaults fit most kinds. A scenario package
    subclasses it (itself a `@dataclass(frozen=True, kw_only=True)`), giving `kind`, `schema`,
    `measurement`, `cost_basis`, `report_kind` and `units`, the sweep functions, and only the
    fields and methods where it differs from these defaults (docs/extending/scenario.md)."""

    kind: str                     # the workload's `scenario.kind`
    schema: str                   # "module:Class" of its `scenario:` section, a pydantic model whose `kind`
                                  # is a Literal of `kind` (registry.schema_of)
    measurement: str              # the module that measures its points (Measurement)
    cost_basis: str               # "module:function" of its cost basis: chip_seconds(rows) -> the
                                  # chip-seconds per unit of output of every result row of its kind
                                  # (each unit's `chip_seconds_columns()`, and its `basis_labels`),
                                  # on the rows' index (docs/extending/scenario.md#cost)
    report_kind: str              # how reports name its stack's kind ('offline', 'serve', ...)
    units: tuple[OutputUnit, ...]  # what its rows are priced per (output_units.py); the first is the one
                                  # its rows are ranked, shown and budgeted in
    builds_model: bool = True     # measures a model tpubench builds from the `model` block: the block
                                  # is required, and roofline peaks and weight-size checks apply
    meters_energy: bool = True    # its work runs on this host's chips inside the timed loop, so the
                                  # sweep's energy source can meter it; one whose answer depends on the
                                  # workload also has energy_here(workload) -> why not, or None (serve:
                                  # a launched server is here, one at a URL may be anywhere)
    layout: tuple[str, ...] = ()  # the `parallel` fields it takes ("tensor", "expert", "data", "fsdp")
    launch_extras: tuple[str, ...] = ()  # pip extras a launched machine needs for it, beyond its device's
    warn_once: bool = False       # its warnings are about the whole sweep (a server's): shown once
    options: tuple[str, ...] = ()  # run options of its own (`server_url`: tpubench run --server-url)
    calibrates_estimate: bool = False  # its results are decode loops of a model tpubench built, batch as
                                  # the load: `tpubench estimate` calibrates on them (tpubench/estimate/)
    quantizes: bool = False       # its points take model.quantization's weight part: the model is quantised
                                  # and gated against its unquantised self (models/quality_gate.py)
    kv_cache_dtypes: bool = False  # its points take model.quantization's KV-cache part (`kv_fp8`): serve
                                  # passes it to the engine it launches (serving/presets.py)
    kv_cache_note: str = "it sets no cache dtype"   # why not, where it does not
    kernel_arms: bool = False     # its results are arms of a MoE kernel A/B (experts implementation,
                                  # decode loop): the report's kernel table compares them
                                  # (output/report/kernel_speedups.py)

    @property
    def unit(self) -> OutputUnit:
        """The unit its rows are ranked, shown and budgeted in (the first of `units`)."""
        return self.units[0]

    def subject(self, workload) -> str:
        """What a workload of this kind runs, in a few words (`tpubench validate`): its model family."""
        return workload.model.family if workload.model is not None else "no model"

    def with_option(self, workload, name: str, value):
        """The workload with one of its `options` set (run.overrides.with_option checks the name)."""
        raise KeyError(name)   # no options unless a scenario declares some

    def check_workload(self, workload, scale: str, config: dict) -> None:
        """After the shared checks of one scale (its resolved model `config`, {} without a model):
        raise FieldProblem for a value this kind cannot run."""

    def sweep_axes(self, workload, scale: str) -> dict[str, list]:
        """Every sweep axis of one scale with its values (a scalar is an axis of one value)."""
        raise NotImplementedError

    def points(self, workload, scale: str, axes: dict[str, list], source: str) -> list[RunPoint]:
        """The cartesian product of `axes` as resolved run points."""
        raise NotImplementedError

    def label(self, point: RunPoint) -> str:
        """The point in a few words, as the progress bar and run table show it."""
        raise NotImplementedError

    def pair_label(self, point: Mapping) -> str:
        """A result's point (its `point` dict) in words that tell it from its neighbours in a
        comparison: its shape or load, layout and dtype."""
        raise NotImplementedError

    def row_label(self, row: Mapping) -> str:
        """A priced result row (one per result and price) as the cost table names it."""
        raise NotImplementedError

    def weight_shards(self, point: RunPoint) -> int | None:
        """Over how many chips the point's weights are split; None when tpubench does not hold
        them (a server's model)."""
        return 1

    def estimate_loads(self, section) -> list | None:
        """The concurrent sequences a roofline estimate sizes for this `scenario:` section (its sweep
        of them), or None where the kind has no such load (`tpubench estimate` refuses it)."""
        return None

    def check_launch(self, points: list[RunPoint], source: str) -> None:
        """Raise UserError for a point that cannot run on a machine `tpubench launch` provisions."""

    def run_table(self, outcomes: list) -> Any:
        """The rich Table of these points' figures (run.runner.PointOutcome, all of this kind)."""
        raise NotImplementedError
