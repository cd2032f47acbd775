"""Leave-one-out validation of the estimate over calibration rows (benchmarks/estimate_loo.py).

For each held-out row (or group of rows, `held_out(by=...)`): everything the command computes from
its calibration rows is recomputed from the other rows alone: the efficiency fit (pooled slopes,
each family's deviation, which terms are free), the leave-one-sweep-out residuals of that reduced
set and so the 90% interval's half-width. The row is then asked of `predict.estimate` exactly as
`tpubench estimate` would ask it (same refusal below 3 family rows, same efficiency cap, same
interval), with the row's own chip, chips, concurrency, lengths and precision. Per row:

    error   = estimated / published output tokens/s per chip - 1  (the $/Mtok error is the same ratio)
    covered = the published value lies inside the estimate's 90% interval as the command shows it

and the same for TTFT and TPOT where the row gives them (its median, else its mean), asked with the
row's own clients and arrival (a static batch, a closed loop of clients, an open loop at a rate).

A refused row (its family left with fewer than 3 rows) has no error and is counted apart.

Rows from one sweep (a publisher's run of one model on one chip at several concurrencies) sit
close together, so holding out one of them still leaves its neighbours in: `by="sweep"`
holds out the whole sweep instead, which is closer to the question a user asks (my model, a chip
whose rows are of other models); `by="chip"` holds out every row of a chip, which is what a chip new
to the calibration (the next TPU) looks like.

`with_own_rows` asks what a user's own measurements add: it holds out each sweep of at least
OWN_CANDIDATES + 1 rows, hands the calibration 0, 1 or 3 of that sweep's rows as if the user had
measured them (`source` measured: they pull their family, predict.Calibration.own_offset), and
scores the sweep's other rows, the same rows for every count.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from tpubench.estimate.calibration import Observations, sweeps
from tpubench.estimate.chips import Target
from tpubench.estimate.features import STATIC
from tpubench.estimate.fit import DEFAULT_RIDGE
from tpubench.estimate.pairs import comparable_pairs, family_pair, shared_halfwidth
from tpubench.estimate.predict import TPOT, TTFT, calibrated, estimate

GROUPINGS = ("row", "sweep", "chip")
OWN_CANDIDATES = 3       # rows of a held-out sweep that may be handed over as yours


def _groups(obs: Observations, by: str) -> np.ndarray:
    if by not in GROUPINGS:
        raise ValueError(f"unknown grouping {by!r}: one of {', '.join(GROUPINGS)}")
    if by == "row":
        return np.arange(len(obs.y))
    return np.asarray(obs.rows["accelerator"].astype(str)) if by == "chip" else np.asarray(sweeps(obs.rows))


def _scored(obs: Observations, cal, i: int, rest: Observations) -> dict:
    """Row i asked of the estimate under calibration `cal` (module notes): as many clients as the row
    had, arriving as its did, so a server's slot wait is asked of the estimate too."""
    row, point = obs.rows.iloc[i], obs.points[i]
    target = Target(spec=f"{row['accelerator']}:{point.chips}", accelerator=row["accelerator"],
                    chips=point.chips, instance_type=None)
    arrival = row["arrival"]
    asked = point if arrival == STATIC else replace(point, concurrency=float(row["clients"]))
    est = estimate(cal, target, obs.specs[i], asked, arrival=arrival)
    published = row["output_tokens_per_s_per_chip"]
    value, low, high = est.output_tokens_per_s_per_chip
    out = {"accelerator": row["accelerator"], "family": obs.families[i], "model": row["model"], "arrival": arrival,
           "published": published, "estimated": value,
           "error_pct": 100 * (value / published - 1), "covered": bool(low <= published <= high),
           "interval_factor": high / value, "nominal": est.interval_nominal,
           "refused": est.refused or "",
           "family_rows_left": sum(1 for f in rest.families if f == obs.families[i])}
    for metric, name in ((TTFT, "ttft"), (TPOT, "tpot")):
        truth, (value, low, high) = float(row[metric]), getattr(est, metric)
        known = math.isfinite(truth) and math.isfinite(value)
        out[f"{name}_error_pct"] = 100 * (value / truth - 1) if known else math.nan
        out[f"{name}_covered"] = bool(low <= truth <= high) if known else math.nan
    return out


def held_out(obs: Observations, *, ridge: float = DEFAULT_RIDGE, by: str = "row") -> pd.DataFrame:
    """One row per calibration row: its chip, family, model, signed % error, whether covered, the
    interval's factor (high / estimate), and the refusal when the command would give no number."""
    groups = _groups(obs, by)
    out = []
    for g in np.unique(groups):
        rest = obs.subset(groups != g)
        cal = calibrated(rest, ridge=ridge)
        out += [_scored(obs, cal, i, rest) for i in np.flatnonzero(groups == g)]
    return pd.DataFrame(out)


def own_candidates(obs: Observations, members: np.ndarray) -> np.ndarray:
    """OWN_CANDIDATES rows of a sweep spread over its loads (lowest, middle, highest concurrency)."""
    order = members[np.argsort([obs.points[i].concurrency for i in members], kind="stable")]
    return order[np.unique(np.linspace(0, len(order) - 1, OWN_CANDIDATES).round().astype(int))]


