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

A TPU slice is an instance of its size (tpu-v6e-8 rents 8 chips at once). A multi-chip point
(tensor or expert parallel, `chips` = its world size) is one replica of that many chips: a 2-chip
point packs 4 replicas into a tpu-v6e-8 slice, a 4-chip point 2 into an 8-GPU instance, and a
16-chip point takes 2 such instances per replica. Only TPU slices never share a replica: their
chips talk over ICI only inside one slice, so a point wider than a slice is left out of that slice
type (with a note) rather than priced as if separate slices were one. The monthly cost CI comes
from the point's throughput CI. Platforms with no point meeting the SLOs are listed with the point
that came closest.

A training budget (a number of training tokens rather than traffic) is `plan_training`: dollars,
wall-clock hours and the slice or instance to rent, per platform and plan (its docstring has the
formulas).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from datetime import date
from typing import Sequence

import numpy as np
import pandas as pd

from tpubench.measure.per_token import mix_rate
from tpubench.money import cost
from tpubench.money.carbon import JOULES_PER_KWH
from tpubench.records.columns import numeric_column
from tpubench.scenarios import SPLIT_BLENDED_ONLY
from tpubench.errors import UserError

HOURS_PER_MONTH = 730.0
SECONDS_PER_DAY = 86400.0
PLATFORM_COLUMNS = ["workload", "scale", "priced_accelerator", "cloud", "region", "instance_type",
                    "chips_per_instance"]
# Guards ceil() against float noise: 3.0000000000004 replicas is 3 replicas, not 4.
_CEIL_EPS = 1e-9


@dataclass(frozen=True)
class Traffic:
    tokens_per_day: float
    output_share: float
    peak_factor: float = 1.0

    def __post_init__(self):
        if not (isinstance(self.tokens_per_day, (int, float)) and self.tokens_per_day > 0
                and math.isfinite(self.tokens_per_day)):
            raise UserError(f"must be a positive number of tokens, got {self.tokens_per_day}",
                            field="--tokens-per-day")
        if not 0 <= self.output_share <= 1:
            raise UserError(f"is the fraction of tokens that are output, 0..1; got {self.output_share}",
                            field="--output-share")
        if not self.peak_factor >= 1:
            raise UserError(f"peak-to-average factor must be >= 1, got {self.peak_factor}",
                            field="--peak-factor")

    @property
    def peak_tokens_per_s(self) -> float:
        return self.tokens_per_day * self.peak_factor / SECONDS_PER_DAY


@dataclass(frozen=True)
class Slo:
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None

    def __post_init__(self):
        for value, flag in ((self.ttft_p99_s, "--slo-ttft-ms"), (self.tpot_p99_s, "--slo-tpot-ms")):
            if value is not None and not value > 0:
                raise UserError(f"an SLO must be a positive time, got {value}", field=flag)


@dataclass(frozen=True)
class Power:
    """What energy costs a fleet (docs/definitions.md#budget-energy): a power price, the data
    centre's PUE, and whether the prices are of owned capacity (energy then adds to the monthly
    cost; a cloud's rental price already includes it, so there it is only shown)."""

    usd_per_kwh: float | None = None
    pue: float = 1.0
    owned: bool = False
    grid_gco2_per_kwh: float | None = None

    def __post_init__(self):
        if self.usd_per_kwh is not None and not (math.isfinite(self.usd_per_kwh) and self.usd_per_kwh >= 0):
            raise UserError(f"a power price is USD per kWh >= 0, got {self.usd_per_kwh}", field="--power-price")
        if not (math.isfinite(self.pue) and self.pue >= 1):
            raise UserError(f"a PUE is >= 1 (facility power over IT power), got {self.pue}", field="--pue")
        if self.owned and self.usd_per_kwh is None:
            raise UserError("owned capacity needs a power price to add", field="--power-price")


DAYS_PER_MONTH = HOURS_PER_MONTH / 24


def monthly_energy(tokens_per_day, joules_per_token, pue: float):
    """kWh a month for the traffic at its joules per token, facility overhead (PUE) included."""
    return np.multiply(tokens_per_day * DAYS_PER_MONTH * pue, joules_per_token) / JOULES_PER_KWH


