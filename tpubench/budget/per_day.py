"""A fleet for any unit of output made at a steady rate (docs/commands.md#budget-per-unit): the
planner of every unit without one of its own (budget/planners.py GENERIC_PLANNER: `tpubench budget
audio-seconds --audio-seconds-per-day N` for a unit "audio seconds"), so a new unit is budgeted
with no code of its own, and the steps budget/images.py builds on.

Traffic is `per_day` units a day with a peak-to-average factor: R = per_day * peak_factor / 86400
units/s at the peak. A priced row of the unit spends c chip-seconds per unit on its headline figure
(the unit's `headline` cost column, as chip-seconds: e.g. `image_chip_s_per_image`), so it makes
1 / c units/s per chip (`{unit.throughput}_per_chip`, CI: the low rate from the high c). Per priced
platform and plan the valid point with the most units/s per chip is chosen (ties: the cheaper
headline cost) and its fleet sized as budget/fleet.py says; monthly energy is the units' chip-seconds
at the point's busy power (the unit's joules per unit over its chip-seconds per unit) plus the idle
floor of the rented chips. No latency limit: a unit that needs one writes its own planner on these
steps (budget/images.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

import numpy as np
import pandas as pd

from tpubench.budget.fleet import (
    BOUND_FROM_RATE,
    DAYS_PER_MONTH,
    PLATFORM_COLUMNS,
    SECONDS_PER_DAY,
    blended_rate,
    check_peak_factor,
    energy_notes,
    priced_rows,
    ranked,
    size_fleet,
    with_energy_cost,
    with_fleet_energy,
    within_tpu_slices,
    without_huge_fleets,
)
from tpubench.budget.request import PER_DAY_FLAG, BudgetOptions, Power, Sizing, check_number, unit_flag
from tpubench.money import cost
from tpubench.records.columns import numeric_column
from tpubench.records.usable import usable_rows

MAX_UNITS_PER_DAY = 1e16   # as for tokens: far above any fleet, every count an exact integer


def headline_chip_s(unit) -> str:
    """The chip-seconds column behind the unit's headline cost (`blended_usd_per_mtok` ->
    `blended_chip_s_per_token`)."""
    return unit.headline.replace(unit.priced_suffix, unit.chip_s_suffix)


def headline_joules(unit) -> str:
    """The joules-per-unit column of the headline figure (`image_usd_per_kimage` -> `image_j_per_image`)."""
    return unit.headline.replace(unit.priced_suffix, unit.energy_suffix)


def rate_column(unit) -> str:
    return f"{unit.throughput}_per_chip"


def with_unit_rate(candidates: pd.DataFrame, unit) -> pd.DataFrame:
    """Each row's units/s per chip (with CI) from its headline chip-seconds, rows without one dropped."""
    chip_s = headline_chip_s(unit)
    for bound, chip_s_bound in BOUND_FROM_RATE:   # the low rate from the high chip-seconds
        candidates[rate_column(unit) + bound] = blended_rate(numeric_column(candidates, chip_s + chip_s_bound))
    return candidates[np.isfinite(candidates[rate_column(unit)])]


def best_per_platform(meets: pd.DataFrame, unit) -> pd.DataFrame:
    """Per priced platform and plan, the point with the most units/s per chip (ties: the cheaper)."""
    return (meets.sort_values([rate_column(unit), unit.headline], ascending=[False, True], kind="stable")
            .drop_duplicates(PLATFORM_COLUMNS + ["plan"], keep="first").copy())


def fleet_per_day(best: pd.DataFrame, unit, per_day: float, peak_per_s: float, power: Power) -> pd.DataFrame:
    """`best`'s fleets at `peak_per_s`, with the month's energy of `per_day` units and its cost, ranked."""
    out = size_fleet(best, rate_column(unit), peak_per_s)
    with np.errstate(divide="ignore", invalid="ignore"):
        chip_s = numeric_column(out, headline_chip_s(unit))
        busy_w = numeric_column(out, headline_joules(unit)) / chip_s
    out = with_fleet_energy(out, per_day * DAYS_PER_MONTH * chip_s, busy_w, power.pue)
    return ranked(with_energy_cost(out, power))


