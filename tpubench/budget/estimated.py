"""Estimated options in a token budget (docs/definitions.md#budget-estimates): a workload's full
architecture on chips not measured (`tpubench budget tokens RESULTS --on tpu-v6e-8 --on H100:8`,
estimated by tpubench/estimate), sized for the same traffic as the measured options and kept apart
from them.

Each estimate (a workload, a chip as written with its quantisation, a precision, a pair of lengths)
is its own sweep of loads (estimate.command.load_sweep). Per plan its operating point is the
answer's (output/answer/operating_point.py): its cheapest load that meets the service level, or the
point between that load and the next where the binding bound is met exactly, every figure taken
there linear in log(load) (`at_point`). The service level is the budget's `--slo-ttft-ms` /
`--slo-tpot-ms` where either is given (at p99, as the measured options are held to), else the
workload's `slo:`, else the answer's stated default (output/answer/service_level.slo_of).

At that point the estimate spends c chip-seconds per token, its $/Mtok over its price per
chip-second (c = $/Mtok / 1e6 / ($/chip-h / 3600)), for input, output and all tokens, each with its
90% prediction interval. Its tokens/s per chip then follow the measured options' rule
(budget/tokens.with_sizing_rate: 1 / c_all at the estimate's own lengths, or the traffic's mix with
--split), and its fleet the same sizing (budget/tokens.size_token_fleet, budget/fleet.size_fleet):
replicas of the option's chips (`tpu-v6e-8`: 8, `H100:1`: 1) in whole instances of the price row
it is priced at (money/fleet_size.py: a tpu-v6e-8 slice holds one 8-chip replica, a p5.48xlarge
eight 1-GPU ones; a replica wider than the instance spans several, as a TPU slice billed per chip
is), at the plan's price. The monthly cost's low and high come from the throughput's interval.

What cannot be sized is listed with why (`not_sized`): a chip the estimate refuses, a plan without
a price (money.price_gaps), an operating point that misses the service level. The estimates are
ranked among themselves; no measured total, buying mix (--months), TCO tier or saving against
--current includes them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from tpubench.budget.fleet import without_huge_fleets
from tpubench.budget.request import BudgetOptions
from tpubench.budget.tokens import Slo, Traffic, size_token_fleet, with_sizing_rate
from tpubench.money import price_gaps
from tpubench.money.cost import usd_per_chip_second
from tpubench.money.pricing import load_unpriced_notes, plan_names, prefer_unflagged
from tpubench.output.answer.operating_point import INTERPOLATED, OperatingPoint, operating_point
from tpubench.output.answer.options import ESTIMATE, INTERVAL, estimate_sweep
from tpubench.output.answer.service_level import Slo as ServiceLevel
from tpubench.output.answer.service_level import slo_of
from tpubench.units import number
from tpubench.workload_spec.vocabulary import FULL_SCALE

FLAGS_SOURCE = "the budget's --slo-ttft-ms / --slo-tpot-ms, as for the measured options"
# One estimate's sweep of loads: what makes it one option of the budget.
SWEEP = ["workload", "target", "precision", "input_length", "output_length"]
NOT_SIZED_COLUMNS = ["workload", "option", "plan", "why"]
# The figures an estimate row prices, each read at the operating point with its interval.
_COSTS = ("input", "output", "blended")
_BOUNDS = (("", ""), ("_low", "_ci95_low"), ("_high", "_ci95_high"))
# The columns of a sized estimate, before `_interval_names` (the CSV's, beside the measured options').
COLUMNS = [
    "rank_overall", "rank_in_plan", "source", "workload", "scale", "option", "target", "priced_accelerator",
    "precision", "chips", "cloud", "region", "instance_type", "chips_per_instance", "price_instance_chips", "plan",
    "usd_per_chip_hour", "usd_per_instance_hour", "monthly_usd", "monthly_usd_ci95_low", "monthly_usd_ci95_high",
    "interval", "instances", "rented_chips", "required_chips", "replicas", "fleet_utilisation",
    "tokens_per_s_per_chip", "tokens_per_s_per_chip_ci95_low", "tokens_per_s_per_chip_ci95_high", "sizing_basis",
    "point_output_share", "status", "operating_point", "load", "input_length", "output_length", "percentile", "ttft_s",
    "tpot_s", "tokens_per_s_per_user", "slo", "slo_source", "blended_usd_per_mtok", "blended_usd_per_mtok_ci95_low",
    "blended_usd_per_mtok_ci95_high", "input_chip_s_per_token", "output_chip_s_per_token", "blended_chip_s_per_token",
    "price_source", "price_as_of", "price_flagged", "price_flag_reason", "calibration", "notes",
]


@dataclass
class EstimatedBudget:
    """The estimated side of a token budget (module notes)."""

    options: pd.DataFrame                   # one row per estimate and plan meeting its service level, ranked
    not_sized: pd.DataFrame                 # NOT_SIZED_COLUMNS: what could not be sized, and why
    slos: dict[str, ServiceLevel]           # per workload: the service level its estimates are taken at
    notes: list[str] = field(default_factory=list)

    def csv_rows(self) -> pd.DataFrame:
        """The sized estimates, then one row per estimate not sized with why (`why_not`)."""
        missing = self.not_sized.rename(columns={"why": "why_not"}).assign(source=ESTIMATE)
        return pd.concat([self.options, missing], ignore_index=True) if len(missing) else self.options


def service_level(slo: Slo, path: str, workload_points) -> ServiceLevel:
    """The service level a workload's estimates are taken at (module notes)."""
    if slo.ttft_p99_s is not None or slo.tpot_p99_s is not None:
        return ServiceLevel(ttft_s=slo.ttft_p99_s, tpot_s=slo.tpot_p99_s, percentile=99, source=FLAGS_SOURCE)
    return slo_of(workload_points, path)