def _with_energy(options: pd.DataFrame, traffic: Traffic, power: Power) -> pd.DataFrame:
    """Monthly energy, its cost and its carbon for each option: the traffic's tokens at the chosen
    point's joules per token on the sizing basis (joules per chip-second over tokens/s per chip)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        per_chip_s = numeric_column(options, "blended_j_per_token") / numeric_column(options, "blended_chip_s_per_token")
        options["traffic_j_per_token"] = per_chip_s / numeric_column(options, "tokens_per_s_per_chip")
    options["monthly_kwh"] = monthly_energy(traffic.tokens_per_day, options["traffic_j_per_token"], power.pue)
    if power.grid_gco2_per_kwh is not None:
        options["grid_gco2e_per_kwh"], options["grid_source"] = power.grid_gco2_per_kwh, "user: --grid-gco2-per-kwh"
    options["monthly_kg_co2e"] = options["monthly_kwh"] * numeric_column(options, "grid_gco2e_per_kwh") / 1000
    options["monthly_energy_usd"] = (options["monthly_kwh"] * power.usd_per_kwh if power.usd_per_kwh is not None
                                     else np.nan)
    options["energy_in_monthly_usd"] = power.owned
    if power.owned:
        # An option without an energy figure has no owned-capacity cost: NaN, never a bare price
        # that would undercut the measured options (plan_budget says how many).
        for bound in ("", "_ci95_low", "_ci95_high"):
            options["monthly_usd" + bound] = options["monthly_usd" + bound] + options["monthly_energy_usd"]
    return options


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


def ceil_whole(x) -> np.ndarray:
    return np.ceil(np.asarray(x, dtype=float) - _CEIL_EPS)


def instances_needed(replicas, chips_per_replica, chips_per_instance) -> np.ndarray:
    """Whole instances for `replicas` replicas of `chips_per_replica` chips each."""
    replicas = np.asarray(replicas, dtype=float)
    per_replica = np.asarray(chips_per_replica, dtype=float)
    per_instance = np.asarray(chips_per_instance, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        replicas_per_instance = np.floor(per_instance / per_replica)
        fits = replicas_per_instance >= 1
        packed = ceil_whole(replicas / np.where(fits, replicas_per_instance, 1))
        spanning = replicas * ceil_whole(per_replica / per_instance)
    return np.where(fits, packed, spanning)


def blended_rate(blended_chip_s_per_token):
    """Tokens/s per chip of a point serving its own measured mix: 1 / blended chip-s per token."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(1.0, np.asarray(blended_chip_s_per_token, dtype=float))


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


def parse_platform(text: str) -> dict[str, str]:
    """'cloud/region/instance_type', 'cloud/instance_type' or 'instance_type' -> filter fields."""
    parts = [p.strip() for p in text.split("/") if p.strip()]
    if len(parts) == 3:
        return {"cloud": parts[0].lower(), "region": parts[1], "instance_type": parts[2]}
    if len(parts) == 2:
        return {"cloud": parts[0].lower(), "instance_type": parts[1]}
    if len(parts) == 1:
        return {"instance_type": parts[0]}
    raise UserError(f"'{text}' is not cloud/region/instance_type", field="--current")


def _match_platform(options: pd.DataFrame, spec: dict[str, str]) -> pd.Series:
    mask = pd.Series(True, index=options.index)
    for key, value in spec.items():
        mask &= options[key].astype(str).str.lower() == value.lower()
    return mask


def plan_budget(results: pd.DataFrame, prices: pd.DataFrame, *, tokens_per_day: float,
                output_share: float, peak_factor: float = 1.0, slo_ttft_s: float | None = None,
                slo_tpot_s: float | None = None, plans=None, current: str | None = None,
                cloud=None, region=None, today: date | None = None,
                scenarios: Sequence[str] | str | None = None, split: bool = False,
                include_flagged: bool = False, power: Power | None = None) -> BudgetResult:
    """Size a fleet on every priced platform and plan for the traffic and SLOs (module docstring).

    `results` is `load_results(...)`; `prices` is `pricing.load_prices(...)`. `current` names the
    platform in use ('cloud/region/instance_type', or a shorter unambiguous form): every option then
    carries the monthly saving (positive) or loss (negative) of switching to it, per plan.
    `scenarios` keeps only results of those scenario kinds (e.g. ["serve"]; all kinds when None).
    `split` sizes on the traffic's input/output mix instead of blended tokens (module docstring);
    `include_flagged` lets flagged prices compete (cost.choose_prices). `power` adds each option's
    monthly energy, carbon and energy cost (`_with_energy`), in the monthly cost for owned capacity.
    """
    traffic = Traffic(float(tokens_per_day), float(output_share), float(peak_factor))
    power = power or Power()
    slo = Slo(slo_ttft_s, slo_tpot_s)
    priced, unpriced = cost.price_results(results, prices, plans=plans, cloud=cloud, region=region,
                                          today=today, include_flagged=include_flagged,
                                          grid_gco2_per_kwh=power.grid_gco2_per_kwh)
    notes: list[str] = list(priced.attrs.get(cost.PRICE_NOTES, []))
    if scenarios is not None:
        priced, note = _only_scenarios(priced, scenarios)
        if note:
            notes.append(note)
    candidates = priced[priced["valid"].astype(bool)].copy()
    if len(candidates) < len(priced):
        notes.append(f"{priced.loc[~priced['valid'].astype(bool), 'file'].nunique()} invalid run(s) "
                     "left out of the budget")

    candidates, note = _with_sizing_rate(candidates, traffic, split)
    notes.append(note)
    candidates["slo_ratio"] = _slo_ratio(candidates, slo)
    candidates = candidates[np.isfinite(candidates["tokens_per_s_per_chip"])]
    wider = _wider_than_tpu_slice(candidates)
    if wider.any():
        notes.append(f"{candidates.loc[wider, 'file'].nunique()} multi-chip point(s) left out on TPU slices "
                     "smaller than their world (ICI links chips only within one slice)")
        candidates = candidates[~wider]
    meets = candidates[candidates["slo_ratio"] <= 1]

    group = PLATFORM_COLUMNS + ["plan"]
    best = (meets.sort_values(["tokens_per_s_per_chip", "blended_usd_per_mtok"], ascending=[False, True])
            .drop_duplicates(group, keep="first").copy())
    options = _size_fleet(best, traffic, power)
    if power.owned and options["monthly_usd"].isna().any():
        notes.append(f"{int(options['monthly_usd'].isna().sum())} option(s) have no energy figure (their points "
                     "were measured without energy): no owned-capacity monthly cost, listed last")
    infeasible = _closest_points(candidates, meets, slo)

    if current:
        options, note = _compare_with_current(options, current)
        if note:
            notes.append(note)
    return BudgetResult(traffic=traffic, slo=slo, options=options.reset_index(drop=True),
                        infeasible=infeasible.reset_index(drop=True), unpriced=unpriced,
                        current=current, notes=notes, sizing=SIZING_SPLIT if split else SIZING_BLENDED)


