"""What the token unit (scenarios/token_unit.py) is priced with beyond its chip-seconds: the
whole chip-hour charged to output tokens as published tables do (InferenceX-style $/Mtok, money/
cost.py's module docstring), tokens per dollar, and tokens/s one user sees. Named by the unit's
`extra_costs` and called by cost.cost_figures for every priced row (NaN where a row has no tokens)."""

from __future__ import annotations

import pandas as pd

from tpubench.measure.stats import cost_ci_from_throughput_ci
from tpubench.money.cost import inferencex_usd_per_mtok, interactivity_tokens_per_s, tokens_per_usd
from tpubench.records.columns import numeric_column


def extra_costs(df: pd.DataFrame, priced: dict) -> dict:
    """{column: values} of the token unit's `extra_cost_columns` and its interactivity, from the
    rows and the unit's figures priced so far (`priced`: its $/Mtok and per-chip columns)."""
    chips = numeric_column(df, "chips")
    tput = priced["output_tokens_per_s"]
    tput_low, tput_high = numeric_column(df, "output_tokens_per_s_ci95_low"), numeric_column(df, "output_tokens_per_s_ci95_high")
    new = {}
    inferencex = new["inferencex_usd_per_mtok"] = inferencex_usd_per_mtok(tput, chips, df["usd_per_chip_hour"])
    new["inferencex_usd_per_mtok_ci95_low"], new["inferencex_usd_per_mtok_ci95_high"] = (
        cost_ci_from_throughput_ci(inferencex, tput, tput_low, tput_high))
    new["tokens_per_usd"] = tokens_per_usd(priced["blended_usd_per_mtok"])
    new["output_tokens_per_usd_inferencex"] = tokens_per_usd(inferencex)
    new["interactivity_tokens_per_s_per_user"] = interactivity_tokens_per_s(df)
    return new
