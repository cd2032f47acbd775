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

The fitted efficiency gives the cycle (roofline cycle / efficiency), so the throughput and a
request's E2E; the latency fit (estimate.features, module notes: latency) splits the E2E into TTFT
and O - 1 decode steps, with the wait for a batch slot added to TTFT where more clients send than
the memory holds. The chip-seconds per token are the measured cost's own
(measure/per_token.batch_chip_seconds_per_token) over that TTFT and E2E. Each figure's interval is
exp(+-q) around it, with q the conformal quantile of its own leave-one-sweep-out misses
(estimate.fit): throughput's from the efficiency residuals, TTFT's and TPOT's from the whole
chain's (the held-out row's efficiency and latency both predicted by fits without its sweep), of
the chip family's own rows when it has enough for the nominal coverage (9 for 90%), else of every
row, never narrower than the family's own worst miss (`interval_basis` says which). Sweeps, not single rows,
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
from tpubench.estimate.features import (
    LATENCY_TERMS,
    MAX_TTFT_SHARE,
    STATIC,
    TERMS,
    Point,
    Roofline,
    latency_terms,
    prefill_one_s,
    roofline,
    sequences_that_fit,
    terms,
)
from tpubench.estimate.fit import DEFAULT_RIDGE, Fit, conformal_halfwidth, fit_efficiency
from tpubench.estimate.pairs import PairMisses
from tpubench.estimate.records import LABEL
from tpubench.measure.per_token import batch_chip_seconds_per_token

MIN_ROWS = 3
COVERAGE = 0.9
# Your rows' pull (module notes): a prior worth this many rows holds the family at the published fit.
OWN_ROW_PRIOR = 1.0
MEASURED = "measured"


THROUGHPUT, TTFT, TPOT = "output_tokens_per_s_per_chip", "ttft_s", "tpot_s"


@dataclass
class Calibration:
    obs: Observations               # the published rows the fits are made on
    fit: Fit                        # log efficiency (throughput)
    loo: np.ndarray                 # its leave-one-sweep-out residuals
    own: Observations | None = None  # your measured rows: they pull their family (own_offset)
    latency: Fit | None = None      # log(TTFT / mean step) (features, module notes: latency)
    # TTFT's and TPOT's leave-one-sweep-out misses, log(estimated / published); NaN where the row
    # gives no such figure.
    latency_loo: dict = field(default_factory=dict)
    # Outside the calibration rows' range of terms, the interval's half-width grows by `widening`
    # per unit of `Box.distance` (calibrated on extreme rows held out: _widening).
    widening: float = 0.0
    # The ratio of two families' estimates: its held-out pairs' misses (estimate.pairs).
    pairs: PairMisses = field(default_factory=PairMisses)
    # What the methods below derive, kept: a Calibration is not changed after it is made.
    _memo: dict = field(default_factory=dict, repr=False, compare=False)

    def _kept(self, key: tuple, make):
        """make(), once per key for this calibration (a sweep of estimates asks again and again)."""
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    def tail(self, metric: str, arrival: str) -> tuple[float, int]:
        """(p99 / median, rows) of TTFT or TPOT for requests arriving as `arrival`: the median ratio
        over the published rows that give both (of that arrival where 9 or more do, else of all);
        (1, 0) where none does. A percentile other than the median is the estimate's median times
        a lognormal's share of this ratio (output.report.service_level.at_percentile)."""
        return self._kept(("tail", metric, arrival), lambda: self._tail(metric, arrival))

    def _tail(self, metric: str, arrival: str) -> tuple[float, int]:
        rows = self.obs.rows
        if not len(rows):
            return 1.0, 0
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = (rows[f"{metric[:4]}_p99_s"] / rows[f"{metric[:4]}_s"]).to_numpy(dtype=float)
        known = np.isfinite(ratio) & (ratio >= 1)
        mine = known & (rows["arrival"] == arrival).to_numpy()
        use = mine if mine.sum() >= 9 else known
        return (float(np.median(ratio[use])), int(use.sum())) if use.any() else (1.0, 0)

    def box(self) -> "Box":
        return self._kept(("box",), lambda: Box.of(self.obs.X))

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

    def halfwidth(self, family: str | None, metric: str = THROUGHPUT) -> tuple[float, bool, str]:
        """(q, nominal, basis) for a family's interval of one figure (module notes)."""
        return self._kept(("halfwidth", family, metric), lambda: self._halfwidth(family, metric))

    def _halfwidth(self, family: str | None, metric: str) -> tuple[float, bool, str]:
        residuals = self.loo if metric == THROUGHPUT else self.latency_loo.get(metric, np.zeros(0))
        known = np.isfinite(residuals)
        everyone = residuals[known]
        mine = np.array([r for r, f, k in zip(residuals, self.obs.families, known) if k and f == family])
        if not len(everyone):   # no latency fit: TTFT and TPOT come from the efficiency alone, and err as it does
            q, nominal, basis = self.halfwidth(family)
            return q, nominal, f"{basis}; no published row gives a {_WORDS[metric]}"
        q, nominal = conformal_halfwidth(mine, COVERAGE) if len(mine) else (math.inf, False)
        if nominal:
            return q, True, f"{family} rows' leave-one-sweep-out residuals (n={len(mine)})"
        q_all, nominal_all = conformal_halfwidth(everyone, COVERAGE)
        # Never narrower than the family's own worst miss: pooling must not hide a family's spread.
        q = max(q_all, max(np.abs(mine)) if len(mine) else 0.0)
        return q, nominal_all, f"all rows' leave-one-sweep-out residuals (n={len(everyone)}; {family}: {len(mine)})"


