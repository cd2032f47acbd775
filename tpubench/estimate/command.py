"""`tpubench estimate`: a workload's operating points on chips one has not measured, calibrated on
the shipped published rows and the user's own measured rows, priced per purchase plan."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from tpubench.errors import UserError
from tpubench.estimate.calibration import measured_rows
from tpubench.estimate.chips import chip, parse_target
from tpubench.estimate.points import workload_points
from tpubench.estimate.predict import Calibration, Estimate, calibrate, estimate
from tpubench.estimate.pricing import plan_prices, priced


@dataclass
class EstimateReport:
    workload: str
    calibration: Calibration
    estimates: list[Estimate]
    prices: list[list[dict]]          # per estimate, one dict per plan (empty when unpriced)


def run_estimate(workload: str | Path, on: list[str], *, prices: pd.DataFrame, results: list[Path] | None = None,
                 plans: list[str] | None = None, warn=None) -> EstimateReport:
    """Estimates of `workload` on each `--on` chip, calibrated on the shipped published rows, plus
    the rows imported and measured under `results`."""
    from tpubench.output.published.store import read_published, shipped_published

    if not on:
        raise UserError("name at least one chip: --on tpu-v6e-8 --on H100:8 --on trn2", field="--on")
    targets = [parse_target(spec, prices) for spec in on]   # every --on checked before any work
    published = shipped_published(warn=warn)
    if results:
        published = pd.concat([published, read_published(results, warn=warn)], ignore_index=True)
    rows = published.assign(source="published")
    if results:
        mine = measured_rows(results)
        if not mine.empty:
            rows = pd.concat([rows, mine], ignore_index=True)
    cal = calibrate(rows)
    name, serving, points = workload_points(workload)
    estimates, priced_rows = [], []
    for target in targets:
        table = plan_prices(prices, target, plans)
        for point in (replace(p, chips=target.chips) for p in points):
            spec = chip(target.accelerator, point.compute_precision)
            est = estimate(cal, target, spec, point, serving=serving)
            estimates.append(est)
            priced_rows.append([] if est.refused else [priced(est, row) for _, row in table.iterrows()])
    return EstimateReport(workload=name, calibration=cal, estimates=estimates, prices=priced_rows)


__all__ = ["EstimateReport", "run_estimate"]
