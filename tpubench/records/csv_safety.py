"""Neutralise spreadsheet formulas in the CSVs tpubench writes (CSV / formula injection).

Result files travel between teams, so any text in them (a workload name, an error message, a
price source) may come from someone else. A spreadsheet that opens a CSV treats a cell that starts
with `=`, `+`, `-` or `@` as a formula (`=cmd|' /C calc'!A0`, `=HYPERLINK(...)`), and some also
after a leading tab or carriage return. Following the OWASP rule, such a text cell is written with
a single quote `'` in front, which the spreadsheet shows as text and never evaluates.

The rule, exactly:

* Only `str` values are touched: in object, string and categorical columns, and in column names.
  Numbers (int/float columns, or numbers inside a mixed object column), booleans, dates, NaN,
  None and pd.NA are left as they are, so numeric columns stay numeric and unquoted, negatives
  included.
* A str that starts with one of `=`, `+`, `-`, `@`, tab or carriage return gets `'` prepended,
  unless the whole string is a plain decimal number such as `-1.5`, `+3` or `-2e-05` (ASCII
  digits, optional sign, point and exponent): a spreadsheet reads that as a number, never as a
  formula, so it stays readable. `-inf`, `-1+2`, `- 1` or `-1.5 ` are not plain numbers and are
  prefixed.

The row index is not written by tpubench (`index=False`) and is not touched. Reading a
neutralised CSV back gives the `'`-prefixed text for the (rare) cells that were changed.
"""

from __future__ import annotations

import re

DANGEROUS_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def neutralize_cell(value):
    """`value` with `'` in front when it is a str a spreadsheet would run as a formula; else as is."""
    if isinstance(value, str) and value.startswith(DANGEROUS_PREFIXES) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def neutralize_frame(df):
    """A copy of DataFrame `df`, safe to write as CSV: see the module docstring for the rule."""
    import pandas as pd
    from pandas.api.types import is_object_dtype, is_string_dtype

    out = df.copy()
    for i, dtype in enumerate(out.dtypes):
        if isinstance(dtype, pd.CategoricalDtype):
            column = out.iloc[:, i].astype(object)
        elif is_object_dtype(dtype) or is_string_dtype(dtype):
            column = out.iloc[:, i]
            if not _needs_neutralizing(column):
                continue                     # the copy already holds these very values
        else:
            continue
        values = [neutralize_cell(v) for v in column]
        out.isetitem(i, pd.Series(values, index=out.index, dtype=column.dtype))
    if isinstance(out.columns, pd.MultiIndex):
        out.columns = pd.MultiIndex.from_tuples(
            [tuple(neutralize_cell(v) for v in key) for key in out.columns], names=out.columns.names)
    else:
        out.columns = pd.Index([neutralize_cell(c) for c in out.columns], name=out.columns.name)
    return out


def _needs_neutralizing(column) -> bool:
    """Whether any cell of text column `column` would change, tested once per distinct value: a
    report's text columns repeat a few values over thousands of rows, and most need nothing.
    Equal values neutralise alike (only a str is touched, and no non-str equals a str), so one
    representative per value decides for all of them."""
    import pandas as pd

    try:
        uniques = pd.unique(column)
    except TypeError:                        # unhashable cells (lists, dicts): ask each cell
        return True
    return any(neutralize_cell(v) is not v for v in uniques)
