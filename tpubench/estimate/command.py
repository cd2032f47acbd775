"""`tpubench estimate`: a workload's operating points on chips one has not measured, calibrated on
the shipped published rows and the user's own measured rows, priced per purchase plan."""

from __future__ import annotations

from dataclasses import dataclass
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


def run_estimate(workload: str | Path, on: list[str], *, prices: pd.DataFrame, published: pd.DataFrame,
                 results: list[Path] | None = None, plans: list[str] | None = None) -> EstimateReport:
    if not on:
        raise UserError("name at least one chip: --on tpu-v6e-8 --on H100:8 --on trn2", field="--on")
    targets = [parse_target(spec, prices) for spec in on]   # every --on checked before any work
    rows = published.assign(source="published")
    if results:
        mine = measured_rows(results)
        if not mine.empty:
            rows = pd.concat([rows, mine], ignore_index=True)
    cal = calibrate(rows)
    estimates, priced_rows = [], []
    name = Path(workload).stem
    for target in targets:
        name, serving, points = workload_points(workload, target.chips)
        table = plan_prices(prices, target, plans)
        for point in points:
            spec = chip(target.accelerator, _precision(point.weight_bytes))
            est = estimate(cal, target, spec, point, serving=serving)
            estimates.append(est)
            priced_rows.append([] if est.refused else [priced(est, row) for _, row in table.iterrows()])
    return EstimateReport(workload=name, calibration=cal, estimates=estimates, prices=priced_rows)


def _precision(weight_bytes: float) -> str:
    # The peak FLOP/s of the workload's own format: fp8 and narrower use the chip's fp8 peak.
    return "fp8" if weight_bytes <= 1 else "bf16"


__all__ = ["EstimateReport", "run_estimate"]
