"""What `tpubench budget` is asked besides its volume, before any file is read (docs/commands.md#budget-per-unit).

`BudgetOptions` is the one declaration of every option: each field carries its flag and its help,
and `tpubench budget` makes its subcommands' options from them (tpubench/cli_budget.py). The
filters marked `common` (plans, cloud, region, flagged prices) apply to every planner; a planner
reads the others it declares (budget/planners.py `reads`), and only those are options of its
subcommands. `Sizing` is what a planner's module gives to size a budget: its plan and its check.

This module imports nothing heavy: the command's options are built from it before pandas is needed.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Callable

from tpubench.errors import UserError

MAX_USD_PER_KWH = 1e3
MAX_PUE = 10.0


def check_number(value, flag: str, what: str, *, low: float = 0.0, high: float, low_open: bool = True) -> float:
    """`value` as a float when it is a finite number in (low, high] (or [low, high] with
    low_open=False), else a one-line UserError naming the flag: NaN, inf, negative and huge values
    never reach the sizing."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = (value > low if low_open else value >= low) and value <= high
    if not ok:
        bound = f"{'>' if low_open else '>='} {low:g} and <= {high:g}"
        raise UserError(f"{what}: a finite number {bound}, got {value}", field=flag)
    return float(value)


@dataclass(frozen=True)
class Power:
    """What energy costs a fleet (docs/definitions.md#budget-energy): a power price, the data
    centre's PUE, and whether the prices are of owned capacity (energy then adds to the monthly
    cost; a cloud's rental price already includes it, so there it is only shown)."""

    usd_per_kwh: float | None = None
    pue: float = 1.0
    owned: bool = False
    grid_gco2_per_kwh: float | None = None

    def __post_init__(self):
        if self.usd_per_kwh is not None:
            check_number(self.usd_per_kwh, "--power-price", "a power price is USD per kWh", low_open=False,
                         high=MAX_USD_PER_KWH)
        check_number(self.pue, "--pue", "a PUE is facility power over IT power", low=1.0, low_open=False,
                     high=MAX_PUE)
        if self.grid_gco2_per_kwh is not None:   # coal is about 1,000 g/kWh
            check_number(self.grid_gco2_per_kwh, "--grid-gco2-per-kwh", "a grid intensity is grams CO2e per kWh",
                         low_open=False, high=1e4)
        if self.owned and self.usd_per_kwh is None:
            raise UserError("owned capacity needs a power price to add", field="--power-price")


def _option(default, flag: str, help: str, *, common: bool = False):
    """An option of `tpubench budget`: its default, flag and help; `common`: every subcommand has it."""
    return field(default=default, metadata={"flag": flag, "help": help, "common": common})


