"""The report's answer: per workload and purchase plan, one table of options priced side by side,
each labelled by where its figure comes from, and a verdict.

- measured: your result files, the cheapest point per platform and stack (report/data.summarise),
  with their 95% CI. A point measured at a smaller scale than the workload's full architecture (a
  CPU smoke test) is listed, labelled so, and never the answer.
- estimate: the workload's full architecture on the chips it is decided between (`compare_on`,
  `report --on`, or records of `tpubench estimate --out`): per chip, the cheapest of the workload's
  operating points, with its 90% prediction interval (tpubench/estimate).
- published: the published rows nearest the workload's model (the same model where published,
  else the nearest model of its kind, dense or mixture-of-experts, by active and total parameters)
  and lengths, one per chip, priced as the published throughput x the price table's list price
  (never the publisher's own $ figure). Another model's rows are yardsticks, not the answer: they
  stay out of the verdict.

Every option's $/Mtok is blended (all chip-seconds over all tokens; docs/definitions.md#cost).
The verdict of a plan names the cheapest option among those that answer for the full
architecture (measured at full scale and valid, estimates, published rows of the same model), and
its ratio to the runner-up (the cheapest option on another chip, at the same precision where there
is one: like with like, else said to cross precisions) with the interval of that ratio: [runner-up low / cheapest high,
runner-up high / cheapest low], the worst case of the two intervals. When that interval reaches 1
the intervals overlap, and the verdict says plainly "not decided at this confidence", with what
would decide it: measuring the two (`tpubench launch WORKLOAD --on A --on B`), the estimate with
the widest interval first.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import date

import numpy as np
import pandas as pd

from tpubench.estimate.models import PointPrecision
from tpubench.money import price_age, price_gaps
from tpubench.money.plans import PLAN_NAMES, base_plan_name
from tpubench.money.pricing import load_unpriced_notes
from tpubench.output.report.format import plan_label, stack_label
from tpubench.records.usable import row_is_usable
from tpubench.scenarios.registry import row_label
from tpubench.units import MISSING, number, sig
from tpubench.workload_spec.vocabulary import FULL_SCALE

MEASURED, ESTIMATE, PUBLISHED = "measured", "estimate", "published"
INTERVAL = {MEASURED: "95% CI", ESTIMATE: "90% prediction interval", PUBLISHED: "none (one published figure)"}
MAX_PUBLISHED = 6          # published rows per workload and plan: the nearest chips' rows
# Why a measured point at a smaller scale is listed, not ranked; source_label reads its scale back.
SMOKE_TEST = "smoke test at the '{scale}' scale, not the full architecture"
_SMOKE_TEST = re.compile("^" + re.escape(SMOKE_TEST).replace(re.escape("{scale}"), "(.+)") + "$")
COLUMNS = ["workload", "plan", "source", "option", "accelerator", "chips", "point", "precision",
           "tokens_per_s_per_chip", "usd_per_mtok", "usd_per_mtok_low", "usd_per_mtok_high", "interval",
           "price_basis", "in_verdict", "why_not", "note", "launch_on", "price_as_of"]


@dataclass
class Answer:
    options: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=COLUMNS))
    verdicts: pd.DataFrame = field(default_factory=pd.DataFrame)
    notes: list[str] = field(default_factory=list)

    def of(self, workload: str, plan: str) -> tuple[pd.DataFrame, dict | None]:
        """The options of one workload and plan, cheapest first, and its verdict."""
        rows = self.options[(self.options["workload"] == workload) & (self.options["plan"] == plan)]
        v = self.verdicts
        hit = v[(v["workload"] == workload) & (v["plan"] == plan)] if len(v) else v
        return rows, (hit.iloc[0].to_dict() if len(hit) else None)

    def groups(self) -> list[tuple[str, str]]:
        """(workload, plan) pairs in table order."""
        if self.options.empty:
            return []
        return list(dict.fromkeys(zip(self.options["workload"], self.options["plan"])))


# --- options ----------------------------------------------------------------------------------------


def measured_options(summary: pd.DataFrame, headline: str, throughput: str) -> list[dict]:
    """One option per workload, plan, chip, stack and precision: the cheapest point of
    data.summarise's rows (several instances of one chip priced alike are one option)."""
    if summary is None or summary.empty:
        return []
    rows = summary.sort_values(headline, kind="stable")
    key = ["workload", "plan", "scale", "priced_accelerator", "chips", "quantization", "dtype", "server_name",
           "scenario_kind", "backend"]
    rows = rows.drop_duplicates([k for k in key if k in rows], keep="first")
    out = []
    for _, r in rows.iterrows():
        full = r.get("scale") in (FULL_SCALE, None) or str(r.get("scale")) == "nan"
        why = "" if full else SMOKE_TEST.format(scale=r["scale"])
        if not why and not row_is_usable(r):
            why = f"invalid: {r.get('invalid_reasons') or 'see the runs table'}"
        out.append({
            "workload": r["workload"], "plan": r["plan"], "source": MEASURED,
            "option": f"{r['priced_accelerator']} ×{number(r['chips'])} · {stack_label(r)}",
            "accelerator": r["priced_accelerator"], "chips": r["chips"],
            "point": row_label(r), "precision": _precision_label(r),
            "tokens_per_s_per_chip": r.get(f"{throughput}_per_chip"),
            "usd_per_mtok": r[headline], "usd_per_mtok_low": r[f"{headline}_ci95_low"],
            "usd_per_mtok_high": r[f"{headline}_ci95_high"], "interval": INTERVAL[MEASURED],
            "price_basis": price_words(r["cloud"], r["instance_type"], r["region"], r["usd_per_chip_hour"],
                                        r.get("price_as_of")),
            "in_verdict": not why, "why_not": why, "note": "", "launch_on": "", "price_as_of": r.get("price_as_of"),
        })
    return out


