"""`tpubench estimate`: a workload's operating points on chips one has not measured, calibrated on
published rows (the shipped ones and your imports, which the caller gathers) and your own measured
rows, priced per purchase plan."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path

import pandas as pd

from tpubench.errors import UserError
from tpubench.estimate.calibration import measured_rows, stack_age_years
from tpubench.estimate.chips import Chip, Target, chip, chip_family, parse_target
from tpubench.estimate.features import CLOSED_LOOP, STATIC, Point, sequences_that_fit
from tpubench.estimate.kv_offers import fp8_kv_refusal, quantised_cache
from tpubench.estimate.points import WorkloadPoints, point_precision, with_precision, workload_points
from tpubench.estimate.predict import Calibration, Estimate, calibrate, estimate
from tpubench.estimate.pricing import plan_prices, priced
from tpubench.run.workload import MAX_COMPARE_ON


@dataclass
class EstimateReport:
    workload: str
    calibration: Calibration
    estimates: list[Estimate]
    prices: list[list[dict]]          # per estimate, one dict per plan (empty when unpriced)
    workload_file: str = ""


# Calibrations already made in this process, by their rows' contents: a notebook (or a test session)
# that reports or estimates over the same rows again reuses the fit instead of making it again
# (about 0.4 s over the shipped rows). A Calibration is not changed after it is made.
_MADE: dict[bytes, Calibration] = {}
_KEEP = 8


def calibration(published: pd.DataFrame, results: list[Path] | None = None) -> Calibration:
    """The estimate's calibration: `published` rows (rows.COLUMNS) and your measured rows under
    `results`; the one already made from the same rows when there is one."""
    rows = published.assign(source="published")
    if results:
        mine = measured_rows(results)
        if not mine.empty:
            rows = pd.concat([rows, mine], ignore_index=True)
    key = _contents(rows)
    if key is None:
        return calibrate(rows)
    if key not in _MADE:
        if len(_MADE) >= _KEEP:
            del _MADE[next(iter(_MADE))]
        _MADE[key] = calibrate(rows)
    return _MADE[key]


def _contents(rows: pd.DataFrame) -> bytes | None:
    """A digest of the rows' columns, dtypes and values; None where a value cannot be hashed."""
    try:
        values = pd.util.hash_pandas_object(rows, index=False).to_numpy().tobytes()
    except TypeError:
        return None
    head = repr([(str(c), str(t)) for c, t in rows.dtypes.items()]).encode()
    return hashlib.sha256(head + values).digest()


def targets_of(on: list[str], wl: WorkloadPoints, prices: pd.DataFrame, workload: str | Path) -> list[Target]:
    """The workload's own `compare_on` chips, then `on`'s, each once; every one checked before any
    work (a bad one is a UserError naming its field)."""
    named = [(spec, "compare_on", str(workload)) for spec in wl.compare_on] + [(spec, "--on", None) for spec in on]
    out, seen = [], set()
    for spec, field, where in named:
        target = parse_target(spec, prices, field=field, where=where)
        if target.spec not in seen:
            seen.add(target.spec)
            out.append(target)
    if len(out) > MAX_COMPARE_ON:
        raise UserError(f"{len(out)} chips with the workload's compare_on; an estimate is made for at most "
                        f"{MAX_COMPARE_ON} (each at every load the workload sweeps)", field="--on")
    return out