def estimated_budget(made, traffic: Traffic, slo: Slo, options: BudgetOptions, prices: pd.DataFrame, *,
                     split: bool = False, unpriced: pd.DataFrame | None = None) -> EstimatedBudget:
    """The estimated options of `made` (estimate.for_reports.ReportEstimates: rows of each estimate's
    sweep per plan, the workloads read, the notes of those that could not be) sized for `traffic`."""
    unpriced = load_unpriced_notes() if unpriced is None else unpriced
    workloads = {wl.name: (path, wl) for path, wl in made.contexts.values()}
    slos = {name: service_level(slo, path, wl) for name, (path, wl) in workloads.items()}
    notes = list(made.notes)
    rows = made.rows
    if len(rows) and not rows["workload"].isin(slos).all():
        others = sorted(set(rows.loc[~rows["workload"].isin(slos), "workload"].astype(str)))
        notes.append(f"estimate records of {', '.join(others)} left out: no workload file of theirs was read "
                     "(name it with --workload)")
        rows = rows[rows["workload"].isin(slos)]
    points, not_sized = operating_points(rows, slos, list(options.plans or plan_names(prices)), unpriced)
    sized = _sized(points, traffic, split, options, prices, notes)
    return EstimatedBudget(sized, pd.DataFrame(not_sized, columns=NOT_SIZED_COLUMNS).drop_duplicates(), slos, notes)


def option_name(row) -> str:
    """'TPU v6e ×8 (tpu-v6e-8) · bf16', as the answer names it; a refused chip without its precision."""
    target, refused = str(row["target"]), bool(row["refused"])
    return (f"{row['accelerator']} ×{number(row['chips'])} ({target})"
            + ("" if refused or "@" in target else f" · {row['precision']}"))


