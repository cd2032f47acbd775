"""A budget as markdown (the terminal) or CSV (a spreadsheet): `render_budget`, what `tpubench budget`
prints. The markdown renderer is the budget's type's (MARKDOWN, by the type a planner returns);
the CSV is its options table, one row per platform x plan, whatever the planner.
"""

from __future__ import annotations

import pandas as pd

from tpubench.budget.images import ImageBudget
from tpubench.budget.per_day import UnitBudget
from tpubench.budget.render.images import image_budget_markdown
from tpubench.budget.render.per_day import unit_budget_markdown
from tpubench.budget.render.tokens import render_budget_markdown
from tpubench.budget.render.training import render_training_budget_markdown
from tpubench.budget.tokens import BudgetResult
from tpubench.budget.training import TrainingBudget
from tpubench.errors import UserError

MARKDOWN = {
    BudgetResult: render_budget_markdown,
    TrainingBudget: render_training_budget_markdown,
    ImageBudget: image_budget_markdown,
    UnitBudget: unit_budget_markdown,
}
FORMATS = ("markdown", "csv")
_ALIASES = {"md": "markdown", "markdown": "markdown", "csv": "csv"}

__all__ = ["FORMATS", "MARKDOWN", "budget_format", "budget_markdown", "csv_frame", "render_budget"]


def budget_format(fmt: str) -> str:
    """"markdown" or "csv" for a `--format` value, else a one-line UserError naming it (checked before
    any file is read)."""
    name = _ALIASES.get(str(fmt).lower())
    if name is None:
        html = str(fmt).lower() == "html"   # the report's third format: not a budget's
        raise UserError("budgets render as markdown or csv" if html else
                        f"unknown format '{fmt}'; choose one of {', '.join(FORMATS)}", field="--format")
    return name


_COUNTS = ("rank_overall", "rank_in_plan", "instances", "rented_chips", "required_chips", "replicas")


def csv_frame(result) -> pd.DataFrame:
    """A budget's CSV: its options, one row per platform x plan; a token budget with estimates adds
    theirs below (`source` estimate, ranked among themselves, the ones not sized with `why_not`)."""
    estimates = getattr(result, "estimates", None)
    if estimates is None:
        return result.options
    rows = estimates.csv_rows()
    out = pd.concat([result.options, rows], ignore_index=True) if len(result.options) else rows
    # Counts stay whole numbers where an estimate not sized has none (not 1.0 and NaN).
    counts = [c for c in _COUNTS if c in out]
    return out.astype({c: "Int64" for c in counts})


def budget_markdown(result, max_rows: int = 50) -> str:
    """The budget as markdown, by its type's renderer (MARKDOWN)."""
    return MARKDOWN[type(result)](result, max_rows=max_rows)


def render_budget(result, fmt: str = "markdown", *, max_rows: int = 50) -> str:
    """A budget (what a unit's planner returns: budget/planners.py) as markdown or CSV."""
    if budget_format(fmt) == "csv":
        from tpubench.records.csv_safety import neutralize_frame
        from tpubench.records.csv_writer import frame_to_csv

        return frame_to_csv(neutralize_frame(csv_frame(result)), float_format="%.6g")
    from tpubench.output.safe_text import markdown_text

    return markdown_text(budget_markdown(result, max_rows=max_rows))   # a result's text never becomes HTML
