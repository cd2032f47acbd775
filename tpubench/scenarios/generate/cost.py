"""The cost basis of scenario `generate`: the chip-seconds one token of an offline batch is charged
(docs/definitions.md#cost; money/cost.py prices them).

An offline batch of B sequences, input length I, output length O is charged, from its mean TTFT
and E2E, the chip-seconds per token of measure/per_token.batch_chip_seconds_per_token (the one
definition, which the estimate uses too), with CIs from the TTFT, TPOT (decode time is
TPOT * (O - 1)) and E2E CIs.

Prefill and decode chip time are really apart in an offline batch, so the split is
`split_method` "time-attributed". The functions accept floats or numpy/pandas arrays alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tpubench.measure.per_token import batch_chip_seconds_per_token, mix_rate, usd_per_mtok_from_chip_seconds
from tpubench.measure.stats import cost_ci_from_time_ci
from tpubench.records.columns import numeric_column

SPLIT_TIME_ATTRIBUTED = "time-attributed"


@dataclass(frozen=True)
class TokenCosts:
    input_usd_per_mtok: float
    output_usd_per_mtok: float
    blended_usd_per_mtok: float


def time_attributed_costs(ttft_s, e2e_s, chips, batch_size, input_length, output_length,
                          usd_per_chip_s) -> TokenCosts:
    """An offline batch priced: prefill chip-seconds over input tokens, decode chip-seconds over
    output tokens, and all chip-seconds over all tokens."""
    c = batch_chip_seconds_per_token(ttft_s, e2e_s, chips, batch_size, input_length, output_length)
    return TokenCosts(
        input_usd_per_mtok=usd_per_mtok_from_chip_seconds(c.input, usd_per_chip_s),
        output_usd_per_mtok=usd_per_mtok_from_chip_seconds(c.output, usd_per_chip_s),
        blended_usd_per_mtok=usd_per_mtok_from_chip_seconds(c.blended, usd_per_chip_s),
    )


def mix_tokens_per_s_per_chip(ttft_s, e2e_s, chips, batch_size, input_length, output_length,
                              output_share: float):
    """Tokens/s per chip for a traffic mix of an offline batch (see budget/tokens.py's docstring); NaN
    when the point cannot serve the mix (no decode time measured for output tokens)."""
    c = batch_chip_seconds_per_token(np.asarray(ttft_s, dtype=float), np.asarray(e2e_s, dtype=float),
                                     np.asarray(chips, dtype=float), np.asarray(batch_size, dtype=float),
                                     np.asarray(input_length, dtype=float), np.asarray(output_length, dtype=float))
    return mix_rate(c.input, c.output, output_share)


def chip_seconds(rows: pd.DataFrame) -> pd.DataFrame:
    """The three chip-seconds-per-token figures of every offline batch row, with their 95% CIs
    (columns `{input,output,blended}_chip_s_per_token[_ci95_low|_ci95_high]`), from its TTFT and
    E2E (module docstring), and `split_method` "time-attributed"."""
    chips = numeric_column(rows, "chips")
    ttft, e2e = numeric_column(rows, "ttft_mean_s"), numeric_column(rows, "e2e_mean_s")
    computed = batch_chip_seconds_per_token(ttft, e2e, chips, numeric_column(rows, "batch_size"),
                                            numeric_column(rows, "input_length"), numeric_column(rows, "output_length"))
    # The measured time each figure is proportional to, for its CI.
    drivers = {"input": ("ttft_mean_s", "ttft_ci95_low_s", "ttft_ci95_high_s"),
               "output": ("tpot_mean_s", "tpot_ci95_low_s", "tpot_ci95_high_s"),
               "blended": ("e2e_mean_s", "e2e_ci95_low_s", "e2e_ci95_high_s")}
    out = pd.DataFrame(index=rows.index)
    for kind, (mean, low, high) in drivers.items():
        value = pd.Series(getattr(computed, kind), index=rows.index, dtype=float)
        value_low, value_high = cost_ci_from_time_ci(value, numeric_column(rows, mean), numeric_column(rows, low),
                                                     numeric_column(rows, high))
        name = f"{kind}_chip_s_per_token"
        out[name] = value
        out[f"{name}_ci95_low"] = value_low
        out[f"{name}_ci95_high"] = value_high
    out["split_method"] = SPLIT_TIME_ATTRIBUTED
    out["split_note"] = ""
    return out
