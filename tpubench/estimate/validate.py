"""Leave-one-out validation of the estimate over calibration rows (benchmarks/estimate_loo.py).

For each row i: the efficiency model is fitted on every other row (so the prediction never saw
row i), and the 90% interval is built from that reduced set alone (its own leave-one-out
residuals, `predict.Calibration.halfwidth`), so neither the point nor the interval was tuned on the
held-out row. Error = predicted / published output tokens/s per chip - 1 (the throughput, hence
the $/Mtok, error); covered = the published value lies inside the interval.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tpubench.estimate.calibration import Observations
from tpubench.estimate.features import TERMS
from tpubench.estimate.fit import DEFAULT_RIDGE, fit_efficiency, loo_residuals
from tpubench.estimate.predict import Calibration


def _subset(obs: Observations, keep: np.ndarray) -> Observations:
    return Observations(X=obs.X[keep], y=obs.y[keep], families=[f for f, k in zip(obs.families, keep) if k],
                        rows=obs.rows[keep].reset_index(drop=True))


def held_out(obs: Observations, *, ridge: float = DEFAULT_RIDGE) -> pd.DataFrame:
    """One row per calibration row: its chip, family, signed % error and whether covered."""
    n = len(obs.y)
    out = []
    for i in range(n):
        keep = np.arange(n) != i
        rest = _subset(obs, keep)
        fit = fit_efficiency(rest.X, rest.y, rest.families, terms=TERMS, ridge=ridge)
        cal = Calibration(obs=rest, fit=fit, loo=loo_residuals(rest.X, rest.y, rest.families, ridge=ridge))
        family = obs.families[i]
        residual = obs.y[i] - fit.predict(obs.X[i], family)   # log(observed eff / predicted eff)
        q, nominal, _ = cal.halfwidth(family)
        out.append({"accelerator": obs.rows["accelerator"].iloc[i], "family": family,
                    "model": obs.rows["model"].iloc[i], "error_pct": 100 * (math.exp(-residual) - 1),
                    "covered": abs(residual) <= q, "interval_factor": math.exp(q), "nominal": nominal,
                    "family_rows_left": sum(1 for f in rest.families if f == family)})
    return pd.DataFrame(out)


def summary(per_row: pd.DataFrame, by: str = "accelerator") -> pd.DataFrame:
    """Per group and overall: n, median |error| %, share covered by the 90% interval."""
    def agg(df: pd.DataFrame) -> dict:
        return {"n": len(df), "median_abs_error_pct": float(np.median(np.abs(df["error_pct"]))),
                "coverage_90": float(df["covered"].mean())}
    rows = [{by: key, **agg(df)} for key, df in per_row.groupby(by, sort=True)]
    rows.append({by: "overall", **agg(per_row)})
    return pd.DataFrame(rows)


__all__ = ["held_out", "summary"]