_WORDS = {THROUGHPUT: "throughput", TTFT: "TTFT", TPOT: "TPOT"}


def calibrate(rows: pd.DataFrame, *, ridge: float = DEFAULT_RIDGE) -> Calibration:
    """The fits and their leave-one-sweep-out residuals over calibration rows (estimate.calibration)."""
    return calibrated(observations(rows), ridge=ridge)


def calibrated(obs: Observations, *, ridge: float = DEFAULT_RIDGE) -> Calibration:
    """The fits and their leave-one-sweep-out residuals over the published observations, your measured
    ones kept apart to pull their families (module notes): what the command builds from every row,
    and what the leave-one-out check builds from all rows but the held-out ones."""
    mine = (obs.rows["source"] == MEASURED).to_numpy() if len(obs.rows) else np.zeros(0, dtype=bool)
    published, own = obs.subset(~mine), obs.subset(mine)
    if len(published.y) < 2:
        raise UserError(f"the estimate needs at least 2 usable published calibration rows; {len(published.y)} of "
                        f"{len(obs.y) + sum(obs.left_out.values())} rows are")
    fit = fit_efficiency(published.X, published.y, published.families, terms=TERMS, ridge=ridge)
    lat = _LatencyRows.of(published)
    groups = np.asarray(sweeps(published.rows))
    if len(set(groups.tolist())) < 2:     # one sweep: leave rows out one by one
        groups = np.arange(len(published.y))
    loo, latency_loo = _held_out_misses(published, lat, groups, ridge)
    published.left_out = obs.left_out
    return Calibration(obs=published, fit=fit, own=own, loo=loo, latency=lat.fit(np.ones(len(groups), bool), ridge),
                       latency_loo=latency_loo, widening=_widening(published, loo, ridge),
                       pairs=PairMisses.of(published.rows, loo) if len(published.rows) else PairMisses())


@dataclass(frozen=True)
class Box:
    """The range of the fit's terms over calibration rows (intercept aside), and each term's spread."""

    low: np.ndarray
    high: np.ndarray
    scale: np.ndarray

    @staticmethod
    def of(X: np.ndarray) -> "Box":
        terms = X[:, 1:]
        return Box(terms.min(0), terms.max(0), terms.std(0))

    def distance(self, x: np.ndarray) -> float:
        """How far a point's terms lie outside the range, in each term's spread (Euclidean; 0 inside).
        A term the rows do not spread over (all at one value) cannot be scaled: it is left out."""
        v = np.asarray(x, dtype=float)[1:]
        outside = np.maximum(0.0, np.maximum(self.low - v, v - self.high))
        spread = self.scale > _SPREAD
        return float(np.sqrt(np.sum((outside[spread] / self.scale[spread]) ** 2)))

    def outside(self, x: np.ndarray) -> list[str]:
        v = np.asarray(x, dtype=float)[1:]
        return [name for name, value, lo, hi in zip(TERMS[1:], v, self.low, self.high)
                if not lo - 1e-9 <= value <= hi + 1e-9]