def unit_candidates(priced: pd.DataFrame, unit, notes: list[str]) -> pd.DataFrame:
    """The valid rows of `unit` (notes: how many of other units and how many invalid were left out)."""
    mine = cost.unit_rows(priced, unit)
    others = priced.loc[~mine, "file"].nunique()
    if others:
        notes.append(f"{others} result(s) in other units than {unit.plural} left out")
    rows = priced[mine]
    kept, unusable = usable_rows(rows)
    if unusable:
        notes.append(f"{unusable} invalid run(s) left out of the budget")
    return kept


def option_columns(unit) -> list[str]:
    """The columns of a per-day budget's options (the CSV): the fleet, the point's rate and cost per
    unit, what the point is, the price and the energy."""
    bounds = [b for b, _ in BOUND_FROM_RATE]
    return (["rank_overall", "rank_in_plan", "workload", "scale", "priced_accelerator", "cloud", "region",
             "instance_type", "chips_per_instance", "plan", "usd_per_instance_hour", "per_day"]
            + [f"monthly_usd{b}" for b in bounds]
            + ["instances", "rented_chips", "required_chips", "replicas", "fleet_utilisation",
               "replica_spans_instances"]
            + [rate_column(unit) + b for b in bounds] + [unit.headline + b for b in bounds]
            + [headline_chip_s(unit), headline_joules(unit)]
            + ["scenario_kind", "batch_size", "dtype", "execution_mode", "chips", "backend", "device", "accelerator",
               "torch_version", "file", "price_source", "price_as_of", "price_age_days", "price_flagged",
               "price_flag_reason", "monthly_kwh", "monthly_kg_co2e", "monthly_energy_usd", "energy_in_monthly_usd",
               "energy_method", "grid_gco2e_per_kwh", "grid_source", "monthly_idle_kwh", "idle_w_per_chip",
               "idle_basis"])


@dataclass
class UnitBudget:
    unit: object                   # the OutputUnit sized on
    per_day: float
    peak_factor: float
    options: pd.DataFrame          # one row per platform x plan with a valid point, ranked
    unpriced: pd.DataFrame         # results that could not be priced, and why
    notes: list[str] = field(default_factory=list)

    @property
    def peak_per_s(self) -> float:
        return self.per_day * self.peak_factor / SECONDS_PER_DAY


def plan_per_day(results: pd.DataFrame, prices: pd.DataFrame, per_day: float, options: BudgetOptions, unit,
                 today: date | None = None) -> UnitBudget:
    """Size a fleet on every priced platform and plan for `per_day` units of `unit` (module docstring)."""
    check_per_day(per_day, options, unit)
    power = options.power()
    priced, unpriced, notes = priced_rows(results, prices, options, today, power.grid_gco2_per_kwh)
    candidates = with_unit_rate(unit_candidates(priced, unit, notes), unit)
    candidates, note = within_tpu_slices(candidates)
    notes += [note] if note else []
    peak = per_day * options.peak_factor / SECONDS_PER_DAY
    best, note = without_huge_fleets(best_per_platform(candidates, unit), rate_column(unit), peak,
                                     unit_flag(PER_DAY_FLAG, unit), unit.plural)
    notes += [note] if note else []
    fleet = fleet_per_day(best, unit, per_day, peak, power).assign(**{"per_day": float(per_day)})
    notes += energy_notes(fleet, power)
    fleet = fleet.reindex(columns=option_columns(unit))
    return UnitBudget(unit=unit, per_day=float(per_day), peak_factor=float(options.peak_factor),
                      options=fleet.reset_index(drop=True), unpriced=unpriced, notes=notes)


def check_per_day(per_day: float, options: BudgetOptions, unit) -> None:
    check_number(per_day, unit_flag(PER_DAY_FLAG, unit), f"must be a positive number of {unit.plural}",
                 high=MAX_UNITS_PER_DAY)
    check_peak_factor(options.peak_factor)
    options.power()


SIZING = Sizing(plan=plan_per_day, check=check_per_day)
