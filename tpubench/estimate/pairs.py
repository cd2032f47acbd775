"""How two estimates err together: the interval of the ratio between two chips' estimates, calibrated
on held-out pairs (DESIGN s25).

Two estimates of one model on two chip families share most of what misleads them (the model's shape,
its lengths, the serving stack), so the error of their ratio, e1 - e2 with e = log(estimated /
published) tokens/s per chip, spreads less than either error alone, and far less than the two
intervals' ends divided (which adds their half-widths). A pair is the same model published on two
families at comparable operating points: the same arrival, input and output lengths within
`LENGTHS`, loads within `LOADS` of each other. Each side's error is its leave-one-sweep-out residual
(each predicted by a fit without its own sweep), so the pair's error is what the answer's ratio would
miss by for a model neither fit saw.

The half-width of a family pair's ratio interval is the conformal quantile (90%) of its own pairs'
|e1 - e2| when it has enough pairs for the nominal coverage (9), of at least MIN_MODELS models; with
fewer, none is given and the caller takes the two errors as independent (their half-widths added in
quadrature, labelled): other family pairs' pairs say nothing of how much this pair's errors share,
and one model's many pairs say little of another model's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tpubench.estimate.fit import conformal_halfwidth

LENGTHS = 1.1        # input and output lengths within 10% of each other
LOADS = 1.5          # loads within a factor 1.5 of each other
COVERAGE = 0.9
# Pairs share what one model's shape and stack do to both sides: a family pair's half-width needs
# pairs of several models, or one model's many pairs would stand for every model.
MIN_MODELS = 3


def comparable_pairs(rows: pd.DataFrame) -> np.ndarray:
    """(k, 2) positions of the calibration rows' pairs (i < j) that are the same model on two
    families at comparable operating points (module notes)."""
    if rows.empty:
        return np.zeros((0, 2), dtype=int)
    rows = rows.reset_index(drop=True)
    fam = rows["family"].to_numpy(dtype=object)
    out = []
    for _, group in rows.groupby(["model", "arrival"], sort=False):
        if group["family"].nunique() < 2:
            continue
        idx = group.index.to_numpy()
        inputs, outputs, loads = (np.log(group[c].to_numpy(dtype=float)) for c in
                                  ("input_length", "output_length", "concurrency"))
        i, j = np.triu_indices(len(idx), k=1)
        close = ((np.abs(inputs[i] - inputs[j]) <= math.log(LENGTHS)) & (np.abs(outputs[i] - outputs[j]) <= math.log(LENGTHS))
                 & (np.abs(loads[i] - loads[j]) <= math.log(LOADS)) & (fam[idx[i]] != fam[idx[j]]))
        out.append(np.column_stack([idx[i[close]], idx[j[close]]]))
    return np.vstack(out).astype(int) if out else np.zeros((0, 2), dtype=int)


def family_pair(a: str | None, b: str | None) -> tuple[str, str]:
    """The unordered name of two families."""
    return tuple(sorted((str(a), str(b))))


@dataclass
class PairMisses:
    """Held-out pairs' ratio misses |e1 - e2| by family pair (module notes)."""

    misses: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    models: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)    # each pair's model

    @staticmethod
    def of(rows: pd.DataFrame, loo: np.ndarray) -> "PairMisses":
        """From calibration rows and their leave-one-sweep-out residuals of log efficiency (y -
        prediction: e = -residual)."""
        pairs = comparable_pairs(rows)
        fam, model = list(rows["family"]), list(rows["model"])
        out: dict[tuple[str, str], list[float]] = {}
        models: dict[tuple[str, str], list[str]] = {}
        for i, j in pairs:
            # e = log(estimated / published) = -(y - prediction); the ratio's error is e_i - e_j.
            key = family_pair(fam[i], fam[j])
            out.setdefault(key, []).append(abs(loo[j] - loo[i]))
            models.setdefault(key, []).append(model[i])
        return PairMisses({k: np.array(v) for k, v in out.items()}, {k: np.array(v) for k, v in models.items()})

    def count(self, a: str | None, b: str | None) -> int:
        return len(self.misses.get(family_pair(a, b), ()))

    def halfwidth(self, a: str | None, b: str | None) -> tuple[float, str] | None:
        """(half-width in log space, basis) of the ratio between families a and b, from their own
        held-out pairs; None when they have fewer than the nominal coverage needs (9 for 90%), or
        pairs of fewer than MIN_MODELS models: the caller then takes the two errors as independent."""
        key = family_pair(a, b)
        mine = self.misses.get(key, np.zeros(0))
        return shared_halfwidth(mine, self.models.get(key, np.zeros(0)), " and ".join(key))


def shared_halfwidth(misses: np.ndarray, models: np.ndarray, what: str) -> tuple[float, str] | None:
    """(half-width, basis) from pairs' ratio misses (module notes); None with too few pairs or models."""
    if len(set(models.tolist())) < MIN_MODELS:
        return None
    q, nominal = conformal_halfwidth(misses, COVERAGE)
    return (q, f"{len(misses)} held-out pairs of {len(set(models.tolist()))} models on {what}") if nominal else None


__all__ = ["COVERAGE", "LENGTHS", "LOADS", "MIN_MODELS", "PairMisses", "comparable_pairs", "family_pair",
           "shared_halfwidth"]
