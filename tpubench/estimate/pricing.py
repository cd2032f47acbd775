"""An estimate priced per purchase plan through money's own cost functions: the cheapest unflagged
price row per plan for the target's chip (the named instance's rows when the user named one; rows
with the target's chip count first), per chip-second; $/Mtok input, output and blended from the
estimate's chip-seconds per token (time-attributed, docs/definitions.md#cost) and the
InferenceX-style figure (the whole chip-hour charged to output tokens), each with the estimate's
interval."""

from __future__ import annotations

import pandas as pd

from tpubench.estimate.chips import Target
from tpubench.estimate.predict import Estimate
from tpubench.measure.per_token import usd_per_mtok_from_chip_seconds
from tpubench.money.cost import usd_per_chip_second
from tpubench.money.pricing import prefer_unflagged
from tpubench.money.token_costs import inferencex_usd_per_mtok


def plan_prices(prices: pd.DataFrame, target: Target, plans: list[str] | None = None) -> pd.DataFrame:
    """One row per plan: the cheapest price row per chip-hour for the target (module notes)."""
    rows = prices[prices["accelerator"] == target.accelerator]
    if target.instance_type:
        rows = rows[rows["instance_type"].str.lower() == target.instance_type.lower()]
    elif (rows["chips_per_instance"] == target.chips).any():
        rows = rows[rows["chips_per_instance"] == target.chips]
    if plans:
        rows = rows[rows["plan"].isin(plans)]
    chosen = prefer_unflagged(rows)
    if chosen.empty:
        return chosen
    best = chosen.sort_values(["usd_per_chip_hour", "cloud", "region"], kind="stable").groupby("plan", sort=False).head(1)
    return best.reset_index(drop=True)


def priced(est: Estimate, price: pd.Series) -> dict:
    """The estimate's $/Mtok figures (estimate, low, high) under one price row."""
    per_chip_s = usd_per_chip_second(float(price["usd_per_chip_hour"]), 1)
    out = {"plan": price["plan"], "cloud": price["cloud"], "region": price["region"],
           "instance_type": price["instance_type"], "chips_per_instance": price.get("chips_per_instance"),
           "usd_per_chip_hour": float(price["usd_per_chip_hour"]),
           "price_as_of": price["as_of"]}
    for name, chip_s in (("input", est.input_chip_s_per_token), ("output", est.output_chip_s_per_token),
                         ("blended", est.blended_chip_s_per_token)):
        value, low, high = (float(usd_per_mtok_from_chip_seconds(c, per_chip_s)) for c in chip_s)
        out[f"{name}_usd_per_mtok"], out[f"{name}_usd_per_mtok_low"], out[f"{name}_usd_per_mtok_high"] = value, low, high
    tput, t_low, t_high = est.output_tokens_per_s_per_chip
    # Dearer when slower: the interval's low throughput gives the high cost.
    out["inferencex_usd_per_mtok"], out["inferencex_usd_per_mtok_low"], out["inferencex_usd_per_mtok_high"] = (
        float(inferencex_usd_per_mtok(t, 1, out["usd_per_chip_hour"])) for t in (tput, t_high, t_low))
    return out


__all__ = ["plan_prices", "priced"]