def _precision_label(r) -> str:
    """A measured point's precision as every option names it ('fp32', 'w int8 / a fp32 / kv fp32')."""
    precision = PointPrecision.of(r.get("weight_dtype"), r.get("activation_dtype"), r.get("kv_cache_dtype"),
                                  r.get("dtype"))
    dtype = r.get("dtype")
    return precision.label if precision else ("" if dtype is None or pd.isna(dtype) else str(dtype))


def estimate_options(estimates: pd.DataFrame, plans: list[str], unpriced: pd.DataFrame | None = None) -> list[dict]:
    """One option per workload, chip (as written, with its quantisation), precision and plan: its
    cheapest operating point; a chip refused, or not priced in a plan, is a row that says why
    (`unpriced`, the shipped unpriced table by default: money.price_gaps)."""
    if estimates is None or estimates.empty:
        return []
    unpriced = load_unpriced_notes() if unpriced is None else unpriced
    out = []
    # One option per chip and precision: a workload sweeping quantisations, or a chip named
    # `@fp8`, is compared at each (the verdict pairs like with like first).
    estimates = estimates.assign(precision=estimates["precision"].fillna("").astype(str))
    refused_targets = set()
    for (workload, target, precision), rows in estimates.groupby(["workload", "target", "precision"], sort=False):
        first = rows.iloc[0]
        refused = str(first.get("refused") or "")
        if refused:              # a chip refused is one row, whatever precisions were asked of it
            if (workload, target) in refused_targets:
                continue
            refused_targets.add((workload, target))
        priced = rows[rows["plan"].astype(str) != ""] if not refused else rows.iloc[0:0]
        for plan in plans:
            mine = priced[priced["plan"] == plan].sort_values("blended_usd_per_mtok", kind="stable")
            base = {"workload": workload, "plan": plan, "source": ESTIMATE,
                    "option": f"{first['accelerator']} ×{number(first['chips'])} ({target})"
                              + ("" if refused or "@" in str(target) else f" · {precision}"),
                    "accelerator": first["accelerator"], "chips": first["chips"], "interval": INTERVAL[ESTIMATE],
                    "launch_on": _launch_spec(str(target), str(first["accelerator"]), first["chips"])}
            if refused or mine.empty:
                why = f"no estimate: {refused}" if refused else price_gaps.missing_price(first["accelerator"], plan, unpriced)
                out.append({**base, "point": MISSING, "precision": str(first.get("precision") or ""),
                            "tokens_per_s_per_chip": math.nan, "usd_per_mtok": math.nan, "usd_per_mtok_low": math.nan,
                            "usd_per_mtok_high": math.nan, "price_basis": "", "in_verdict": False, "why_not": why,
                            "note": "", "price_as_of": None})
                continue
            r = mine.iloc[0]
            out.append({**base, "point": load_words(r),
                        "precision": str(r.get("precision") or ""),
                        "tokens_per_s_per_chip": r["output_tokens_per_s_per_chip"],
                        "usd_per_mtok": r["blended_usd_per_mtok"], "usd_per_mtok_low": r["blended_usd_per_mtok_low"],
                        "usd_per_mtok_high": r["blended_usd_per_mtok_high"],
                        "price_basis": price_words(r["cloud"], r["instance_type"], r["region"], r["usd_per_chip_hour"],
                                                    r.get("price_as_of")),
                        "in_verdict": True, "why_not": "", "note": _calibration_words(r),
                        "price_as_of": r.get("price_as_of")})
    return out