_SPREAD = 1e-9
_EXTREME = 0.25    # the share of rows at each end of each term held out to calibrate the widening


def _widening(obs: Observations, loo: np.ndarray, ridge: float) -> float:
    """The half-width's growth per unit of Box.distance: for each term and end, the quarter of rows
    beyond its quantile are held out and predicted by a fit on the rest, which they lie outside; the
    growth is the conformal quantile (90%) of (|miss| - the pooled half-width) / distance over them,
    so an extrapolated point's interval covers as often as an interior one's. A quarter, not fewer:
    with a tenth held out no row lies more than two spreads outside the rest, and misses there stay
    inside the pooled half-width; with a quarter they reach four spreads, where they do not (shipped
    rows, 2026-12: a tenth gives a growth of 0, a fifth 0.23, a quarter 0.24, three tenths 0.25). 0
    when no held-out row lies outside the rest."""
    q, _ = conformal_halfwidth(loo, COVERAGE)
    ratios = []
    for j in range(1, obs.X.shape[1]):
        column = obs.X[:, j]
        if np.ptp(column) <= _SPREAD:
            continue
        for held in (column < np.quantile(column, _EXTREME), column > np.quantile(column, 1 - _EXTREME)):
            rest = ~held
            if held.sum() < 3 or rest.sum() < 10:
                continue
            fit = fit_efficiency(obs.X[rest], obs.y[rest], [f for f, k in zip(obs.families, rest) if k], ridge=ridge)
            box = Box.of(obs.X[rest])
            for i in np.flatnonzero(held):
                d = box.distance(obs.X[i])
                if d > 0:
                    ratios.append((abs(obs.y[i] - fit.predict(obs.X[i], obs.families[i])) - q) / d)
    if not ratios:
        return 0.0
    k, _ = conformal_halfwidth(np.maximum(ratios, 0.0), COVERAGE)
    return k


@dataclass
class _LatencyRows:
    """What the latency fit reads of each observation: its roofline and one prompt's prefill, how
    its requests arrived, its published TTFT and TPOT (NaN where not given), and its terms and
    log(TTFT / mean step) at its observed step. A row whose clients outnumber what ran (waiting for
    a batch slot) does not fit the latency model: its slot wait is a guess of the memory model, not
    a measurement."""

    obs: Observations
    roofs: list[Roofline]
    prefill_one: np.ndarray
    clients: np.ndarray
    arrivals: list[str]
    ttft: np.ndarray
    tpot: np.ndarray
    X: np.ndarray          # latency terms at the observed step, rows that fit the model (else 0)
    y: np.ndarray          # log(TTFT / observed step), NaN where the row does not fit the model

    @staticmethod
    def of(obs: Observations) -> "_LatencyRows":
        rows, n = obs.rows, len(obs.y)
        roofs = obs.roofs
        column = (lambda name: rows[name].to_numpy(dtype=float)) if n else (lambda name: np.zeros(0))
        prefill_one, clients, ttft = column("prefill_one_s"), column("clients"), column("ttft_s")
        arrivals = list(rows["arrival"]) if n else []
        X, y = np.zeros((n, len(LATENCY_TERMS))), np.full(n, np.nan)
        running = np.array([p.concurrency for p in obs.points])
        for i in np.flatnonzero(np.isfinite(ttft) & (clients <= running + 0.5)):
            step = float(rows["observed_cycle_s"].iat[i]) / obs.points[i].output_len
            X[i] = latency_terms(obs.points[i], roofs[i], prefill_one[i], step, arrivals[i])
            y[i] = math.log(ttft[i] / step)
        return _LatencyRows(obs=obs, roofs=roofs, prefill_one=prefill_one, clients=clients, arrivals=arrivals,
                            ttft=ttft, tpot=column("tpot_s"), X=X, y=y)

    def fit(self, keep: np.ndarray, ridge: float) -> Fit | None:
        """The latency fit on the kept rows that fit its model; None with fewer than 2 of them."""
        use = keep & np.isfinite(self.y)
        if use.sum() < 2:
            return None
        return fit_efficiency(self.X[use], self.y[use], [f for f, u in zip(self.obs.families, use) if u],
                              terms=LATENCY_TERMS, ridge=ridge)


