"""The answer as the reports show it (the numbers are made once in output/answer; this only lays
them out): per workload, one block.

1. The service level it is decided at, and where that comes from; the volume, where one is given.
2. Where the plans' cheapest options differ, a line that says so first.
3. Per plan, the verdict: the cheapest, its ratio to the runner-up with the ratio's interval, the
   break-even prices, what would decide it, a stale price, a plan the table lacks for a contender.
4. The ranked options at their operating points (load, TTFT, TPOT, tokens/s per user), then per
   plan their $/Mtok with its interval and the price it rests on (where, and how old), with the
   chips and $ per month a volume needs.
5. For reference, one line each: what is not ranked, and why (a smoke test, another model's
   published row, an invalid run, an option that misses the SLO or has no price).
6. Sources, numbered.

Every table and line fits 120 columns in markdown.
"""

from __future__ import annotations

import math
import textwrap

import pandas as pd

from tpubench.money.plans import plan_label
from tpubench.money.price_age import REFRESH_COMMAND, REFRESH_USE
from tpubench.output.answer.assemble import Answer
from tpubench.output.answer.options import MEASURED, PUBLISHED, SMOKE_TEST_PATTERN
from tpubench.units import MISSING, duration, number, sig, usd_whole

WIDTH = 120
POINT_HEADERS = ["Option", "Source", "At the SLO", "TTFT", "TPOT", "tok/s/user", "tok/s/chip"]
POINT_NUMERIC = {3, 4, 5, 6}
PLAN_HEADERS = ["Plan", "Option", "$/Mtok (interval)", "Price per chip-h"]
FLEET_HEADERS = ["Chips", "$/month"]
NOTE = ("Measured: your result files (95% CI). Estimate: the workload's full architecture on a chip you have not "
        "measured (90% prediction interval; docs/estimate.md). Published: what others published on that chip, priced at "
        "its throughput x the list price. Every option is taken at its cheapest load that meets the service level "
        "(\"(TPOT bound)\": interpolated between two loads to where the next one's TPOT would miss; \"+\": a sweep's top "
        "load, which still meets it, so at least that cheap; never beyond a sweep's top); $/Mtok is "
        "blended (all chip-seconds over all tokens) at the list price for the plan (docs/answer.md).")


def source_label(row) -> str:
    """'measured', 'measured (small scale: smoke test)', 'estimate', 'published'."""
    smoke = SMOKE_TEST_PATTERN.match(str(row["why_not"])) if row["source"] == MEASURED else None
    return f"measured ({smoke.group(1)} scale: smoke test)" if smoke else str(row["source"])


def _finite(x) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def cost_cell(row) -> str:
    value, low, high = row["usd_per_mtok"], row["usd_per_mtok_low"], row["usd_per_mtok_high"]
    if not _finite(value):
        return MISSING
    if row["source"] == PUBLISHED or not (_finite(low) and _finite(high)) or low == high:
        return f"${sig(value)}"
    return f"${sig(value)} (${sig(low)}–${sig(high)})"


def _short(option: str) -> str:
    """An option name without its `(target)`: the table's Option column stays narrow."""
    head, sep, tail = option.partition(" (")
    return head + (tail.split(")", 1)[1] if sep and ")" in tail else "")


def point_cells(row, ref: int) -> list[str]:
    """One ranked option's operating point (plan-free: the load at the SLO does not depend on price)."""
    load = (row["point"].replace(" (the sweep's top: at least this cheap)", "+")
            .replace("(interpolated: TTFT at its bound)", "(TTFT bound)")
            .replace("(interpolated: TPOT at its bound)", "(TPOT bound)").removeprefix("load "))
    noisy = f", {row['note']}" if row["source"] == MEASURED and row["note"] else ""     # 'noisy: CV 25.4%'
    return [_short(row["option"]), f"{source_label(row)}{noisy} [{ref}]", load, duration(row["ttft_s"]),
            duration(row["tpot_s"]), sig(row["tokens_per_s_per_user"]) if _finite(row["tokens_per_s_per_user"]) else MISSING,
            sig(row["tokens_per_s_per_chip"]) if _finite(row["tokens_per_s_per_chip"]) else MISSING]


def plan_cells(row, fleet: bool) -> list[str]:
    price = (f"${sig(row['usd_per_chip_hour'])} {row['region']}, {row['price_as_of']}"
             if _finite(row["usd_per_chip_hour"]) else MISSING)
    cells = [plan_label(row["plan"]), _short(row["option"]), cost_cell(row) if row["in_verdict"] else _why_short(row),
             price]
    if fleet:
        cells += [number(row["chips_needed"]) if _finite(row["chips_needed"]) else MISSING,
                  usd_whole(row["usd_per_month"])]
    return cells


