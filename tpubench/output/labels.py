"""Labels of result rows shared by the reports (output/report) and the answer (output/answer)."""

from __future__ import annotations

import pandas as pd


def present(value) -> bool:
    """Whether a cell holds a value (not None, NaN or empty)."""
    if value is None:
        return False
    try:
        if pd.isna(value):
            return False
    except (TypeError, ValueError):
        pass
    return str(value) != ""


def stack_label(row) -> str:
    """The software that produced the tokens: a serving stack ('vllm 0.11.0') where the row names
    one, else the backend tpubench drove ('torch')."""
    if present(row.get("server_name")):
        version = row.get("server_version")
        return f"{row['server_name']} {version}" if present(version) else str(row["server_name"])
    return str(row.get("backend", ""))


__all__ = ["present", "stack_label"]
