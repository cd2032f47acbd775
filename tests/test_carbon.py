"""Grid carbon intensity: the shipped table covers every priced region, a user's figure wins, an
unknown region is NaN labelled "unknown", bad files are one-line errors naming file:line and column,
and grams CO2e per million tokens follow the unit algebra of docs/definitions.md#carbon."""

from __future__ import annotations

import math
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tpubench.errors import UserError
from tpubench.money import carbon, pricing

TODAY = date(2026, 12, 2)
HEADER = "cloud,region,gco2e_per_kwh,year,source,source_url,note"


def write(tmp_path: Path, text: str, name: str = "grid.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- arithmetic


def test_gco2e_per_mtok_by_hand():
    # 0.5 J/token -> 0.5e6 J per Mtok = 0.5e6 / 3.6e6 kWh = 0.138889 kWh; at 400 g/kWh -> 55.556 g.
    assert carbon.gco2e_per_mtok(0.5, 400.0) == pytest.approx(0.5e6 / 3.6e6 * 400.0)
    assert carbon.gco2e_per_mtok(0.5, 400.0) == pytest.approx(55.5556, rel=1e-5)
    # 3.6 J/token is exactly 1 kWh per Mtok: the grams are the intensity itself.
    assert carbon.gco2e_per_mtok(3.6, 208.81) == pytest.approx(208.81)


def test_tokens_per_kwh_by_hand():
    assert carbon.tokens_per_kwh(0.5) == pytest.approx(7.2e6)
    assert carbon.tokens_per_kwh(3.6e6) == pytest.approx(1.0)


def test_arithmetic_takes_arrays_and_gives_nan_without_energy():
    joules = np.array([0.5, 0.0, -1.0, np.nan])
    grams = carbon.gco2e_per_mtok(joules, 400.0)
    assert grams[0] == pytest.approx(55.5556, rel=1e-5)
    assert np.isnan(grams[1:]).all()
    tokens = carbon.tokens_per_kwh(joules)
    assert tokens[0] == pytest.approx(7.2e6)
    assert np.isnan(tokens[1:]).all()
    series = pd.Series([0.5, 1.0], index=["a", "b"])
    out = carbon.gco2e_per_mtok(series, pd.Series([400.0, np.nan], index=["a", "b"]))
    assert list(out.index) == ["a", "b"]
    assert out["a"] == pytest.approx(55.5556, rel=1e-5) and math.isnan(out["b"])
    assert isinstance(carbon.tokens_per_kwh(0.5), float)


# ----------------------------------------------------------------------------- the figure a point gets


def test_user_figure_wins_over_the_table():
    table = carbon.load_grid_carbon()
    assert carbon.grid_intensity(table, "gcp", "us-central1", user_gco2_per_kwh=100.0) == \
        (100.0, "user: --grid-gco2-per-kwh")
    # Even for a region the table does not know, or one whose figure is unknown.
    assert carbon.grid_intensity(table, "aws", "us-east-1", 250)[0] == 250.0
    assert carbon.grid_intensity(table, "nocloud", "nowhere", 0.0) == (0.0, "user: --grid-gco2-per-kwh")


def test_table_figure_carries_its_source():
    table = carbon.load_grid_carbon()
    value, source = carbon.grid_intensity(table, "GCP", "us-central1")
    assert value == pytest.approx(412.72)
    assert "region-carbon-info" in source and "2024" in source


def test_unknown_region_is_nan_labelled_unknown():
    table = carbon.load_grid_carbon()
    value, source = carbon.grid_intensity(table, "gcp", "mars-north1")
    assert math.isnan(value) and source.startswith("unknown")
    # A known region without a published figure says so as well.
    value, source = carbon.grid_intensity(table, "azure", "eastus")
    assert math.isnan(value) and source.startswith("unknown")


def test_bad_user_figure_is_a_user_error():
    with pytest.raises(UserError, match="--grid-gco2-per-kwh"):
        carbon.grid_intensity(carbon.load_grid_carbon(), "gcp", "us-central1", user_gco2_per_kwh=-5)


# ----------------------------------------------------------------------------- the shipped table


def test_shipped_table_covers_every_priced_region():
    table = carbon.load_grid_carbon()
    assert list(table.columns) == list(carbon.COLUMNS)
    prices = pricing.load_prices()
    priced = set(map(tuple, prices[["cloud", "region"]].drop_duplicates().itertuples(index=False)))
    listed = set(map(tuple, table[["cloud", "region"]].itertuples(index=False)))
    assert priced <= listed, f"regions priced but missing from grid_carbon.csv: {sorted(priced - listed)}"
    # A figure always names its source, year and address; a missing one says it is unknown.
    known = table[table["gco2e_per_kwh"].notna()]
    assert not known.empty
    assert (known["source"] != "").all() and (known["source_url"] != "").all() and known["year"].notna().all()
    unknown = table[table["gco2e_per_kwh"].isna()]
    assert unknown["note"].str.startswith("unknown").all()


# ----------------------------------------------------------------------------- user files


def test_user_file_loads(tmp_path):
    path = write(tmp_path, f"{HEADER}\ngcp,us-central1,100,2025,my utility,,\naws,us-east-1,,,,,unknown: ask\n")
    table = carbon.load_grid_carbon(path, today=TODAY)
    assert len(table) == 2
    assert carbon.grid_intensity(table, "gcp", "us-central1") == (100.0, "my utility 2025")
    assert math.isnan(carbon.grid_intensity(table, "aws", "us-east-1")[0])


@pytest.mark.parametrize("body, line, field, message", [
    ("gcp,us-central1,lots,2024,s,,\n", 2, "gco2e_per_kwh", "not a number"),
    ("gcp,us-central1,-3,2024,s,,\n", 2, "gco2e_per_kwh", ">= 0"),
    ("gcp,us-central1,10,2024,s,,\ngcp,us-central1,20,2024,s,,\n", 3, "region", "duplicate row: line 2"),
    ("gcp,,10,2024,s,,\n", 2, "region", "empty"),
    ("gcp,us-central1,10,2999,s,,\n", 2, "year", "not a year"),
])
def test_malformed_user_file_is_one_line_naming_file_line_and_column(tmp_path, body, line, field, message):
    path = write(tmp_path, f"{HEADER}\n{body}")
    with pytest.raises(UserError) as info:
        carbon.load_grid_carbon(path, today=TODAY)
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(f"{path}:{line}: {field}: ")
    assert message in text


def test_malformed_header_and_row_shape(tmp_path):
    with pytest.raises(UserError, match=r"grid\.csv:1: gco2e_per_kwh: missing column"):
        carbon.load_grid_carbon(write(tmp_path, "cloud,region\ngcp,us-central1\n"), today=TODAY)
    with pytest.raises(UserError, match=r"grid\.csv:1: gco2_per_kwh: unknown column \(did you mean"):
        carbon.load_grid_carbon(write(tmp_path, "cloud,region,gco2_per_kwh\n"), today=TODAY)
    with pytest.raises(UserError, match=r"grid\.csv:2: row has 2 fields but the header has 7"):
        carbon.load_grid_carbon(write(tmp_path, f"{HEADER}\ngcp,us-central1\n"), today=TODAY)
    with pytest.raises(UserError, match="no such grid carbon file"):
        carbon.load_grid_carbon(tmp_path / "absent.csv")
