"""CSV for spreadsheets: every priced row (all columns, seconds and USD, and `stack`: the serving
stack, or the backend of an offline run), then every unpriced result with its reason, so no
result silently disappears. Each row carries the columns of every registered unit of output
(scenarios/output_units.py), NaN but for its own unit's (inference rows the $/Mtok ones, training
rows `train_usd_per_mtok` and the other `train_*` columns, image rows $/1k images); `cost_basis`
says which unit a row is priced in (the unit's `basis_words`: "inference", "training", "images").
Text cells a spreadsheet would run as a formula are neutralised (tpubench.records.csv_safety)."""

from __future__ import annotations

import pandas as pd

from tpubench.money.cost import unit_keys
from tpubench.output.report.data import ReportData
from tpubench.output.report.format import stack_label
from tpubench.records.csv_safety import neutralize_frame
from tpubench.records.csv_writer import frame_to_csv
from tpubench.scenarios import registry

_STACK_COLUMNS = ("server_name", "server_version", "backend")


def render_csv(data: ReportData) -> str:
    priced = data.priced.assign(priced=True, unpriced_reason="",
                                stack=_stack_labels(data.priced),
                                cost_basis=unit_keys(data.priced).map(
                                    {u.key: u.basis_words for u in registry.units()}))
    unpriced = data.unpriced.rename(columns={"reason": "unpriced_reason"}).assign(priced=False)
    frames = [df for df in (priced, unpriced) if len(df)]
    table = pd.concat(frames, ignore_index=True) if frames else priced
    front = ["priced", "unpriced_reason"]
    table = table[front + [c for c in table.columns if c not in front]]
    return frame_to_csv(neutralize_frame(table), float_format="%.6g")


def _stack_labels(priced: pd.DataFrame) -> list[str]:
    """stack_label of every priced row, computed once per distinct (server_name, server_version,
    backend): the label reads only those, and 10k results' rows share a handful (row by row,
    iterrows took ~4 s). Cells are the objects iterrows would give. A row of str/None cells is
    its own key; any other cell is keyed by its type and repr, so values a dict takes as equal
    (1, 1.0 and True; 0.0 and -0.0) keep their own labels."""
    present = [c for c in _STACK_COLUMNS if c in priced.columns]
    cells = [priced[c].to_numpy(dtype=object).tolist() for c in present]
    labels: dict[tuple, str] = {}

    def label_of(values: tuple) -> str:
        plain = all(v is None or type(v) is str for v in values)
        key = values if plain else tuple((type(v), repr(v)) for v in values)
        if key not in labels:
            labels[key] = stack_label(dict(zip(present, values)))
        return labels[key]

    def rows():
        return zip(*cells) if cells else [()] * len(priced)

    try:
        # A raw lookup can only hit a plain key: no value but a str equals a str.
        return [labels[values] if values in labels else label_of(values) for values in rows()]
    except TypeError:                        # an unhashable cell (a list): every row by its key
        return [label_of(values) for values in rows()]
