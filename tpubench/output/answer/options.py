"""The answer's options at the service level (DESIGN s25): each option's cheapest operating point
that meets the SLO (output/answer/operating_point.py), one row per option and purchase plan.

- measured: your result files, one option per workload, chip, stack, precision and scale; its
  sweeps (one per pair of lengths) are its points by load (batch size, concurrency or request
  rate), valid points only; a smaller scale than the full architecture (a CPU smoke test), or an
  option none of whose points is valid, is listed for reference, never ranked.
- estimate: the workload's full architecture on a chip of `compare_on` / `--on`, its own sweep of
  loads (estimate.command.load_sweep), a latency at the SLO's percentile read from its median and
  the calibration's p99 / median (output/answer/service_level.at_percentile).

The published options are made beside (output/answer/published.py), on the same sweeps.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from tpubench.money import price_gaps
from tpubench.output.answer.operating_point import OperatingPoint, SweepPoint, better, operating_point
from tpubench.output.answer.service_level import Slo, at_percentile
from tpubench.output.labels import precision_label, stack_label
from tpubench.records.usable import noise_label, usable_mask
from tpubench.units import number, sig
from tpubench.workload_spec.vocabulary import FULL_SCALE

MEASURED, ESTIMATE, PUBLISHED = "measured", "estimate", "published"
INTERVAL = {MEASURED: "95% CI", ESTIMATE: "90% prediction interval", PUBLISHED: "none (one published figure)"}
# Why a measured point at a smaller scale is listed, not ranked; source_label reads its scale back.
SMOKE_TEST = "smoke test at the '{scale}' scale, not the full architecture"
SMOKE_TEST_PATTERN = re.compile("^" + re.escape(SMOKE_TEST).replace(re.escape("{scale}"), "(.+)") + "$")
COLUMNS = ["workload", "plan", "source", "option", "accelerator", "chips", "precision", "status", "point", "load",
           "ttft_s", "tpot_s", "tokens_per_s_per_user", "tokens_per_s_per_chip", "usd_per_mtok", "usd_per_mtok_low",
           "usd_per_mtok_high", "interval", "usd_per_chip_hour", "chips_per_instance", "price_basis", "price_as_of",
           "region",
           "in_verdict", "why_not", "note", "reference", "launch_on", "family"]
# The columns of an option's sweep (`Answer.sweeps`: what the answer's figure draws).
SWEEP_COLUMNS = ["workload", "plan", "option", "source", "load", "tokens_per_s_per_user", "usd_per_mtok", "chosen"]


def option_row(**fields) -> dict:
    """An option row with every column (missing ones empty)."""
    row = {c: math.nan for c in COLUMNS}
    row.update({"point": "", "status": "", "why_not": "", "note": "", "reference": "", "launch_on": "",
                "price_basis": "", "price_as_of": "", "region": "", "precision": "", "family": "", "in_verdict": False})
    row.update(fields)
    return row


def operating_fields(op: OperatingPoint) -> dict:
    """What an option row shows of its operating point."""
    p = op.point
    return {"status": op.status, "point": op.words(), "load": p.load, "ttft_s": p.ttft_s, "tpot_s": p.tpot_s,
            "tokens_per_s_per_user": op.tokens_per_s_per_user, "tokens_per_s_per_chip": p.tokens_per_s_per_chip,
            "usd_per_mtok": p.usd_per_mtok, "usd_per_mtok_low": p.usd_per_mtok_low,
            "usd_per_mtok_high": p.usd_per_mtok_high}


def price_words(cloud, instance, region, usd_per_chip_hour, as_of) -> str:
    return f"list price: {cloud} {instance} ({region}), ${sig(usd_per_chip_hour)}/chip-h, as of {as_of}"


def sweep_rows(workload: str, plan: str, option: str, source: str, points: list[SweepPoint],
               op: OperatingPoint | None) -> list[dict]:
    """An option's sweep as rows of SWEEP_COLUMNS, its operating point among them (`chosen`)."""
    out = [{"workload": workload, "plan": plan, "option": option, "source": source, "load": p.load,
            "tokens_per_s_per_user": 1 / p.tpot_s if p.tpot_s > 0 else math.nan, "usd_per_mtok": p.usd_per_mtok,
            "chosen": False} for p in points]
    if op is not None and op.ranked:
        out.append({"workload": workload, "plan": plan, "option": option, "source": source, "load": op.point.load,
                    "tokens_per_s_per_user": op.tokens_per_s_per_user, "usd_per_mtok": op.point.usd_per_mtok,
                    "chosen": True})
    return out


