"""Accelerator mapping: the runtime device names a result records -> the canonical accelerator names
the price table uses, so a result can be joined to the prices of the chips it ran on.

The matching rules themselves live in `tpubench.hardware.accelerators.normalize_accelerator` (the
measurement side needs them too and may not import money); this module applies them over a whole
results column, which is what costing needs.
"""

from __future__ import annotations

from typing import Iterable

import pandas as pd

from tpubench.hardware.accelerators import normalize_accelerator


def map_accelerators(raw_names: pd.Series, devices: pd.Series, known: Iterable[str]) -> pd.Series:
    """normalize_accelerator over a column, computed once per distinct (name, device) pair."""
    known = list(known)
    pairs = pd.DataFrame({"name": raw_names.astype(object), "device": devices.astype(object)},
                         index=raw_names.index)
    distinct = pairs.drop_duplicates()
    mapping = pd.Series([normalize_accelerator(n, d, known) for n, d in zip(distinct["name"], distinct["device"])],
                        index=pd.MultiIndex.from_frame(distinct), dtype=object)
    looked_up = mapping.reindex(pd.MultiIndex.from_frame(pairs))
    return pd.Series(looked_up.to_numpy(dtype=object), index=raw_names.index, dtype=object)
