"""Fleet sizing under SLOs (docs/definitions.md#budget): which platform, how many instances, what per month.

Traffic is `tokens_per_day` (input + output), of which `output_share` are output tokens, with a
peak-to-average factor. At the peak the fleet must absorb

    R_in  = tokens_per_day * peak_factor / 86400 * (1 - output_share)   input tokens/s
    R_out = tokens_per_day * peak_factor / 86400 * output_share         output tokens/s

Sizing basis (`sizing_basis` on every option; the budget's notes say which):

- "blended" (the default): a point serves tokens at its own measured input/output mix, so its
  throughput per chip is 1 / c_all, c_all its blended chip-seconds per token (a server's window
  times chips over all its tokens; an offline batch's E2E * chips / (B * (I + O))). The traffic's
  `output_share` is not used; each option shows the mix it was measured at (`point_output_share`).
  CI: from c_all's CI (the low rate from the high c_all).
- "split" (`split=True`, `tpubench budget --split`): the traffic's own mix, from the input/output
  split below. A server point has one only where its cost basis (tpubench/scenarios/serve/cost.py)
  fitted it from probe points (`split_method`); the others are left out, with a note.

With the split, a measured point spends c_in chip-seconds per input token and c_out per output
token: the chip-seconds-per-token figures of `cost.chip_seconds` (a server's probe fit)
or, for an offline batch (batch B, lengths I and O, `chips` chips per replica), computed as

    c_in  = TTFT * chips / (B * I)              chip-seconds per input token  (prefill)
    c_out = (E2E - TTFT) * chips / (B * O)      chip-seconds per output token (decode)

so the traffic keeps R_in * c_in + R_out * c_out chips busy, and the point's throughput per chip
*for this traffic's mix* is

    tokens/s/chip = 1 / ((1 - output_share) * c_in + output_share * c_out)

When the traffic's mix equals the point's (output_share = O / (I + O)) this is exactly
B * (I + O) / (E2E * chips), the tokens a replica serves per E2E (for a server whose split
attributes its whole window: the tokens it served per chip-second of the window). It
assumes requests look like the measured ones (same lengths) and that prefill and decode time scale
with the tokens served. Every scenario kind competes alike (`scenarios` keeps only some kinds);
each option says which kind and serving stack its point is (`scenario_kind`, `server_name`,
`server_version`, `concurrency`, `request_rate`).

For each priced platform (price row: cloud, region, instance type) and plan, the valid point with
the most tokens/s/chip whose p99 TTFT and p99 TPOT (`ttft_p99_s`, `tpot_p99_s`) meet the SLOs is
chosen. Then

    replicas      = ceil(peak tokens/s / (tokens/s/chip * chips per replica))
    required_chips = replicas * chips per replica
    instances     = ceil(replicas / floor(chips_per_instance / chips per replica))   (replica fits)
                  = replicas * ceil(chips per replica / chips_per_instance)            (it does not)
    monthly_usd   = instances * instance $/h * 730 h
    monthly_kwh   = the work's chip-seconds at the point's busy power + the rest of the rented
                    chips' month at its idle power (with_fleet_energy; docs/definitions.md#budget-energy)

A TPU slice is an instance of its size (tpu-v6e-8 rents 8 chips at once). A multi-chip point
(tensor or expert parallel, `chips` = its world size) is one replica of that many chips: a 2-chip
point packs 4 replicas into a tpu-v6e-8 slice, a 4-chip point 2 into an 8-GPU instance, and a
16-chip point takes 2 such instances per replica. Only TPU slices never share a replica: their
chips talk over ICI only inside one slice, so a point wider than a slice is left out of that slice
type (with a note) rather than priced as if separate slices were one. The monthly cost CI comes
from the point's throughput CI. Platforms with no point meeting the SLOs are listed with the point
that came closest.

The sizing helpers shared with the other units' planners (replicas, instances, energy, TPU
slices) are budget/fleet.py's; a training budget is budget/training.py, an image budget
budget/images.py. How to buy the fleet over a horizon is budget/purchase_mixes.py, the saving against
the platform in use budget/current.py. `SIZING` is this planner's sizing for `tpubench budget`
(its subcommands serve, generate and tokens: budget/planners.py `TOKENS`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from datetime import date
from typing import Sequence

import numpy as np
import pandas as pd

from tpubench.budget import buying
from tpubench.budget.current import compare_with_current
from tpubench.budget.fleet import (
    DAYS_PER_MONTH,
    HOURS_PER_MONTH,
    MAX_HORIZON_H,
    MAX_SLO_S,
    PLATFORM_COLUMNS,
    SECONDS_PER_DAY,
    blended_rate,
    check_peak_factor,
    energy_notes,
    only_scenarios,
    ranked,
    size_fleet,
    with_energy_cost,
    with_fleet_energy,
    within_tpu_slices,
    without_huge_fleets,
)
from tpubench.budget.purchase_mixes import purchase_mixes
from tpubench.budget.request import BudgetOptions, Power, Sizing, check_number
from tpubench.errors import UserError
from tpubench.measure.per_token import mix_rate
from tpubench.money import cost, tco
from tpubench.records.columns import numeric_column
from tpubench.records.usable import usable_rows
from tpubench.scenarios import SPLIT_BLENDED_ONLY

MAX_TOKENS_PER_DAY = 1e16       # ~1.2e11 tokens/s: far above any real fleet's load (budget/fleet.py)


@dataclass(frozen=True)
class Traffic:
    tokens_per_day: float
    output_share: float
    peak_factor: float = 1.0

    def __post_init__(self):
        check_number(self.tokens_per_day, "--tokens-per-day", "must be a positive number of tokens",
                     high=MAX_TOKENS_PER_DAY)
        if not 0 <= self.output_share <= 1:
            raise UserError(f"is the fraction of tokens that are output, 0..1; got {self.output_share}",
                            field="--output-share")
        check_peak_factor(self.peak_factor)

    @property
    def peak_tokens_per_s(self) -> float:
        return self.tokens_per_day * self.peak_factor / SECONDS_PER_DAY


@dataclass(frozen=True)
class Slo:
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None

    def __post_init__(self):
        for value, flag in ((self.ttft_p99_s, "--slo-ttft-ms"), (self.tpot_p99_s, "--slo-tpot-ms")):
            if value is not None:   # seconds here; the flag is in milliseconds
                check_number(value, flag, "an SLO must be a positive time in seconds", high=MAX_SLO_S)


def _with_energy(options: pd.DataFrame, traffic: Traffic, power: Power) -> pd.DataFrame:
    """Monthly energy, its cost and its carbon for each option: the traffic's tokens at the chosen
    point's joules per token on the sizing basis (joules per chip-second over tokens/s per chip),
    plus the idle floor of the rented chips the traffic leaves idle (with_fleet_energy)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        per_chip_s = numeric_column(options, "blended_j_per_token") / numeric_column(options, "blended_chip_s_per_token")
        options["traffic_j_per_token"] = per_chip_s / numeric_column(options, "tokens_per_s_per_chip")
        busy_chip_s = traffic.tokens_per_day * DAYS_PER_MONTH / numeric_column(options, "tokens_per_s_per_chip")
    options = with_fleet_energy(options, busy_chip_s, per_chip_s, power.pue)
    return with_energy_cost(options, power)


