"""Sizing a rented fleet for a rate of work: shared by every unit's budget planner (budget/tokens.py,
budget/training.py, budget/images.py, budget/per_day.py, and a new unit's own). It names no
unit: the caller says which column holds a point's rate per chip and what the peak rate is.

For a point making `rate` units/s per chip on `chips` chips per replica, at a peak of R units/s:

    replicas       = ceil(R / (rate * chips))
    instances      = instances_needed(replicas, chips, chips_per_instance)
    monthly_usd    = instances * instance $/h * 730 h      (CI: the low cost from the high rate)
    monthly_kwh    = the work's chip-seconds at the point's busy power + the rest of the rented
                     chips' month at its idle power (with_fleet_energy; docs/definitions.md#budget-energy)

The whole-instance rule itself is tpubench/money/fleet_size.py's. A TPU slice is an instance of
its size and never shares a replica with another slice (ICI links chips only within one slice): a
point wider than a slice is left out of that slice type.
"""

from __future__ import annotations

from datetime import date
from typing import Sequence

import numpy as np
import pandas as pd

from tpubench.budget.request import BudgetOptions, Power, check_number
from tpubench.errors import UserError
from tpubench.money import cost
from tpubench.money import energy as energy_money
from tpubench.money import plans as plan_vocab
from tpubench.money.carbon import JOULES_PER_KWH

# The whole-instance rule is money's (one rule for every fleet); named here for the budget's modules.
from tpubench.money.fleet_size import ceil_whole, instances_needed, whole_instances  # noqa: F401
from tpubench.records.columns import numeric_column

HOURS_PER_MONTH = plan_vocab.HOURS_PER_MONTH   # one month for every cost: the plan vocabulary's
DAYS_PER_MONTH = HOURS_PER_MONTH / 24
SECONDS_PER_DAY = 86400.0
SECONDS_PER_HOUR = cost.SECONDS_PER_HOUR
PLATFORM_COLUMNS = ["workload", "scale", "priced_accelerator", "cloud", "region", "instance_type",
                    "chips_per_instance"]
# Upper bounds on what a budget is asked to size: far above any real fleet's load, and low enough
# that every count below stays an exact integer (a float past int64 cast to int wraps round to
# -9223372036854775808 instances). A larger number is a typo or a test of the tool, never a plan.
MAX_PEAK_FACTOR = 1e3
MAX_SLO_S = 86400.0             # a p99 limit past a day limits nothing
MAX_HORIZON_H = 100 * 8760.0    # a century: --months and --spot-lost-hours
MAX_FLEET_INSTANCES = 1e9       # an option needing more is left out (no count is cast past this)
# The rate columns a cost bound comes from: the low cost from the high rate, and vice versa.
BOUND_FROM_RATE = (("", ""), ("_ci95_low", "_ci95_high"), ("_ci95_high", "_ci95_low"))


def blended_rate(chip_s_per_unit):
    """Units/s per chip of a point from its chip-seconds per unit: 1 / chip-seconds."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(1.0, np.asarray(chip_s_per_unit, dtype=float))


def check_peak_factor(peak_factor) -> float:
    return check_number(peak_factor, "--peak-factor", "peak-to-average factor must be >= 1", low=1.0,
                        low_open=False, high=MAX_PEAK_FACTOR)


def priced_rows(results: pd.DataFrame, prices: pd.DataFrame, options: BudgetOptions, today: date | None,
                grid_gco2_per_kwh: float | None = None) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(priced rows of the kinds asked for, unpriced results, notes): what every planner starts from."""
    priced, unpriced = cost.price_results(results, prices, plans=options.plans, cloud=options.cloud,
                                          region=options.region, today=today, include_flagged=options.include_flagged,
                                          grid_gco2_per_kwh=grid_gco2_per_kwh)
    notes: list[str] = list(priced.attrs.get(cost.PRICE_NOTES, []))
    if options.scenarios is not None:
        priced, note = only_scenarios(priced, options.scenarios)
        if note:
            notes.append(note)
    return priced, unpriced, notes