def load_words(r) -> str:
    """'load 64 I=1024 O=256' (a load MLPerf gives by Little's law is not a whole number)."""
    def n(x) -> str:
        try:
            x = float(x)
        except (TypeError, ValueError):
            return MISSING
        return number(x) if math.isfinite(x) and x == round(x) else sig(x)
    return f"load {n(r.get('concurrency'))} I={n(r.get('input_length'))} O={n(r.get('output_length'))}"


def _calibration_words(r) -> str:
    words = (f"calibrated on {number(r.get('calibration_rows'))} rows of {r.get('chip_family')} "
             f"({number(r.get('calibration_rows_same_chip'))} on {r.get('accelerator')})")
    own = r.get("own_rows")
    if own and float(own) > 0:
        words += f", {number(own)} of them yours"
    notes = str(r.get("notes") or "")
    return words + (f"; {notes}" if notes and notes != "nan" else "")


def _launch_spec(target: str, accelerator: str, chips) -> str:
    """The `tpubench launch --on` value that measures an estimated option: the chip as written
    (a TPU slice, an instance, NAME:COUNT) without its quantisation, else NAME:CHIPS."""
    written = target.split("@", 1)[0]
    return written if (":" in written or accelerator.startswith("TPU") or "." in written) else f"{accelerator}:{number(chips)}"


def price_words(cloud, instance, region, usd_per_chip_hour, as_of) -> str:
    return f"list price: {cloud} {instance} ({region}), ${sig(usd_per_chip_hour)}/chip-h, as of {as_of}"


# --- verdicts ---------------------------------------------------------------------------------------


def ratio_interval(best: tuple[float, float, float], runner: tuple[float, float, float]) -> tuple[float, float, float]:
    """(ratio, low, high) of the runner-up's cost to the cheapest's, each given as (value, low,
    high): low = runner low / best high, high = runner high / best low (module notes)."""
    (b, b_low, b_high), (r, r_low, r_high) = best, runner
    with np.errstate(divide="ignore", invalid="ignore"):
        return r / b, (r_low / b_high if b_high > 0 else 0.0), (r_high / b_low if b_low > 0 else math.inf)


def _triple(row) -> tuple[float, float, float]:
    value = float(row["usd_per_mtok"])
    low, high = (float(row[c]) for c in ("usd_per_mtok_low", "usd_per_mtok_high"))
    return value, (low if math.isfinite(low) else value), (high if math.isfinite(high) else value)


