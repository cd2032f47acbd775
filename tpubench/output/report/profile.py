"""The report's "where the time goes" section: the profiled pass of each point run with
`tpubench run --profile` (measure/profile.py), as a table of seconds per category and a stacked
bar per point (figures.profile_breakdown).

Rows come from the results frame's `profile_json` column (output/frames.py), one per result.
"""

from __future__ import annotations

import json
import math

import pandas as pd

from tpubench.output.report.format import point_label, workload_label
from tpubench.units import MISSING, ms

MAX_ROWS = 40
# Category -> how the report names it, in CATEGORIES' order (bars stack in this order).
LABELS = {
    "expert_matmul_s": "expert matmuls",
    "expert_dispatch_s": "expert dispatch",
    "router_topk_s": "router, top-k",
    "attention_s": "attention",
    "dense_matmul_s": "dense matmuls",
    "norm_elementwise_s": "norms, elementwise",
    "collectives_s": "collectives",
    "other_s": "other ops",
    "host_gap_s": "host gaps",
}
# measure/profile.py's CATEGORIES (imported there only: that module reaches torch, reports may not;
# tests/test_profile.py keeps the two the same).
CATEGORIES = tuple(LABELS)
HEADERS = ["Point", "Device", "Pass ms"] + [f"{LABELS[c]} ms (%)" for c in CATEGORIES] + ["Top op"]
NOTE = ("One profiled pass per point after its timed loop (one iteration: a batch from prefill to last "
        "token, a training step or a pipeline call), under the framework's profiler, which slows it: compare shares, "
        "not the pass's milliseconds with the timed figures. Trace files sit beside the results "
        "(docs/measurement.md#profile).")


def profiled(results: pd.DataFrame) -> pd.DataFrame:
    """The results that carry a profile, with their label and parsed profile (at most MAX_ROWS)."""
    if results.empty or "profile_json" not in results:
        return pd.DataFrame()
    rows = results[results["profile_json"].notna() & (results["status"] == "ok")].head(MAX_ROWS)
    if rows.empty:
        return pd.DataFrame()
    labels = [_label(r) for _, r in rows.iterrows()]
    return rows.assign(profile_label=labels, profile=[json.loads(t) for t in rows["profile_json"]])


def _label(row) -> str:
    """The point, with what tells MoE points apart here: their experts implementation and routing."""
    parts = [workload_label(row), point_label(row)]
    impl, routing = row.get("experts_implementation"), row.get("routing")
    if isinstance(impl, str) and impl:
        parts.append(f"experts={impl}")
    if isinstance(routing, str) and routing and routing != "natural":
        parts.append(f"routing={routing}")
    return " ".join(parts)


def cells(row) -> list[str]:
    """One table row: the point, its device, the pass's milliseconds, each category's milliseconds
    and share of the pass, and the op that took the most time."""
    profile = row["profile"]
    total = profile.get("total_s") or math.nan
    out = [row["profile_label"], f"{row['backend']}:{row['device']}", ms(total)]
    for category in CATEGORIES:
        seconds = (profile.get("categories") or {}).get(category, 0.0)
        out.append(f"{ms(seconds)} ({seconds / total * 100:.0f}%)" if total and math.isfinite(total) else MISSING)
    top = profile.get("top_ops") or []
    out.append(f"{top[0]['name']} ({ms(top[0]['self_s'])} ms)" if top else MISSING)
    return out


def markdown(results: pd.DataFrame, table) -> list[str]:
    """The section's markdown lines ([] when no result was profiled); `table` renders a table."""
    rows = profiled(results)
    if rows.empty:
        return []
    return ["## Where the time goes (run --profile)", "",
            table(HEADERS, [cells(r) for _, r in rows.iterrows()]), "", f"- {NOTE}", ""]


def html(results: pd.DataFrame, table, escape) -> list[str]:
    """The section's HTML parts ([] when no result was profiled); the stacked bars are among the
    report's figures (figures.profile_figures)."""
    rows = profiled(results)
    if rows.empty:
        return []
    numeric = set(range(2, 3 + len(CATEGORIES)))
    return ["<h2>Where the time goes (run --profile)</h2>",
            table(HEADERS, [cells(r) for _, r in rows.iterrows()], numeric),
            f'<p class="note">{escape(NOTE)}</p>']
