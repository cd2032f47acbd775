"""Grid carbon intensity: the shipped per-region table, the figure a point is charged, and grams of
CO2e per million tokens (docs/definitions.md#carbon).

The table (`data/grid_carbon.csv`) has one row per (cloud, region) that the shipped price table
knows, with the columns in `COLUMNS`: the region's grid intensity in grams CO2e per kWh, the year it
describes, and where it comes from. A figure is only ever copied from the cloud's own per-region
publication; a cloud that publishes none keeps its rows with an empty figure and a note that starts
"unknown", so a missing number is visible instead of being guessed. A user's figure
(`--grid-gco2-per-kwh`) always wins over the table.

The arithmetic is pure and takes floats or numpy/pandas arrays alike, as `money.cost` does.
"""

from __future__ import annotations

import math
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

from tpubench.errors import UserError
from tpubench.money.pricing import DATA_DIR, today_utc
from tpubench.money.table_files import check_header, read_rows

SHIPPED_GRID_CARBON = DATA_DIR / "grid_carbon.csv"

KEY_COLUMNS = ("cloud", "region")
COLUMNS = KEY_COLUMNS + ("gco2e_per_kwh", "year", "source", "source_url", "note")
REQUIRED_COLUMNS = KEY_COLUMNS + ("gco2e_per_kwh",)

USER_SOURCE = "user: --grid-gco2-per-kwh"
UNKNOWN = "unknown"

JOULES_PER_KWH = 3.6e6
TOKENS_PER_MTOK = 1e6


# ----------------------------------------------------------------------------- reading the table


def _parse_intensity(text: str, where: str) -> float:
    """NaN for an empty cell (the figure is unknown), else a finite number of grams >= 0."""
    text = text.strip()
    if not text:
        return math.nan
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"'{text}' is not a number (grams CO2e per kWh)", where=where,
                        field="gco2e_per_kwh") from None
    if not math.isfinite(value) or value < 0:
        raise UserError(f"grid intensity must be a finite number of grams CO2e per kWh >= 0, got {text} "
                        "(leave the cell empty when it is not known)", where=where, field="gco2e_per_kwh")
    return value


def _parse_year(text: str, where: str, today: date) -> int | None:
    """None for an empty cell, else a whole year no later than this one."""
    text = text.strip()
    if not text:
        return None
    if not text.isdigit() or not 1900 <= int(text) <= today.year:
        raise UserError(f"'{text}' is not a year up to {today.year}", where=where, field="year")
    return int(text)


def load_grid_carbon(path: str | Path | None = None, *, today: date | None = None) -> pd.DataFrame:
    """The grid carbon table: the shipped one, or a user's CSV with the same columns.

    One row per (cloud, region) with `COLUMNS`; `gco2e_per_kwh` is NaN where the figure is unknown
    and `year` a nullable integer. A bad row is a UserError naming file:line and column.
    """
    path = Path(path) if path is not None else SHIPPED_GRID_CARBON
    today = today or today_utc()
    header_line, header, rows = read_rows(path, "grid carbon file", COLUMNS)
    check_header(path, header_line, header, COLUMNS, REQUIRED_COLUMNS, f"columns are {', '.join(COLUMNS)}")
    records = []
    seen_keys: dict[tuple[str, str], int] = {}
    for line, cells in rows:
        where = f"{path}:{line}"
        if len(cells) != len(header):
            raise UserError(f"row has {len(cells)} fields but the header has {len(header)}", where=where)
        cell = {col: value.strip() for col, value in zip(header, cells)}
        for col in KEY_COLUMNS:
            if not cell[col]:
                raise UserError("empty; every row names its cloud and region", where=where, field=col)
        # Clouds are lower case everywhere (as the price tables keep them); regions as spelled.
        key = (cell["cloud"].lower(), cell["region"])
        if key in seen_keys:
            raise UserError(f"duplicate row: line {seen_keys[key]} already gives {'/'.join(key)}",
                            where=where, field="region")
        seen_keys[key] = line
        records.append({
            "cloud": key[0], "region": key[1],
            "gco2e_per_kwh": _parse_intensity(cell["gco2e_per_kwh"], where),
            "year": _parse_year(cell.get("year", ""), where, today),
            "source": cell.get("source", ""), "source_url": cell.get("source_url", ""),
            "note": cell.get("note", ""),
        })
    table = pd.DataFrame.from_records(records, columns=list(COLUMNS))
    table["gco2e_per_kwh"] = table["gco2e_per_kwh"].astype(float)
    table["year"] = table["year"].astype("Int64")
    return table