def run_estimate(workload: str | Path, on: list[str], *, prices: pd.DataFrame, published: pd.DataFrame,
                 results: list[Path] | None = None, plans: list[str] | None = None,
                 cal: Calibration | None = None, wl: WorkloadPoints | None = None,
                 sweep: bool = False, stack_date: str | None = None) -> EstimateReport:
    """Estimates of `workload` on each chip of its `compare_on` and of `on` (module notes); `cal`
    reuses a calibration already made, `wl` the workload's points already read from it. `sweep`
    estimates every load of `load_sweep` instead of the workload's own: what an answer looks for its
    operating point at a service level along. `stack_date` (YYYY-MM-DD) estimates a serving stack of
    that date instead of the calibration's newest (features.TERMS: stack_age_years)."""
    wl = wl or workload_points(workload)
    targets = targets_of(on, wl, prices, workload)
    if not targets:
        raise UserError("name at least one chip: --on tpu-v6e-8 --on H100:8 --on trn2 (or compare_on in the "
                        "workload)", field="--on")
    cal = cal or calibration(published, results)
    age = _stack_age(stack_date, cal)
    estimates, priced_rows = [], []
    for target in targets:
        table = plan_prices(prices, target, plans)
        points = [replace(p, stack_age_years=age) for p in _points_on(wl, target)]
        if sweep:
            points = [replace(point, concurrency=load) for point in _distinct_shapes(points)
                      for load in load_sweep(point, chip(target.accelerator, point.compute_precision))]
        for point in points:
            why = fp8_kv_refusal(target.accelerator) if quantised_cache(point.kv_bytes) else None
            est = _refused(target, point, why) if why else \
                estimate(cal, target, chip(target.accelerator, point.compute_precision), point,
                         arrival=CLOSED_LOOP if wl.serving else STATIC)
            estimates.append(est)
            priced_rows.append([] if est.refused else [priced(est, row) for _, row in table.iterrows()])
    return EstimateReport(workload=wl.name, calibration=cal, estimates=estimates, prices=priced_rows,
                          workload_file=str(workload))


def _stack_age(stack_date: str | None, cal: Calibration) -> float:
    """Years a stack of `stack_date` is older than the calibration's newest rows' (0 without one)."""
    if stack_date is None:
        return 0.0
    try:
        day = date.fromisoformat(str(stack_date))
    except ValueError:
        raise UserError(f"'{stack_date}' is not a date: write YYYY-MM-DD", field="--stack-date") from None
    if cal.obs.stack_date and day.isoformat() > cal.obs.stack_date:
        raise UserError(f"{day} is newer than the calibration's newest rows ({cal.obs.stack_date}): the estimate "
                        "knows no newer stack", field="--stack-date")
    return stack_age_years(day.isoformat(), cal.obs.stack_date)


# The largest load a sweep estimates: far beyond any server's batch, and bounded work per chip.
MAX_SWEEP_LOAD = 1 << 14


def load_sweep(point: Point, spec: Chip | None) -> list[float]:
    """Loads 1, 2, 4, ... up to the most sequences the chips hold beside the weights, and that most
    itself (DESIGN s25: the estimate is its own sweep); [1] when not even one fits, which the
    estimate then refuses with why. More clients than fit only wait for a slot: never cheaper."""
    fits = sequences_that_fit(point, spec.memory_bytes if spec else None)
    top = min(math.floor(fits) if math.isfinite(fits) else MAX_SWEEP_LOAD, MAX_SWEEP_LOAD)
    if top < 1:
        return [1.0]
    loads = [float(1 << k) for k in range(top.bit_length()) if 1 << k <= top]
    return loads + ([float(top)] if loads[-1] != top else [])


def _distinct_shapes(points: list[Point]) -> list[Point]:
    """One point per precision and lengths (a sweep replaces the workload's loads)."""
    return list({(p.precision, p.input_len, p.output_len): p for p in points}.values())


def _refused(target: Target, point: Point, why: str) -> Estimate:
    """A point no engine can run on the target (an fp8 KV cache where none is offered): no number."""
    return Estimate(target=target.spec, accelerator=target.accelerator, family=chip_family(target.accelerator),
                    chips=point.chips, concurrency=point.concurrency, input_length=point.input_len,
                    output_length=point.output_len, calibration_rows=0, calibration_chip_rows=0, calibrated_by=(),
                    refused=why, precision=point.precision)


def _points_on(wl: WorkloadPoints, target: Target):
    """The workload's points on the target's chips, at the target's quantisation where it names one
    (every point then at that precision, once), else at each precision the workload sweeps."""
    points = [replace(p, chips=target.chips) for p in wl.points]
    if target.quantization is None:
        return points
    precision = point_precision(wl.dtype, target.quantization)
    return list({(p.concurrency, p.input_len, p.output_len): with_precision(p, precision) for p in points}.values())


__all__ = ["EstimateReport", "MAX_SWEEP_LOAD", "calibration", "load_sweep", "run_estimate", "targets_of"]
