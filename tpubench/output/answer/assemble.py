"""The Answer: option rows at the service level in table order, one verdict per workload and plan,
and per workload the block over every plan (output/answer/verdict.py's rules).

A verdict is a dict (one row of `Answer.verdicts`): the cheapest and the runner-up with the ratio
and its interval (and the interval's basis), the break-even prices, what would decide an open
verdict, the stale-price line (money.price_age) and the plans the table lacks for a contender
(money.price_gaps). With a volume (the workload's `volume:`), every option ranked at the SLO also
gets the chips it needs and its $ per month (`chips_needed`, `usd_per_month`): the peak tokens/s
over its tokens/s per chip at its operating point (all tokens: input and output, as blended $/Mtok
counts them), in replicas of its chips packed into whole instances of its price row (the budgets'
rule, money.fleet_size), each chip rented all month.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date

import pandas as pd

from tpubench.money import price_age, price_gaps
from tpubench.money.fleet_size import whole_instances
from tpubench.money.plans import HOURS_PER_MONTH, PLAN_NAMES, base_plan_name, plan_label
from tpubench.money.pricing import load_unpriced_notes
from tpubench.output.answer import verdict as rules
from tpubench.output.answer.options import COLUMNS, ESTIMATE, SWEEP_COLUMNS
from tpubench.output.answer.service_level import Slo
from tpubench.units import number, sig, usd_whole

SECONDS_PER_DAY = 86_400.0


@dataclass
class Answer:
    options: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=COLUMNS))
    verdicts: pd.DataFrame = field(default_factory=pd.DataFrame)
    sweeps: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=SWEEP_COLUMNS))
    slos: dict[str, Slo] = field(default_factory=dict)           # per workload
    volumes: dict[str, object] = field(default_factory=dict)     # per workload: workload_spec Volume
    notes: list[str] = field(default_factory=list)

    def workloads(self) -> list[str]:
        return list(dict.fromkeys(self.options["workload"])) if len(self.options) else []

    def of(self, workload: str) -> tuple[pd.DataFrame, pd.DataFrame]:
        """A workload's options and its verdicts (one per plan, in plan order)."""
        rows = self.options[self.options["workload"] == workload]
        v = self.verdicts
        return rows, (v[v["workload"] == workload] if len(v) else v)

    def disagreement(self, workload: str) -> str | None:
        """The line that says the answer turns on the plan, where it does."""
        _, verdicts = self.of(workload)
        return rules.plans_disagree({plan_label(v["plan"]): v["cheapest"] for v in verdicts.to_dict("records")})


def assemble(options: list[dict], sweeps: list[dict], workload_files: dict[str, str], slos: dict[str, Slo],
             notes: list[str], *, newest: dict[str, str] | None = None, today: date | None = None,
             unpriced: pd.DataFrame | None = None, pairs=None, volumes: dict | None = None) -> Answer:
    """The Answer of these options (module notes): the workload measured last first (`newest`:
    workload -> its latest result's start time, then by name), plans in the vocabulary's order, per
    plan the ranked options cheapest first, then the rest. `pairs` (estimate.pairs.PairMisses) gives
    two estimates' shared ratio interval."""
    frame = pd.DataFrame(options, columns=COLUMNS)
    volumes = volumes or {}
    if frame.empty:
        return Answer(slos=slos, volumes=volumes, notes=notes)
    recency = {w: rank for rank, w in enumerate(sorted(newest or {}, key=lambda w: (newest[w], w), reverse=True))}
    plan_order = {name: i for i, name in enumerate(PLAN_NAMES)}
    frame = frame.assign(_unranked=~frame["in_verdict"].astype(bool), _order=frame["usd_per_mtok"].fillna(math.inf),
                         _recent=frame["workload"].map(recency).fillna(len(recency)),
                         _plan=frame["plan"].map(lambda p: plan_order.get(base_plan_name(p), len(plan_order))))
    frame = (frame.sort_values(["_recent", "workload", "_plan", "plan", "_unranked", "_order"], kind="stable")
             .drop(columns=["_unranked", "_order", "_recent", "_plan"]).reset_index(drop=True))
    frame = _with_fleet(frame, volumes)
    unpriced = load_unpriced_notes() if unpriced is None else unpriced
    gaps = price_gaps.plan_gaps(frame, unpriced)
    verdicts = [{**verdict(group, workload_files.get(workload, "WORKLOAD.yaml"), today, pairs),
                 "fleet": fleet_words(group), "gaps": gaps.get((workload, plan), []),
                 "gaps_note": price_gaps.gap_words(gaps.get((workload, plan), []))}
                for (workload, plan), group in frame.groupby(["workload", "plan"], sort=False)]
    return Answer(options=frame, verdicts=pd.DataFrame(verdicts), sweeps=pd.DataFrame(sweeps, columns=SWEEP_COLUMNS),
                  slos=slos, volumes=volumes, notes=notes)


