"""How to buy a fleet over a horizon (docs/definitions.md#budget-buying): commitments for the load
that is always there, on-demand or spot for the peak, per platform. Pure functions over numbers.

Load profile: the traffic's average (tokens/day / 86400) with a peak `peak_factor` times the average
for `peak_hours` hours a day and a base level the rest of the day, so that the day's tokens add up:

    R_peak = avg * peak_factor
    R_base = avg * (24 - peak_factor * peak_hours) / (24 - peak_hours)      (R_base = avg when flat)

The fleet is sized for each rate as the budget sizes it (whole replicas, whole instances): N_base
instances serve the base, N_peak the peak. That makes two layers of instances: N_base busy every
hour (utilisation 1), N_peak - N_base busy only at the peak (utilisation u = peak_hours / 24).

A layer of n instances at utilisation u over a horizon of H months (730 h each) costs, per plan:

    pay per hour used (on-demand, a discount of it):   n * p * u * 730 * H
    spot (interruptible):                              n * p / (1 - lambda * L) * u * 730 * H
    booked in day blocks (calendar / flex-start):      n * p * 730 * H       (a daily peak holds it all day)
    committed, term T months (1y, 3y, block):          n * p * 730 * T * ceil(H / T)
    committed without a term (a held reservation):     n * p * 730 * H

with p the plan's effective USD per instance-hour (upfront amortised over the term, money/plans.py).
A commitment is paid for every hour of each whole term bought, used or not: a 3-year term on a
12-month horizon costs the 3 years.

Spot's preemption overhead: lambda preemptions per hour, each losing L hours of the instance's
work (a replacement to start, weights to load, the server to warm up, requests in flight to redo),
so a spot instance does useful work only 1 - lambda * L of the hours it is paid for and the fleet
needs 1 / (1 - lambda * L) times the instance-hours. A spot price without a preemption rate (neither
the price row's nor `--spot-preemption-rate`) is not bought: its risk cannot be priced.

Choice: per layer the cheapest plan; the base layer only from plans that are not interruptible
(a preemption at the base load has nothing to fall back on), the peak layer from all.

Break-even utilisation of a commitment: the utilisation above which it is cheaper than on-demand
over the horizon,

    u* = cost of one committed instance over H / (on-demand p * 730 * H)
       = p_commit / p_on_demand                     when H is a whole number of terms

so a layer whose utilisation exceeds u* is cheaper committed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from tpubench.errors import UserError
from tpubench.money.plans import HOURS_PER_MONTH, plan_info

HOURS_PER_DAY = 24.0
# Hours of a spot instance's work lost per preemption when the user does not say: a replacement
# instance to start, the weights to load and the server to warm up (a quarter hour is typical of a
# mid-size model on one host); `--spot-lost-hours` sets the fleet's own.
DEFAULT_SPOT_LOST_HOURS = 0.25
# Plans booked in blocks of days: billed for whole days even when only a daily peak needs them.
DAY_BLOCK_PLANS = frozenset({"flex_start"})


@dataclass(frozen=True)
class Offer:
    """One plan's price for one platform's instance, with what the buying choice needs to know."""

    plan: str
    usd_per_hour: float                       # effective USD per instance-hour (upfront amortised)
    committed: bool = False                   # paid for its whole term whether used or not
    term_months: float | None = None          # the term a commitment is bought in; None: no term
    interruptible: bool = False               # spot: the cloud may take it back
    preemption_rate_per_h: float | None = None
    day_blocks: bool = False                  # obtained in blocks of days (flex-start)

    @classmethod
    def of_plan(cls, plan: str, usd_per_hour: float, *, term_months: float | None = None,
                preemption_rate_per_h: float | None = None) -> "Offer | None":
        """An offer from the plan vocabulary (money/plans.py); None for a plan outside it."""
        info = plan_info(plan)
        if info is None:
            return None
        term = term_months if term_months is not None and math.isfinite(term_months) else info.term_months
        return cls(plan, float(usd_per_hour), committed=info.committed, term_months=term,
                   interruptible=info.interruptible, preemption_rate_per_h=preemption_rate_per_h,
                   day_blocks=info.name in DAY_BLOCK_PLANS)


@dataclass(frozen=True)
class LoadProfile:
    """A day of traffic: the average rate, the peak factor over it, and hours a day at the peak."""

    avg_tokens_per_s: float
    peak_factor: float = 1.0
    peak_hours: float | None = None

    def __post_init__(self):
        flat = self.peak_factor == 1
        if self.peak_hours is None:
            if not flat:
                raise UserError("a peak factor above 1 needs the hours a day at the peak to size the "
                                "base load apart (e.g. --peak-hours 4)", field="--peak-hours")
            return
        if not (math.isfinite(self.peak_hours) and 0 < self.peak_hours <= HOURS_PER_DAY):
            raise UserError(f"hours a day at the peak are in (0, 24], got {self.peak_hours:g}",
                            field="--peak-hours")
        if not flat and self.peak_factor * self.peak_hours > HOURS_PER_DAY:
            raise UserError(f"{self.peak_hours:g} h a day at {self.peak_factor:g}x the average carry more "
                            "than the day's tokens (peak factor x peak hours must be <= 24)", field="--peak-hours")

    @property
    def peak_tokens_per_s(self) -> float:
        return self.avg_tokens_per_s * self.peak_factor

    @property
    def base_tokens_per_s(self) -> float:
        if self.peak_factor == 1:
            return self.avg_tokens_per_s
        h = self.peak_hours
        return self.avg_tokens_per_s * (HOURS_PER_DAY - self.peak_factor * h) / (HOURS_PER_DAY - h)

    @property
    def peak_utilisation(self) -> float:
        """Share of the hours the peak layer is needed: peak hours / 24 (1 when flat)."""
        return 1.0 if self.peak_hours is None else self.peak_hours / HOURS_PER_DAY


def check_horizon(months: float) -> float:
    if not (isinstance(months, (int, float)) and math.isfinite(months) and months > 0):
        raise UserError(f"a horizon is a positive number of months, got {months}", field="--months")
    return float(months)


def check_spot_inputs(lost_hours: float, preemption_rate_per_h: float | None) -> None:
    if not (math.isfinite(lost_hours) and lost_hours >= 0):
        raise UserError(f"hours lost per preemption are >= 0, got {lost_hours:g}", field="--spot-lost-hours")
    if preemption_rate_per_h is not None and not (math.isfinite(preemption_rate_per_h) and preemption_rate_per_h >= 0):
        raise UserError(f"a preemption rate is events per hour >= 0, got {preemption_rate_per_h:g}",
                        field="--spot-preemption-rate")


def spot_effective_usd_per_hour(usd_per_hour: float, preemption_rate_per_h: float, lost_hours: float) -> float:
    """p / (1 - lambda * L): the spot price per hour of useful work; inf when preemptions lose every hour."""
    lost_share = preemption_rate_per_h * lost_hours
    return usd_per_hour / (1 - lost_share) if lost_share < 1 else math.inf


def committed_usd_per_instance(offer: Offer, months: float) -> float:
    """What one committed instance costs over `months`: whole terms bought, used or not."""
    if offer.term_months:
        terms = math.ceil(months / offer.term_months - 1e-9)
        return offer.usd_per_hour * HOURS_PER_MONTH * offer.term_months * terms
    return offer.usd_per_hour * HOURS_PER_MONTH * months


def layer_usd(offer: Offer, instances: float, utilisation: float, months: float,
              lost_hours: float = 0.0, default_preemption_rate: float | None = None) -> float:
    """USD over `months` for `instances` instances busy `utilisation` of the hours, on `offer`
    (module docstring); NaN for spot whose preemption rate is unknown."""
    if instances <= 0:
        return 0.0
    if offer.committed:
        return instances * committed_usd_per_instance(offer, months)
    hours = HOURS_PER_MONTH * months
    if offer.day_blocks:
        return instances * offer.usd_per_hour * hours
    price = offer.usd_per_hour
    if offer.interruptible:
        rate = offer.preemption_rate_per_h if offer.preemption_rate_per_h is not None else default_preemption_rate
        if rate is None:
            return math.nan
        price = spot_effective_usd_per_hour(price, rate, lost_hours)
    return instances * price * utilisation * hours


def break_even_utilisation(offer: Offer, on_demand_usd_per_hour: float, months: float) -> float:
    """Utilisation above which the commitment `offer` beats on-demand over `months` (module docstring)."""
    if not offer.committed or not (on_demand_usd_per_hour > 0):
        return math.nan
    return committed_usd_per_instance(offer, months) / (on_demand_usd_per_hour * HOURS_PER_MONTH * months)


@dataclass(frozen=True)
class LayerChoice:
    plan: str | None        # None: the layer is empty, or no plan can serve it
    usd: float              # over the horizon


@dataclass(frozen=True)
class Mix:
    base: LayerChoice
    peak: LayerChoice
    usd: float               # over the horizon, both layers
    months: float

    @property
    def monthly_usd(self) -> float:
        return self.usd / self.months


def cheapest_layer(offers: Sequence[Offer], instances: float, utilisation: float, months: float, *,
                   allow_interruptible: bool, lost_hours: float = 0.0,
                   default_preemption_rate: float | None = None) -> LayerChoice:
    """The cheapest plan for one layer; ties go to the earlier offer."""
    if instances <= 0:
        return LayerChoice(None, 0.0)
    best = LayerChoice(None, math.nan)
    for offer in offers:
        if offer.interruptible and not allow_interruptible:
            continue
        usd = layer_usd(offer, instances, utilisation, months, lost_hours, default_preemption_rate)
        if math.isfinite(usd) and not (best.plan is not None and best.usd <= usd):
            best = LayerChoice(offer.plan, usd)
    return best


def choose_mix(offers: Sequence[Offer], base_instances: float, peak_instances: float, peak_utilisation: float,
               months: float, *, lost_hours: float = 0.0, default_preemption_rate: float | None = None) -> Mix:
    """The cheapest way to buy `base_instances` busy all the time and `peak_instances - base_instances`
    more busy `peak_utilisation` of the hours, over `months` (module docstring)."""
    extra = max(peak_instances - base_instances, 0.0)
    base = cheapest_layer(offers, base_instances, 1.0, months, allow_interruptible=False,
                          lost_hours=lost_hours, default_preemption_rate=default_preemption_rate)
    peak = cheapest_layer(offers, extra, peak_utilisation, months, allow_interruptible=True,
                          lost_hours=lost_hours, default_preemption_rate=default_preemption_rate)
    return Mix(base, peak, base.usd + peak.usd, months)