def only_scenarios(priced: pd.DataFrame, scenarios: Sequence[str] | str) -> tuple[pd.DataFrame, str | None]:
    """The rows of the named scenario kinds, and a note on how many results were left out."""
    wanted = {scenarios} if isinstance(scenarios, str) else set(scenarios)
    wanted = {str(k).strip().lower() for k in wanted}
    keep = priced["scenario_kind"].astype(str).str.lower().isin(wanted)
    left_out = priced.loc[~keep, "file"].nunique()
    note = (f"{left_out} result(s) of other scenario kinds left out (kept: {', '.join(sorted(wanted))})"
            if left_out else None)
    return priced[keep], note


def wider_than_tpu_slice(df: pd.DataFrame) -> pd.Series:
    """Rows pricing a replica of more chips than one TPU slice (an instance type named tpu-...,
    as the price table names whole slices) holds."""
    tpu = df["instance_type"].astype(str).str.lower().str.startswith("tpu-")
    return tpu & (df["chips"].astype(float) > df["chips_per_instance"].astype(float))


def within_tpu_slices(candidates: pd.DataFrame, what: str = "multi-chip") -> tuple[pd.DataFrame, str | None]:
    """(`candidates` without the rows wider_than_tpu_slice finds, the note saying how many `what`
    points that left out, or None)."""
    wider = wider_than_tpu_slice(candidates)
    if not wider.any():
        return candidates, None
    return candidates[~wider], (f"{candidates.loc[wider, 'file'].nunique()} {what} point(s) left out on TPU slices "
                                "smaller than their world (ICI links chips only within one slice)")


def without_huge_fleets(best: pd.DataFrame, rate_column: str, peak_per_s: float, flag: str,
                        unit: str) -> tuple[pd.DataFrame, str | None]:
    """`best` without the options whose fleet at `peak_per_s` would need more than
    MAX_FLEET_INSTANCES instances (a rate near zero, or a load no fleet carries), and the note
    saying how many; a UserError naming `flag` when that leaves none (the load, not a point, is wrong)."""
    if best.empty:
        return best, None
    _, instances = whole_instances(peak_per_s, best[rate_column].astype(float), best["chips"].astype(float),
                                   best["chips_per_instance"].astype(float))
    huge = ~(instances <= MAX_FLEET_INSTANCES)
    if not huge.any():
        return best, None
    if huge.all():
        raise UserError(f"{peak_per_s:.3g} {unit}/s at the peak needs more than {MAX_FLEET_INSTANCES:.0e} instances "
                        "on every platform: give the traffic a real fleet could carry", field=flag)
    return best[~huge], (f"{int(huge.sum())} option(s) left out: their fleet would need more than "
                         f"{MAX_FLEET_INSTANCES:.0e} instances (a throughput near zero)")


def size_fleet(best: pd.DataFrame, rate_column: str, peak_per_s: float) -> pd.DataFrame:
    """`best` (one chosen point per platform and plan) with its fleet at `peak_per_s` (module
    docstring): monthly_usd with CI from `rate_column`'s CI, replicas, required and rented chips,
    instances, fleet_utilisation, replica_spans_instances."""
    out = best
    chips = out["chips"].astype(float)
    for suffix, rate_bound in BOUND_FROM_RATE:
        replicas, instances = whole_instances(peak_per_s, out[rate_column + rate_bound].astype(float), chips,
                                              out["chips_per_instance"].astype(float))
        out["monthly_usd" + suffix] = instances * out["usd_per_instance_hour"].astype(float) * HOURS_PER_MONTH
        if not suffix:
            out["replicas"] = replicas.astype(int)
            out["required_chips"] = (replicas * chips).astype(int)
            out["instances"] = instances.astype(int)
            out["rented_chips"] = (instances * out["chips_per_instance"]).astype(int)
            out["fleet_utilisation"] = peak_per_s / (out[rate_column] * out["rented_chips"])
    out["replica_spans_instances"] = out["chips"] > out["chips_per_instance"]
    return out