# ----------------------------------------------------------------------------- the figure a point gets


def _row_source(row: pd.Series) -> str:
    """The row's provenance in one line: source, year and address, as far as the row gives them."""
    parts = [str(row["source"])]
    if not pd.isna(row["year"]):
        parts.append(str(int(row["year"])))
    if row["source_url"]:
        parts.append(f"({row['source_url']})")
    return " ".join(p for p in parts if p) or "grid carbon table"


def grid_intensity(table: pd.DataFrame, cloud: str, region: str,
                   user_gco2_per_kwh: float | None = None) -> tuple[float, str]:
    """Grams CO2e per kWh for (cloud, region) and where that figure comes from.

    The user's figure wins (source "user: --grid-gco2-per-kwh"); else the table's row; else NaN with
    a source that starts "unknown" (no row, or a row whose figure is empty: its note says why).
    """
    if user_gco2_per_kwh is not None:
        value = float(user_gco2_per_kwh)
        if not math.isfinite(value) or value < 0:
            raise UserError(f"a grid intensity is a finite number of grams CO2e per kWh >= 0, "
                            f"got {user_gco2_per_kwh}", field="--grid-gco2-per-kwh")
        return value, USER_SOURCE
    match = table[(table["cloud"] == str(cloud).lower()) & (table["region"] == str(region))]
    if match.empty:
        return math.nan, (f"{UNKNOWN}: no grid intensity for {str(cloud).lower()}/{region} in the table; "
                          "give --grid-gco2-per-kwh")
    row = match.iloc[0]
    if pd.isna(row["gco2e_per_kwh"]):
        note = str(row["note"])
        return math.nan, note if note.startswith(UNKNOWN) else f"{UNKNOWN}: {note}".rstrip(": ")
    return float(row["gco2e_per_kwh"]), _row_source(row)


# ----------------------------------------------------------------------------- per-token arithmetic


def _nan_unless_positive(joules_per_token, values):
    """`values` where `joules_per_token` > 0, NaN elsewhere (no energy measured is no figure); a pandas
    Series keeps its index, a scalar stays one."""
    mask = np.greater(joules_per_token, 0)
    if isinstance(values, pd.Series):
        return values.where(mask)
    out = np.where(mask, values, np.nan)
    return float(out) if np.ndim(out) == 0 else out


def gco2e_per_mtok(joules_per_token, gco2e_per_kwh):
    """Grams CO2e per million tokens.

    Units: J/token * 1e6 token/Mtok = J/Mtok; / 3.6e6 J/kWh = kWh/Mtok; * g/kWh = g/Mtok. So

        gco2e_per_mtok = joules_per_token * 1e6 / 3.6e6 * gco2e_per_kwh

    e.g. 0.5 J/token at 400 g/kWh: 0.5e6 J = 0.13889 kWh per Mtok, 55.56 g per Mtok. NaN where the
    energy per token is not positive or the intensity is unknown (NaN).
    """
    kwh_per_mtok = np.multiply(joules_per_token, TOKENS_PER_MTOK) / JOULES_PER_KWH
    return _nan_unless_positive(joules_per_token, np.multiply(kwh_per_mtok, gco2e_per_kwh))


def tokens_per_kwh(joules_per_token):
    """Tokens one kWh produces: 3.6e6 J/kWh / (J/token) = tokens/kWh; NaN where the energy per token
    is not positive."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return _nan_unless_positive(joules_per_token, np.divide(JOULES_PER_KWH, joules_per_token))
