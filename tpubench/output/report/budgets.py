"""Which markdown renderer a budget gets: a table owned by the reports, keyed by the budget's type
(money's planners return them and name no renderer: money sits below the reports)."""

from __future__ import annotations

from tpubench.money.budget import BudgetResult
from tpubench.money.image_budget import ImageBudget
from tpubench.money.training_budget import TrainingBudget
from tpubench.money.unit_budget import UnitBudget
from tpubench.output.report.budget_images import image_budget_markdown
from tpubench.output.report.budget_units import unit_budget_markdown
from tpubench.output.report.markdown import render_budget_markdown, render_training_budget_markdown

MARKDOWN = {
    BudgetResult: render_budget_markdown,
    TrainingBudget: render_training_budget_markdown,
    ImageBudget: image_budget_markdown,
    UnitBudget: unit_budget_markdown,
}


def budget_markdown(result, max_rows: int = 50) -> str:
    """The budget as markdown, by its type's renderer (MARKDOWN)."""
    return MARKDOWN[type(result)](result, max_rows=max_rows)


__all__ = ["MARKDOWN", "budget_markdown"]
