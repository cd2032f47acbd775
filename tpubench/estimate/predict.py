"""Estimates with prediction intervals for chips one has not measured.

`calibrate` fits the efficiency model (estimate.fit) on calibration rows and keeps each row's
leave-one-sweep-out residual (the row predicted by a fit without any row of its sweep: its
publisher's rows of that model on that chip, estimate.calibration.sweeps); `estimate` turns the roofline
 of one operating point on one target into
throughput, TTFT, TPOT and chip-seconds per token, each with its 90% interval, and names the rows
that calibrated it. A chip whose family has fewer than MIN_ROWS calibration rows is refused, with
why, instead of guessed.

The one fitted efficiency applies to both phases: TTFT = roofline prefill / efficiency (a static
batch's whole prefill; a server's one prompt, without queueing) and TPOT = roofline decode step /
efficiency. The interval is exp(+-q) around the estimate in efficiency, with q the conformal
quantile of those |residuals| (estimate.fit): of the chip family's own rows when it has enough for
the nominal coverage (9 for 90%), else of every row, never narrower than the family's own worst
miss (`interval_basis` says which). Sweeps, not single rows, are held out because a user's
workload is a model the calibration has not seen: a row's neighbours in its own sweep would make
the residuals, and so the interval, look better than that question deserves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tpubench.errors import UserError
from tpubench.estimate.calibration import Observations, observations, sweeps
from tpubench.estimate.chips import Chip, Target, chip_family
from tpubench.estimate.features import TERMS, Point, roofline, terms
from tpubench.estimate.fit import DEFAULT_RIDGE, Fit, conformal_halfwidth, fit_efficiency, loo_residuals

MIN_ROWS = 3
COVERAGE = 0.9
LABEL = "estimate"


@dataclass
class Calibration:
    obs: Observations
    fit: Fit
    loo: np.ndarray

    def family_rows(self, family: str | None) -> pd.DataFrame:
        if self.obs.rows.empty:
            return self.obs.rows
        return self.obs.rows[self.obs.rows["family"] == family]

    def halfwidth(self, family: str | None) -> tuple[float, bool, str]:
        """(q, nominal, basis) for a family's interval (module notes)."""
        mine = np.array([r for r, f in zip(self.loo, self.obs.families) if f == family])
        q, nominal = conformal_halfwidth(mine, COVERAGE) if len(mine) else (math.inf, False)
        if nominal:
            return q, True, f"{family} rows' leave-one-sweep-out residuals (n={len(mine)})"
        q_all, nominal_all = conformal_halfwidth(self.loo, COVERAGE)
        # Never narrower than the family's own worst miss: pooling must not hide a family's spread.
        q = max(q_all, max(np.abs(mine)) if len(mine) else 0.0)
        return q, nominal_all, f"all rows' leave-one-sweep-out residuals (n={len(self.loo)}; {family}: {len(mine)})"


def calibrate(rows: pd.DataFrame, *, ridge: float = DEFAULT_RIDGE) -> Calibration:
    """The fit and its leave-one-sweep-out residuals over calibration rows (estimate.calibration)."""
    return calibrated(observations(rows), ridge=ridge)


def calibrated(obs: Observations, *, ridge: float = DEFAULT_RIDGE) -> Calibration:
    """The fit and its leave-one-sweep-out residuals over these observations alone: what the
    command builds from every row, and what the leave-one-out check builds from all rows but the
    held-out ones."""
    if len(obs.y) < 2:
        raise UserError(f"the estimate needs at least 2 usable calibration rows; {len(obs.y)} of "
                        f"{len(obs.y) + sum(obs.left_out.values())} are usable")
    fit = fit_efficiency(obs.X, obs.y, obs.families, terms=TERMS, ridge=ridge)
    groups = sweeps(obs.rows)
    groups = groups if len(set(groups)) >= 2 else None   # one sweep: leave rows out one by one
    return Calibration(obs=obs, fit=fit, loo=loo_residuals(obs.X, obs.y, obs.families, ridge=ridge, groups=groups))


