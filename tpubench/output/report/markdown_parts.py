"""The pieces markdown sections are made of: a table and a table of runs. Apart from markdown.py
(the page) so that a unit's own section (report/sections.py) builds with them without importing
the page that lays the sections out."""

from __future__ import annotations

from tpubench.output.report import format as f
from tpubench.records.columns import records


def _escape(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(_escape(h) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def runs_section(data, title: str, runs, header_templates, cells, max_rows: int,
                  energy_figure: str = "blended") -> list[str]:
    """One row per run, at most max_rows of them (the CSV has all)."""
    headers = [h.format(plan=f.plan_label(data.primary_plan or "")) for h in header_templates]
    headers, cells = f.with_energy_column(runs, energy_figure, headers, cells)
    out = [f"## {title} ({len(runs)})", "", table(headers, [cells(r) for r in records(runs.head(max_rows))])]
    if len(runs) > max_rows:
        out.append(f"\n… {len(runs) - max_rows} more run(s): use --format csv for all rows.")
    return out + [""]


__all__ = ["runs_section", "table"]
