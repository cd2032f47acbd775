"""CSV for spreadsheets: every priced row (all columns, seconds and USD, and `stack`: the serving
stack, or the backend of an offline run), then every unpriced result with its reason, so no
result silently disappears. Training rows carry `train_usd_per_mtok` and the other `train_*`
columns, inference rows the $/Mtok ones, each NaN on the other; `cost_basis` says which a row is
("training" or "inference"). Text cells a spreadsheet would run as a formula are neutralised
(tpubench.output.csv_safety)."""

from __future__ import annotations

import pandas as pd

from tpubench.money.cost import is_training
from tpubench.records.csv_safety import neutralize_frame
from tpubench.output.report.data import ReportData
from tpubench.output.report.format import stack_label


def render_csv(data: ReportData) -> str:
    priced = data.priced.assign(priced=True, unpriced_reason="",
                                stack=[stack_label(r) for _, r in data.priced.iterrows()],
                                cost_basis=is_training(data.priced).map({True: "training", False: "inference"}))
    unpriced = data.unpriced.rename(columns={"reason": "unpriced_reason"}).assign(priced=False)
    frames = [df for df in (priced, unpriced) if len(df)]
    table = pd.concat(frames, ignore_index=True) if frames else priced
    front = ["priced", "unpriced_reason"]
    table = table[front + [c for c in table.columns if c not in front]]
    return neutralize_frame(table).to_csv(index=False, float_format="%.6g")


def render_budget_csv(result) -> str:
    """The ranked options of a BudgetResult or TrainingBudget, one row per platform x plan."""
    return neutralize_frame(result.options).to_csv(index=False, float_format="%.6g")
