"""The verdict of one workload and plan, and the block over every plan (DESIGN s25): pure functions
over option rows (output/answer/options.py and published.py make them).

- **Ranked**: the options that answer for the workload (its own model at full scale, valid, priced
  in the plan) at an operating point that meets the SLO (`in_verdict`). The cheapest is named, and
  its ratio to the runner-up: the cheapest ranked option on another chip, at the same precision
  where there is one (like with like), else said to cross precisions.
- **The ratio's interval** is symmetric in log space around the ratio. Two estimates err together
  (one model, one fit): the half-width is their family pair's, calibrated on held-out pairs
  (estimate.pairs); where the pair has too few, and for any other two options, the two errors are
  taken as independent: their log half-widths added in quadrature (a measurement's 95% CI, an
  estimate's 90% interval, a published figure's none), labelled so. Decided when its low end is
  above 1.
- **Break-even price.** With chip-hours per Mtok h = $/Mtok / price per chip-hour, the cheapest A
  stays cheapest while its price is under P_B h_B / h_A, and the runner-up B would win below
  P_A h_A / h_B; both per chip-hour, with the plan and each price's date.
- **The block**: where the plans' cheapest options differ, it says so first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

ESTIMATE = "estimate"


@dataclass(frozen=True)
class Ratio:
    value: float
    low: float
    high: float
    basis: str

    @property
    def decided(self) -> bool:
        return self.low > 1


def log_halfwidth(value: float, low: float, high: float) -> float:
    """An interval's half-width in log space (its wider side); 0 without one (a published figure)."""
    sides = [math.log(high / value) if high > 0 and value > 0 and math.isfinite(high) else math.nan,
             math.log(value / low) if low > 0 and value > 0 and math.isfinite(low) else math.nan]
    known = [s for s in sides if math.isfinite(s)]
    if not known:
        return math.inf if (math.isinf(high) or low == 0) else 0.0
    return max(0.0, *known)


def ratio_interval(best, runner, shared: tuple[float, str] | None = None) -> Ratio:
    """The runner-up's $/Mtok over the cheapest's, and its interval (module notes). `best` and
    `runner` are option rows; `shared` the family pair's (half-width, basis) when both are
    estimates and their pair has enough held-out pairs."""
    value = float(runner["usd_per_mtok"]) / float(best["usd_per_mtok"])
    if shared is not None and best["source"] == ESTIMATE and runner["source"] == ESTIMATE:
        q, basis = shared
        basis = f"shared errors, from {basis}"
    else:
        qs = [log_halfwidth(float(r["usd_per_mtok"]), float(r["usd_per_mtok_low"]), float(r["usd_per_mtok_high"]))
              for r in (best, runner)]
        q = math.sqrt(sum(v * v for v in qs))
        basis = ("independent errors (no held-out pairs of these two chip families): the two intervals' "
                 "half-widths added in quadrature" if best["source"] == ESTIMATE == runner["source"]
                 else "independent errors: the two intervals' half-widths added in quadrature")
    spread = math.exp(q) if q < 700 else math.inf
    return Ratio(value, value / spread, value * spread, basis)


@dataclass(frozen=True)
class BreakEven:
    best_stays_below: float       # $/chip-h under which the cheapest stays cheapest
    runner_wins_below: float      # $/chip-h under which the runner-up would win


def break_even(best, runner) -> BreakEven:
    """The prices at which the two would tie (module notes)."""
    p_a, p_b = float(best["usd_per_chip_hour"]), float(runner["usd_per_chip_hour"])
    h_a, h_b = float(best["usd_per_mtok"]) / p_a, float(runner["usd_per_mtok"]) / p_b
    return BreakEven(best_stays_below=p_b * h_b / h_a, runner_wins_below=p_a * h_a / h_b)


def runner_up(ranked: pd.DataFrame, best) -> pd.Series | None:
    """The cheapest ranked option on another chip, at the cheapest's precision where one is."""
    others = ranked[ranked["accelerator"] != best["accelerator"]]
    if others.empty:
        return None
    alike = others[others["precision"] == best["precision"]]
    return (alike if len(alike) else others).iloc[0]


def ranked(options: pd.DataFrame) -> pd.DataFrame:
    """The options a verdict ranks, cheapest first."""
    if options.empty:
        return options
    keep = options["in_verdict"].astype(bool) & options["usd_per_mtok"].notna()
    return options[keep].sort_values("usd_per_mtok", kind="stable")


def plans_disagree(cheapest: dict[str, str]) -> str | None:
    """'The answer turns on the plan: A on on-demand and spot; B on 1-year.' where the plans'
    cheapest differ (plan label -> its cheapest option)."""
    by_option: dict[str, list[str]] = {}
    for plan, option in cheapest.items():
        if option:
            by_option.setdefault(option, []).append(plan)
    if len(by_option) < 2:
        return None
    return "The answer turns on the plan: " + "; ".join(f"{option} on {', '.join(plans)}"
                                                         for option, plans in by_option.items())


__all__ = ["BreakEven", "Ratio", "break_even", "log_halfwidth", "plans_disagree", "ranked", "ratio_interval",
           "runner_up"]
