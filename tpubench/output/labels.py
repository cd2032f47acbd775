"""Labels of result rows shared by the reports (output/report) and the answer (output/answer)."""

from __future__ import annotations

import pandas as pd

from tpubench.estimate.models import PointPrecision


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


def precision_label(weight_dtype, activation_dtype, kv_cache_dtype, dtype) -> str:
    """A point's precision as every option and chart names it ('fp32', 'w int8 / a fp32 / kv fp32'):
    one filter value then picks one precision everywhere. Its dtype where the parts say nothing."""
    found = PointPrecision.of(weight_dtype, activation_dtype, kv_cache_dtype, dtype)
    return found.label if found else (str(dtype) if present(dtype) else "")


__all__ = ["precision_label", "present", "stack_label"]