SIZING_BLENDED = "blended"
SIZING_SPLIT = "split"


@dataclass
class BudgetResult:
    traffic: Traffic
    slo: Slo
    options: pd.DataFrame          # one row per platform x plan that can meet the SLOs, ranked
    infeasible: pd.DataFrame       # platforms with no point meeting the SLOs, with the closest point
    unpriced: pd.DataFrame         # results that could not be priced, and why
    current: str | None = None
    notes: list[str] = field(default_factory=list)
    sizing: str = SIZING_BLENDED   # SIZING_BLENDED or SIZING_SPLIT (module docstring)
    # With a horizon (`months`): how to buy per platform (budget/purchase_mixes.py), one row per platform,
    # and each commitment's break-even utilisation, one row per platform x committed plan.
    mixes: pd.DataFrame | None = None
    commitments: pd.DataFrame | None = None
    profile: buying.LoadProfile | None = None
    months: float | None = None     # the horizon
    # With TCO tiers (money/tco.py): each platform's fleet at each tier's rate beside list on-demand.
    tco: pd.DataFrame | None = None
    # With --on or --workload: the estimated options, sized apart (budget/estimated.py EstimatedBudget).
    estimates: object | None = None


def point_output_share(df: pd.DataFrame) -> pd.Series:
    """Output tokens / all tokens of each measured point: a server's token rates, else the lengths."""
    col = functools.partial(numeric_column, df)
    # Only a server records its input token rate; an offline batch's mix is its lengths.
    from_rates = col("output_tokens_per_s") / (col("input_tokens_per_s") + col("output_tokens_per_s"))
    from_lengths = col("output_length") / (col("input_length") + col("output_length"))
    return from_rates.where(from_rates.notna(), from_lengths)