@dataclass(frozen=True)
class BudgetOptions:
    """Every option of `tpubench budget` but the volume, the results and the output. The first ones
    filter what competes and apply to every planner; a planner reads those of the rest it declares."""

    plans: tuple[str, ...] | None = _option(None, "--plan", "Only this purchase plan: on_demand, spot, commit_1y, "
                                            "commit_3y, reservation, flex_start, capacity_block (repeatable).",
                                            common=True)
    cloud: tuple[str, ...] | None = _option(None, "--cloud", "Only this cloud's prices (repeatable; default: every "
                                            "cloud in the price table).", common=True)
    region: tuple[str, ...] | None = _option(None, "--region", "Only this region's prices (repeatable; default: every "
                                             "region in the price table).", common=True)
    include_flagged: bool = _option(False, "--include-flagged", "Let flagged prices (spot above on-demand, a lower "
                                    "bound...) compete where an unflagged row prices the same accelerator and plan; "
                                    "they stay marked.", common=True)
    # The scenario kinds whose points compete (None: every kind making the unit): the subcommand's.
    scenarios: tuple[str, ...] | None = None
    output_share: float = _option(0.25, "--output-share", "Fraction of the tokens that are output.")
    peak_factor: float = _option(1.0, "--peak-factor", "Peak-to-average traffic ratio.")
    slo_ttft_ms: float | None = _option(None, "--slo-ttft-ms", "p99 TTFT limit.")
    slo_tpot_ms: float | None = _option(None, "--slo-tpot-ms", "p99 TPOT limit.")
    max_image_latency_s: float | None = _option(None, "--max-image-latency-s",
                                                "Only points whose p99 seconds per call (a user's wait for an "
                                                "image) is within this qualify.")
    current: str | None = _option(None, "--current", "Platform in use: cloud/region/instance_type.")
    split: bool = _option(False, "--split", "Size on this traffic's input/output mix (--output-share) from each "
                          "point's input/output split, instead of blended tokens at the point's own mix; server "
                          "points without a probe-fitted split are left out.")
    months: float | None = _option(None, "--months", "Horizon in months: choose how to buy per platform "
                                   "(commitments for the base, on-demand or spot for the peak).")
    peak_hours: float | None = _option(None, "--peak-hours", "Hours a day at the peak (with --peak-factor): the "
                                       "rest of the day runs at the base load.")
    spot_lost_hours: float = _option(0.25, "--spot-lost-hours", "Hours of an instance's work lost per spot "
                                     "preemption.")
    spot_preemption_rate: float | None = _option(None, "--spot-preemption-rate", "Spot preemptions per hour where "
                                                 "the price table gives none.")
    tco: Path | None = _option(None, "--tco", "CSV of TCO tiers (hyperscaler, neocloud, owned...) shown beside "
                               "list prices.")
    on: tuple[str, ...] | None = _option(None, "--on", "A chip to estimate the workload on, beside the chips its "
                                         "compare_on names: tpu-v6e-8, H100:8, H100:8@fp8, trn2 (repeatable). "
                                         "Each estimate is sized apart from the measured options, labelled "
                                         "estimate, at its cheapest load that meets the service level.")
    workload: tuple[str, ...] | None = _option(None, "--workload", "A workload file to estimate (repeatable; "
                                               "default: the workload files your results name). Estimates the "
                                               "chips its compare_on names, and --on's.")
    power_price: float | None = _option(None, "--power-price", "USD per kWh: each option's monthly energy cost.")
    pue: float = _option(1.0, "--pue", "Power usage effectiveness of the data centre (>= 1).")
    owned: bool = _option(False, "--owned", "The prices are of owned capacity: add the energy cost to the "
                          "monthly cost (a cloud's price includes it).")
    grid_gco2_per_kwh: float | None = _option(None, "--grid-gco2-per-kwh", "Grid carbon intensity to use instead "
                                              "of the region's.")

    def power(self) -> Power:
        return Power(self.power_price, self.pue, self.owned, self.grid_gco2_per_kwh)

    @staticmethod
    def ms_to_s(value: float | None) -> float | None:
        return None if value is None else value / 1e3


def option_fields(*, common: bool | None = None) -> list:
    """The fields of BudgetOptions given by a flag (`common` True/False: only those every planner
    reads, or only the others)."""
    return [f for f in fields(BudgetOptions)
            if "flag" in f.metadata and (common is None or f.metadata["common"] == common)]


POWER_FLAGS = ("--power-price", "--pue", "--owned", "--grid-gco2-per-kwh")


@dataclass(frozen=True)
class Sizing:
    """How a planner's module sizes a budget: `check(amount, options, unit)` checks the volume and
    every option it reads (one-line UserError naming the flag) before any file is read;
    `plan(results, prices, amount, options, unit, today=None)` returns the budget, an object with an
    `options` frame (the CSV) that budget/render/ renders by its type."""

    plan: Callable
    check: Callable


def unit_words(unit) -> str:
    """A unit in a command or flag: its plural, hyphenated ("audio seconds" -> "audio-seconds")."""
    return "-".join(unit.plural.split())


# The volume flag of a unit the generic planner sizes per day: --audio-seconds-per-day.
PER_DAY_FLAG = "--{unit}-per-day"


def unit_flag(template: str, unit) -> str:
    """A flag or command name of `unit` from its template ("{unit}" is unit_words)."""
    return template.format(unit=unit_words(unit))
