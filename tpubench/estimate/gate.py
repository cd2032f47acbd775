"""The physics gate (estimate/physics.py) on published rows: a row whose figures are not finite
positive numbers, or that claims more than its chip can do, is left out with one warning naming
its file and row, before it can be imported, listed, calibrate, enter an answer or a budget.

A row's efficiency is the estimate's own: its calibration (estimate/calibration.observations) is
asked about every row at once, each row its own configuration (so that none is counted out as a
superseded run: an older run still enters an answer or a budget), at a rate of ASKED_RATE tokens/s
per chip, and the efficiency it finds is scaled to the rate the row claims (efficiency is
proportional to the rate: the observed cycle is concurrency x output length / (rate x chips)). So
the gate sees exactly the operating point the fit would: the batch that ran, capped by what the
chips' memory holds. The rate a row claims is its output tokens/s per chip, or the output share of
its total (input + output) tokens/s where that is higher: a budget prices a server on the total.

Which roofline holds a row:

- a single-node, aggregated, non-speculative row (the system the estimate models): the full
  roofline, max(FLOPs / peak, bytes / bandwidth) per phase;
- a row that does not state its load (an MLPerf Offline result): the same, at the most sequences
  its chips' memory holds, where the roofline allows the highest rate of any load;
- a speculative, disaggregated or multi-node row: the compute roofline alone (FLOPs / peak; no
  deployment does a token's arithmetic in less), as the byte roofline does not describe those
  systems: speculation reads the weights once for several tokens, and attention spread over nodes
  reads a fraction of the cache modelled (shipped rows of them read up to 59x the full roofline,
  and at most 0.78 of the compute one);
- a row whose model, precision or chip the estimate does not know: its figures only.

An import keeps its publisher's name for a chip (InferenceX's `h200`); the gate reads its peaks
under the chip's canonical name (hardware.accelerators.normalize_accelerator), as a budget prices it.

Rows alike in every column but what they measured (their rates, latencies, date, file) are asked
about once. Each refused row gets one warning where it is met: where one command meets a row at two
entry points (a report's estimate, then its answer), both warn through `once(warn)`, which passes a
line on only the first time this process gives it, as Python's own warnings do.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from tpubench.estimate.calibration import excluded, observations
from tpubench.estimate.features import roofline
from tpubench.estimate.physics import (
    EFFICIENCY_LIMIT,
    REQUIRED_FIGURES,
    STATED_FIGURES,
    beyond_roofline,
    efficiency_refusal,
    figures_refusal,
    refusal_warning,
    row_name,
)
from tpubench.hardware.accelerators import normalize_accelerator

ASKED_RATE = 1e-3
UNSTATED_LOAD = 1e12     # capped by the calibration to the sequences the chips' memory holds
# What a row measured or where it was read: nothing its operating point, and so its roofline at
# ASKED_RATE, depends on.
_MEASURED = ("file", "file_row", "source", "date", "reference", "output_tokens_per_s_per_chip",
             "total_tokens_per_s_per_chip", "interactivity_tokens_per_s", "ttft_p50_s", "ttft_mean_s", "ttft_p99_s",
             "tpot_p50_s", "tpot_mean_s", "tpot_p99_s", "e2e_p50_s", "publisher_usd_per_mtok", "cost_basis")
_GIVEN: set[str] = set()
# Each operating point's efficiency at ASKED_RATE (NaN: no roofline), kept for the process: a report
# asks the gate about the shipped rows for its calibration, then again for its answer, and a roofline
# per row is the whole cost (about 0.4 s for the shipped rows). An operating point's roofline never changes.
_EFFICIENCY: dict[str, float] = {}
# Each operating point's compute-roofline cycle over its full-roofline cycle (_compute_ratios).
_COMPUTE_RATIO: dict[str, float] = {}
_KEEP = 100_000


def claimed_rates(rows: pd.DataFrame) -> np.ndarray:
    """Per row, the output tokens/s per chip it claims: its output rate, or the output share of its
    total rate (total x O / (I + O)) where that is higher."""
    def column(name: str) -> np.ndarray:
        values = rows[name] if name in rows else pd.Series(np.nan, index=rows.index)
        return pd.to_numeric(values, errors="coerce").to_numpy(float)

    rate, total = column("output_tokens_per_s_per_chip"), column("total_tokens_per_s_per_chip")
    i, o = column("input_length"), column("output_length")
    with np.errstate(invalid="ignore", over="ignore"):
        share = np.where((total > 0) & (i > 0) & (o > 0), total * o / (i + o), np.nan)
    return np.fmax(rate, share)


def _asked(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` as the calibration is asked about them (module notes): valid, of the system the estimate
    models, at ASKED_RATE, with a load where they state none, none dated (none superseded)."""
    load = pd.to_numeric(rows["concurrency"], errors="coerce") if "concurrency" in rows else np.nan
    asked = rows.assign(date="", valid=True, spec_decoding="none", disaggregated=False, multinode=False,
                        output_tokens_per_s_per_chip=ASKED_RATE,
                        concurrency=pd.Series(load, index=rows.index, dtype=float).fillna(UNSTATED_LOAD))
    if "accelerator" in rows:   # an import keeps its publisher's name for a chip ("h200"); the peaks are the chip's
        names = {n: normalize_accelerator(n) or n for n in rows["accelerator"].dropna().unique() if isinstance(n, str)}
        asked["accelerator"] = rows["accelerator"].map(lambda n: names.get(n, n))
    return asked