@dataclass(frozen=True)
class Estimate:
    target: str
    accelerator: str
    family: str | None
    chips: int
    concurrency: float
    input_length: float
    output_length: float
    calibration_rows: int
    calibration_chip_rows: int
    calibrated_by: tuple[str, ...]           # "publisher: model on chip (date) reference"
    refused: str | None = None
    label: str = LABEL
    efficiency: float = math.nan
    decode_bound: str = ""
    output_tokens_per_s_per_chip: tuple[float, float, float] = (math.nan,) * 3   # estimate, low, high
    ttft_s: tuple[float, float, float] = (math.nan,) * 3
    tpot_s: tuple[float, float, float] = (math.nan,) * 3
    input_chip_s_per_token: tuple[float, float, float] = (math.nan,) * 3
    output_chip_s_per_token: tuple[float, float, float] = (math.nan,) * 3
    blended_chip_s_per_token: tuple[float, float, float] = (math.nan,) * 3
    interval_nominal: bool = False
    interval_basis: str = ""
    notes: tuple[str, ...] = field(default=())


def estimate(cal: Calibration, target: Target, spec: Chip, point: Point, *, serving: bool = False) -> Estimate:
    """One operating point on one target (module notes); refused below MIN_ROWS family rows."""
    family = chip_family(target.accelerator)
    rows = cal.family_rows(family)
    refs = tuple(f"{r.publisher}: {r.model} on {r.chips} x {r.accelerator}, concurrency {r.concurrency:g} "
                 f"({r.date}; {r.reference})" for r in rows.itertuples())
    common = dict(target=target.spec, accelerator=target.accelerator, family=family, chips=point.chips,
                  concurrency=point.concurrency, input_length=point.input_len, output_length=point.output_len,
                  calibration_rows=len(rows),
                  calibration_chip_rows=int((rows["accelerator"] == target.accelerator).sum()) if len(rows) else 0,
                  calibrated_by=refs)
    if len(rows) < MIN_ROWS:
        return Estimate(**common, refused=(f"{family or target.accelerator} has {len(rows)} calibration row(s); "
                                           f"an estimate needs at least {MIN_ROWS}"))
    notes = []
    memory = spec.memory_bytes
    weights = point.shape.total_params * point.weight_bytes
    if memory and weights > memory * point.chips:
        return Estimate(**common, refused=(f"the weights ({weights / 1e9:,.0f} GB) do not fit in "
                                           f"{point.chips} x {memory / 1e9:,.0f} GB"))
    roof = roofline(point, spec.peak_flops, spec.peak_bytes_per_s)
    x = terms(point, roof)
    outside = [name for name, v, lo, hi in zip(TERMS[1:], x[1:], cal.obs.X[:, 1:].min(0), cal.obs.X[:, 1:].max(0))
               if not lo - 1e-9 <= v <= hi + 1e-9]
    if outside:
        # The interval comes from rows inside the calibration's range; it does not know this one.
        notes.append(f"extrapolated: {', '.join(outside)} outside the calibration rows' range")
    log_eff = cal.fit.predict(x, family)
    eff = math.exp(log_eff)
    if eff > 1:
        notes.append(f"fitted efficiency {eff:.2f} > 1 capped at 1 (extrapolated)")
        eff = 1.0
    q, nominal, basis = cal.halfwidth(family)
    # A calibration too thin to bound its own misses gives an unbounded interval, not an overflow.
    up = math.exp(q) if q < 700 else math.inf
    down = 1 / up
    cycle = roof.cycle_s / eff
    tokens_out = point.concurrency * point.output_len
    tput = tokens_out / cycle / point.chips
    prefill = roof.prefill_s / eff
    ttft = prefill / point.concurrency if serving else prefill
    tpot = roof.decode_step_s / eff
    n = point.chips
    in_chip_s = prefill * n / (point.concurrency * point.input_len)
    out_chip_s = point.output_len * tpot * n / tokens_out
    blended = cycle * n / (point.concurrency * (point.input_len + point.output_len))

    def slower(v: float) -> tuple[float, float, float]:   # times and costs: 1 / efficiency
        return (v, v * down, v * up)

    return Estimate(**common, efficiency=eff, decode_bound=roof.decode_bound,
                    output_tokens_per_s_per_chip=(tput, tput * down, tput * up),
                    ttft_s=slower(ttft), tpot_s=slower(tpot), input_chip_s_per_token=slower(in_chip_s),
                    output_chip_s_per_token=slower(out_chip_s), blended_chip_s_per_token=slower(blended),
                    interval_nominal=nominal, interval_basis=basis, notes=tuple(notes))


__all__ = ["COVERAGE", "Calibration", "Estimate", "LABEL", "MIN_ROWS", "calibrate", "calibrated", "estimate"]
