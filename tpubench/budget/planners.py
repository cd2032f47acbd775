"""The budget planners, by unit of output, and the `tpubench budget` subcommands they make
(docs/commands.md#budget-per-unit).

A unit's planner is a `BudgetPlanner`: the subcommand it is offered as, the flag its volume is given
with, the options it reads beyond the common filters, and its sizing (imported only when a budget is
asked for). PLANNERS holds the units with a planner of their own; any other unit (one a new scenario
brings) is sized per day at its steady rate by GENERIC_PLANNER. No unit names its planner: this
table, owned by the budget, is keyed by the unit.

`budget_commands` makes the subcommands from the registry's units: one per unit, named by its
planner; and for a planner with `per_kind`, one more per scenario kind when several kinds make the
unit, on that kind's points only (`tpubench budget serve` and `generate` beside `tokens`).

This module imports nothing heavy (the registry's descriptions, no pandas): the CLI reads it to
build `tpubench budget`'s subcommands and their help.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from tpubench.budget.request import PER_DAY_FLAG, POWER_FLAGS, Sizing, unit_flag
from tpubench.scenarios import registry


@dataclass(frozen=True)
class BudgetPlanner:
    """How one unit of output is budgeted. The generic planner's texts name the unit: "{unit}" in
    `name` and `flag` is its plural hyphenated, "{plural}" / "{Plural}" in the help texts its plural;
    "{points}" in `help` is the points a subcommand sizes on."""

    name: str                           # its subcommand: "tokens", "train", "images"
    flag: str                           # its volume's flag: "--tokens-per-day"
    volume_words: str                   # "Tokens per day": a subcommand's line in `tpubench budget --help`
    volume_help: str
    help: str
    sizing: Callable[[], Sizing]        # the planner's module's Sizing, imported when called
    reads: tuple[str, ...] = ()         # the BudgetOptions flags it reads beyond the common ones
    per_kind: bool = False              # one subcommand per kind making the unit, besides its own


def _tokens() -> Sizing:
    from tpubench.budget.tokens import SIZING

    return SIZING


def _training() -> Sizing:
    from tpubench.budget.training import SIZING

    return SIZING


def _images() -> Sizing:
    from tpubench.budget.images import SIZING

    return SIZING


def _per_day() -> Sizing:
    from tpubench.budget.per_day import SIZING

    return SIZING


TOKENS = BudgetPlanner(
    name="tokens", flag="--tokens-per-day", volume_words="Tokens per day", volume_help="Input + output tokens per day.",
    help="A fleet per platform and plan for a token load under latency SLOs, sized on {points}: monthly cost, "
         "ranking, the saving against --current; with --months, how to buy it; with --on, the workload's "
         "estimates on chips not measured, sized apart.",
    sizing=_tokens, per_kind=True,
    reads=("--output-share", "--peak-factor", "--slo-ttft-ms", "--slo-tpot-ms", "--current", "--split", "--months",
           "--peak-hours", "--spot-lost-hours", "--spot-preemption-rate", "--tco", "--on", "--workload")
    + POWER_FLAGS)

# A training run is a number of tokens, not a load: no peak, SLO or power option applies.
TRAINING = BudgetPlanner(
    name="train", flag="--train-tokens", volume_words="Training tokens", volume_help="Training tokens to train on (e.g. 1e9).",
    help="Dollars, wall-clock hours and the slice or instance to rent to train on a number of tokens, per "
         "platform and plan, from {points}.",
    sizing=_training)

IMAGES = BudgetPlanner(
    name="images", flag="--images-per-day", volume_words="Images per day", volume_help="Images per day.",
    help="A fleet per platform and plan for an image load under a p99 seconds-per-image limit, sized on "
         "{points}: monthly cost and ranking.",
    sizing=_images, reads=("--peak-factor", "--max-image-latency-s") + POWER_FLAGS)

# Any unit without a planner of its own, sized on its units a day at its steady rate.
PER_DAY = BudgetPlanner(
    name="{unit}", flag=PER_DAY_FLAG, volume_words="{Plural} per day", volume_help="The {plural} to make a day.",
    help="A fleet per platform and plan for a day's {plural} made at a steady rate, sized on {points}: "
         "monthly cost and ranking.",
    sizing=_per_day, reads=("--peak-factor",) + POWER_FLAGS)

PLANNERS = {"token": TOKENS, "training_token": TRAINING, "image": IMAGES}
GENERIC_PLANNER = PER_DAY


def planner_of(unit) -> BudgetPlanner:
    return PLANNERS.get(unit.key, GENERIC_PLANNER)


@dataclass(frozen=True)
class BudgetCommand:
    """One subcommand of `tpubench budget`: a unit's planner, on the points of `scenarios` (None: of
    every kind making the unit)."""

    name: str
    unit: object                        # the OutputUnit sized on
    planner: BudgetPlanner
    scenarios: tuple[str, ...] | None
    points: str                         # the points it sizes on, in words: "serve points only"

    @property
    def help(self) -> str:
        return self.planner.help.format(points=self.points, plural=self.unit.plural)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The scenario kinds whose points it sizes on."""
        return self.scenarios or tuple(_kinds_making(self.unit))

    @property
    def short_help(self) -> str:
        """Its line in `tpubench budget --help`: what it sizes, on which points."""
        words = self.planner.volume_words.format(Plural=self.unit.plural.capitalize())
        return f"{words} on {self.points}."

    @property
    def flag(self) -> str:
        return unit_flag(self.planner.flag, self.unit)

    @property
    def volume_help(self) -> str:
        return self.planner.volume_help.format(plural=self.unit.plural)

    def flags(self) -> set[str]:
        """The flags only some subcommands have that this one has: its volume and what its planner reads."""
        return {self.flag, *self.planner.reads}


def _kinds_making(unit) -> list[str]:
    return [kind for kind, scenario in registry.SCENARIOS.items() if any(u.key == unit.key for u in scenario.units)]


def budget_commands() -> list[BudgetCommand]:
    """Every subcommand, unit by unit in the registry's order: one per scenario kind making the unit
    where its planner has `per_kind` and several kinds make it, then the unit's own; a name taken
    already (a kind named as a unit's command) is not made twice."""
    commands: dict[str, BudgetCommand] = {}
    for unit in registry.units():
        planner = planner_of(unit)
        kinds = _kinds_making(unit)
        if planner.per_kind and len(kinds) > 1:
            for kind in kinds:
                commands.setdefault(kind, BudgetCommand(kind, unit, planner, (kind,), f"{kind} points only"))
        points = (f"{', '.join(kinds[:-1])} and {kinds[-1]} points alike" if len(kinds) > 1
                  else f"{kinds[0]} points" if kinds else f"points in {unit.plural}")
        name = unit_flag(planner.name, unit)
        commands.setdefault(name, BudgetCommand(name, unit, planner, None, points))
    return list(commands.values())