# --- measured ---------------------------------------------------------------------------------------

# One option: a workload's platform, stack and precision at one scale. Its sweeps add the lengths.
MEASURED_OPTION = ["workload", "plan", "scale", "priced_accelerator", "chips", "quantization", "dtype",
                   "server_name", "scenario_kind", "backend"]
_LOADS = ("batch_size", "concurrency", "request_rate")
# What names a measured point's precision (output/labels.precision_label), in its argument order.
_DTYPES = ("weight_dtype", "activation_dtype", "kv_cache_dtype", "dtype")


def _column(rows: pd.DataFrame, name: str) -> np.ndarray:
    return pd.to_numeric(rows[name], errors="coerce").to_numpy(dtype=float) if name in rows else np.full(len(rows), np.nan)


def _loads(rows: pd.DataFrame) -> np.ndarray:
    """Per row the first of _LOADS that is a finite number above 0 (its load), else NaN."""
    out = np.full(len(rows), np.nan)
    for column in _LOADS:
        value = _column(rows, column)
        take = np.isnan(out) & np.isfinite(value) & (value > 0)
        out[take] = value[take]
    return out


class _MeasuredRows:
    """The priced rows measured_options reads, each column read once as an array, and the options'
    groups and sweeps as row positions: slicing a DataFrame per option and per sweep (hundreds of
    times in a 10,000-result report) was most of the answer's time."""

    def __init__(self, rows: pd.DataFrame):
        self.frame = rows.reset_index(drop=True)
        self.usable = usable_mask(self.frame).to_numpy(dtype=bool)
        self.loads = _loads(self.frame)
        self._numbers: dict[str, np.ndarray] = {}
        self._groups: dict[tuple, np.ndarray] = {}
        self._values: dict[str, list] = {}

    def numbers(self, name: str) -> np.ndarray:
        if name not in self._numbers:
            self._numbers[name] = _column(self.frame, name)
        return self._numbers[name]

    def groups(self, by: list[str], at: np.ndarray | None = None) -> list[np.ndarray]:
        """Row positions (ascending) of each group of `by`, in the order groups first appear, over
        the rows `at` (all by default); missing values form groups of their own."""
        key = tuple(by)
        if key not in self._groups:
            self._groups[key] = self.frame.groupby(list(by), sort=False, dropna=False).ngroup().to_numpy()
        at = np.arange(len(self.frame)) if at is None else at
        ids = self._groups[key][at]
        return [at[ids == g] for g in dict.fromkeys(ids.tolist())]

    def sweep(self, at: np.ndarray, headline: str, throughput: str, slo: Slo) -> list[SweepPoint]:
        """A measured sweep's points (rows `at`, one result each, priced in one plan), latencies at
        the SLO's percentile (results give p50, p90, p95 and p99); a point's position is its row's."""
        q = slo.percentile
        ttft, tpot = self.numbers(f"ttft_p{q}_s")[at], self.numbers(f"tpot_p{q}_s")[at]
        cost, low, high = (self.numbers(c)[at] for c in (headline, f"{headline}_ci95_low", f"{headline}_ci95_high"))
        low, high = np.where(np.isfinite(low), low, cost), np.where(np.isfinite(high), high, cost)
        rate = self.numbers(f"{throughput}_per_chip")[at]
        # As Python floats, column by column: indexing numpy arrays point by point took most of it.
        return [SweepPoint(load=load, ttft_s=t1, tpot_s=t2, usd_per_mtok=c, usd_per_mtok_low=lo, usd_per_mtok_high=hi,
                           tokens_per_s_per_chip=r, position=i)
                for load, t1, t2, c, lo, hi, r, i in zip(self.loads[at].tolist(), ttft.tolist(), tpot.tolist(),
                                                         cost.tolist(), low.tolist(), high.tolist(), rate.tolist(),
                                                         at.tolist())]

    def records(self, at, names) -> list[dict]:
        """Rows `at` as dicts of only the columns `names` that the rows have."""
        for name in names:
            if name in self.frame and name not in self._values:
                self._values[name] = self.frame[name].tolist()
        return [{name: self._values[name][i] for name in names if name in self._values} for i in at]


