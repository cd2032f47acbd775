"""The cost basis of scenario `train`: the chip-seconds one training token is charged
(docs/definitions.md#training; money/cost.py prices them).

A training row has `train_s_per_token` (seconds of the whole world per training token, with
`_ci95_low` / `_ci95_high`) and spends

    c_train = train_s_per_token * chips          chip-seconds per training token

(`train_chip_s_per_token`, CI from the column's bounds). A training row has no TTFT, E2E or
output tokens, so it has no inference chip-seconds and no input/output split.
"""

from __future__ import annotations

import pandas as pd

from tpubench.records.columns import numeric_column


def chip_seconds(rows: pd.DataFrame) -> pd.DataFrame:
    """Chip-seconds per training token with its 95% CI (`train_chip_s_per_token[_ci95_low|_ci95_high]`):
    the row's `train_s_per_token` columns times chips; NaN for rows without them."""
    chips = numeric_column(rows, "chips")
    return pd.DataFrame({f"train_chip_s_per_token{bound}": numeric_column(rows, f"train_s_per_token{bound}") * chips
                         for bound in ("", "_ci95_low", "_ci95_high")}, index=rows.index)
