"""Reports: markdown, one self-contained HTML file, CSV (a budget's are tpubench.budget.render's).

    render_report("results/", "html")            # what `tpubench report` calls
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Callable, Sequence

from tpubench.errors import UserError
from tpubench.output.collection import paused_collection
from tpubench.output.python_strings import python_strings
from tpubench.output.report.data import ReportData, build_report

FORMATS = ("markdown", "html", "csv")
_ALIASES = {"md": "markdown", "markdown": "markdown", "html": "html", "csv": "csv"}

__all__ = ["FORMATS", "ReportData", "build_report", "render", "render_report"]


def _format(fmt: str) -> str:
    try:
        return _ALIASES[fmt.lower()]
    except KeyError:
        raise UserError(f"unknown format '{fmt}'; choose one of {', '.join(FORMATS)}", field="--format") from None


TABLES = ("report", "answer")


@paused_collection
@python_strings
def render(data: ReportData, fmt: str = "markdown", *, max_rows: int = 200, table: str = "report",
           images=None, html_name: str | None = None) -> str:
    """Format an already built ReportData: the whole report, or (`table="answer"`) only its answer
    table (report/answer.py; as CSV, its options with their verdicts). Markdown shows `images`
    (report/chart_images.write_images) as its figures, else names the HTML report (`html_name`)."""
    fmt = _format(fmt)
    if table not in TABLES:
        raise UserError(f"unknown table '{table}'; choose one of {', '.join(TABLES)}", field="--table")
    if table == "answer":
        return _render_answer(data, fmt)
    if fmt == "html":
        from tpubench.output.report.html import render_html

        return render_html(data, max_rows=max_rows)
    if fmt == "csv":
        from tpubench.output.report.csv import render_csv

        return render_csv(data)
    from tpubench.output.report.markdown import render_markdown
    from tpubench.output.safe_text import markdown_text

    # A result's text never becomes HTML.
    return markdown_text(render_markdown(data, max_rows=max_rows, images=images, html_name=html_name))


def _render_answer(data: ReportData, fmt: str) -> str:
    if fmt == "csv":
        from tpubench.output.answer.assemble import frame
        from tpubench.records.csv_safety import neutralize_frame

        return neutralize_frame(frame(data.answer)).to_csv(index=False, float_format="%.6g")
    if fmt == "html":
        from tpubench.output.report.html import render_answer_html

        return render_answer_html(data)
    from tpubench.output.report.markdown import answer_markdown
    from tpubench.output.safe_text import markdown_text

    return markdown_text("\n".join(answer_markdown(data)))


def render_report(source, fmt: str = "markdown", *, prices=None, price_files: Sequence[str | Path] = (),
                  plans: Sequence[str] | None = None, discount_pct: float | None = None, cloud=None,
                  region=None, instance=None, what_if_instance: str | None = None,
                  today: date | None = None, warn: Callable[[str], None] | None = None,
                  max_rows: int = 200, keep: str = "latest", include_flagged: bool = False) -> str:
    """Load results (folders/files, or a DataFrame from load_results), price and render them.

    `prices` is a long price table (pricing.load_prices); when None the shipped table is loaded
    with `price_files` layered on top. Filters (`plans`, `cloud`, `region`, `instance`) and
    `what_if_instance` are those of cost.price_results. `keep` is load_results' ("latest": a point
    measured several times counts once, with a warning saying how many older runs were left out;
    "all": every run). `include_flagged` lets flagged prices compete (cost.choose_prices). Bad input
    raises UserError.
    """
    fmt = _format(fmt)
    data = build_report(source, prices=prices, price_files=price_files, plans=plans,
                        discount_pct=discount_pct, cloud=cloud, region=region, instance=instance,
                        what_if_instance=what_if_instance, today=today, warn=warn, keep=keep,
                        include_flagged=include_flagged)
    return render(data, fmt, max_rows=max_rows)