def measured_columns(headline: str, throughput: str) -> list[str]:
    """Every column measured_options reads of the priced rows: a caller may pass these alone (a
    10,000-result report's rows have ~300 columns, and copying them per group was most of its time)."""
    latencies = [f"{m}_p{q}_s" for m in ("ttft", "tpot") for q in (50, 90, 95, 99)]
    return list(dict.fromkeys([
        headline, f"{headline}_ci95_low", f"{headline}_ci95_high", f"{throughput}_per_chip", *latencies, *_LOADS,
        "file", *MEASURED_OPTION, "status", "valid", "invalid_reasons", "noisy", "headline_cv", "input_length",
        "output_length", "usd_per_chip_hour", "chips_per_instance", "cloud", "instance_type", "region",
        "price_as_of", "weight_dtype", "activation_dtype", "kv_cache_dtype", "server_version"]))


def measured_options(points: pd.DataFrame, headline: str, throughput: str, slos: dict[str, Slo],
                     default: Slo) -> tuple[list[dict], list[dict]]:
    """(option rows, sweep rows) of your measured points: every priced result of the unit, one row
    per price row it was priced at (module notes)."""
    if points is None or points.empty:
        return [], []
    # A result priced on several instances of one plan: its cheapest.
    rows = points.sort_values(headline, kind="stable").drop_duplicates(["file", "plan"], keep="first")
    # Text columns as Python objects (the same str values, NaN where missing): a row read as a
    # record then holds what a loop over the rows expects.
    rows = _MeasuredRows(rows.astype({c: object for c, t in rows.dtypes.items() if isinstance(t, pd.StringDtype)}))
    files = rows.frame["file"].astype(str).to_numpy() if "file" in rows.frame else None
    options, sweeps = [], []
    for group in rows.groups([k for k in MEASURED_OPTION if k in rows.frame]):
        first = rows.frame.iloc[group[0]].to_dict()
        slo = slos.get(str(first["workload"]), default)
        option, best, chosen_sweep = _measured_option(rows, group, first, headline, throughput, slo)
        r = rows.frame.iloc[best.point.position].to_dict() if best is not None else first
        full = first.get("scale") in (FULL_SCALE, None) or str(first.get("scale")) == "nan"
        why = "" if full else SMOKE_TEST.format(scale=first["scale"])
        if not why and not rows.usable[group].any():
            why = f"invalid: {first.get('invalid_reasons') or 'see the runs table'}"
        if not why and best is not None and not best.ranked:
            why = f"does not meet the SLO: {best.miss}"
        fields = operating_fields(best) if best is not None else {}
        on_sweep = np.array([p.position for p in chosen_sweep], dtype=int)
        options.append(option_row(
            workload=first["workload"], plan=first["plan"], source=MEASURED, option=option,
            accelerator=first["priced_accelerator"], chips=first["chips"],
            precision=precision_label(*(first.get(k) for k in _DTYPES)),
            interval=INTERVAL[MEASURED], usd_per_chip_hour=r["usd_per_chip_hour"],
            chips_per_instance=r.get("chips_per_instance"),
            price_basis=price_words(r["cloud"], r["instance_type"], r["region"], r["usd_per_chip_hour"],
                                    r.get("price_as_of")),
            price_as_of=str(r.get("price_as_of") or ""), region=str(r.get("region") or ""),
            in_verdict=not why, why_not=why, reference=_measured_reference(files[group] if files is not None else []),
            note=_noise(rows.records(on_sweep, ("noisy", "headline_cv"))), **fields))
        sweeps += sweep_rows(first["workload"], first["plan"], option, MEASURED, chosen_sweep, best)
    return options, sweeps


