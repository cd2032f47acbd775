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
from tpubench.scenarios import registry


def render_csv(data: ReportData) -> str:
    priced = data.priced.assign(priced=True, unpriced_reason="",
                                stack=[stack_label(r) for _, r in data.priced.iterrows()],
                                cost_basis=unit_keys(data.priced).map(
                                    {u.key: u.basis_words for u in registry.units()}))
    unpriced = data.unpriced.rename(columns={"reason": "unpriced_reason"}).assign(priced=False)
    frames = [df for df in (priced, unpriced) if len(df)]
    table = pd.concat(frames, ignore_index=True) if frames else priced
    front = ["priced", "unpriced_reason"]
    table = table[front + [c for c in table.columns if c not in front]]
    return neutralize_frame(table).to_csv(index=False, float_format="%.6g")


def render_budget_csv(result) -> str:
    """The ranked options of a BudgetResult or TrainingBudget, one row per platform x plan."""
    return neutralize_frame(result.options).to_csv(index=False, float_format="%.6g")
