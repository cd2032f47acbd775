"""The cost basis of scenario `serve`: the chip-seconds one token served by an inference server is
charged (docs/definitions.md#cost; money/cost.py prices them).

A server row has `blended_s_per_token` (seconds of the whole server per token over the measured
window, with `_ci95_low` / `_ci95_high`) and spends

    c_all = blended_s_per_token * chips   (CI: the column's bounds times chips)

Its input/output split comes from what the engine spends, never from request time (under
continuous batching a request's time before its first token is not the chip's time on its
prompt). `serve_split` fits it when several points of the same server and load (same workload,
stack, hardware, chips, layout, concurrency or rate, endpoint) were measured at input/output
mixes at least `MIN_PROBE_MIX_SPREAD` apart in output share: the window's chip-seconds per
second, `chips`, is fitted over those points by non-negative least squares as

    chips = c_in * input_tokens_per_s + c_out * output_tokens_per_s     (`fit_chip_seconds_per_token`)

and every point of the group gets that c_in and c_out (`split_method` "probe fit over N points",
`split_note` the fit's rms misfit; CIs: the widest relative CI of the group's blended figures).
Otherwise, or when the fit is not defensible (one coefficient at zero, misfit over
`MAX_PROBE_FIT_RMS`, an invalid point), c_in and c_out are NaN: `split_method` "blended only",
`split_note` the reason. The result's own `input_s_per_token` / `output_s_per_token` (the window
split by sum TTFT / sum E2E) are not used.

Caching changes what the engine spends, not how it is charged: a point whose prompts were served
from the prefix cache costs its window's chip-seconds like any other. What the cache did is
reported beside the cost, from the same point: `cached_input_share` (the share of input tokens
served from the cache, scenarios/serve/measure.py:engine_cache_metrics) is a priced column
(the token unit's `performance`, scenarios/token_unit.py), shown next to $/Mtok after a run and in the report, so two
stacks with different hit rates are compared on the same traffic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tpubench.records.columns import numeric_column
from tpubench.records.usable import usable_mask
from tpubench.scenarios import SPLIT_BLENDED_ONLY

# Output shares (output tokens / all tokens) of a probe's points must span at least this much:
# closer mixes leave the two per-token costs at the mercy of the noise.
MIN_PROBE_MIX_SPREAD = 0.2
# A fit that misses its points by more than this (rms, relative to the chips) is no model of them.
MAX_PROBE_FIT_RMS = 0.2
# What makes serve points "the same server and load" (the columns a result has of these).
PROBE_GROUP_COLUMNS = [
    "workload", "scale", "family", "dtype", "server_name", "server_version", "served_model", "endpoint",
    "accelerator", "device", "chips", "tensor_parallel", "expert_parallel", "world_size", "host",
    "instance", "concurrency", "request_rate",
]
SPLIT_COLUMNS = ["split_method", "split_note"] + [
    f"probe_{kind}_chip_s_per_token{bound}" for kind in ("input", "output")
    for bound in ("", "_ci95_low", "_ci95_high")]


def probe_method(points: int) -> str:
    return f"probe fit over {points} points"


def fit_chip_seconds_per_token(chip_seconds, input_tokens, output_tokens) -> tuple[float, float]:
    """(a, b) >= 0 minimising sum (a * input_tokens + b * output_tokens - chip_seconds)^2: chip-seconds
    per input token and per output token. Two unknowns, so the non-negative least squares is solved
    exactly: the unconstrained solution when both are >= 0, else the better one-variable fit."""
    y, x, z = (np.asarray(v, dtype=float) for v in (chip_seconds, input_tokens, output_tokens))
    sxx, szz, sxz, sxy, szy = x @ x, z @ z, x @ z, x @ y, z @ y
    det = sxx * szz - sxz * sxz
    if det > 1e-12 * sxx * szz:
        a, b = (sxy * szz - szy * sxz) / det, (szy * sxx - sxy * sxz) / det
        if a >= 0 and b >= 0:
            return float(a), float(b)
    candidates = [(max(sxy / sxx, 0.0) if sxx > 0 else 0.0, 0.0), (0.0, max(szy / szz, 0.0) if szz > 0 else 0.0)]
    return min(candidates, key=lambda ab: float(np.sum((ab[0] * x + ab[1] * z - y) ** 2)))


@dataclass(frozen=True)
class ProbeSplit:
    """Chip-seconds per input and output token of one server and load (NaN without a split)."""

    input: float
    output: float
    method: str
    note: str


def probe_split(chips, input_tokens_per_s, output_tokens_per_s) -> ProbeSplit:
    """The input/output split of points measured at one server and load (module docstring): fitted
    when their mixes differ enough and the fit is defensible, else NaN with the reason."""
    y, r_in, r_out = (np.asarray(v, dtype=float) for v in (chips, input_tokens_per_s, output_tokens_per_s))
    # A point without both token rates (a result that predates them) cannot be a probe.
    usable = np.isfinite(y) & np.isfinite(r_in) & np.isfinite(r_out) & (r_in >= 0) & (r_out >= 0) & (r_in + r_out > 0)
    y, r_in, r_out = y[usable], r_in[usable], r_out[usable]
    n = y.size
    if n < 2:
        return ProbeSplit(math.nan, math.nan, SPLIT_BLENDED_ONLY,
                          "one point at this server and load: no input-heavy and output-heavy probe points")
    share = r_out / (r_in + r_out)
    spread = float(share.max() - share.min())
    if spread < MIN_PROBE_MIX_SPREAD:
        return ProbeSplit(math.nan, math.nan, SPLIT_BLENDED_ONLY,
                          f"the {n} points at this server and load have output shares {share.min():.2f}-"
                          f"{share.max():.2f}; a probe needs mixes at least {MIN_PROBE_MIX_SPREAD:g} apart")
    a, b = fit_chip_seconds_per_token(y, r_in, r_out)
    if a <= 0 or b <= 0:
        return ProbeSplit(math.nan, math.nan, SPLIT_BLENDED_ONLY,
                          f"the fit over {n} points puts no chip time on {'input' if a <= 0 else 'output'} tokens")
    rms = float(np.sqrt(np.mean((a * r_in + b * r_out - y) ** 2)) / np.mean(y))
    if rms > MAX_PROBE_FIT_RMS:
        return ProbeSplit(math.nan, math.nan, SPLIT_BLENDED_ONLY,
                          f"the linear fit misses its {n} points by {rms:.0%} rms (over {MAX_PROBE_FIT_RMS:.0%})")
    return ProbeSplit(a, b, probe_method(n), f"rms misfit {rms:.1%}; output shares {share.min():.2f}-{share.max():.2f}")


def _has_server_figures(df: pd.DataFrame) -> pd.Series:
    """Rows whose cost comes from a server's window (a `blended_s_per_token` figure)."""
    return numeric_column(df, "blended_s_per_token").notna()