def operating_points(rows: pd.DataFrame, slos: dict[str, ServiceLevel], plans: list[str],
                     unpriced: pd.DataFrame) -> tuple[list[dict], list[dict]]:
    """(one candidate per estimate and plan whose operating point meets its workload's service
    level, one NOT_SIZED row for every other: a chip refused, a plan not priced, a miss)."""
    points, not_sized = [], []
    if rows.empty:
        return points, not_sized
    rows = rows.assign(**{c: rows[c].fillna("").astype(str) for c in ("precision", "refused", "plan")})
    for _, sweep in rows.groupby(SWEEP, sort=False, dropna=False):
        first = sweep.iloc[0]
        usable = sweep[(sweep["refused"] == "") & (sweep["plan"] != "")]
        if (sweep["refused"] != "").all():
            not_sized.append(_not_sized(first, "", f"no estimate: {first['refused']}"))
            continue
        slo = slos[first["workload"]]
        for plan in plans:
            mine = usable[usable["plan"] == plan].sort_values("concurrency", kind="stable").reset_index(drop=True)
            if mine.empty:
                not_sized.append(_not_sized(first, plan, price_gaps.missing_price(first["accelerator"], plan, unpriced)))
                continue
            op = operating_point(estimate_sweep(mine, slo), slo)
            if op.ranked:
                points.append(candidate(mine, op, slo))
            else:
                # The same sweep misses alike on every plan: one row, with no plan.
                not_sized.append(_not_sized(first, "", f"does not meet the service level: {op.miss}"))
    return points, not_sized


def _not_sized(row, plan: str, why: str) -> dict:
    return {"workload": row["workload"], "option": option_name(row), "plan": plan, "why": why}


def at_point(sweep: pd.DataFrame, op: OperatingPoint, column: str) -> float:
    """`column` of a sweep (its rows by load, as the operating point was found on) at the operating
    point: the row it was taken at, or, interpolated, between that row and the next, linear in
    log(load) as every interpolated figure is (output/answer/operating_point.py)."""
    k = op.point.position
    value = float(sweep[column].iloc[k])
    if op.status != INTERPOLATED:
        return value
    load, after_load = float(sweep["concurrency"].iloc[k]), float(sweep["concurrency"].iloc[k + 1])
    t = math.log(op.point.load / load) / math.log(after_load / load)
    after = float(sweep[column].iloc[k + 1])
    if not (value > 0 and after > 0 and math.isfinite(value) and math.isfinite(after)):
        return value if t == 0 else math.nan
    return math.exp(math.log(value) + t * (math.log(after) - math.log(value)))


def candidate(sweep: pd.DataFrame, op: OperatingPoint, slo: ServiceLevel) -> dict:
    """One estimate at its operating point, in the columns the budget's sizing reads (module notes):
    chip-seconds per token from its $/Mtok and price, the 90% interval where a measurement's CI goes."""
    row = sweep.iloc[op.point.position]
    per_chip_hour = float(row["usd_per_chip_hour"])
    per_chip_s = usd_per_chip_second(per_chip_hour, 1)
    out = {"source": ESTIMATE, "valid": True, "workload": row["workload"], "scale": FULL_SCALE,
           "option": option_name(row), "target": row["target"], "priced_accelerator": row["accelerator"],
           "precision": row["precision"], "chips": float(row["chips"]), "cloud": row["cloud"],
           "region": row["region"], "instance_type": row["instance_type"], "plan": row["plan"],
           "usd_per_chip_hour": per_chip_hour,
           "price_as_of": row["price_as_of"], "input_length": row["input_length"], "output_length": row["output_length"],
           "interval": INTERVAL[ESTIMATE], "status": op.status, "operating_point": op.words(), "load": op.point.load,
           "percentile": slo.percentile, "ttft_s": op.point.ttft_s, "tpot_s": op.point.tpot_s,
           "tokens_per_s_per_user": op.tokens_per_s_per_user, "slo": slo.words(), "slo_source": slo.source,
           "split_method": ESTIMATE, "calibration": _calibration(row), "notes": _notes(row)}
    for suffix, bound in _BOUNDS:
        out["output_tokens_per_s_per_chip" + bound] = at_point(sweep, op, "output_tokens_per_s_per_chip" + suffix)
        for kind in _COSTS:
            usd = at_point(sweep, op, f"{kind}_usd_per_mtok{suffix}")
            out[f"{kind}_usd_per_mtok{bound}"] = usd
            out[f"{kind}_chip_s_per_token{bound}"] = usd / 1e6 / per_chip_s
    return out