def _measured_option(rows: _MeasuredRows, group: np.ndarray, first: dict, headline: str, throughput: str,
                     slo: Slo):
    """(option name, its operating point, that sweep's points): of the option's sweeps (one per
    pair of lengths, usable points only where it has any), the cheapest that meets the SLO, else
    the nearest miss."""
    option = f"{first['priced_accelerator']} ×{number(first['chips'])} · {stack_label(first)}"
    usable = group[rows.usable[group]]
    use = usable if len(usable) else group
    best = best_points = None
    for sweep in rows.groups(["input_length", "output_length"], use):   # its sweeps, in order
        points = rows.sweep(sweep, headline, throughput, slo)
        op = operating_point(points, slo)
        if op is not None and better(op, best):
            best, best_points = op, points
    return option, best, best_points or []


def _noise(records: list[dict]) -> str:
    """'noisy: CV 25.4%' where a point of the sweep the option was taken on is noisy (records/usable.py:
    used and ranked, with its wider interval), else ''."""
    return "; ".join(dict.fromkeys(label for label in map(noise_label, records) if label))


def _measured_reference(files) -> str:
    files = sorted(set(files))
    return f"your results: {files[0]}" + (f" and {len(files) - 1} more" if len(files) > 1 else "") if files else ""


# --- estimates --------------------------------------------------------------------------------------


def estimate_sweep(rows: pd.DataFrame, slo: Slo) -> list[SweepPoint]:
    """An estimate's sweep of loads priced in one plan, latencies at the SLO's percentile."""
    q = slo.percentile
    out = []
    for i, r in enumerate(rows.to_dict("records")):
        ttft, tpot = float(r["ttft_s"]), float(r["tpot_s"])
        tails = {m: float(r.get(f"{m}_tail", math.nan)) for m in ("ttft", "tpot")}
        out.append(SweepPoint(
            load=float(r["concurrency"]), ttft_s=at_percentile(ttft, ttft * tails["ttft"], q),
            tpot_s=at_percentile(tpot, tpot * tails["tpot"], q), usd_per_mtok=float(r["blended_usd_per_mtok"]),
            usd_per_mtok_low=float(r["blended_usd_per_mtok_low"]), usd_per_mtok_high=float(r["blended_usd_per_mtok_high"]),
            tokens_per_s_per_chip=float(r["output_tokens_per_s_per_chip"]), position=i))
    return out


