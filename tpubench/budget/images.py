"""Fleet sizing for images (docs/definitions.md#budget-images): `tpubench budget images --images-per-day`.

The token budget's method (budget/tokens.py) with the image as the unit, on the steps of
budget/per_day.py (any unit made at a steady rate) plus a latency limit. Traffic is
`images_per_day` with a peak-to-average factor; at the peak the fleet must make

    R = images_per_day * peak_factor / 86400                     images/s

A priced image row (cost.unit_rows of the image unit) spends c = `image_chip_s_per_image` chip-seconds per image
(seconds per image x chips, the diffuse cost basis), so it makes 1 / c images/s per chip (CI: the
low rate from the high c). A point qualifies when it is valid and the p99 of its calls' seconds
(`call_p99_s`) is within `max_image_latency_s`: an image of a call of B images arrives with the
whole call, so that is the latency a user waits, not the call's seconds / B; per priced
platform (cloud, region, instance type) and plan the qualifying point with the most images/s per
chip is chosen, ties broken by the cheaper $ per 1,000 images. Then, as for tokens,

    replicas       = ceil(R / (images/s/chip * chips per replica))
    instances      = fleet.instances_needed(replicas, chips per replica, chips_per_instance)
    monthly_usd    = instances * instance $/h * 730 h      (CI from the images/s/chip CI)
    monthly_kwh    = (images_per_day * 730 / 24 * J per image
                      + idle chip-seconds of the rented chips * idle W per chip) * PUE / 3.6e6

(J per image: the point's joules per chip-second times its chip-seconds per image,
`image_j_per_image` of money/energy.py; the idle floor as for tokens, fleet.with_fleet_energy;
owned capacity adds its cost to the monthly cost). A point
wider than a TPU slice is left out of that slice type; platforms with no qualifying point are
listed with the point that came closest to the latency limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date
from typing import Sequence

import numpy as np
import pandas as pd

from tpubench.budget.fleet import (
    MAX_SLO_S,
    PLATFORM_COLUMNS,
    SECONDS_PER_DAY,
    check_peak_factor,
    energy_notes,
    priced_rows,
    within_tpu_slices,
    without_huge_fleets,
)
from tpubench.budget.per_day import best_per_platform, fleet_per_day, with_unit_rate
from tpubench.budget.request import BudgetOptions, Power, Sizing, check_number
from tpubench.budget.training import unit_named
from tpubench.money import cost
from tpubench.records.columns import numeric_column
from tpubench.records.usable import usable_rows

MAX_IMAGES_PER_DAY = 1e13
IMAGE = "image"   # the unit's key (scenarios/diffuse/unit.py)


@dataclass(frozen=True)
class ImageTraffic:
    images_per_day: float
    peak_factor: float = 1.0
    max_image_latency_s: float | None = None   # p99 seconds a point's call (a user's wait for an image) may take

    def __post_init__(self):
        check_number(self.images_per_day, "--images-per-day", "must be a positive number of images",
                     high=MAX_IMAGES_PER_DAY)
        check_peak_factor(self.peak_factor)
        if self.max_image_latency_s is not None:
            check_number(self.max_image_latency_s, "--max-image-latency-s",
                         "a latency limit is a positive number of seconds", high=MAX_SLO_S)

    @property
    def peak_images_per_s(self) -> float:
        return self.images_per_day * self.peak_factor / SECONDS_PER_DAY


@dataclass
class ImageBudget:
    traffic: ImageTraffic
    options: pd.DataFrame          # one row per platform x plan with a qualifying point, ranked
    infeasible: pd.DataFrame       # platforms with no qualifying point, with the closest one
    unpriced: pd.DataFrame         # results that could not be priced, and why
    notes: list[str] = field(default_factory=list)


def plan_images(results: pd.DataFrame, prices: pd.DataFrame, *, images_per_day: float, peak_factor: float = 1.0,
                max_image_latency_s: float | None = None, plans=None, cloud=None, region=None,
                today: date | None = None, scenarios: Sequence[str] | str | None = None,
                include_flagged: bool = False, power: Power | None = None, unit=None) -> ImageBudget:
    """Size a fleet on every priced platform and plan for `images_per_day` (module docstring).
    `results` is `load_results(...)`, `prices` `pricing.load_prices(...)`; `power` adds monthly
    energy, its cost and carbon (in the monthly cost for owned capacity), as for tokens."""
    traffic = ImageTraffic(float(images_per_day), float(peak_factor),
                           None if max_image_latency_s is None else float(max_image_latency_s))
    power = power or Power()
    options = BudgetOptions(plans=plans, cloud=cloud, region=region, scenarios=scenarios,
                            include_flagged=include_flagged)
    priced, unpriced, notes = priced_rows(results, prices, options, today, power.grid_gco2_per_kwh)
    unit = unit or unit_named(IMAGE)
    imaging = cost.unit_rows(priced, unit)
    others = priced.loc[~imaging, "file"].nunique()
    if others:
        notes.append(f"{others} result(s) without per-image figures left out (token points: use `tpubench budget tokens`)")
    images = priced[imaging]
    candidates, unusable = usable_rows(images)
    if unusable:
        notes.append(f"{unusable} invalid image run(s) left out of the budget")
    # Sized on the cost basis's chip-seconds, as tokens are: the low rate from the high bound.
    candidates = with_unit_rate(candidates, unit)   # images_per_s_per_chip
    candidates, note = within_tpu_slices(candidates)
    notes += [note] if note else []
    candidates["latency_ratio"] = _latency_ratio(candidates, traffic.max_image_latency_s)
    meets = candidates[candidates["latency_ratio"] <= 1]
    best = best_per_platform(meets, unit)
    best, note = without_huge_fleets(best, "images_per_s_per_chip", traffic.peak_images_per_s, "--images-per-day",
                                     "images")
    notes += [note] if note else []
    options = _size_fleet(best, traffic, power, unit)
    notes += energy_notes(options, power)
    return ImageBudget(traffic=traffic, options=options.reset_index(drop=True),
                       infeasible=_closest_points(candidates, meets, traffic).reset_index(drop=True),
                       unpriced=unpriced, notes=notes)


def _latency_ratio(df: pd.DataFrame, limit_s: float | None) -> pd.Series:
    """p99 seconds per call / the limit: <= 1 qualifies; a missing p99 never does."""
    if limit_s is None:
        return pd.Series(0.0, index=df.index)
    return (numeric_column(df, "call_p99_s") / limit_s).fillna(math.inf)


def _size_fleet(best: pd.DataFrame, traffic: ImageTraffic, power: Power, unit) -> pd.DataFrame:
    out = fleet_per_day(best, unit, traffic.images_per_day, traffic.peak_images_per_s, power)
    out["images_per_day"] = traffic.images_per_day
    for column in IMAGE_OPTION_COLUMNS:
        if column not in out:
            out[column] = np.nan
    return out[IMAGE_OPTION_COLUMNS]


def _closest_points(candidates: pd.DataFrame, meets: pd.DataFrame, traffic: ImageTraffic) -> pd.DataFrame:
    point_columns = ["batch_size", "resolution_px", "denoise_steps", "dtype", "chips", "call_p99_s", "latency_ratio"]
    columns = PLATFORM_COLUMNS + ["closest_file"] + point_columns + ["misses"]
    feasible = set(map(tuple, meets[PLATFORM_COLUMNS].drop_duplicates().itertuples(index=False)))
    rows = []
    platforms = candidates.drop_duplicates(PLATFORM_COLUMNS + ["file"])
    for key, group in platforms.groupby(PLATFORM_COLUMNS, sort=True, dropna=False):
        if tuple(key) in feasible:
            continue
        closest = group.sort_values(["latency_ratio", "images_per_s_per_chip"], ascending=[True, False]).iloc[0]
        rows.append({**dict(zip(PLATFORM_COLUMNS, key)), "closest_file": closest["file"],
                     **{c: closest.get(c) for c in point_columns},
                     "misses": f"p99 {closest['call_p99_s']:.3g} s per call > {traffic.max_image_latency_s:g} s"})
    return pd.DataFrame(rows, columns=columns)


IMAGE_OPTION_COLUMNS = [
    "rank_overall", "rank_in_plan", "workload", "scale", "priced_accelerator", "cloud", "region", "instance_type",
    "chips_per_instance", "plan", "usd_per_instance_hour", "images_per_day", "monthly_usd", "monthly_usd_ci95_low",
    "monthly_usd_ci95_high", "instances", "rented_chips", "required_chips", "replicas", "fleet_utilisation",
    "replica_spans_instances", "images_per_s_per_chip", "images_per_s_per_chip_ci95_low",
    "images_per_s_per_chip_ci95_high", "image_p50_s", "image_p99_s", "call_p99_s", "image_usd_per_kimage",
    "image_usd_per_kimage_ci95_low", "image_usd_per_kimage_ci95_high", "image_chip_s_per_image", "image_j_per_image",
    "image_j_per_image_ci95_low", "image_j_per_image_ci95_high",
    "scenario_kind", "batch_size", "resolution_px", "denoise_steps", "dtype", "execution_mode", "chips", "backend",
    "device", "accelerator", "torch_version", "file", "price_source", "price_as_of", "price_age_days",
    "price_flagged", "price_flag_reason", "monthly_kwh", "monthly_kg_co2e", "monthly_energy_usd",
    "energy_in_monthly_usd", "energy_method", "grid_gco2e_per_kwh", "grid_source", "monthly_idle_kwh",
    "idle_w_per_chip", "idle_basis",
]


def plan_images_per_day(results: pd.DataFrame, prices: pd.DataFrame, images_per_day: float, options: BudgetOptions,
                        unit=None, today: date | None = None) -> ImageBudget:
    """`plan_images` on the options of `tpubench budget` (budget/request.py)."""
    return plan_images(results, prices, images_per_day=images_per_day, peak_factor=options.peak_factor,
                       max_image_latency_s=options.max_image_latency_s, plans=options.plans, cloud=options.cloud,
                       region=options.region, today=today, scenarios=options.scenarios,
                       include_flagged=options.include_flagged, power=options.power(), unit=unit)


def check_images(images_per_day: float, options: BudgetOptions, unit=None) -> None:
    ImageTraffic(images_per_day, options.peak_factor, options.max_image_latency_s)
    options.power()


SIZING = Sizing(plan=plan_images_per_day, check=check_images)