def _with_sizing_rate(candidates: pd.DataFrame, traffic: Traffic, split: bool) -> tuple[pd.DataFrame, str]:
    """`tokens_per_s_per_chip` (with CI) on the basis asked for (module docstring), the basis in
    `sizing_basis`, the point's own mix in `point_output_share`; and the note saying which."""
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


def _only_scenarios(priced: pd.DataFrame, scenarios: Sequence[str] | str) -> tuple[pd.DataFrame, str | None]:
    """The rows of the named scenario kinds, and a note on how many results were left out."""
    wanted = {scenarios} if isinstance(scenarios, str) else set(scenarios)
    wanted = {str(k).strip().lower() for k in wanted}
    keep = priced["scenario_kind"].astype(str).str.lower().isin(wanted)
    left_out = priced.loc[~keep, "file"].nunique()
    note = (f"{left_out} result(s) of other scenario kinds left out (kept: {', '.join(sorted(wanted))})"
            if left_out else None)
    return priced[keep], note


def _wider_than_tpu_slice(df: pd.DataFrame) -> pd.Series:
    """Rows pricing a replica of more chips than one TPU slice (an instance type named tpu-...,
    as the price table names whole slices) holds."""
    tpu = df["instance_type"].astype(str).str.lower().str.startswith("tpu-")
    return tpu & (df["chips"].astype(float) > df["chips_per_instance"].astype(float))


def _size_fleet(best: pd.DataFrame, traffic: Traffic, power: Power) -> pd.DataFrame:
    peak = traffic.peak_tokens_per_s
    chips = best["chips"].astype(float)
    out = best
    for suffix, column in (("", "tokens_per_s_per_chip"), ("_ci95_low", "tokens_per_s_per_chip_ci95_high"),
                           ("_ci95_high", "tokens_per_s_per_chip_ci95_low")):
        # The low cost bound comes from the high throughput bound, and vice versa.
        replicas = ceil_whole(peak / (out[column].astype(float) * chips))
        instances = instances_needed(replicas, chips, out["chips_per_instance"])
        out["monthly_usd" + suffix] = instances * out["usd_per_instance_hour"] * HOURS_PER_MONTH
        if not suffix:
            out["replicas"] = replicas.astype(int)
            out["required_chips"] = (replicas * chips).astype(int)
            out["instances"] = instances.astype(int)
            out["rented_chips"] = (instances * out["chips_per_instance"]).astype(int)
            out["fleet_utilisation"] = peak / (out["tokens_per_s_per_chip"] * out["rented_chips"])
    out["replica_spans_instances"] = out["chips"] > out["chips_per_instance"]
    out = _with_energy(out, traffic, power)
    out = out.sort_values(["workload", "scale", "monthly_usd"], kind="stable")
    # dropna=False: a result without a scale (a server's workload, say) is ranked too.
    out["rank_in_plan"] = out.groupby(["workload", "scale", "plan"], dropna=False).cumcount() + 1
    out["rank_overall"] = out.groupby(["workload", "scale"], dropna=False).cumcount() + 1
    return out[OPTION_COLUMNS]