def _slo_ratio(df: pd.DataFrame, slo: Slo) -> pd.Series:
    """max(p99 / SLO) over the SLOs set: <= 1 meets them all; NaN latency counts as a miss."""
    ratios = []
    if slo.ttft_p99_s is not None:
        ratios.append(df["ttft_p99_s"].astype(float) / slo.ttft_p99_s)
    if slo.tpot_p99_s is not None:
        ratios.append(df["tpot_p99_s"].astype(float) / slo.tpot_p99_s)
    if not ratios:
        return pd.Series(0.0, index=df.index)
    return pd.concat(ratios, axis=1).fillna(math.inf).max(axis=1)


def _misses(row, slo: Slo) -> str:
    parts = []
    if slo.ttft_p99_s is not None and not row["ttft_p99_s"] <= slo.ttft_p99_s:
        parts.append(f"TTFT p99 {row['ttft_p99_s'] * 1e3:.0f} ms > {slo.ttft_p99_s * 1e3:.0f} ms")
    if slo.tpot_p99_s is not None and not row["tpot_p99_s"] <= slo.tpot_p99_s:
        parts.append(f"TPOT p99 {row['tpot_p99_s'] * 1e3:.1f} ms > {slo.tpot_p99_s * 1e3:.1f} ms")
    return "; ".join(parts) or "no valid measured point"


def check_token_inputs(*, tokens_per_day, output_share, peak_factor=1.0, slo_ttft_s=None, slo_tpot_s=None,
                       months=None, peak_hours=None, spot_lost_hours=buying.DEFAULT_SPOT_LOST_HOURS,
                       spot_preemption_rate=None) -> tuple[Traffic, Slo, float | None, buying.LoadProfile | None]:
    """(traffic, SLOs, horizon, load profile) of a token budget, every input checked (a one-line
    UserError naming the flag): `tpubench budget` calls it before reading any file."""
    traffic = Traffic(tokens_per_day, output_share, peak_factor)
    slo = Slo(slo_ttft_s, slo_tpot_s)
    profile = None
    # Checked whether or not a horizon uses them: a bad flag is an error, never silently ignored.
    check_number(spot_lost_hours, "--spot-lost-hours", "hours lost per preemption", low_open=False, high=MAX_HORIZON_H)
    if spot_preemption_rate is not None:
        check_number(spot_preemption_rate, "--spot-preemption-rate", "preemptions per hour", low_open=False,
                     high=3600.0)
    if months is not None:
        months = buying.check_horizon(check_number(months, "--months", "a horizon is a positive number of months",
                                                   high=MAX_HORIZON_H / HOURS_PER_MONTH))
        profile = buying.LoadProfile(traffic.tokens_per_day / SECONDS_PER_DAY, traffic.peak_factor, peak_hours)
        buying.check_spot_inputs(spot_lost_hours, spot_preemption_rate)
    elif peak_hours is not None:
        raise UserError("peak hours shape the buying choice over a horizon: give --months too", field="--peak-hours")
    return traffic, slo, months, profile


