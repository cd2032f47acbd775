"""A report's frames hold text as Python strings whether or not pyarrow is installed
(output/python_strings.py), and leave the caller's pandas options as they were."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tpubench.output.frames import load_results
from tpubench.output.python_strings import python_strings

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "results"


def _storages(df: pd.DataFrame) -> set[str]:
    return {dtype.storage for dtype in df.dtypes if isinstance(dtype, pd.StringDtype)}


def test_the_wrapped_function_builds_python_strings_and_restores_the_option():
    before = pd.get_option("mode.string_storage")
    built = python_strings(lambda: pd.DataFrame({"chip": ["H100", "TPU v6e"]}))()
    assert pd.get_option("mode.string_storage") == before
    if isinstance(built["chip"].dtype, pd.StringDtype):     # pandas 3 infers text; pandas 2 keeps objects
        assert built["chip"].dtype.storage == "python"


def test_load_results_text_columns_are_python_strings_even_beside_pyarrow():
    pytest.importorskip("pyarrow")
    df = load_results(EXAMPLES)
    assert len(df) and _storages(df) <= {"python"}
    if pd.get_option("mode.string_storage") == "auto" and isinstance(pd.Series(["x"]).dtype, pd.StringDtype):
        assert _storages(pd.DataFrame({"a": ["x"]})) == {"pyarrow"}     # outside, the caller's default stays
