"""The platform in use (`tpubench budget serve|generate|tokens --current cloud/region/instance_type`): every option of a
token budget, and every buying mix, carries the monthly saving (positive) or loss of switching to it
from that platform (docs/definitions.md#budget)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tpubench.errors import UserError
from tpubench.money import cost


def parse_platform(text: str) -> dict[str, str]:
    """'cloud/region/instance_type', 'cloud/instance_type' or 'instance_type' -> filter fields."""
    parts = [p.strip() for p in text.split("/") if p.strip()]
    if len(parts) == 3:
        return {"cloud": parts[0].lower(), "region": parts[1], "instance_type": parts[2]}
    if len(parts) == 2:
        return {"cloud": parts[0].lower(), "instance_type": parts[1]}
    if len(parts) == 1:
        return {"instance_type": parts[0]}
    raise UserError(f"'{text}' is not cloud/region/instance_type", field="--current")


def match_platform(options: pd.DataFrame, spec: dict[str, str]) -> pd.Series:
    mask = pd.Series(True, index=options.index)
    for key, value in spec.items():
        mask &= options[key].astype(str).str.lower() == value.lower()
    return mask

def compare_with_current(options: pd.DataFrame, current: str) -> tuple[pd.DataFrame, str | None]:
    """Each option's monthly saving (positive) against the current platform's option of the same
    workload, scale and plan, and the note when the current platform has none."""
    spec = parse_platform(current)
    mask = match_platform(options, spec)
    if not mask.any():
        return options.assign(saving_vs_current_usd_per_month=math.nan, saving_vs_current_pct=math.nan,
                              vs_current="unknown"), (
            f"current platform '{current}' has no option meeting the SLOs (or no price): no savings computed")
    matched = options[mask]
    where = matched[["cloud", "region", "instance_type"]].drop_duplicates()
    if len(where) > 1:
        choices = ", ".join("/".join(r) for r in where.astype(str).itertuples(index=False))
        raise UserError(f"'{current}' matches several platforms: {choices}", field="--current")
    reference = matched.drop_duplicates(["workload", "scale", "plan"]).set_index(["workload", "scale", "plan"])
    keys = list(zip(options["workload"], options["scale"], options["plan"]))
    ref_cost = np.array([reference["monthly_usd"].get(k, math.nan) for k in keys], dtype=float)
    ref_low = np.array([reference["monthly_usd_ci95_low"].get(k, math.nan) for k in keys], dtype=float)
    ref_high = np.array([reference["monthly_usd_ci95_high"].get(k, math.nan) for k in keys], dtype=float)
    out = options.copy()
    out["current_monthly_usd"] = ref_cost
    out["saving_vs_current_usd_per_month"] = ref_cost - out["monthly_usd"]
    out["saving_vs_current_pct"] = out["saving_vs_current_usd_per_month"] / ref_cost * 100
    out["vs_current"] = [
        cost.compare_costs(a, (ah - al) / 2, b, (bh - bl) / 2) if math.isfinite(b) else "unknown"
        for a, al, ah, b, bl, bh in zip(out["monthly_usd"], out["monthly_usd_ci95_low"],
                                         out["monthly_usd_ci95_high"], ref_cost, ref_low, ref_high)
    ]
    out["is_current"] = mask.values
    return out, None

def mix_vs_current(table: pd.DataFrame, current: str) -> tuple[pd.DataFrame, str | None]:
    """Each mix's monthly saving (positive) against the current platform's own best mix."""
    mask = match_platform(table, parse_platform(current))
    if not mask.any():
        return table, f"current platform '{current}' has no buying mix: no savings of the mix computed"
    def key(row):  # a server's result has no scale: NaN, which never equals itself as a key
        return row["workload"], "" if pd.isna(row["scale"]) else str(row["scale"])

    reference = {}
    for _, row in table[mask].iterrows():
        reference.setdefault(key(row), row)
    out = table.copy()
    ref = [reference.get(key(row)) for _, row in out.iterrows()]
    ref_cost = np.array([r["monthly_usd"] if r is not None else math.nan for r in ref], dtype=float)
    ref_half = np.array([(r["monthly_usd_ci95_high"] - r["monthly_usd_ci95_low"]) / 2 if r is not None else math.nan
                         for r in ref], dtype=float)
    out["current_monthly_usd"] = ref_cost
    out["saving_vs_current_usd_per_month"] = ref_cost - out["monthly_usd"]
    out["saving_vs_current_pct"] = out["saving_vs_current_usd_per_month"] / ref_cost * 100
    out["vs_current"] = [cost.compare_costs(a, (ah - al) / 2, b, bh) if math.isfinite(b) else "unknown"
                         for a, al, ah, b, bh in zip(out["monthly_usd"], out["monthly_usd_ci95_low"],
                                                     out["monthly_usd_ci95_high"], ref_cost, ref_half)]
    out["is_current"] = mask.values
    return out, None