def plan_budget(results: pd.DataFrame, prices: pd.DataFrame, *, tokens_per_day: float,
                output_share: float, peak_factor: float = 1.0, slo_ttft_s: float | None = None,
                slo_tpot_s: float | None = None, plans=None, current: str | None = None,
                cloud=None, region=None, today: date | None = None,
                scenarios: Sequence[str] | str | None = None, split: bool = False,
                include_flagged: bool = False, power: Power | None = None, months: float | None = None,
                peak_hours: float | None = None, spot_lost_hours: float = buying.DEFAULT_SPOT_LOST_HOURS,
                spot_preemption_rate: float | None = None, tco_tiers: pd.DataFrame | None = None) -> BudgetResult:
    """Size a fleet on every priced platform and plan for the traffic and SLOs (module docstring).

    `results` is `load_results(...)`; `prices` is `pricing.load_prices(...)`. `current` names the
    platform in use ('cloud/region/instance_type', or a shorter unambiguous form): every option then
    carries the monthly saving (positive) or loss (negative) of switching to it, per plan.
    `scenarios` keeps only results of those scenario kinds (e.g. ["serve"]; all kinds when None).
    `split` sizes on the traffic's input/output mix instead of blended tokens (module docstring);
    `include_flagged` lets flagged prices compete (cost.choose_prices). `power` adds each option's
    monthly energy, carbon and energy cost (`_with_energy`), in the monthly cost for owned capacity.
    `months` (a horizon) adds how to buy per platform (`purchase_mixes`, budget/buying.py) for a day
    with `peak_hours` hours at the peak; `tco_tiers` (money/tco.load_tco) prices each platform's
    fleet at each tier beside list on-demand (`tco.tier_costs`).
    """
    traffic, slo, months, profile = check_token_inputs(
        tokens_per_day=tokens_per_day, output_share=output_share, peak_factor=peak_factor, slo_ttft_s=slo_ttft_s,
        slo_tpot_s=slo_tpot_s, months=months, peak_hours=peak_hours, spot_lost_hours=spot_lost_hours,
        spot_preemption_rate=spot_preemption_rate)
    power = power or Power()
    priced, unpriced = cost.price_results(results, prices, plans=plans, cloud=cloud, region=region,
                                          today=today, include_flagged=include_flagged,
                                          grid_gco2_per_kwh=power.grid_gco2_per_kwh)
    notes: list[str] = list(priced.attrs.get(cost.PRICE_NOTES, []))
    if scenarios is not None:
        priced, note = only_scenarios(priced, scenarios)
        if note:
            notes.append(note)
    if "capacity_probe" in results:   # a capacity search's probes: its capacity point is the number
        probes = results["capacity_probe"].fillna(0).astype(float) == 1
        if probes.any():
            notes.append(f"{results.loc[probes, 'file'].nunique()} capacity-search probe(s) left out: "
                         "their search's capacity point is sized on (scenarios/serve/capacity.py)")
            priced = priced[~priced["file"].isin(set(results.loc[probes, "file"]))]
    candidates, unusable = usable_rows(priced)
    candidates = candidates.copy()
    candidates["source"] = _sources(results, candidates)
    if unusable:
        notes.append(f"{unusable} invalid run(s) left out of the budget")

    candidates, note = with_sizing_rate(candidates, traffic, split)
    notes.append(note)
    candidates["slo_ratio"] = _slo_ratio(candidates, slo)
    candidates = candidates[np.isfinite(candidates["tokens_per_s_per_chip"])]
    candidates, note = within_tpu_slices(candidates)
    notes += [note] if note else []
    meets = candidates[candidates["slo_ratio"] <= 1]

    group = PLATFORM_COLUMNS + ["plan"]
    best = (meets.sort_values(["tokens_per_s_per_chip", "blended_usd_per_mtok"], ascending=[False, True])
            .drop_duplicates(group, keep="first").copy())
    best, note = without_huge_fleets(best, "tokens_per_s_per_chip", traffic.peak_tokens_per_s, "--tokens-per-day",
                                     "tokens")
    notes += [note] if note else []
    options = size_token_fleet(best, traffic, power)
    notes += energy_notes(options, power)
    infeasible = _closest_points(candidates, meets, slo)

    if current:
        options, note = compare_with_current(options, current)
        if note:
            notes.append(note)
    mixes = commitments = tiers = None
    if profile is not None:
        mixes, commitments, mix_notes = purchase_mixes(options, prices, profile, months, power,
                                                       spot_lost_hours, spot_preemption_rate, current)
        notes += mix_notes
    if tco_tiers is not None:
        tiers, tco_notes = tco.tier_costs(options, tco_tiers, power)
        notes += tco_notes
    options = _with_platform_columns(options, mixes, tiers)
    return BudgetResult(traffic=traffic, slo=slo, options=options.reset_index(drop=True),
                        infeasible=infeasible.reset_index(drop=True), unpriced=unpriced,
                        current=current, notes=notes, sizing=SIZING_SPLIT if split else SIZING_BLENDED,
                        mixes=mixes, commitments=commitments, profile=profile, months=months,
                        tco=tiers)


def _sources(results: pd.DataFrame, candidates: pd.DataFrame) -> pd.Series:
    """Each candidate's `source`, measured or published (--include-published), from its result file:
    pricing names the price row's own source `price_source`, and does not keep the result's."""
    if "source" not in results or "file" not in results:   # a frame made without load_results
        return pd.Series("measured", index=candidates.index, dtype=object)
    by_file = dict(zip(results["file"].astype(str), results["source"].fillna("measured")))
    return candidates["file"].astype(str).map(by_file).fillna("measured")


