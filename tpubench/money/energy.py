"""Energy and carbon per token of priced rows: pure functions (docs/definitions.md#energy-per-token).

A result measured with energy (docs/measurement.md#energy) carries `energy_j` over its timed window
of `energy_window_s` seconds on `chips` chips: its chips drew on average

    J per chip-second = energy_j / (energy_window_s * chips)

and each unit of output is charged energy as it is charged money, through its chip-seconds (the
scenario's cost basis): for every unit (scenarios/output_units.py) and figure X of it,

    X{energy_suffix} = X{chip_s_suffix} * J per chip-second

(e.g. `blended_j_per_token`, `train_j_per_token`, `image_j_per_image`; with the CI bounds the unit's
`energy_bounds` names: the chip-seconds' bounds times the one power figure of the window). Then,
for a unit with a `carbon_figure` C (tokens: blended, training tokens: train),

    units per kWh (`per_kwh_column`, e.g. tokens_per_kwh) = 3.6e6 / C J per unit
    gCO2e per million units (scaled to the unit's price scale) = C J per unit * 1e6 / 3.6e6 * grid gCO2e per kWh
                                                              (money/carbon.py)

with the grid intensity of the price row's cloud region (or the user's `--grid-gco2-per-kwh`),
and `energy_method` (measured or modelled) carried beside every figure. Rows without energy have
NaN in these columns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tpubench.money import carbon
from tpubench.records.columns import numeric_column
from tpubench.scenarios import registry


def energy_columns() -> list[str]:
    """The energy columns of a priced row, built from the registered units (scenarios.output_units):
    each unit's joules per unit, its units per kWh, the grid, each unit's carbon, the idle power."""
    units = registry.units()
    return list(dict.fromkeys(
        [c for u in units for c in u.energy_columns()] + [u.per_kwh_column for u in units if u.per_kwh_column]
        + ["energy_method", "grid_gco2e_per_kwh", "grid_source"]
        + [u.carbon_column() for u in units if u.carbon_column()] + ["idle_power_w"]))


ENERGY_COLUMNS = energy_columns()   # the shipped scenarios' (a scenario registered later: energy_columns())


def joules_per_chip_second(energy_j, window_s, chips):
    """Mean joules per chip-second over a measured window."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(energy_j, np.multiply(window_s, chips))


IDLE_MEASURED = "idle baseline"               # the idle power recorded with the point (measured or modelled)
IDLE_AT_BUSY = "busy power (no idle figure)"   # none recorded: idle chips charged as busy ones (an upper bound)


def idle_watts_per_chip(df: pd.DataFrame, busy_w_per_chip) -> tuple[pd.Series, pd.Series]:
    """(watts one chip of each row draws doing nothing, how that figure was had): the point's idle
    baseline over its chips (`idle_power_w`: all its devices, measured before the sweep or a
    model's idle floor), else its busy watts per chip, so that idle capacity is never free."""
    busy = pd.Series(np.asarray(busy_w_per_chip, dtype=float), index=df.index)
    with np.errstate(divide="ignore", invalid="ignore"):
        idle = numeric_column(df, "idle_power_w") / numeric_column(df, "chips")
    known = idle.notna() & np.isfinite(idle)
    basis = pd.Series(np.where(known, IDLE_MEASURED, IDLE_AT_BUSY), index=df.index, dtype=object)
    return idle.where(known, busy), basis.where(busy.notna() | known, None)


def fleet_joules(busy_chip_s, busy_w_per_chip, rented_chips, period_s, idle_w_per_chip):
    """(joules of the work, joules of the idle floor) of a fleet of `rented_chips` over `period_s`
    that is busy `busy_chip_s` chip-seconds of it: the work at its busy power, every other
    chip-second of the rented chips at the idle power (never below zero: a fleet cannot idle less
    than not at all)."""
    busy_chip_s = np.asarray(busy_chip_s, dtype=float)
    idle_chip_s = np.maximum(np.multiply(rented_chips, period_s) - busy_chip_s, 0.0)
    return busy_chip_s * np.asarray(busy_w_per_chip, dtype=float), idle_chip_s * np.asarray(idle_w_per_chip, dtype=float)


def add_energy(df: pd.DataFrame, grid: pd.DataFrame | None = None,
               user_gco2_per_kwh: float | None = None) -> pd.DataFrame:
    """`df` with `energy_figures` (replacing same-named columns)."""
    new = energy_figures(df, grid, user_gco2_per_kwh)
    return pd.concat([df.drop(columns=[c for c in new if c in df]), pd.DataFrame(new, index=df.index)], axis=1)


def energy_figures(df: pd.DataFrame, grid: pd.DataFrame | None = None,
                   user_gco2_per_kwh: float | None = None) -> dict:
    """`energy_columns()` (name -> values on df's index) for priced rows that carry their
    chip-seconds per unit (cost.chip_seconds) and a cloud and region (their price row's)."""
    # The columns are made apart and joined to the rows at once: copying 66,000 priced rows to add
    # them one at a time (pandas warns of a fragmented frame otherwise) was half of pricing's time.
    new: dict = {}

    def column(name):
        return new[name] if name in new else df[name]

    per_chip_s = joules_per_chip_second(numeric_column(df, "energy_j"), numeric_column(df, "energy_window_s"),
                                        numeric_column(df, "chips"))
    units = registry.units()
    for unit in units:   # NaN on rows without the unit's chip-seconds
        for figure in unit.figures:
            for bound in unit.energy_bounds:
                new[f"{figure}{unit.energy_suffix}{bound}"] = (
                    numeric_column(df, f"{figure}{unit.chip_s_suffix}{bound}") * per_chip_s)
    new["idle_power_w"] = numeric_column(df, "idle_power_w")   # the point's devices idle: a budget's idle floor
    for unit in units:
        if unit.per_kwh_column:
            new[unit.per_kwh_column] = carbon.tokens_per_kwh(column(unit.headline_energy()))   # 3.6e6 J / J per unit
    if "energy_method" not in df:
        new["energy_method"] = pd.Series(None, index=df.index, dtype=object)
    grid = carbon.load_grid_carbon() if grid is None else grid
    # As object arrays: iterating pandas' Arrow-backed text columns costs ~1 us a cell (66,000 priced rows).
    clouds = df.get("cloud", pd.Series(dtype=object)).to_numpy(dtype=object)
    regions = df.get("region", pd.Series(dtype=object)).to_numpy(dtype=object)
    # Each distinct (cloud, region) looked up once and set by position: 66,000 rows, a few places.
    place = pd.DataFrame({"cloud": clouds, "region": regions}, dtype=object)
    at = place.groupby(["cloud", "region"], sort=False, dropna=False).ngroup().to_numpy()
    found = [carbon.grid_intensity(grid, c, r, user_gco2_per_kwh)
             for c, r in place.drop_duplicates().itertuples(index=False, name=None)]
    new["grid_gco2e_per_kwh"] = pd.Series(np.array([f[0] for f in found], dtype=float)[at], index=df.index, dtype=float)
    new["grid_source"] = pd.Series(np.array([f[1] for f in found], dtype=object)[at], index=df.index, dtype=object)
    for unit in units:
        if unit.carbon_column():   # grams per million units, rescaled to the unit's price scale
            grams = carbon.gco2e_per_mtok(column(unit.headline_energy()), new["grid_gco2e_per_kwh"])
            new[unit.carbon_column()] = grams if unit.price_scale == 1e6 else grams * (unit.price_scale / 1e6)
    return new