def estimate_options(estimates: pd.DataFrame, plans: list[str], slos: dict[str, Slo], default: Slo,
                     unpriced: pd.DataFrame | None = None) -> tuple[list[dict], list[dict]]:
    """(option rows, sweep rows): one option per workload, chip (as written, with its quantisation),
    precision and plan, at its operating point along its sweep; a chip refused, or not priced in a
    plan, is a row that says why (`unpriced`: money.price_gaps)."""
    if estimates is None or estimates.empty:
        return [], []
    options, sweeps = [], []
    estimates = estimates.assign(precision=estimates["precision"].fillna("").astype(str))
    refused_targets = set()
    for (workload, target, precision), rows in estimates.groupby(["workload", "target", "precision"], sort=False):
        first = rows.iloc[0]
        refused = str(first.get("refused") or "")
        if refused:              # a chip refused is one row, whatever precisions were asked of it
            if (workload, target) in refused_targets:
                continue
            refused_targets.add((workload, target))
        slo = slos.get(str(workload), default)
        name = (f"{first['accelerator']} ×{number(first['chips'])} ({target})"
                + ("" if refused or "@" in str(target) else f" · {precision}"))
        base = dict(workload=workload, source=ESTIMATE, option=name, accelerator=first["accelerator"],
                    chips=first["chips"], precision=precision, interval=INTERVAL[ESTIMATE],
                    family=str(first.get("chip_family") or ""), reference=_calibration_words(first),
                    launch_on=_launch_spec(str(target), str(first["accelerator"]), first["chips"]))
        priced = rows[rows["plan"].astype(str) != ""] if not refused else rows.iloc[0:0]
        for plan in plans:
            mine = priced[priced["plan"] == plan]
            if refused or mine.empty:
                why = f"no estimate: {refused}" if refused else price_gaps.missing_price(first["accelerator"], plan, unpriced)
                options.append(option_row(plan=plan, why_not=why, **base))
                continue
            op, mine, points = _best_sweep(mine, slo)
            r = mine.iloc[op.point.position]
            options.append(option_row(
                plan=plan, usd_per_chip_hour=r["usd_per_chip_hour"], chips_per_instance=r.get("chips_per_instance"),
                price_basis=price_words(r["cloud"], r["instance_type"], r["region"], r["usd_per_chip_hour"],
                                        r.get("price_as_of")),
                price_as_of=str(r.get("price_as_of") or ""), region=str(r.get("region") or ""),
                in_verdict=op.ranked, why_not="" if op.ranked else f"does not meet the SLO: {op.miss}",
                note=_estimate_notes(r), **operating_fields(op), **base))
            sweeps += sweep_rows(workload, plan, name, ESTIMATE, points, op)
    return options, sweeps


def _best_sweep(rows: pd.DataFrame, slo: Slo) -> tuple[OperatingPoint, pd.DataFrame, list[SweepPoint]]:
    """(operating point, its sweep's rows, points) of an estimate's sweeps, one per pair of lengths
    the workload sweeps: the cheapest that meets the SLO, else the nearest miss."""
    best = None
    for _, sweep in rows.groupby(["input_length", "output_length"], sort=False):
        sweep = sweep.sort_values("concurrency", kind="stable").reset_index(drop=True)
        points = estimate_sweep(sweep, slo)
        op = operating_point(points, slo)
        if better(op, best[0] if best else None):
            best = (op, sweep, points)
    return best


def _calibration_words(r) -> str:
    words = (f"estimate calibrated on {number(r.get('calibration_rows'))} published rows of {r.get('chip_family')} "
             f"({number(r.get('calibration_rows_same_chip'))} on {r.get('accelerator')})")
    own = r.get("own_rows")
    if own and float(own) > 0:
        words += f", {number(own)} of them yours"
    return words


def _estimate_notes(r) -> str:
    notes = str(r.get("notes") or "")
    return notes if notes and notes != "nan" else ""


def _launch_spec(target: str, accelerator: str, chips) -> str:
    """The `tpubench launch --on` value that measures an estimated option: the chip as written
    (a TPU slice, an instance, NAME:COUNT) without its quantisation, else NAME:CHIPS."""
    written = target.split("@", 1)[0]
    return written if (":" in written or accelerator.startswith("TPU") or "." in written) else f"{accelerator}:{number(chips)}"


__all__ = ["COLUMNS", "ESTIMATE", "INTERVAL", "MEASURED", "MEASURED_OPTION", "PUBLISHED", "SMOKE_TEST",
           "SMOKE_TEST_PATTERN", "SWEEP_COLUMNS", "estimate_options", "estimate_sweep", "measured_columns",
           "measured_options",
           "operating_fields", "option_row", "price_words", "sweep_rows"]