def with_sizing_rate(candidates: pd.DataFrame, traffic: Traffic, split: bool) -> tuple[pd.DataFrame, str]:
    """`tokens_per_s_per_chip` (with CI) on the basis asked for (module docstring), the basis in
    `sizing_basis`, the point's own mix in `point_output_share`; and the note saying which. The
    estimated options go through it too (budget/estimated.py)."""
    candidates = candidates.assign(point_output_share=point_output_share(candidates),
                                   sizing_basis=SIZING_SPLIT if split else SIZING_BLENDED)
    if not split:
        candidates["tokens_per_s_per_chip"] = blended_rate(candidates["blended_chip_s_per_token"])
        # The low rate comes from the high chip-seconds bound.
        candidates["tokens_per_s_per_chip_ci95_low"] = blended_rate(candidates["blended_chip_s_per_token_ci95_high"])
        candidates["tokens_per_s_per_chip_ci95_high"] = blended_rate(candidates["blended_chip_s_per_token_ci95_low"])
        return candidates, ("sized on blended tokens: each point serves its own measured input/output mix "
                            "(point_output_share) at 1 / its blended chip-seconds per token; the traffic's "
                            "output share is not used (--split sizes input and output tokens apart)")
    rate = pd.Series(mix_rate(candidates["input_chip_s_per_token"], candidates["output_chip_s_per_token"],
                              traffic.output_share), index=candidates.index)
    candidates["tokens_per_s_per_chip"] = rate
    # The mix rate moves with the measured throughput: carry its relative CI across.
    per_chip = candidates["output_tokens_per_s_per_chip"].astype(float)
    for bound in ("ci95_low", "ci95_high"):
        candidates[f"tokens_per_s_per_chip_{bound}"] = (
            rate * candidates[f"output_tokens_per_s_per_chip_{bound}"] / per_chip)
    note = (f"sized on the input/output split at the traffic's {traffic.output_share:.0%} output: offline "
            "points time-attributed, server points by their probe fit (split_method)")
    unsplit = candidates["split_method"].eq(SPLIT_BLENDED_ONLY) & ~np.isfinite(rate)
    if unsplit.any():
        note += (f"; {candidates.loc[unsplit, 'file'].nunique()} server point(s) without an input/output split "
                 "left out (blended only: their split_note says why; drop --split to size on blended tokens)")
    return candidates, note


def size_token_fleet(best: pd.DataFrame, traffic: Traffic, power: Power, columns: list[str] | None = None) -> pd.DataFrame:
    """`best`'s fleets at the traffic's peak (fleet.size_fleet) with their energy, ranked, as `columns`
    (OPTION_COLUMNS by default; the estimated options keep their own)."""
    out = size_fleet(best, "tokens_per_s_per_chip", traffic.peak_tokens_per_s)
    return ranked(_with_energy(out, traffic, power))[columns or OPTION_COLUMNS]


OPTION_COLUMNS = [
    "rank_overall", "rank_in_plan", "source", "workload", "scale", "priced_accelerator", "cloud", "region", "instance_type",
    "chips_per_instance", "plan", "usd_per_instance_hour", "monthly_usd", "monthly_usd_ci95_low",
    "monthly_usd_ci95_high", "instances", "rented_chips", "required_chips", "replicas",
    "fleet_utilisation", "replica_spans_instances", "tokens_per_s_per_chip",
    "tokens_per_s_per_chip_ci95_low", "tokens_per_s_per_chip_ci95_high", "output_tokens_per_s_per_chip",
    "ttft_p99_s", "tpot_p99_s", "scenario_kind", "server_name", "server_version", "concurrency",
    "request_rate", "batch_size", "input_length", "output_length", "dtype", "execution_mode",
    "chips", "tensor_parallel", "expert_parallel", "world_size", "backend", "device", "accelerator", "torch_version",
    "transformers_version", "jax_version",
    "file", "price_source", "price_as_of", "price_age_days", "blended_usd_per_mtok",
    "input_chip_s_per_token", "output_chip_s_per_token", "sizing_basis", "point_output_share", "split_method",
    "split_note", "price_flagged", "price_flag_reason", "traffic_j_per_token", "monthly_kwh", "monthly_kg_co2e",
    "monthly_energy_usd", "energy_in_monthly_usd", "energy_method", "grid_gco2e_per_kwh", "grid_source",
    "monthly_idle_kwh", "idle_w_per_chip", "idle_basis",
]


