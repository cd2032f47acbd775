"""What the token unit (scenarios/token_unit.py) is priced with beyond its chip-seconds: the
whole chip-hour charged to output tokens as published tables do (InferenceX-style $/Mtok, money/
cost.py's module docstring), tokens per dollar, and tokens/s one user sees. cost.EXTRA_COSTS names
`extra_costs` for the token unit; cost.cost_figures calls it for every priced row (NaN where a row
has no tokens). Pure arithmetic over floats or arrays, below cost.py."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tpubench.measure.per_token import SECONDS_PER_HOUR, TOKENS_PER_MTOK
from tpubench.measure.stats import cost_ci_from_throughput_ci
from tpubench.records.columns import numeric_column


def inferencex_usd_per_mtok(output_tokens_per_s, chips, usd_per_chip_hour):
    """The whole chip-hour charged to output tokens, as InferenceX-style tables do."""
    with np.errstate(divide="ignore", invalid="ignore"):
        per_chip = np.divide(output_tokens_per_s, chips)
        return np.divide(np.multiply(usd_per_chip_hour, TOKENS_PER_MTOK), np.multiply(SECONDS_PER_HOUR, per_chip))


def tokens_per_usd(usd_per_mtok_value):
    """Tokens one dollar buys at a given $/Mtok."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(TOKENS_PER_MTOK, usd_per_mtok_value)


def interactivity_tokens_per_s(df: pd.DataFrame) -> pd.Series:
    """Tokens/s one user sees: the row's `interactivity_tokens_per_s` where it has one (a server's
    1 / median TPOT over requests), else 1 / median TPOT."""
    with np.errstate(divide="ignore", invalid="ignore"):
        from_tpot = 1.0 / numeric_column(df, "tpot_p50_s")
    given = numeric_column(df, "interactivity_tokens_per_s")
    return given.where(given.notna(), from_tpot)


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
