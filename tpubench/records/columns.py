"""Reading columns of flattened result rows: a column as numbers, NaN where a result predates it.

Results written by different versions and kinds carry different columns, so code that reads them
(the scenarios' cost bases, cost, budgets) asks for a column by name and gets floats either way.
"""

from __future__ import annotations

import math

import pandas as pd


def numeric_column(df: pd.DataFrame, name: str) -> pd.Series:
    """A column as floats, NaN where the results predate it."""
    if name in df:
        return pd.to_numeric(df[name], errors="coerce")
    return pd.Series(math.nan, index=df.index, dtype=float)