def _closest_points(candidates: pd.DataFrame, meets: pd.DataFrame, slo: Slo) -> pd.DataFrame:
    point_columns = ["scenario_kind", "server_name", "server_version", "concurrency", "request_rate",
                     "batch_size", "input_length", "output_length", "chips", "ttft_p99_s", "tpot_p99_s",
                     "slo_ratio"]
    columns = PLATFORM_COLUMNS + ["closest_file"] + point_columns + ["misses"]
    platforms = candidates.drop_duplicates(PLATFORM_COLUMNS + ["file"])
    feasible = set(map(tuple, meets[PLATFORM_COLUMNS].drop_duplicates().itertuples(index=False)))
    rows = []
    for key, group in platforms.groupby(PLATFORM_COLUMNS, sort=True, dropna=False):
        if tuple(key) in feasible:
            continue
        closest = group.sort_values(["slo_ratio", "tokens_per_s_per_chip"], ascending=[True, False]).iloc[0]
        rows.append({**dict(zip(PLATFORM_COLUMNS, key)), "closest_file": closest["file"],
                     **{c: closest[c] for c in point_columns},
                     "misses": _misses(closest, slo)})
    return pd.DataFrame(rows, columns=columns)


def _with_platform_columns(options: pd.DataFrame, mixes: pd.DataFrame | None,
                           tiers: pd.DataFrame | None) -> pd.DataFrame:
    """The per-platform mix (`buy_*`) and tier costs (`tco_<tier>_monthly_usd`) on every option row
    of the platform, so that the CSV carries them beside each plan's own cost."""
    def key(df: pd.DataFrame) -> pd.Series:
        # A result without a scale (a server's) has NaN there, typed differently frame to frame.
        parts = df[["workload", "scale", "cloud", "region", "instance_type"]].astype(object).fillna("").astype(str)
        return pd.Series(["|".join(p) for p in parts.itertuples(index=False)], index=df.index, dtype=object)

    if options.empty:
        return options
    out = options.assign(_platform=key(options))
    if mixes is not None and len(mixes):
        buy = mixes[["months", "base_plan", "peak_plan", "monthly_usd", "monthly_usd_ci95_low",
                     "monthly_usd_ci95_high"]].add_prefix("buy_").assign(_platform=key(mixes))
        out = out.merge(buy, on="_platform", how="left")
    if tiers is not None and len(tiers):
        for tier, rows in tiers.groupby("tier", sort=False):
            column = tco.tier_column(tier)
            out = out.merge(rows[["monthly_usd"]].rename(columns={"monthly_usd": column}).assign(
                _platform=key(rows)), on="_platform", how="left")
    return out.drop(columns="_platform")


# ----------------------------------------------------------------------------- tpubench budget

def plan_tokens(results: pd.DataFrame, prices: pd.DataFrame, tokens_per_day: float, options: BudgetOptions,
                unit=None, today: date | None = None) -> BudgetResult:
    """`plan_budget` on the options of `tpubench budget` (budget/request.py)."""
    return plan_budget(results, prices, tokens_per_day=tokens_per_day, output_share=options.output_share,
                       peak_factor=options.peak_factor, slo_ttft_s=options.ms_to_s(options.slo_ttft_ms),
                       slo_tpot_s=options.ms_to_s(options.slo_tpot_ms), plans=options.plans, current=options.current,
                       cloud=options.cloud, region=options.region, today=today, scenarios=options.scenarios,
                       split=options.split, include_flagged=options.include_flagged, power=options.power(),
                       months=options.months, peak_hours=options.peak_hours, spot_lost_hours=options.spot_lost_hours,
                       spot_preemption_rate=options.spot_preemption_rate,
                       tco_tiers=None if options.tco is None else tco.load_tco(options.tco))


def check_tokens(tokens_per_day: float, options: BudgetOptions, unit=None) -> None:
    check_token_inputs(tokens_per_day=tokens_per_day, output_share=options.output_share,
                       peak_factor=options.peak_factor, slo_ttft_s=options.ms_to_s(options.slo_ttft_ms),
                       slo_tpot_s=options.ms_to_s(options.slo_tpot_ms), months=options.months,
                       peak_hours=options.peak_hours, spot_lost_hours=options.spot_lost_hours,
                       spot_preemption_rate=options.spot_preemption_rate)
    options.power()


SIZING = Sizing(plan=plan_tokens, check=check_tokens)