def serve_split(results: pd.DataFrame) -> pd.DataFrame:
    """`SPLIT_COLUMNS` for every row of `results` (one row per result): server rows get their
    group's probe fit (valid points only) or "blended only" with the reason; rows without a
    server's figures nothing."""
    # Filled by position in numpy arrays, one frame built at the end: a .loc write per group and
    # column cost ~1 ms each (the ~900 groups of the shipped published rows took 3 s).
    n = len(results)
    method, note = np.full(n, "", dtype=object), np.full(n, "", dtype=object)
    figures = {col: np.full(n, math.nan) for col in SPLIT_COLUMNS[2:]}
    server = _has_server_figures(results).to_numpy()
    if server.any():
        rows, at = results[server], np.flatnonzero(server)
        valid = usable_mask(rows).to_numpy(dtype=bool)
        method[at[~valid]], note[at[~valid]] = SPLIT_BLENDED_ONLY, "invalid point: left out of any probe fit"
        keys = [c for c in PROBE_GROUP_COLUMNS if c in rows]
        fitted, fitted_at = rows[valid], at[valid]
        numbers = {name: numeric_column(fitted, name).to_numpy(dtype=float, na_value=math.nan) for name in _SPLIT_INPUTS}
        groups = fitted.groupby(keys, dropna=False, sort=False).indices.values() if keys else [np.arange(len(fitted))]
        for positions in groups:
            _split_group({name: values[positions] for name, values in numbers.items()}, fitted_at[positions],
                         method, note, figures)
    return pd.DataFrame({"split_method": pd.Series(method, index=results.index, dtype=object),
                         "split_note": pd.Series(note, index=results.index, dtype=object),
                         **{col: pd.Series(values, index=results.index) for col, values in figures.items()}})


# The figures of a server row that its group's split is computed from.
_SPLIT_INPUTS = ("chips", "input_tokens_per_s", "output_tokens_per_s", "blended_s_per_token",
                 "blended_s_per_token_ci95_low", "blended_s_per_token_ci95_high")


def _split_group(group: dict[str, np.ndarray], where: np.ndarray, method: np.ndarray, note: np.ndarray,
                 figures: dict[str, np.ndarray]) -> None:
    """One server and load's probe split (`group`: its _SPLIT_INPUTS as arrays) written at
    positions `where` of serve_split's columns."""
    split = probe_split(group["chips"], group["input_tokens_per_s"], group["output_tokens_per_s"])
    method[where], note[where] = split.method, split.note
    blended = group["blended_s_per_token"]
    with np.errstate(divide="ignore", invalid="ignore"):
        # NaN-skipping like the Series' min and max (all NaN: NaN).
        low = _nan_extreme(group["blended_s_per_token_ci95_low"] / blended, np.nanmin)
        high = _nan_extreme(group["blended_s_per_token_ci95_high"] / blended, np.nanmax)
    for kind, value in (("input", split.input), ("output", split.output)):
        figures[f"probe_{kind}_chip_s_per_token"][where] = value
        figures[f"probe_{kind}_chip_s_per_token_ci95_low"][where] = value * low
        figures[f"probe_{kind}_chip_s_per_token_ci95_high"][where] = value * high


def _nan_extreme(values: np.ndarray, extreme) -> float:
    return float(extreme(values)) if not np.isnan(values).all() else math.nan


def chip_seconds(rows: pd.DataFrame) -> pd.DataFrame:
    """The three chip-seconds-per-token figures of every server row, with their 95% CIs (columns
    `{input,output,blended}_chip_s_per_token[_ci95_low|_ci95_high]`), and `split_method` /
    `split_note`: blended from `blended_s_per_token` times chips, input/output from `serve_split`'s
    probe fit over all of `rows` (NaN where it found none)."""
    chips = numeric_column(rows, "chips")
    split = serve_split(rows)
    out = pd.DataFrame(index=rows.index)
    for kind in ("input", "output", "blended"):
        name = f"{kind}_chip_s_per_token"
        for bound in ("", "_ci95_low", "_ci95_high"):
            if kind == "blended":
                # The server's whole window over all its tokens.
                out[f"{name}{bound}"] = numeric_column(rows, f"blended_s_per_token{bound}") * chips
            else:
                # The split serve_split derived (NaN where it found none): never the request-time split.
                out[f"{name}{bound}"] = split[f"probe_{name}{bound}"]
    out["split_method"], out["split_note"] = split["split_method"], split["split_note"]
    return out