def _with_fleet(frame: pd.DataFrame, volumes: dict) -> pd.DataFrame:
    """`chips_needed` and `usd_per_month` of the ranked options of workloads with a volume (module
    notes): replicas of the option's chips at its rate, packed into the price row's instances
    (money.fleet_size, the budgets' own rule)."""
    chips_needed, monthly = [], []
    for r in frame.to_dict("records"):
        volume = volumes.get(r["workload"])
        rate = 1e6 * float(r["usd_per_chip_hour"]) / 3600 / float(r["usd_per_mtok"]) if r["in_verdict"] else math.nan
        if volume is None or not (rate > 0 and math.isfinite(rate)):
            chips_needed.append(math.nan)
            monthly.append(math.nan)
            continue
        per_instance = float(r["chips_per_instance"]) if r["chips_per_instance"] == r["chips_per_instance"] \
            else float(r["chips"])
        _, instances = whole_instances(volume.tokens_per_day * volume.peak_factor / SECONDS_PER_DAY, rate,
                                       float(r["chips"]), per_instance)
        chips = float(instances) * per_instance
        chips_needed.append(chips)
        monthly.append(chips * float(r["usd_per_chip_hour"]) * HOURS_PER_MONTH)
    return frame.assign(chips_needed=chips_needed, usd_per_month=monthly)


def fleet_words(options: pd.DataFrame) -> str:
    """At a volume, which ranked option's fleet costs least a month, and the next on another chip:
    a small volume may fill less than one instance of the cheaper chip per token (module notes)."""
    fleets = rules.ranked(options)
    if fleets.empty or "usd_per_month" not in fleets or fleets["usd_per_month"].isna().all():
        return ""
    fleets = fleets.sort_values("usd_per_month", kind="stable")
    best = fleets.iloc[0]
    others = fleets[fleets["accelerator"] != best["accelerator"]]
    words = f"at the volume, {best['option']}'s fleet costs least: {_fleet(best)}"
    if len(others):
        words += f"; then {others.iloc[0]['option']}: {_fleet(others.iloc[0])}"
    return words


def _fleet(row) -> str:
    return f"{usd_whole(row['usd_per_month'])} a month for {number(row['chips_needed'])} chips"


