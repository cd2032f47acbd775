"""The cost basis of the demo scenario: a row has `compute_s_per_audio_s` (seconds of the whole
call per second of audio, with `_ci95_low` / `_ci95_high`) and spends

    c_audio = compute_s_per_audio_s * chips          chip-seconds per audio second
"""

from __future__ import annotations

import pandas as pd

from tpubench.records.columns import numeric_column


def chip_seconds(rows: pd.DataFrame) -> pd.DataFrame:
    chips = numeric_column(rows, "chips")
    return pd.DataFrame({f"audio_chip_s_per_audio_s{b}": numeric_column(rows, f"compute_s_per_audio_s{b}") * chips
                         for b in ("", "_ci95_low", "_ci95_high")}, index=rows.index)
