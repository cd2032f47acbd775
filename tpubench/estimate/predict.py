"""Estimates with prediction intervals for chips one has not measured.

`calibrate` fits the efficiency model (estimate.fit) on the published calibration rows and keeps
each row's leave-one-sweep-out residual (the row predicted by a fit without any row of its sweep:
its publisher's rows of that model on that chip, estimate.calibration.sweeps); `estimate` turns the
roofline of one operating point on one target into throughput, TTFT, TPOT and chip-seconds per
token, each with its 90% interval, and names the rows that calibrated it. A chip whose family has
fewer than MIN_ROWS calibration rows is refused, with why, instead of guessed.

Your own measured rows (source `measured`) are not fitted with the published ones: they pull their
family's estimate toward them. Their misses against the published fit (log efficiency) are
averaged and shrunk, offset = sum(miss) / (n + OWN_ROW_PRIOR), so one row moves the estimate half
way to it and three rows three quarters; the estimate says "calibrated on n of your rows".
benchmarks/estimate_loo.py measures what 0, 1 and 3 such rows do to the error.

The one fitted efficiency applies to both phases: TTFT = roofline prefill / efficiency (a static
batch's whole prefill; a server's one prompt, without queueing) and TPOT = roofline decode step /
efficiency; E2E = prefill + (O - 1) TPOT, and the chip-seconds per token are the measured cost's
own (measure/per_token.batch_chip_seconds_per_token). The interval is exp(+-q) around the estimate
in efficiency, with q the conformal quantile of those |residuals| (estimate.fit): of the chip
family's own rows when it has enough for the nominal coverage (9 for 90%), else of every row, never
narrower than the family's own worst miss (`interval_basis` says which). Sweeps, not single rows,
are held out because a user's workload is a model the calibration has not seen: a row's neighbours
in its own sweep would make the residuals, and so the interval, look better than that question
deserves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from tpubench.errors import UserError
from tpubench.estimate.calibration import Observations, observations, sweeps
from tpubench.estimate.chips import Chip, Target, chip_family
from tpubench.estimate.features import TERMS, Point, roofline, sequences_that_fit, terms
from tpubench.estimate.fit import DEFAULT_RIDGE, Fit, conformal_halfwidth, fit_efficiency, loo_residuals
from tpubench.estimate.records import LABEL
from tpubench.measure.per_token import batch_chip_seconds_per_token

MIN_ROWS = 3
COVERAGE = 0.9
# Your rows' pull (module notes): a prior worth this many rows holds the family at the published fit.
OWN_ROW_PRIOR = 1.0
MEASURED = "measured"


@dataclass
class Calibration:
    obs: Observations               # the published rows the fit is made on
    fit: Fit
    loo: np.ndarray                 # their leave-one-sweep-out residuals
    own: Observations | None = None  # your measured rows: they pull their family (own_offset)

    def family_rows(self, family: str | None) -> pd.DataFrame:
        """Every calibration row of the family, published and yours."""
        frames = [o.rows for o in (self.obs, self.own) if o is not None and not o.rows.empty]
        rows = pd.concat(frames, ignore_index=True) if frames else self.obs.rows
        return rows[rows["family"] == family] if len(rows) else rows

    def own_offset(self, family: str | None) -> tuple[float, int]:
        """(log-efficiency offset, your rows) of a family (module notes); (0, 0) without your rows."""
        if self.own is None or not len(self.own.y):
            return 0.0, 0
        misses = [y - self.fit.predict(x, f) for x, y, f in zip(self.own.X, self.own.y, self.own.families)
                  if f == family]
        return (sum(misses) / (len(misses) + OWN_ROW_PRIOR), len(misses)) if misses else (0.0, 0)

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
    """The fit and its leave-one-sweep-out residuals over the published observations, your measured
    ones kept apart to pull their families (module notes): what the command builds from every row,
    and what the leave-one-out check builds from all rows but the held-out ones."""
    mine = (obs.rows["source"] == MEASURED).to_numpy() if len(obs.rows) else np.zeros(0, dtype=bool)
    published, own = obs.subset(~mine), obs.subset(mine)
    if len(published.y) < 2:
        raise UserError(f"the estimate needs at least 2 usable published calibration rows; {len(published.y)} of "
                        f"{len(obs.y) + sum(obs.left_out.values())} rows are")
    fit = fit_efficiency(published.X, published.y, published.families, terms=TERMS, ridge=ridge)
    groups = sweeps(published.rows)
    groups = groups if len(set(groups)) >= 2 else None   # one sweep: leave rows out one by one
    published.left_out = obs.left_out
    return Calibration(obs=published, fit=fit, own=own,
                       loo=loo_residuals(published.X, published.y, published.families, ridge=ridge, groups=groups))


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
    precision: str = ""                      # 'bf16', 'w fp8 / a fp8 / kv bf16'
    own_rows: int = 0                        # your measured rows that pulled it
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
                  calibration_rows=len(rows), precision=point.precision,
                  calibration_chip_rows=int((rows["accelerator"] == target.accelerator).sum()) if len(rows) else 0,
                  calibrated_by=refs)
    if len(rows) < MIN_ROWS:
        return Estimate(**common, refused=(f"{family or target.accelerator} has {len(rows)} calibration row(s); "
                                           f"an estimate needs at least {MIN_ROWS}"))
    memory = spec.memory_bytes
    weights = point.shape.total_params * point.weight_bytes
    if memory and weights > memory * point.chips:
        return Estimate(**common, refused=(f"the weights ({weights / 1e9:,.0f} GB) do not fit in "
                                           f"{point.chips} x {memory / 1e9:,.0f} GB"))
    fits = sequences_that_fit(point, spec.memory_bytes)
    if point.concurrency > fits:
        if not serving or fits < 1:     # a static batch of more does not fit at all
            return Estimate(**common, refused=(f"{point.concurrency:g} sequences of {point.input_len + point.output_len:g} "
                                               f"tokens do not fit beside the weights in {point.chips} x "
                                               f"{memory / 1e9:,.0f} GB (at most {math.floor(fits)})"))
    notes = []
    if point.concurrency > fits:        # a server runs what fits; the rest of its clients queue
        notes.append(f"only {math.floor(fits)} of {point.concurrency:g} sequences fit at once: estimated at that batch")
        point = replace(point, concurrency=float(math.floor(fits)))
    roof = roofline(point, spec.peak_flops, spec.peak_bytes_per_s)
    notes += _extrapolation(cal, terms(point, roof))
    offset, own = cal.own_offset(family)
    if own:
        notes.append(f"calibrated on {own} of your rows")
    eff = math.exp(cal.fit.predict(terms(point, roof), family) + offset)
    if eff > 1:
        notes.append(f"fitted efficiency {eff:.2f} > 1 capped at 1 (extrapolated)")
        eff = 1.0
    q, nominal, basis = cal.halfwidth(family)
    # A calibration too thin to bound its own misses gives an unbounded interval, not an overflow.
    up = math.exp(q) if q < 700 else math.inf
    prefill = roof.prefill_s / eff
    tpot = roof.decode_step_s / eff
    e2e = prefill + roof.decode_steps * tpot
    c, n = point.concurrency, point.chips
    charged = batch_chip_seconds_per_token(prefill, e2e, n, c, point.input_len, point.output_len)
    tput = c * point.output_len / e2e / n

    def slower(v: float) -> tuple[float, float, float]:   # times and costs: 1 / efficiency
        return (v, v / up, v * up)

    return Estimate(**common, own_rows=own, efficiency=eff, decode_bound=roof.decode_bound,
                    output_tokens_per_s_per_chip=(tput, tput / up, tput * up),
                    ttft_s=slower(prefill / c if serving else prefill), tpot_s=slower(tpot),
                    input_chip_s_per_token=slower(float(charged.input)),
                    output_chip_s_per_token=slower(float(charged.output)),
                    blended_chip_s_per_token=slower(float(charged.blended)),
                    interval_nominal=nominal, interval_basis=basis, notes=tuple(notes))


def _extrapolation(cal: Calibration, x: np.ndarray) -> list[str]:
    """A note when a point's terms lie outside the published rows' range: the interval comes from
    rows inside it and does not know this one."""
    X = cal.obs.X
    outside = [name for name, v, lo, hi in zip(TERMS[1:], x[1:], X[:, 1:].min(0), X[:, 1:].max(0))
               if not lo - 1e-9 <= v <= hi + 1e-9]
    return [f"extrapolated: {', '.join(outside)} outside the calibration rows' range"] if outside else []


__all__ = ["COVERAGE", "Calibration", "Estimate", "LABEL", "MIN_ROWS", "OWN_ROW_PRIOR", "calibrate", "calibrated",
           "estimate"]
