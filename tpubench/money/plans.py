"""Purchase options ("plans"): the vocabulary every price row's `plan` comes from, and how a plan's
price parts (an hourly rate, an upfront payment, a term) become the one effective hourly price that
cost and budget use.

A plan says how capacity is bought, not what it costs: the price table (`money.pricing`) holds the
numbers per (cloud, region, instance_type, plan). Pure data and pure functions, so that the price
loader, the importers and the budget's buying choice all read the same definitions.

Effective hourly price of a plan with an upfront part (a 1- or 3-year commitment paid partly or all
up front, a prepaid capacity block):

    effective USD/h = hourly USD/h + upfront USD / (term months * HOURS_PER_MONTH)

i.e. the upfront payment spread evenly over every hour of the term, used or not. A plan with no
upfront part costs its hourly rate.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# 8760 h / 12: the month budgets (budget/fleet.py) and the clouds' monthly estimates use.
HOURS_PER_MONTH = 730.0


@dataclass(frozen=True)
class Plan:
    name: str                  # the `plan` value in price files and the long price table
    label: str                 # how tables and docs name it
    term_months: float | None  # default term; None = no term (pay per hour used), or set per price row
    upfront: bool              # may carry an upfront part, amortised over the term
    interruptible: bool        # the cloud may take the capacity back at short notice (spot)
    committed: bool            # paid for the whole term / booking whether the capacity is used or not
    about: str                 # one line for `pricing plans` and the docs


PLAN_LIST: tuple[Plan, ...] = (
    Plan("on_demand", "on-demand", None, False, False, False,
         "list price per hour, pay for the hours used"),
    Plan("spot", "spot", None, False, True, False,
         "spare capacity (GCP Spot/preemptible, AWS Spot, Azure Spot/Low Priority): cheap, can be "
         "taken back; optional preemption rate per hour"),
    Plan("commit_1y", "1-year commitment", 12.0, True, False, True,
         "1-year committed use / reserved instance / savings plan: hourly part plus optional upfront"),
    Plan("commit_3y", "3-year commitment", 36.0, True, False, True,
         "3-year committed use / reserved instance / savings plan: hourly part plus optional upfront"),
    Plan("reservation", "reservation", None, True, False, True,
         "capacity reservation held (and paid) whether used or not (e.g. a GCP DWS calendar-mode "
         "reservation); term per row when it has one"),
    Plan("flex_start", "calendar / flex-start", None, False, False, False,
         "scheduled capacity (GCP Dynamic Workload Scheduler flex-start, SKUs 'DWS Defined Duration'; "
         "a calendar-mode booking is a reservation): "
         "obtained in bounded blocks of days, billed for the hours it runs"),
    Plan("capacity_block", "capacity block", None, True, False, True,
         "a booked block of days (AWS EC2 Capacity Blocks for ML, training plans), paid for the "
         "whole block; length per row as term_months"),
)
PLANS: dict[str, Plan] = {p.name: p for p in PLAN_LIST}
PLAN_NAMES: tuple[str, ...] = tuple(PLANS)

# A plan derived by `--discount`: "<base plan>-<percent>%" (pricing.apply_discount writes these).
_DISCOUNTED = re.compile(r"^(?P<base>[a-z0-9_]+)-(?P<pct>[0-9.]+)%$")


def base_plan_name(name: str) -> str:
    """The vocabulary plan a table plan name stands for: itself, or the base of a discounted plan
    ("on_demand-20%" -> "on_demand"). Unknown names come back unchanged."""
    m = _DISCOUNTED.match(name)
    return m.group("base") if m and m.group("base") in PLANS else name


def plan_info(name: str) -> Plan | None:
    """The Plan a table plan name stands for (a discounted plan shares its base's nature), or None
    for a name outside the vocabulary."""
    return PLANS.get(base_plan_name(name))


def plan_label(name: str) -> str:
    """How every table (report, budget, `pricing list`) shows a plan: the vocabulary label, with a
    discount's percentage ("on_demand-20%" -> "on-demand -20%"); a name outside the vocabulary as is."""
    info = plan_info(name)
    if info is None:
        return name
    suffix = name[len(info.name):]
    return f"{info.label} {suffix}" if suffix else info.label


def term_hours(term_months: float) -> float:
    return term_months * HOURS_PER_MONTH


def effective_usd_per_hour(hourly_usd: float, upfront_usd: float = 0.0,
                           term_months: float | None = None) -> float:
    """hourly + upfront / (term months * HOURS_PER_MONTH): the hourly price with an upfront payment
    spread over every hour of its term. An upfront part needs a term to spread over."""
    if not upfront_usd:
        return float(hourly_usd)
    if term_months is None or not math.isfinite(term_months) or term_months <= 0:
        raise ValueError(f"an upfront payment ({upfront_usd:g} USD) needs a positive term in months")
    return float(hourly_usd) + float(upfront_usd) / term_hours(term_months)


def preemption_rate_per_hour(rate: float, per: str = "h") -> float:
    """A preemption rate given per hour ("h") or per day ("day") as events per hour."""
    if per in ("h", "hour"):
        return float(rate)
    if per in ("d", "day"):
        return float(rate) / 24.0
    raise ValueError(f"unknown preemption rate unit '{per}' (h or day)")