def _per_configuration(asked: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """(the first row of each distinct operating point of `asked`, tagged by its number as its own
    configuration in `source`; each row's number; each operating point's key)."""
    keep = [c for c in asked.columns if c not in _MEASURED and not str(c).startswith("_")]   # `_shape`: the answer's
    codes, uniques = pd.factorize(pd.Series([repr(key) for key in asked[keep].itertuples(index=False)]))
    first = pd.Series(range(len(codes))).groupby(codes).first().to_numpy()
    return asked.iloc[first].assign(source=[str(i) for i in range(len(uniques))]), codes, list(uniques)


def _asked_efficiencies(distinct: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """Each distinct operating point's efficiency at ASKED_RATE (NaN without a roofline)."""
    def efficiency(obs) -> dict[int, float]:
        return dict(zip(obs.rows["source"].astype(int), obs.rows["efficiency"].astype(float))) if len(obs.rows) else {}

    return np.array(_kept(_EFFICIENCY, distinct, keys, range(len(keys)), efficiency), dtype=float)


def _kept(cache: dict[str, float], distinct: pd.DataFrame, keys: list[str], wanted, of_observations) -> list[float]:
    """A figure of each operating point of `wanted` (positions in `distinct`), from `cache` (kept for
    the process, module notes), the points not asked about before observed by the calibration at
    once: `of_observations(obs)` gives each observed position's figure, NaN for one not observed."""
    wanted = list(wanted)
    new = [j for j in wanted if keys[j] not in cache]
    if new:
        found = of_observations(observations(distinct.iloc[new].assign(source=[str(j) for j in new])))
        if len(cache) + len(new) > _KEEP:
            cache.clear()
        cache.update({keys[j]: found.get(j, math.nan) for j in new})
    return [cache[keys[j]] for j in wanted]


def _modelled(row: dict) -> bool:
    """Whether the estimate's full roofline describes the row's system (module notes): the
    calibration would take it but for its load, validity or rate."""
    return excluded({**row, "valid": True, "concurrency": 1.0, "output_tokens_per_s_per_chip": 1.0}) is None


def efficiencies(rows: pd.DataFrame) -> np.ndarray:
    """Per row, the efficiency the gate judges it by (module notes); NaN where the estimate has no
    roofline for it."""
    out = np.full(len(rows), np.nan)
    if rows.empty:
        return out
    distinct, of_row, keys = _per_configuration(_asked(rows))
    with np.errstate(over="ignore", invalid="ignore"):
        out = _asked_efficiencies(distinct, keys)[of_row] * (claimed_rates(rows) / ASKED_RATE)
    unmodelled = [i for i in np.flatnonzero(out > EFFICIENCY_LIMIT) if not _modelled(rows.iloc[i].to_dict())]
    if unmodelled:
        ratios = _compute_ratios(distinct, keys, sorted({int(of_row[i]) for i in unmodelled}))
        for i in unmodelled:
            out[i] *= ratios[keys[of_row[i]]]
    return out


def _compute_ratios(distinct: pd.DataFrame, keys: list[str], wanted: list[int]) -> dict[str, float]:
    """Per operating point of `wanted` (positions in `distinct`), its cycle by the compute roofline
    alone (FLOPs / peak) over its cycle by the full roofline: a row's efficiency by the compute
    roofline is its full efficiency times this."""
    def ratio(obs) -> dict[int, float]:
        sources = obs.rows["source"].astype(int) if len(obs.rows) else []
        return {j: roofline(point, spec.peak_flops, math.inf).cycle_s / roof.cycle_s
                for j, point, spec, roof in zip(sources, obs.points, obs.specs, obs.roofs)}

    return dict(zip((keys[j] for j in wanted), _kept(_COMPUTE_RATIO, distinct, keys, wanted, ratio)))


def _figure_refusals(rows: pd.DataFrame) -> list[str | None]:
    """Per row, physics.figures_refusal of its cells. A row is asked as a dict only where a figure
    column holds other than numbers, or a number that is not finite and positive (blank where a
    figure may be left unstated): 2,700 shipped rows made dicts each took 0.25 s a read."""
    suspect = np.zeros(len(rows), dtype=bool)
    for name in (*REQUIRED_FIGURES, *STATED_FIGURES):
        column = rows[name] if name in rows else None
        if column is None:
            suspect |= name in REQUIRED_FIGURES
        elif isinstance(column.dtype, np.dtype) and column.dtype.kind in "iuf":
            values = column.to_numpy(dtype=float)
            with np.errstate(invalid="ignore"):
                sound = np.isfinite(values) & (values > 0)
            suspect |= ~(sound | np.isnan(values)) if name in STATED_FIGURES else ~sound
        else:       # text, bools, pandas' nullable types: their cells as figures_refusal reads them
            suspect[:] = True
    why: list[str | None] = [None] * len(rows)
    at = np.flatnonzero(suspect)
    for i, record in zip(at, rows.iloc[at].to_dict("records") if len(at) else ()):
        why[i] = figures_refusal(record)
    return why


def refusals(rows: pd.DataFrame, *, roofline_too: bool = True) -> list[str | None]:
    """Per row of `rows` (published-row columns), why the gate refuses it, or None."""
    why = _figure_refusals(rows)
    sound = [i for i, w in enumerate(why) if w is None]
    if roofline_too and sound:
        for i, e in zip(sound, efficiencies(rows.iloc[sound])):
            if not math.isnan(e) and efficiency_refusal(e):
                why[i] = beyond_roofline(rows.iloc[i].to_dict())
    return why


def refused(rows: pd.DataFrame, warn: Callable[[str], None] | None = None, *, names: Sequence[str] | None = None,
            roofline_too: bool = True) -> np.ndarray:
    """A boolean mask of the rows the gate refuses, each warned about (`names[i]` says where row i
    is; physics.row_name by default)."""
    why = refusals(rows, roofline_too=roofline_too)
    mask = np.array([w is not None for w in why], dtype=bool)
    for i in np.flatnonzero(mask) if warn is not None else ():
        warn(refusal_warning(names[i] if names is not None else row_name(rows.iloc[i].to_dict()), why[i]))
    return mask


def once(warn: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """`warn`, passing on a line only the first time this process gives it (module notes)."""
    if warn is None:
        return None

    def first_time(line: str) -> None:
        if line not in _GIVEN:
            _GIVEN.add(line)
            warn(line)
    return first_time


def gate(rows: pd.DataFrame, warn: Callable[[str], None] | None = None, *, names: Sequence[str] | None = None,
         roofline_too: bool = True) -> pd.DataFrame:
    """`rows` without those the gate refuses (refused), index reset."""
    if rows.empty:
        return rows
    mask = refused(rows, warn, names=names, roofline_too=roofline_too)
    return rows[~mask].reset_index(drop=True) if mask.any() else rows


__all__ = ["ASKED_RATE", "claimed_rates", "efficiencies", "gate", "once", "refusals", "refused"]
