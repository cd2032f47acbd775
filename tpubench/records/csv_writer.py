"""`frame_to_csv(df, float_format)`: the bytes of `df.to_csv(index=False, float_format=...)`,
written once per distinct cell value instead of once per cell.

Why: pandas formats every float cell through a Python lambda (`float_format % value`) and hands
every cell to csv.writer; over the 10k-result report (66k priced rows x ~160 columns, 79 MB) that
is ~6 s. The report's priced rows repeat each result's metrics once per price row, so its 7.4M
float cells hold ~23k distinct values: formatting (and quoting) each distinct value once gives
the same bytes in a fraction of the time (12.6 s down to ~0.5 s for the whole report CSV). Rows
are joined 16 adjacent columns at a time, each block's text built once per distinct combination
of its cells' values.

Exactly what pandas 3 does for each supported column (pandas.core.indexes.base.get_values_for_csv):

* numpy float columns: `float_format % value` (the numpy scalar), NaN as "" (inf is not NA:
  "inf"). Distinct values are found on the bit pattern, so -0.0 ("-0") and 0.0 ("0") stay apart.
* numpy int and bool columns, object columns, string and (non-datetime) categorical columns: the
  value itself goes to csv.writer, which writes `repr` for a float and `str` for anything else;
  NA cells (pd.isna: None, NaN, pd.NA, NaT) as "".
* every distinct text is quoted by the same csv.writer configuration pandas uses (QUOTE_MINIMAL,
  `"` doubled, os.linesep as line end), so quoting rules are csv's own, not re-implemented here;
  only a non-empty str free of every character csv quotes for (`,`, `"`, CR, LF) skips the writer.

Anything else (a float_format that is not a %-string, nullable Float64, datetimes, intervals,
sparse or complex columns, MultiIndex columns, a frame of fewer than two columns, where csv
writes a lone empty field as `""`) is left to pandas, so the result is always pandas' bytes.
"""

from __future__ import annotations

import csv
import io
import os
import re

_LINE_END = os.linesep                       # pandas' default lineterminator
_BLOCK = 16                                  # columns whose text _rows joins at once


def frame_to_csv(df, float_format: str | None = None) -> str:
    """`df.to_csv(index=False, float_format=float_format)`, byte for byte; see the module docstring."""
    columns = _coded_columns(df, float_format)
    if columns is None:
        return df.to_csv(index=False, float_format=float_format)
    header = df.iloc[:0].to_csv(index=False, float_format=float_format)
    if not len(df):
        return header
    # One join for the whole text: header + body would copy its ~80 MB once more.
    lines = [header[:-len(_LINE_END)]]
    lines.extend(_rows(columns, len(df)))
    lines.append("")
    return _LINE_END.join(lines)


def _coded_columns(df, float_format):
    """Every column as (codes, texts): cell i reads texts[codes[i]], code -1 the last text, NA's
    "". None where pandas must write the frame."""
    import pandas as pd

    if not isinstance(float_format, str) or isinstance(df.columns, pd.MultiIndex) or df.shape[1] < 2:
        return None
    quote = _Quoter()
    out = []
    for i in range(df.shape[1]):
        coded = _column_codes(df.iloc[:, i], float_format, quote)
        if coded is None:
            return None
        out.append(coded)
    return out


def _rows(columns: list, n_rows: int):
    """Each row's text, joined a block of adjacent columns at a time: a block's text is built once
    per distinct combination of its cells (a result's metrics repeat on each of its price rows)."""
    import numpy as np

    blocks = []
    for start in range(0, len(columns), _BLOCK):
        block = columns[start:start + _BLOCK]
        joint, first = _joint_codes([codes for codes, _ in block], n_rows)
        cells = [np.array(texts, dtype=object)[codes[first]].tolist() for codes, texts in block]
        combinations = np.array(list(map(",".join, zip(*cells))), dtype=object)
        blocks.append(combinations[joint].tolist())
    return map(",".join, zip(*blocks))


def _joint_codes(codes_list: list, n_rows: int):
    """One code per distinct combination of the given columns' codes, and the first row of each."""
    import numpy as np
    import pandas as pd

    key = np.zeros(n_rows, dtype=np.int64)
    span = 1                                 # key < span: a mixed-radix number of the codes so far
    for codes in codes_list:
        radix = int(codes.max()) + 2         # codes run from -1 (NA) to max
        if span * radix >= 2**62:            # renumber the combinations seen so far, densely
            key, seen = pd.factorize(key)
            span = len(seen)
        key = key * radix + (codes + 1)
        span *= radix
    joint, _ = pd.factorize(key)
    _, first = np.unique(joint, return_index=True)
    return joint, first


