"""How to buy a token budget's fleet per platform over a horizon (`tpubench budget serve --months N`,
docs/definitions.md#budget-buying): buying.choose_mix on the fleet each platform's chosen point
needs at the base load and at the peak, its CI from the point's throughput CI, and each
commitment's break-even utilisation against on-demand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tpubench.budget import buying
from tpubench.budget.current import mix_vs_current
from tpubench.budget.fleet import HOURS_PER_MONTH, PLATFORM_COLUMNS, ceil_whole, instances_needed
from tpubench.budget.request import Power
from tpubench.money import plans as plan_vocab

MIX_COLUMNS = [
    "rank", "workload", "scale", "priced_accelerator", "cloud", "region", "instance_type", "chips_per_instance",
    "months", "base_tokens_per_s", "peak_tokens_per_s", "peak_hours", "peak_utilisation",
    "base_instances", "peak_instances", "base_plan", "base_usd", "peak_plan", "peak_usd",
    "horizon_usd", "monthly_usd", "monthly_usd_ci95_low", "monthly_usd_ci95_high",
    "on_demand_monthly_usd", "saving_vs_on_demand_usd_per_month", "energy_in_monthly_usd",
    "tokens_per_s_per_chip", "tokens_per_s_per_chip_ci95_low", "tokens_per_s_per_chip_ci95_high", "chips", "file",
]
COMMITMENT_COLUMNS = ["workload", "scale", "cloud", "region", "instance_type", "plan", "usd_per_instance_hour",
                      "term_months", "horizon_usd_per_instance", "break_even_utilisation", "bought_for"]


def _offers(group: pd.DataFrame, prices: pd.DataFrame) -> list[buying.Offer]:
    """One platform's plans as offers, with the term and preemption rate its price rows carry."""
    extra = [c for c in ("term_months", "preemption_rate_per_h") if c in prices]
    rows = group.merge(prices[["cloud", "region", "instance_type", "plan"] + extra].drop_duplicates(
        ["cloud", "region", "instance_type", "plan"]), on=["cloud", "region", "instance_type", "plan"], how="left")
    offers = []
    for _, r in rows.iterrows():
        term = r.get("term_months")
        rate = r.get("preemption_rate_per_h")
        offer = buying.Offer.of_plan(str(r["plan"]), float(r["usd_per_instance_hour"]),
                                     term_months=float(term) if pd.notna(term) else None,
                                     preemption_rate_per_h=float(rate) if pd.notna(rate) else None)
        if offer is not None and math.isfinite(offer.usd_per_hour):
            offers.append(offer)
    # The vocabulary's order (on-demand, spot, 1y, 3y, ...): ties and tables read the same every time.
    order = {name: i for i, name in enumerate(plan_vocab.PLAN_NAMES)}
    return sorted(offers, key=lambda o: (order.get(plan_vocab.base_plan_name(o.plan), len(order)), o.plan))