def _calibration(row) -> str:
    return (f"{number(row.get('calibration_rows'))} published rows of {row.get('chip_family')} "
            f"({number(row.get('calibration_rows_same_chip'))} on {row.get('accelerator')})")


def _notes(row) -> str:
    notes = row.get("notes")
    return "" if notes is None or (isinstance(notes, float) and math.isnan(notes)) else str(notes)


def _sized(points: list[dict], traffic: Traffic, split: bool, options: BudgetOptions, prices: pd.DataFrame,
           notes: list[str]) -> pd.DataFrame:
    """The candidates' fleets, sized and ranked as the measured options are, with their price rows'
    source and flag; the notes say what the sizing left out or could not price."""
    if not points:
        return pd.DataFrame(columns=_interval_names(COLUMNS))
    frame = with_price_rows(pd.DataFrame(points), prices)
    # Rented as the price row's instance (a record priced with another table: as its own chips).
    frame["chips_per_instance"] = frame["price_instance_chips"].fillna(frame["chips"]).astype(float)
    frame["usd_per_instance_hour"] = frame["usd_per_chip_hour"] * frame["chips_per_instance"]
    frame, _ = with_sizing_rate(frame, traffic, split)
    frame, note = without_huge_fleets(frame, "tokens_per_s_per_chip", traffic.peak_tokens_per_s, "--tokens-per-day",
                                      "tokens")
    notes += [note] if note else []
    power = options.power()
    sized = size_token_fleet(frame.copy(), traffic, power, COLUMNS)
    if power.owned:
        notes.append("with --owned the estimates have no energy figure, so no owned-capacity monthly cost")
    notes += _instance_notes(sized)
    return sized.rename(columns=dict(zip(COLUMNS, _interval_names(COLUMNS))))


def _instance_notes(sized: pd.DataFrame) -> list[str]:
    """How a chip whose replica is not one whole instance is rented, once per chip and instance."""
    out = []
    other = sized[sized["chips_per_instance"] != sized["chips"]]
    for r in other.drop_duplicates(["target", "instance_type"]).to_dict("records"):
        chips, per = float(r["chips"]), float(r["chips_per_instance"])
        how = (f"{number(per // chips)} replicas of {_chips(chips)} to an instance" if per > chips else
               f"each replica of {_chips(chips)} spans {number(math.ceil(chips / per))} instances")
        if per < chips and str(r["instance_type"]).lower().startswith("tpu-"):
            how += f" (TPU slices are billed per chip: what one {number(chips)}-chip slice costs)"
        out.append(f"{r['target']}: rented as {r['instance_type']} ({_chips(per)}), the instance the price table "
                   f"prices it at: {how}")
    return out


def _chips(n: float) -> str:
    return f"{number(n)} chip{'' if n == 1 else 's'}"


def _interval_names(columns: list[str]) -> list[str]:
    """An estimate's interval is a 90% prediction interval, not a 95% CI: `_low` / `_high`."""
    return [c.replace("_ci95_", "_") for c in columns]


def with_price_rows(frame: pd.DataFrame, prices: pd.DataFrame) -> pd.DataFrame:
    """Each candidate with its price row's source, flag and instance size (`price_instance_chips`)."""
    keys = ["cloud", "region", "instance_type", "plan"]
    table = (prefer_unflagged(prices).sort_values("usd_per_chip_hour", kind="stable").drop_duplicates(keys)
             [keys + ["source", "flagged", "flag_reason", "chips_per_instance"]]
             .rename(columns={"source": "price_source", "flagged": "price_flagged", "flag_reason": "price_flag_reason",
                              "chips_per_instance": "price_instance_chips"}))
    return frame.merge(table, on=keys, how="left")


__all__ = ["COLUMNS", "EstimatedBudget", "NOT_SIZED_COLUMNS", "at_point", "candidate", "estimated_budget",
           "operating_points", "service_level"]