def verdict(options: pd.DataFrame, workload_file: str = "WORKLOAD.yaml", today: date | None = None) -> dict:
    """The verdict of one workload and plan over its options (module notes), with a stale-price line
    where a price it rests on is older than its plan allows (money.price_age)."""
    candidates = options[options["in_verdict"].astype(bool) & options["usd_per_mtok"].notna()]
    candidates = candidates.sort_values("usd_per_mtok", kind="stable")
    base = {"workload": options["workload"].iloc[0], "plan": options["plan"].iloc[0], "cheapest": "",
            "runner_up": "", "ratio": math.nan, "ratio_low": math.nan, "ratio_high": math.nan, "decided": False,
            "decide_command": "", "decide_why": "", "stale_note": None, "gaps_note": None}
    if candidates.empty:
        return {**base, "text": "no option answers for the full architecture in this plan: name the chips to "
                                "decide between (compare_on in the workload, or --on)"}
    best = candidates.iloc[0]
    runner = _runner_up(candidates, best)
    if runner is None:
        return {**base, "cheapest": best["option"], "text": f"only one option: {best['option']} ({best['source']})",
                "stale_note": _stale_note([best], today)}
    ratio, low, high = ratio_interval(_triple(best), _triple(runner))
    decided = bool(low > 1)
    # Said only where both precisions are known (a server's dtype may not be).
    mixed = " (crosses precisions)" if best["precision"] and runner["precision"] and \
        str(best["precision"]) != str(runner["precision"]) else ""
    text = (f"{best['option']} ({best['source']}) is cheapest, {ratio:.2f}x cheaper than {runner['option']} "
            f"({runner['source']}){mixed}; ratio interval {low:.2f}-{high:.2f}x: "
            + ("decided at this confidence" if decided else "not decided at this confidence"))
    command, why = ("", "") if decided else _to_decide(best, runner, workload_file)
    return {**base, "cheapest": best["option"], "runner_up": runner["option"], "ratio": ratio, "ratio_low": low,
            "ratio_high": high, "decided": decided, "text": text, "decide_command": command, "decide_why": why,
            "stale_note": _stale_note([best, runner], today)}


def _stale_note(rows, today: date | None) -> str | None:
    """money.price_age's line for the prices a verdict rests on (each option's plan and date)."""
    return price_age.stale_note([(r["plan"], r.get("price_as_of"), r["option"]) for r in rows],
                                today or price_age.today_utc())


def _runner_up(candidates: pd.DataFrame, best):
    """The cheapest option on another chip, at the cheapest's precision where one is (like with
    like), else at any; None when every option is on the cheapest's chip."""
    others = candidates[candidates["accelerator"] != best["accelerator"]]
    if others.empty:
        return None
    alike = others[others["precision"] == best["precision"]]
    return (alike if len(alike) else others).iloc[0]


def _to_decide(best, runner, workload_file: str) -> tuple[str, str]:
    """(command, why) that would decide an open verdict: measure the estimated contenders, the
    widest interval first; for two measured options, measuring longer."""
    estimated = [r for r in (best, runner) if r["source"] == ESTIMATE and r["launch_on"]]
    if not estimated:
        return "", ("measure longer or more repeats (measurement.min_seconds, target_ci) to narrow the measured "
                    "intervals")
    estimated.sort(key=lambda r: -(float(r["usd_per_mtok_high"]) / float(r["usd_per_mtok_low"])))
    launch = f"tpubench launch {workload_file} " + " ".join(f"--on {r['launch_on']}" for r in estimated)
    widest = estimated[0]
    spread = float(widest["usd_per_mtok_high"]) / float(widest["usd_per_mtok_low"])
    return launch, (f"measuring {widest['option']} narrows the estimate most: its interval spans {spread:.1f}x")


# --- what the renderers show -------------------------------------------------------------------------

HEADERS = ["Option", "Source", "Point", "Precision", "Out tok/s/chip", "Blended $/Mtok", "Interval", "Priced as",
           "Note"]
NUMERIC = {4, 5}
WRAP = {2, 7, 8}
NOTE = ("Measured: your result files (95% CI). Estimate: the workload's full architecture on a chip you have not "
        "measured, a roofline over an efficiency fitted on published rows of that chip's family (90% prediction "
        "interval; `tpubench estimate`, docs/estimate.md). Published: the nearest operating point others published on "
        "that chip, priced as its throughput x the list price (never the publisher's own $ figure). Every $/Mtok is "
        "blended (all chip-seconds over all tokens) at the price table's list price for the plan. The verdict ranks "
        "only options that answer for your workload's full architecture: a smaller-scale smoke test, an invalid run "
        "or another model's published row is listed, not ranked.")


def source_label(row) -> str:
    """'measured', 'measured (small scale: smoke test)', 'estimate', 'published'."""
    smoke = _SMOKE_TEST.match(str(row["why_not"])) if row["source"] == MEASURED else None
    return f"measured ({smoke.group(1)} scale: smoke test)" if smoke else str(row["source"])


