"""A training budget (docs/definitions.md#budget): `tpubench budget train --train-tokens`, the planner of
the training-token unit. Dollars, wall-clock hours and the slice or instance to rent to train on a
number of tokens, per priced platform and plan (`plan_training` has the formulas)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Sequence

import numpy as np
import pandas as pd

from tpubench.budget.fleet import PLATFORM_COLUMNS, SECONDS_PER_HOUR, ceil_whole, priced_rows, within_tpu_slices
from tpubench.budget.request import BudgetOptions, Sizing, check_number
from tpubench.money import cost
from tpubench.records.usable import usable_rows
from tpubench.scenarios import registry

MAX_TRAIN_TOKENS = 1e18
TRAINING_TOKEN = "training_token"   # the unit's key (scenarios/train/unit.py)


def unit_named(key: str):
    return next(unit for unit in registry.units() if unit.key == key)


@dataclass
class TrainingBudget:
    train_tokens: float
    options: pd.DataFrame          # one row per platform x plan with a valid training point, ranked
    unpriced: pd.DataFrame         # results that could not be priced, and why
    notes: list[str] = field(default_factory=list)


def plan_training(results: pd.DataFrame, prices: pd.DataFrame, *, train_tokens: float, plans=None,
                  cloud=None, region=None, today: date | None = None,
                  scenarios: Sequence[str] | str | None = None, include_flagged: bool = False,
                  unit=None) -> TrainingBudget:
    """Dollars, wall-clock hours and the slice or instance to rent to train on `train_tokens`
    tokens, per priced platform (cloud, region, instance type) and plan (docs/definitions.md#budget).

    Rows in training tokens (`unit`, the training unit: cost.unit_rows) compete; invalid
    runs are left out. A point measured on `chips` chips (its world) spends
    c = train_s_per_token * chips chip-seconds per training token (`train_chip_s_per_token`) and is
    one replica. On an instance of `chips_per_instance` (cpi) chips at H $/instance-hour:

        replicas  = floor(cpi / chips)      instances = 1        (the replica fits one instance)
        replicas  = 1                       instances = ceil(chips / cpi)   (it spans instances)
        rented_chips = instances * cpi      utilisation = chips * replicas / rented_chips
        hours     = train_tokens * c / (chips * replicas) / 3600
                  = train_tokens * train_s_per_token / replicas / 3600
        usd       = instances * H * hours = train_tokens * c * H / (cpi * 3600) / utilisation

    e.g. a 2-chip point on a tpu-v6e-8 runs 4 replicas data-parallel on the one slice, a quarter of
    the hours of one replica. Assumed: replicas on one rental scale linearly (data parallel, the
    gradient all-reduce between replicas costing no more than inside the measured world), the run
    keeps the measured step time for all its steps, and time is billed by the second (no rounding
    up to whole hours; no start-up, checkpointing or evaluation time). As for the inference budget,
    a point wider than a TPU slice is left out of that slice type (ICI links chips only within a
    slice), with a note.

    The point per platform and plan is the fastest on what is rented: the most training tokens/s
    per rented chip (1 / c * utilisation; the measured tokens/s per chip when replicas fill the
    instance), ties broken by the cheaper $ per million training tokens. CIs on usd and hours come
    from the point's train_s_per_token CI (the low bound from the low time). `rank_in_plan` /
    `rank_overall` order the options by usd per workload and scale.
    """
    check_train_tokens(train_tokens)
    options = BudgetOptions(plans=plans, cloud=cloud, region=region, include_flagged=include_flagged,
                            scenarios=scenarios)
    priced, unpriced, notes = priced_rows(results, prices, options, today)
    mine = cost.unit_rows(priced, unit or unit_named(TRAINING_TOKEN))
    training = priced[mine]
    others = priced.loc[~mine, "file"].nunique()
    if others:
        notes.append(f"{others} result(s) without training figures left out (inference points: use "
                     "`tpubench budget tokens`)")
    candidates, unusable = usable_rows(training)
    if unusable:
        notes.append(f"{unusable} invalid training run(s) left out of the budget")
    candidates = candidates[np.isfinite(candidates["train_chip_s_per_token"].astype(float))
                            & (candidates["train_chip_s_per_token"].astype(float) > 0)]
    candidates, note = within_tpu_slices(candidates, "training")
    notes += [note] if note else []
    options = _size_training(candidates, float(train_tokens))
    return TrainingBudget(train_tokens=float(train_tokens), options=options.reset_index(drop=True),
                          unpriced=unpriced, notes=notes)


def _size_training(candidates: pd.DataFrame, train_tokens: float) -> pd.DataFrame:
    out = candidates.copy()
    chips = out["chips"].astype(float)
    per_instance = out["chips_per_instance"].astype(float)
    fits = chips <= per_instance
    out["replicas"] = np.where(fits, np.floor(per_instance / chips), 1).astype(int)
    out["instances"] = np.where(fits, 1, ceil_whole(chips / per_instance)).astype(int)
    out["rented_chips"] = (out["instances"] * per_instance).astype(int)
    out["utilisation"] = chips * out["replicas"] / out["rented_chips"]
    out["replica_spans_instances"] = ~fits
    out["train_tokens_per_s_per_rented_chip"] = out["utilisation"] / out["train_chip_s_per_token"].astype(float)
    out = (out.sort_values(["train_tokens_per_s_per_rented_chip", "train_usd_per_mtok"], ascending=[False, True],
                           kind="stable")
           .drop_duplicates(PLATFORM_COLUMNS + ["plan"], keep="first"))
    out["train_tokens"] = train_tokens
    for bound in ("", "_ci95_low", "_ci95_high"):
        c = out[f"train_chip_s_per_token{bound}"].astype(float)
        hours = train_tokens * c / (out["chips"].astype(float) * out["replicas"]) / SECONDS_PER_HOUR
        out[f"hours{bound}"] = hours
        out[f"usd{bound}"] = out["instances"] * out["usd_per_instance_hour"].astype(float) * hours
    out = out.sort_values(["workload", "scale", "usd"], kind="stable")
    out["rank_in_plan"] = out.groupby(["workload", "scale", "plan"], dropna=False).cumcount() + 1
    out["rank_overall"] = out.groupby(["workload", "scale"], dropna=False).cumcount() + 1
    return out[TRAINING_OPTION_COLUMNS]


TRAINING_OPTION_COLUMNS = [
    "rank_overall", "rank_in_plan", "workload", "scale", "priced_accelerator", "cloud", "region",
    "instance_type", "chips_per_instance", "plan", "usd_per_instance_hour", "train_tokens",
    "usd", "usd_ci95_low", "usd_ci95_high", "hours", "hours_ci95_low", "hours_ci95_high",
    "instances", "rented_chips", "replicas", "utilisation", "replica_spans_instances",
    "train_tokens_per_s_per_rented_chip", "train_tokens_per_s_per_chip",
    "train_tokens_per_s_per_chip_ci95_low", "train_tokens_per_s_per_chip_ci95_high",
    "train_usd_per_mtok", "train_usd_per_mtok_ci95_low", "train_usd_per_mtok_ci95_high",
    "train_chip_s_per_token", "mfu", "step_mean_s", "step_p50_s", "scenario_kind", "batch_size", "input_length",
    "dtype", "execution_mode", "chips", "world_size", "backend", "device", "accelerator", "torch_version",
    "transformers_version", "jax_version", "file", "price_source", "price_as_of", "price_age_days",
    "price_flagged", "price_flag_reason",
]


def plan_train_tokens(results: pd.DataFrame, prices: pd.DataFrame, train_tokens: float, options: BudgetOptions,
                      unit=None, today: date | None = None) -> TrainingBudget:
    """`plan_training` on the options of `tpubench budget` (budget/request.py)."""
    return plan_training(results, prices, train_tokens=train_tokens, plans=options.plans, cloud=options.cloud,
                         region=options.region, today=today, scenarios=options.scenarios,
                         include_flagged=options.include_flagged, unit=unit)


def check_train_tokens(train_tokens: float, options: BudgetOptions | None = None, unit=None) -> float:
    # A training run is a number of tokens, not a load: no other option applies.
    return check_number(train_tokens, "--train-tokens", "must be a positive number of tokens", high=MAX_TRAIN_TOKENS)


SIZING = Sizing(plan=plan_train_tokens, check=check_train_tokens)