def ranked(options: pd.DataFrame, by: str = "monthly_usd") -> pd.DataFrame:
    """Options cheapest first per workload and scale, with `rank_in_plan` and `rank_overall`."""
    out = options.sort_values(["workload", "scale", by], kind="stable")
    # dropna=False: a result without a scale (a server's workload, say) is ranked too.
    out["rank_in_plan"] = out.groupby(["workload", "scale", "plan"], dropna=False).cumcount() + 1
    out["rank_overall"] = out.groupby(["workload", "scale"], dropna=False).cumcount() + 1
    return out


def with_fleet_energy(options: pd.DataFrame, busy_chip_s_per_month, busy_w_per_chip, pue: float) -> pd.DataFrame:
    """`monthly_kwh` of each option's fleet, idle floor included (docs/definitions.md#budget-energy):
    the work's chip-seconds at the point's busy watts per chip, and every other chip-second of the
    rented chips over the month at the point's idle watts per chip (`idle_w_per_chip`, how it was
    had in `idle_basis`; `monthly_idle_kwh` the idle part), facility overhead (PUE) included."""
    idle_w, basis = energy_money.idle_watts_per_chip(options, busy_w_per_chip)
    work_j, idle_j = energy_money.fleet_joules(busy_chip_s_per_month, busy_w_per_chip,
                                               numeric_column(options, "rented_chips"),
                                               HOURS_PER_MONTH * 3600.0, idle_w)
    options["idle_w_per_chip"], options["idle_basis"] = idle_w, basis
    options["monthly_idle_kwh"] = idle_j * pue / JOULES_PER_KWH
    options["monthly_kwh"] = (work_j + idle_j) * pue / JOULES_PER_KWH
    return options


def with_energy_cost(options: pd.DataFrame, power: Power) -> pd.DataFrame:
    """Carbon and the energy's cost of each option's `monthly_kwh`; for owned capacity the energy
    cost added to the monthly cost (NaN where an option has no energy figure: never a bare price
    that would undercut the measured options)."""
    if power.grid_gco2_per_kwh is not None:
        options["grid_gco2e_per_kwh"], options["grid_source"] = power.grid_gco2_per_kwh, "user: --grid-gco2-per-kwh"
    options["monthly_kg_co2e"] = options["monthly_kwh"] * numeric_column(options, "grid_gco2e_per_kwh") / 1000
    options["monthly_energy_usd"] = (options["monthly_kwh"] * power.usd_per_kwh if power.usd_per_kwh is not None
                                     else np.nan)
    options["energy_in_monthly_usd"] = power.owned
    if power.owned:
        for bound in ("", "_ci95_low", "_ci95_high"):
            options["monthly_usd" + bound] = options["monthly_usd" + bound] + options["monthly_energy_usd"]
    return options


def energy_notes(options: pd.DataFrame, power: Power) -> list[str]:
    """Notes on options whose energy is unknown (owned capacity) or an upper bound (idle at busy power)."""
    notes = []
    if power.owned and options["monthly_usd"].isna().any():
        notes.append(f"{int(options['monthly_usd'].isna().sum())} option(s) have no energy figure (their points "
                     "were measured without energy): no owned-capacity monthly cost, listed last")
    return notes + idle_floor_notes(options)


def idle_floor_notes(options: pd.DataFrame) -> list[str]:
    """The note on options whose energy charges idle chips at busy power (no idle figure recorded)."""
    at_busy = options["monthly_kwh"].notna() & (options["idle_basis"] == energy_money.IDLE_AT_BUSY)
    if not at_busy.any():
        return []
    return [f"{int(at_busy.sum())} option(s) charge their idle chips at the point's busy power (no idle power "
            "was recorded with it): an upper bound on the fleet's energy"]