def with_own_rows(obs: Observations, counts=(0, 1, 3), *, ridge: float = DEFAULT_RIDGE) -> pd.DataFrame:
    """Per count of your rows (module notes), one row per scored published row, with `own_rows`."""
    groups = np.asarray(sweeps(obs.rows))
    out = []
    for g in np.unique(groups):
        members = np.flatnonzero(groups == g)
        if len(members) <= OWN_CANDIDATES:
            continue
        candidates = own_candidates(obs, members)
        scored = np.setdiff1d(members, candidates)
        rest = obs.subset(groups != g)
        for count in counts:
            handed = candidates[[len(candidates) // 2]] if count == 1 else candidates[:count]
            cal = calibrated(rest + obs.mine(handed) if count else rest, ridge=ridge)
            out += [{**_scored(obs, cal, i, rest), "own_rows": count} for i in scored]
    return pd.DataFrame(out)


# The ranking accuracy counts pairs whose true $ ratio is at least this far from a tie.
DECISIVE_RATIO = 1.2


def pair_scores(obs: Observations, per_row: pd.DataFrame, usd_per_chip_hour: dict[str, float]) -> pd.DataFrame:
    """Each held-out pair (estimate.pairs: one model on two families at comparable points, each side
    predicted with its own sweep held out: `per_row`, held_out(by="sweep")), priced at one shared
    table (`usd_per_chip_hour` per accelerator), with: its true and estimated $ ratio (second over
    first), whether the estimate names the cheaper side, the half-width the answer would give it
    (its family pair's held-out pairs of the other models, estimate.pairs's rule, else the two
    intervals' half-widths in quadrature: `shared` says which) and whether it covers the true ratio."""
    rows = obs.rows.reset_index(drop=True)
    pairs = comparable_pairs(rows)
    error = np.log1p(per_row["error_pct"].to_numpy(dtype=float) / 100)          # log(estimated / published)
    factor = np.log(per_row["interval_factor"].to_numpy(dtype=float))
    answered = (per_row["refused"] == "").to_numpy()
    out = []
    models = rows["model"].to_numpy()
    for i, j in pairs:
        a, b = rows.loc[i, "accelerator"], rows.loc[j, "accelerator"]
        if not (answered[i] and answered[j] and a in usd_per_chip_hour and b in usd_per_chip_hour):
            continue
        price = usd_per_chip_hour[b] / usd_per_chip_hour[a]
        true = price * rows.loc[i, "output_tokens_per_s_per_chip"] / rows.loc[j, "output_tokens_per_s_per_chip"]
        estimated = true * math.exp(error[i] - error[j])
        out.append({"model": models[i], "family_pair": " and ".join(family_pair(obs.families[i], obs.families[j])),
                    "first": a, "second": b, "true_ratio": true, "estimated_ratio": estimated,
                    "miss": abs(error[i] - error[j]), "quadrature": math.hypot(factor[i], factor[j]),
                    "decisive": abs(math.log(true)) >= math.log(DECISIVE_RATIO),
                    "named_cheaper": (true > 1) == (estimated > 1)})
    frame = pd.DataFrame(out)
    if frame.empty:
        return frame
    halfwidth, shared = [], []
    for r in frame.itertuples():
        others = frame[(frame["family_pair"] == r.family_pair) & (frame["model"] != r.model)]
        found = shared_halfwidth(others["miss"].to_numpy(), others["model"].to_numpy(), r.family_pair)
        halfwidth.append(found[0] if found else r.quadrature)
        shared.append(found is not None)
    frame["shared"] = shared
    frame["halfwidth"] = halfwidth
    frame["covered"] = frame["miss"] <= frame["halfwidth"]
    return frame


def pair_summary(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per family pair and overall: pairs, ratio coverage, decisive pairs (true ratio >= 1.2x either
    way) and the share of them whose cheaper side the estimate names."""
    def agg(df: pd.DataFrame) -> dict:
        decisive = df[df["decisive"]]
        return {"pairs": len(df), "ratio_coverage_90": float(df["covered"].mean()) if len(df) else np.nan,
                "decisive": len(decisive),
                "ranking_accuracy": float(decisive["named_cheaper"].mean()) if len(decisive) else np.nan,
                "median_halfwidth_factor": float(np.exp(np.median(df["halfwidth"]))) if len(df) else np.nan,
                "shared_share": float(df["shared"].mean()) if len(df) else np.nan}
    if pairs.empty:
        return pd.DataFrame(columns=["family_pair", "pairs", "ratio_coverage_90", "decisive", "ranking_accuracy",
                                     "median_halfwidth_factor", "shared_share"])
    rows = [{"family_pair": key, **agg(df)} for key, df in pairs.groupby("family_pair", sort=True)]
    rows.append({"family_pair": "overall", **agg(pairs)})
    return pd.DataFrame(rows)


METRICS = {"throughput": "", "ttft": "ttft_", "tpot": "tpot_"}


def summary(per_row: pd.DataFrame, by: str = "accelerator", metric: str = "throughput") -> pd.DataFrame:
    """Per group and overall, over the rows the command would estimate that give the metric
    (`METRICS`: output tokens/s per chip, TTFT or TPOT): n, median |error| %, share inside the 90%
    interval; `refused` counts the rows it would refuse."""
    prefix = METRICS[metric]

    def agg(df: pd.DataFrame) -> dict:
        answered = df[(df["refused"] == "") & df[f"{prefix}error_pct"].notna()]
        return {"n": len(answered), "refused": int((df["refused"] != "").sum()),
                "median_abs_error_pct": float(np.median(np.abs(answered[f"{prefix}error_pct"]))) if len(answered)
                else np.nan,
                "coverage_90": float(answered[f"{prefix}covered"].astype(float).mean()) if len(answered) else np.nan}
    rows = [{by: key, **agg(df)} for key, df in per_row.groupby(by, sort=True)]
    rows.append({by: "overall", **agg(per_row)})
    return pd.DataFrame(rows)


__all__ = ["DECISIVE_RATIO", "GROUPINGS", "METRICS", "OWN_CANDIDATES", "held_out", "own_candidates", "pair_scores",
           "pair_summary", "summary", "with_own_rows"]