OPTION_COLUMNS = [
    "rank_overall", "rank_in_plan", "workload", "scale", "priced_accelerator", "cloud", "region", "instance_type",
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


def _compare_with_current(options: pd.DataFrame, current: str) -> tuple[pd.DataFrame, str | None]:
    spec = parse_platform(current)
    mask = _match_platform(options, spec)
    if not mask.any():
        return options.assign(saving_vs_current_usd_per_month=math.nan, saving_vs_current_pct=math.nan,
                              vs_current="unknown"), (
            f"current platform '{current}' has no option meeting the SLOs (or no price): no savings computed")
    matched = options[mask]
    where = matched[["cloud", "region", "instance_type"]].drop_duplicates()
    if len(where) > 1:
        choices = ", ".join("/".join(r) for r in where.astype(str).itertuples(index=False))
        raise UserError(f"'{current}' matches several platforms: {choices}", field="--current")
    reference = matched.drop_duplicates(["workload", "scale", "plan"]).set_index(["workload", "scale", "plan"])
    keys = list(zip(options["workload"], options["scale"], options["plan"]))
    ref_cost = np.array([reference["monthly_usd"].get(k, math.nan) for k in keys], dtype=float)
    ref_low = np.array([reference["monthly_usd_ci95_low"].get(k, math.nan) for k in keys], dtype=float)
    ref_high = np.array([reference["monthly_usd_ci95_high"].get(k, math.nan) for k in keys], dtype=float)
    out = options.copy()
    out["current_monthly_usd"] = ref_cost
    out["saving_vs_current_usd_per_month"] = ref_cost - out["monthly_usd"]
    out["saving_vs_current_pct"] = out["saving_vs_current_usd_per_month"] / ref_cost * 100
    out["vs_current"] = [
        cost.compare_costs(a, (ah - al) / 2, b, (bh - bl) / 2) if math.isfinite(b) else "unknown"
        for a, al, ah, b, bl, bh in zip(out["monthly_usd"], out["monthly_usd_ci95_low"],
                                         out["monthly_usd_ci95_high"], ref_cost, ref_low, ref_high)
    ]
    out["is_current"] = mask.values
    return out, None


# ----------------------------------------------------------------------------- training budget

@dataclass
class TrainingBudget:
    train_tokens: float
    options: pd.DataFrame          # one row per platform x plan with a valid training point, ranked
    unpriced: pd.DataFrame         # results that could not be priced, and why
    notes: list[str] = field(default_factory=list)


def plan_training(results: pd.DataFrame, prices: pd.DataFrame, *, train_tokens: float, plans=None,
                  cloud=None, region=None, today: date | None = None,
                  scenarios: Sequence[str] | str | None = None, include_flagged: bool = False) -> TrainingBudget:
    """Dollars, wall-clock hours and the slice or instance to rent to train on `train_tokens`
    tokens, per priced platform (cloud, region, instance type) and plan (docs/definitions.md#budget).

    Rows with training figures (`cost.is_training`: a `train_s_per_token` column) compete; invalid
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
    if not (isinstance(train_tokens, (int, float)) and math.isfinite(train_tokens) and train_tokens > 0):
        raise UserError(f"must be a positive number of tokens, got {train_tokens}", field="--train-tokens")
    priced, unpriced = cost.price_results(results, prices, plans=plans, cloud=cloud, region=region, today=today,
                                          include_flagged=include_flagged)
    notes: list[str] = list(priced.attrs.get(cost.PRICE_NOTES, []))
    if scenarios is not None:
        priced, note = _only_scenarios(priced, scenarios)
        if note:
            notes.append(note)
    training = priced[cost.is_training(priced)]
    others = priced.loc[~cost.is_training(priced), "file"].nunique()
    if others:
        notes.append(f"{others} result(s) without training figures left out (inference points: use "
                     "--tokens-per-day)")
    candidates = training[training["valid"].astype(bool)].copy()
    if len(candidates) < len(training):
        notes.append(f"{training.loc[~training['valid'].astype(bool), 'file'].nunique()} invalid training "
                     "run(s) left out of the budget")
    candidates = candidates[np.isfinite(candidates["train_chip_s_per_token"].astype(float))
                            & (candidates["train_chip_s_per_token"].astype(float) > 0)]
    wider = _wider_than_tpu_slice(candidates)
    if wider.any():
        notes.append(f"{candidates.loc[wider, 'file'].nunique()} training point(s) left out on TPU slices "
                     "smaller than their world (ICI links chips only within one slice)")
        candidates = candidates[~wider]
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


SECONDS_PER_HOUR = cost.SECONDS_PER_HOUR
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
