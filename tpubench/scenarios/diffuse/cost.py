"""The cost basis of scenario `diffuse`: the chip-seconds one image is charged
(docs/definitions.md#diffusion; money/cost.py prices them as $ per 1,000 images).

A diffusion row has `image_s_per_image` (seconds of the whole call per image: the whole pipeline,
text encoders to decoded image, with `_ci95_low` / `_ci95_high`) and spends

    c_image = image_s_per_image * chips          chip-seconds per image

(`image_chip_s_per_image`, CI from the column's bounds). It has no tokens, so no per-token figure.
"""

from __future__ import annotations

import pandas as pd

from tpubench.records.columns import numeric_column


def chip_seconds(rows: pd.DataFrame) -> pd.DataFrame:
    """Chip-seconds per image with its 95% CI (`image_chip_s_per_image[_ci95_low|_ci95_high]`);
    NaN for rows without `image_s_per_image`."""
    chips = numeric_column(rows, "chips")
    return pd.DataFrame({f"image_chip_s_per_image{bound}": numeric_column(rows, f"image_s_per_image{bound}") * chips
                         for bound in ("", "_ci95_low", "_ci95_high")}, index=rows.index)