def _column_codes(column, float_format: str, quote):
    import numpy as np
    import pandas as pd

    dtype = column.dtype
    if isinstance(dtype, np.dtype) and dtype in (np.float64, np.float32):
        return _float_codes(column.to_numpy(), float_format, quote)
    if isinstance(dtype, np.dtype) and dtype.kind in "iub":
        # pandas passes Python ints/bools to csv.writer, which writes their str().
        codes, uniques = pd.factorize(column.to_numpy())
        return codes, [quote(str(u)) for u in uniques.tolist()] + [""]
    if isinstance(dtype, np.dtype) and dtype.kind == "O":
        return _object_codes(column.to_numpy(), quote)
    if isinstance(dtype, pd.StringDtype):
        # pandas' ExtensionArray branch writes each cell's str and NA as na_rep; the array
        # finds its distinct values itself, without a Python object per cell.
        codes, uniques = column.array.factorize(use_na_sentinel=True)
        return np.asarray(codes), [quote(u) for u in uniques.tolist()] + [""]
    if isinstance(dtype, pd.CategoricalDtype) and dtype.categories.dtype.kind not in "Mm":
        # pandas' ExtensionArray branch: the cells as objects, NA as na_rep.
        return _object_codes(np.asarray(column.array.astype(object)), quote)
    return None


def _float_codes(values, float_format: str, quote):
    import numpy as np
    import pandas as pd

    bits = values.view(np.int64 if values.dtype == np.float64 else np.int32)
    codes, unique_bits = pd.factorize(bits)
    # Iterating a numpy array yields numpy scalars, as pandas' formatter gets them.
    return codes, [quote(float_format % u) if u == u else "" for u in unique_bits.view(values.dtype)] + [""]


def _object_codes(values, quote):
    """The codes and texts of an object array: a plain str once per distinct value; any other
    value (1, 1.0 and True are equal as keys, yet written "1", "1.0", "True") cell by cell.
    factorize's NA (code -1) is pd.isna's: both ask pandas' checknull (None, NaN, pd.NA, NaT,
    Decimal NaN)."""
    import numpy as np
    import pandas as pd

    try:
        codes, uniques = pd.factorize(values, use_na_sentinel=True)
    except TypeError:                        # unhashable cells (lists, dicts): cell by cell
        missing = pd.isna(values)
        return _coded(["" if na else quote(v) for v, na in zip(values.tolist(), missing.tolist())])
    uniques = uniques.tolist()
    if all(type(u) is str for u in uniques) or _one_text_per_value(values[codes >= 0], uniques):
        return codes, [quote(u) for u in uniques] + [""]
    unique_texts = [quote(u) if type(u) is str else None for u in uniques]
    texts = np.array(unique_texts + [""], dtype=object)[codes].tolist()
    _other_cells(values, np.flatnonzero(np.equal(np.array(texts, dtype=object), None)), texts, quote)
    return _coded(texts)


def _one_text_per_value(cells, uniques: list) -> bool:
    """Whether cells that factorize took as equal are all written alike: so when the cells are
    str and one other type whose equal values write the same (bool, int, numpy integers, or
    floats where no value is a zero: 0.0 and -0.0 are equal), e.g. a bool column that concat
    made object to hold NaN."""
    import numpy as np
    import pandas as pd

    kinds = set(pd.unique(np.frompyfunc(type, 1, 1)(cells))) - {str}
    if len(kinds) != 1:
        return False
    kind = kinds.pop()
    if issubclass(kind, (int, np.integer, np.bool_)):
        return True
    return issubclass(kind, float) and all(u != 0 for u in uniques if type(u) is not str)


def _coded(texts: list):
    """(codes, texts) of a column whose every cell's text is known."""
    import numpy as np
    import pandas as pd

    codes, uniques = pd.factorize(np.array(texts, dtype=object))
    return codes, uniques.tolist() + [""]


def _other_cells(values, positions, texts: list, quote) -> None:
    """Fill in the texts of the non-str cells at `positions` (e.g. a bool column that concat
    made object to hold NaN). A cell is keyed by its type and its value, a float by its bits
    (float.hex: 0.0 and -0.0 differ), where equal keys mean equal text: bool, int and numpy
    integers; any other value (Decimal("1.0") equals Decimal("1.00")) is written on its own."""
    import numpy as np

    cells = values.tolist()
    known: dict = {}
    for i in positions.tolist():
        value = cells[i]
        kind = type(value)
        if isinstance(value, float):
            key = (kind, float.hex(value))
        elif isinstance(value, (int, np.integer, np.bool_)):
            key = (kind, value)
        else:
            texts[i] = quote(value)
            continue
        text = known.get(key)
        if text is None:
            text = known[key] = quote(value)
        texts[i] = text


class _Quoter:
    """A cell's text as pandas' csv.writer writes it inside a row (quoted where csv says so).

    A str holding none of the characters csv ever quotes for (delimiter, quote character, CR, LF,
    line end) and not empty is written as it is; anything else asks the writer itself."""

    def __init__(self) -> None:
        self._buffer = io.StringIO()
        self._writer = csv.writer(self._buffer, lineterminator=_LINE_END, delimiter=",",
                                  quotechar='"', quoting=csv.QUOTE_MINIMAL, doublequote=True,
                                  escapechar=None)
        self._suffix = len("," + _LINE_END)
        self._special = re.compile("[" + re.escape(',"\r\n' + _LINE_END) + "]")

    def __call__(self, value) -> str:
        if type(value) is str and value and not self._special.search(value):
            return value
        # A second, empty field: csv quotes a lone empty field, never one of several.
        self._buffer.seek(0)
        self._buffer.truncate()
        self._writer.writerow((value, ""))
        return self._buffer.getvalue()[:-self._suffix]