def _why_short(row) -> str:
    """Why a ranked option has no figure in this plan, in a cell."""
    why = str(row["why_not"])
    return "misses the SLO" if why.startswith("does not meet") else ("no price" if "price" in why else "not ranked")


def service_level_lines(answer: Answer, workload: str) -> list[str]:
    slo = answer.slos.get(workload)
    out = []
    if slo is not None and slo.bounds():
        out.append(f"Service level: {slo.words()} ({slo.source}).")
    elif slo is not None:
        out.append(f"Service level: none ({slo.source}).")
    volume = answer.volumes.get(workload)
    if volume is not None:
        out.append(f"Volume: {sig(volume.tokens_per_day)} tokens a day, peak {sig(volume.peak_factor)}x the mean: each "
                   f"option's chips (whole instances) and $ per month at the SLO, every chip rented all month.")
    return out


def verdict_lines(v: dict, notes: dict[str, int]) -> list[str]:
    """One plan's verdict: its sentence, the break-even, what would decide it, stale prices, and the
    plans the table lacks for a contender (each reason a numbered note: `notes`, filled here)."""
    out = [f"{plan_label(v['plan'])}: {v['text']}" + (f" ({v['ratio_basis']})" if v.get("ratio_basis") else "") + "."]
    if v.get("break_even"):
        out.append(f"Break-even: {v['break_even']}.")
    if v.get("decide_command"):
        out.append(f"To decide it: `{v['decide_command']}` ({v['decide_why']}).")
    elif v.get("decide_why"):
        out.append(f"To decide it: {v['decide_why']}.")
    if v.get("fleet"):
        out.append(f"Fleet: {v['fleet']}.")
    if isinstance(v.get("stale_note"), str):
        out.append(f"{v['stale_note']}.")
    gaps = [_gap(line, notes) for line in (v.get("gaps") or [])]
    if gaps:
        out.append("Not in this verdict: " + "; ".join(gaps) + ".")
    return out


def _gap(line: str, notes: dict[str, int]) -> str:
    """'no 1-year commitment price for H100 [n2]', its reason numbered once among the block's notes."""
    head, _, reason = line.partition(": ")
    if not reason:
        return head
    n = notes.setdefault(reason, len(notes) + 1)
    return f"{head} [n{n}]"


def refresh_line(verdicts: pd.DataFrame) -> list[str]:
    """The command that refreshes stale prices, once, where a verdict rests on one."""
    if verdicts.empty or not verdicts["stale_note"].map(lambda x: isinstance(x, str)).any():
        return []
    return [f"Refresh stale prices: `{REFRESH_COMMAND}`, {REFRESH_USE}."]


def ranked_options(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per option ranked in some plan (its first such plan's), cheapest first."""
    ranked = rows[rows["in_verdict"].astype(bool)]
    return ranked.sort_values("usd_per_mtok", kind="stable").drop_duplicates("option")


def reference_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per option ranked in no plan, with why."""
    ranked = set(rows.loc[rows["in_verdict"].astype(bool), "option"])
    rest = rows[~rows["option"].isin(ranked)]
    return rest.sort_values("usd_per_mtok", kind="stable", na_position="last").drop_duplicates("option")


def reference_words(row) -> str:
    cost = f"; ${sig(row['usd_per_mtok'])}/Mtok {plan_label(row['plan'])}" if _finite(row["usd_per_mtok"]) else ""
    at = f" at {row['point']}" if row["point"] and not str(row["point"]).startswith("misses") else ""
    return f"{row['option']} ({source_label(row)}): {row['why_not'] or 'not ranked'}{at}{cost}"


def sources(rows: pd.DataFrame) -> dict[str, int]:
    """Each option's source citation, numbered in table order."""
    out: dict[str, int] = {}
    for ref in rows["reference"]:
        if ref and ref not in out:
            out[ref] = len(out) + 1
    return out


def wrapped(text: str, indent: str = "") -> list[str]:
    return textwrap.wrap(text, WIDTH, subsequent_indent=indent or "  ", break_on_hyphens=False) or [""]


__all__ = ["FLEET_HEADERS", "NOTE", "PLAN_HEADERS", "POINT_HEADERS", "POINT_NUMERIC", "WIDTH", "cost_cell",
           "plan_cells", "point_cells", "ranked_options", "reference_rows", "reference_words", "refresh_line",
           "service_level_lines",
           "source_label", "sources", "verdict_lines", "wrapped"]