def _fleet_instances(rate_per_chip: float, tokens_per_s: float, chips: float, per_instance: float) -> float:
    """Whole instances serving `tokens_per_s`, as the token budget sizes them; inf when the rate is 0 (a
    throughput CI reaching zero: the fleet is unbounded, as its cost is in the options table)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        replicas = ceil_whole(np.divide(tokens_per_s, rate_per_chip * chips))
    return float(instances_needed(replicas, chips, per_instance))


def purchase_mixes(options: pd.DataFrame, prices: pd.DataFrame, profile: buying.LoadProfile, months: float,
                   power: Power, lost_hours: float, spot_rate: float | None,
                   current: str | None) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """Per workload, scale and platform: the cheapest mix of plans over `months` (budget/buying.py) for
    the fleet sized at the base and at the peak with the platform's chosen point, its CI from the
    point's throughput CI; and each commitment's break-even utilisation against on-demand."""
    notes: list[str] = []
    rows, commits = [], []
    unrated_spot = 0
    keys = ["workload", "scale"] + PLATFORM_COLUMNS[2:]
    for key, group in options.groupby(keys, sort=False, dropna=False):
        point = group.sort_values("tokens_per_s_per_chip", ascending=False, kind="stable").iloc[0]
        offers = _offers(group, prices)
        unrated_spot += any(o.interruptible and o.preemption_rate_per_h is None for o in offers) and spot_rate is None
        chips, per_instance = float(point["chips"]), float(point["chips_per_instance"])
        mixes = {}
        # The low cost comes from the high throughput bound, and vice versa.
        for bound, rate_col in (("", "tokens_per_s_per_chip"), ("_ci95_low", "tokens_per_s_per_chip_ci95_high"),
                                ("_ci95_high", "tokens_per_s_per_chip_ci95_low")):
            rate = float(point[rate_col])
            base_n = _fleet_instances(rate, profile.base_tokens_per_s, chips, per_instance)
            peak_n = _fleet_instances(rate, profile.peak_tokens_per_s, chips, per_instance)
            mixes[bound] = (buying.choose_mix(offers, base_n, peak_n, profile.peak_utilisation, months,
                                              lost_hours=lost_hours, default_preemption_rate=spot_rate)
                            if math.isfinite(base_n) and math.isfinite(peak_n) else None, base_n, peak_n)
        mix, base_n, peak_n = mixes[""]
        if mix is None:
            continue
        if mix.base.plan is None and base_n > 0:
            notes.append(f"{point['instance_type']} ({point['region']}) has no plan for the base load (spot, its "
                         "only price, is never bought for the base): its mix has no cost")
        energy = float(point["monthly_energy_usd"]) if power.owned else 0.0
        on_demand = next((o for o in offers if o.plan == "on_demand"), None)
        od_monthly = peak_n * on_demand.usd_per_hour * HOURS_PER_MONTH if on_demand else math.nan
        # A bound without a mix: unbounded (inf) where its fleet is, unknown (NaN) where its rate is.
        monthly = {b: (m.monthly_usd if m is not None else math.inf if math.inf in (bn, pn) else math.nan) + energy
                   for b, (m, bn, pn) in mixes.items()}
        rows.append({**dict(zip(keys, key)), "months": months,
                     "base_tokens_per_s": profile.base_tokens_per_s, "peak_tokens_per_s": profile.peak_tokens_per_s,
                     "peak_hours": profile.peak_hours, "peak_utilisation": profile.peak_utilisation,
                     "base_instances": int(base_n), "peak_instances": int(peak_n),
                     "base_plan": mix.base.plan, "base_usd": mix.base.usd, "peak_plan": mix.peak.plan,
                     "peak_usd": mix.peak.usd, "horizon_usd": mix.usd + energy * months,
                     "monthly_usd": monthly[""], "monthly_usd_ci95_low": monthly["_ci95_low"],
                     "monthly_usd_ci95_high": monthly["_ci95_high"], "on_demand_monthly_usd": od_monthly + energy,
                     "saving_vs_on_demand_usd_per_month": od_monthly + energy - monthly[""],
                     "energy_in_monthly_usd": power.owned,
                     **{c: point[c] for c in ("tokens_per_s_per_chip", "tokens_per_s_per_chip_ci95_low",
                                              "tokens_per_s_per_chip_ci95_high", "chips", "file")}})
        for offer in offers:
            if offer.committed:
                used = [layer for layer, choice in (("base", mix.base), ("peak", mix.peak))
                        if choice.plan == offer.plan]
                commits.append({"workload": key[0], "scale": key[1], "cloud": point["cloud"],
                                "region": point["region"], "instance_type": point["instance_type"],
                                "plan": offer.plan, "usd_per_instance_hour": offer.usd_per_hour,
                                "term_months": offer.term_months,
                                "horizon_usd_per_instance": buying.committed_usd_per_instance(offer, months),
                                "break_even_utilisation": buying.break_even_utilisation(
                                    offer, on_demand.usd_per_hour if on_demand else math.nan, months),
                                "bought_for": "+".join(used)})
                if offer.term_months and offer.term_months > months:
                    notes.append(f"{offer.plan} on {point['instance_type']} runs {offer.term_months:g} months, "
                                 f"past the {months:g}-month horizon: its whole term is costed")
    table = pd.DataFrame(rows, columns=[c for c in MIX_COLUMNS if c != "rank"])
    table = table.sort_values(["workload", "scale", "monthly_usd"], kind="stable")
    table.insert(0, "rank", table.groupby(["workload", "scale"], dropna=False).cumcount() + 1)
    if unrated_spot:
        notes.append(f"spot left out of {unrated_spot} platform(s)' mix: no preemption rate in the price table "
                     "(--spot-preemption-rate prices its risk)")
    notes = list(dict.fromkeys(notes))
    if current and len(table):
        table, note = mix_vs_current(table, current)
        if note:
            notes.append(note)
    return table.reset_index(drop=True), pd.DataFrame(commits, columns=COMMITMENT_COLUMNS), notes
