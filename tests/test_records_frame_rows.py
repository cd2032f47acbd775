"""records.columns.records: the rows of a frame as to_dict("records") gives them, value for value
and type for type, whatever the columns' dtypes."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tpubench.records.columns import records


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if a is b:
        return True
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


FRAMES = {
    "mixed": pd.DataFrame({
        "f": [1.5, math.nan, 3.0], "i": [1, 2, 3], "b": [True, False, True], "s": ["x", None, "z"],
        "o": [np.float64(1.5), "x", None], "n": pd.array([1, None, 3], dtype="Int64"),
        "t": pd.to_datetime(["2020-01-01", None, "2021-06-01"]), "c": pd.Categorical(["a", None, "a"]),
        "l": [[1], {"a": 1}, ()], "u": np.array([1, 2, 3], dtype="uint8"), "f32": np.array([0.1, 0.2, 0.3], "float32"),
    }, index=[10, 5, 7]),
    "empty rows": pd.DataFrame({"f": pd.Series([], dtype=float), "s": pd.Series([], dtype="str")}),
    "no columns": pd.DataFrame(index=[1, 2]),
}


@pytest.mark.parametrize("name", FRAMES)
def test_records_are_to_dict_records(name):
    frame = FRAMES[name]
    expected, got = frame.to_dict("records"), records(frame)
    assert len(got) == len(expected)
    for want, row in zip(expected, got):
        assert list(row) == list(want)
        assert all(_same(want[k], row[k]) for k in want), (want, row)


@pytest.mark.filterwarnings("ignore:DataFrame columns are not unique")
def test_duplicate_column_names_fall_back_to_pandas():
    frame = pd.DataFrame([[1, "a"]], columns=["x", "x"])
    assert records(frame) == frame.to_dict("records")