def _held_out_misses(obs: Observations, lat: _LatencyRows, groups: np.ndarray, ridge: float):
    """Each row's misses with its group held out of both fits: log-efficiency residual, and
    log(estimated / published) TTFT and TPOT (the row's efficiency and latency both predicted)."""
    n = len(obs.y)
    loo, ttft, tpot = np.empty(n), np.full(n, np.nan), np.full(n, np.nan)
    for g in dict.fromkeys(groups.tolist()):
        keep = groups != g
        fit = fit_efficiency(obs.X[keep], obs.y[keep], [f for f, k in zip(obs.families, keep) if k], ridge=ridge)
        latency = lat.fit(keep, ridge)
        for i in np.flatnonzero(~keep):
            predicted = fit.predict(obs.X[i], obs.families[i])
            loo[i] = obs.y[i] - predicted
            if latency is None:
                continue
            clients = lat.clients[i]
            t1, t2 = latencies(latency, obs.families[i], obs.points[i], lat.roofs[i], lat.prefill_one[i],
                               min(math.exp(predicted), 1.0), lat.arrivals[i], clients)
            ttft[i] = math.log(t1 / lat.ttft[i]) if math.isfinite(lat.ttft[i]) else math.nan
            tpot[i] = math.log(t2 / lat.tpot[i]) if math.isfinite(lat.tpot[i]) and t2 > 0 else math.nan
    return loo, {TTFT: ttft, TPOT: tpot}


def latencies(latency: Fit | None, family: str | None, point: Point, roof: Roofline, prefill_one: float,
              efficiency: float, arrival: str, clients: float) -> tuple[float, float]:
    """(TTFT, TPOT) in seconds of `point` (its concurrency the batch that runs) at `efficiency`, for
    `clients` sending (features, module notes: latency). Without a latency fit: the static batch's
    roofline split (prefill / efficiency, decode step / efficiency)."""
    cycle = roof.cycle_s / efficiency
    steps = max(point.output_len - 1, 0.0)
    if latency is None:
        first = roof.prefill_s / efficiency
    else:
        step = cycle / point.output_len
        x = latency_terms(point, roof, prefill_one, step, arrival)
        # Never before the prompts ahead could be prefilled at the chips' peak (a fit read far outside
        # its rows, a static batch of thousands, would say so), nor past the cycle's share for it.
        floor = roof.prefill_s if arrival == STATIC else prefill_one
        first = max(min(step * math.exp(latency.predict(x, family)), MAX_TTFT_SHARE * cycle), floor)
    # More clients than the batch holds: each waits for a slot (Little's law on the running batch).
    wait = (clients - point.concurrency) * cycle / point.concurrency if clients > point.concurrency else 0.0
    return wait + first, ((cycle - first) / steps if steps else math.nan)


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
    arrival: str = STATIC                    # how its requests arrive (features.ARRIVALS)
    stack_date: str = ""                     # the serving stack it assumes: of that date (features.TERMS)
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
    # p99 / median of TTFT and TPOT for this arrival (Calibration.tail): another percentile than
    # the median is asked of these.
    ttft_tail: float = 1.0
    tpot_tail: float = 1.0