def verdict(options: pd.DataFrame, workload_file: str = "WORKLOAD.yaml", today: date | None = None,
            pairs=None) -> dict:
    """The verdict of one workload and plan over its options (output/answer/verdict.py)."""
    ranked = rules.ranked(options)
    base = {"workload": options["workload"].iloc[0], "plan": options["plan"].iloc[0], "cheapest": "",
            "cheapest_source": "", "runner_up": "", "runner_up_source": "", "ratio": math.nan,
            "ratio_low": math.nan, "ratio_high": math.nan, "ratio_basis": "", "decided": False,
            "crosses_precisions": False, "cheapest_stays_below_usd_per_chip_hour": math.nan,
            "runner_up_wins_below_usd_per_chip_hour": math.nan, "break_even": "", "decide_command": "",
            "decide_why": "", "stale_note": None, "refresh_command": "", "gaps_note": None}
    if ranked.empty:
        return {**base, "text": "no option meets the SLO for the full architecture in this plan (the options say "
                                "why); name more chips to decide between (compare_on, or --on)"}
    best = ranked.iloc[0]
    runner = rules.runner_up(ranked, best)
    base.update(cheapest=best["option"], cheapest_source=best["source"])
    if runner is None:
        return {**base, "text": f"only one chip meets the SLO: {best['option']} ({best['source']})",
                **_stale([best], today)}
    shared = pairs.halfwidth(best["family"], runner["family"]) if pairs is not None else None
    ratio = rules.ratio_interval(best, runner, shared)
    even = rules.break_even(best, runner)
    mixed = bool(best["precision"] and runner["precision"] and str(best["precision"]) != str(runner["precision"]))
    text = (f"{best['option']} ({best['source']}) is cheapest, {ratio.value:.2f}x cheaper than {runner['option']} "
            f"({runner['source']}){' (crosses precisions)' if mixed else ''}; ratio interval {ratio.low:.2f}-"
            f"{ratio.high:.2f}x: " + ("decided at this confidence" if ratio.decided else "not decided at this confidence"))
    command, why = ("", "") if ratio.decided else _to_decide(best, runner, workload_file)
    return {**base, "runner_up": runner["option"], "runner_up_source": runner["source"], "ratio": ratio.value,
            "ratio_low": ratio.low, "ratio_high": ratio.high, "ratio_basis": ratio.basis, "decided": ratio.decided,
            "crosses_precisions": mixed, "cheapest_stays_below_usd_per_chip_hour": even.best_stays_below,
            "runner_up_wins_below_usd_per_chip_hour": even.runner_wins_below,
            "break_even": _break_even_words(best, runner, even), "text": text, "decide_command": command,
            "decide_why": why, **_stale([best, runner], today)}


def _break_even_words(best, runner, even: rules.BreakEven) -> str:
    return (f"{best['option']} stays cheapest while it costs under ${sig(even.best_stays_below)} per chip-hour "
            f"(now ${sig(best['usd_per_chip_hour'])}, {best['region']}, as of {best['price_as_of']}); "
            f"{runner['option']} would win below ${sig(even.runner_wins_below)} per chip-hour "
            f"(now ${sig(runner['usd_per_chip_hour'])}, {runner['region']}, as of {runner['price_as_of']})")


def _stale(rows, today: date | None) -> dict:
    """The verdict's stale-price line and, where it has one, the command that refreshes the table."""
    note = _stale_note(rows, today)
    return {"stale_note": note, "refresh_command": price_age.REFRESH_COMMAND if note else ""}


def _stale_note(rows, today: date | None) -> str | None:
    """Which prices a verdict rests on are older than their plan allows (money.price_age), in a line;
    the command that refreshes them is said once under the answer (price_age.REFRESH_COMMAND)."""
    today = today or price_age.today_utc()
    found = [(r, s) for r in rows if (s := price_age.stale(r["plan"], r.get("price_as_of"), today)) is not None]
    if not found:
        return None
    return "Stale prices: " + "; ".join(f"{r['option']}'s {plan_label(r['plan'])} price ({r['region']}, dated "
                                        f"{s.as_of}) is {s.age_days} days old (over {s.limit_days})" for r, s in found)


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
    return launch, f"measuring {widest['option']} narrows the estimate most: its interval spans {spread:.1f}x"


def frame(answer: Answer) -> pd.DataFrame:
    """Every option with its plan's verdict (`verdict_*` columns): the CSV, and `tpubench.answer`."""
    if answer.options.empty:
        return answer.options
    verdicts = answer.verdicts.rename(columns={c: f"verdict_{c}" for c in answer.verdicts.columns
                                               if c not in ("workload", "plan")})
    out = answer.options.merge(verdicts, on=["workload", "plan"], how="left")
    return out.assign(slo=out["workload"].map(lambda w: answer.slos[w].words() if w in answer.slos else ""),
                      slo_source=out["workload"].map(lambda w: answer.slos[w].source if w in answer.slos else ""))


__all__ = ["Answer", "assemble", "fleet_words", "frame", "verdict"]