def cost_cell(row) -> str:
    value, low, high = row["usd_per_mtok"], row["usd_per_mtok_low"], row["usd_per_mtok_high"]
    if not (isinstance(value, float) and math.isfinite(value)):
        return MISSING
    if row["source"] == PUBLISHED or not (math.isfinite(low) and math.isfinite(high)):
        return f"${sig(value)}"
    return f"${sig(value)} (${sig(low)}–${sig(high)})"


def cells(row) -> list[str]:
    """One option as the tables show it."""
    note = row["why_not"] if row["why_not"] else row["note"]
    rate = row["tokens_per_s_per_chip"]
    return [row["option"], source_label(row), row["point"], row["precision"] or MISSING,
            sig(rate) if isinstance(rate, float) and math.isfinite(rate) else MISSING, cost_cell(row),
            row["interval"], row["price_basis"] or MISSING, note or MISSING]


def verdict_lines(v: dict | None) -> list[str]:
    """The verdict of a table and, where it is open, what would decide it."""
    if not v:
        return []
    out = [f"Verdict ({plan_label(v['plan'])}): {v['text']}."]
    if v.get("decide_command"):
        out.append(f"To decide it: `{v['decide_command']}` ({v['decide_why']}).")
    elif v.get("decide_why"):
        out.append(f"To decide it: {v['decide_why']}.")
    return out + [line for line in (v.get("stale_note"), v.get("gaps_note")) if line and line == line]


def title(workload: str, plan: str) -> str:
    return f"{workload}: the options, {plan_label(plan)}"


def frame(answer: Answer) -> pd.DataFrame:
    """Every option with its table's verdict (the CSV, and `tpubench.answer` in a notebook)."""
    if answer.options.empty:
        return answer.options
    verdicts = answer.verdicts.rename(columns={c: f"verdict_{c}" for c in answer.verdicts.columns
                                               if c not in ("workload", "plan")})
    return answer.options.merge(verdicts, on=["workload", "plan"], how="left")


def assemble(options: list[dict], workload_files: dict[str, str], notes: list[str],
             newest: dict[str, str] | None = None, today: date | None = None,
             unpriced: pd.DataFrame | None = None) -> Answer:
    """The Answer of these options: in table order (the workload measured last first, by `newest`:
    workload -> its latest result's start time, then by name; per plan, cheapest first, options
    without a figure last), with one verdict per workload and plan."""
    frame = pd.DataFrame(options, columns=COLUMNS)
    if frame.empty:
        return Answer(notes=notes)
    recency = {w: rank for rank, w in enumerate(sorted(newest or {}, key=lambda w: (newest[w], w), reverse=True))}
    plan_order = {name: i for i, name in enumerate(PLAN_NAMES)}      # on-demand first, as the plan vocabulary
    frame = frame.assign(_order=frame["usd_per_mtok"].fillna(math.inf),
                         _recent=frame["workload"].map(recency).fillna(len(recency)),
                         _plan=frame["plan"].map(lambda p: plan_order.get(base_plan_name(p), len(plan_order))))
    frame = (frame.sort_values(["_recent", "workload", "_plan", "plan", "_order"], kind="stable")
             .drop(columns=["_order", "_recent", "_plan"]).reset_index(drop=True))
    gaps = price_gaps.plan_gaps(frame, load_unpriced_notes() if unpriced is None else unpriced)
    verdicts = [{**verdict(group, workload_files.get(workload, "WORKLOAD.yaml"), today),
                 "gaps_note": price_gaps.gap_words(gaps.get((workload, plan), []))}
                for (workload, plan), group in frame.groupby(["workload", "plan"], sort=False)]
    return Answer(options=frame, verdicts=pd.DataFrame(verdicts), notes=notes)


__all__ = ["Answer", "COLUMNS", "ESTIMATE", "HEADERS", "INTERVAL", "MEASURED", "NOTE", "NUMERIC", "PUBLISHED", "WRAP",
           "assemble", "cells", "estimate_options", "frame", "measured_options", "price_words", "ratio_interval",
           "title", "verdict", "verdict_lines"]