def estimate(cal: Calibration, target: Target, spec: Chip, point: Point, *, arrival: str = STATIC) -> Estimate:
    """One operating point on one target (module notes), its requests arriving as `arrival`
    (features.ARRIVALS: a static batch, or a server's clients); refused below MIN_ROWS family rows."""
    family = chip_family(target.accelerator)
    rows = cal.family_rows(family)
    refs = tuple(f"{r.publisher}: {r.model} on {r.chips} x {r.accelerator}, concurrency {r.concurrency:g} "
                 f"({r.date}; {r.reference})" for r in rows.itertuples())
    common = dict(target=target.spec, accelerator=target.accelerator, family=family, chips=point.chips,
                  concurrency=point.concurrency, input_length=point.input_len, output_length=point.output_len,
                  calibration_rows=len(rows), precision=point.precision, arrival=arrival,
                  stack_date=_stack_words(cal, point),
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
    clients = point.concurrency
    if point.concurrency > fits:
        if arrival == STATIC or fits < 1:     # a static batch of more does not fit at all
            return Estimate(**common, refused=(f"{point.concurrency:g} sequences of {point.input_len + point.output_len:g} "
                                               f"tokens do not fit beside the weights in {point.chips} x "
                                               f"{memory / 1e9:,.0f} GB (at most {math.floor(fits)})"))
    notes = []
    if point.concurrency > fits:        # a server runs what fits; the rest of its clients queue
        notes.append(f"only {math.floor(fits)} of {point.concurrency:g} sequences fit at once: the rest wait for "
                     "a slot (counted in TTFT)")
        point = replace(point, concurrency=float(math.floor(fits)))
    roof = roofline(point, spec.peak_flops, spec.peak_bytes_per_s)
    x = terms(point, roof)
    beyond = cal.box().distance(x) * cal.widening
    if beyond > 0:
        notes.append(f"extrapolated: {', '.join(cal.box().outside(x))} outside the calibration rows' range; "
                     f"interval widened x{math.exp(beyond):.2f}")
    offset, own = cal.own_offset(family)
    if own:
        notes.append(f"calibrated on {own} of your rows")
    eff = math.exp(cal.fit.predict(x, family) + offset)
    if eff > 1:
        notes.append(f"fitted efficiency {eff:.2f} > 1 capped at 1 (extrapolated)")
        eff = 1.0
    q, nominal, basis = cal.halfwidth(family)
    up = _factor(q + beyond)
    ttft, tpot = latencies(cal.latency, family, point, roof, prefill_one_s(point, spec.peak_flops, spec.peak_bytes_per_s),
                           eff, arrival, clients)
    # Chip-seconds per token split by phase as a measured batch's are: a static batch's by its own
    # TTFT and E2E; a server's by its batch's prefill work and the rest of the cycle (its TTFT is
    # one request's wait, not the batch's prefill). The cycle, so the blended cost, is the throughput's.
    e2e = roof.cycle_s / eff
    prefill = ttft if arrival == STATIC else roof.prefill_s / eff
    c, n = point.concurrency, point.chips
    charged = batch_chip_seconds_per_token(prefill, e2e, n, c, point.input_len, point.output_len)
    tput = c * point.output_len / e2e / n

    def slower(v: float, factor: float = up) -> tuple[float, float, float]:   # times and costs: 1 / efficiency
        return (v, v / factor, v * factor)

    return Estimate(**common, own_rows=own, efficiency=eff, decode_bound=roof.decode_bound,
                    output_tokens_per_s_per_chip=(tput, tput / up, tput * up),
                    ttft_s=slower(ttft, _factor(cal.halfwidth(family, TTFT)[0] + beyond)),
                    tpot_s=slower(tpot, _factor(cal.halfwidth(family, TPOT)[0] + beyond)),
                    input_chip_s_per_token=slower(float(charged.input)),
                    output_chip_s_per_token=slower(float(charged.output)),
                    blended_chip_s_per_token=slower(float(charged.blended)),
                    interval_nominal=nominal, interval_basis=basis, notes=tuple(notes),
                    ttft_tail=cal.tail(TTFT, arrival)[0], tpot_tail=cal.tail(TPOT, arrival)[0])


def _stack_words(cal: Calibration, point: Point) -> str:
    """The date of the serving stack an estimate assumes: the calibration's newest rows', less the
    point's stack age where one was asked for (estimate --stack-date)."""
    if not cal.obs.stack_date:
        return ""
    day = pd.Timestamp(cal.obs.stack_date) - pd.Timedelta(days=round(point.stack_age_years * 365.25))
    return day.date().isoformat()


def _factor(q: float) -> float:
    """exp(q); a calibration too thin to bound its own misses gives an unbounded interval, not an overflow."""
    return math.exp(q) if q < 700 else math.inf


__all__ = ["COVERAGE", "Box", "Calibration", "Estimate", "LABEL", "MIN_ROWS", "OWN_ROW_PRIOR", "THROUGHPUT", "TPOT", "TTFT",
           "calibrate", "calibrated", "estimate", "latencies"]
