"""The estimated options of a token budget (budget/estimated.py) as markdown: a section of its own
below the measured options, each row labelled estimate, then what could not be sized and why."""

from __future__ import annotations

from tpubench.budget.render.footer import stale_notes
from tpubench.output.report import format as f

HEADING = "## Estimates: chips you have not measured (not in any measured total)"
INTRO = ("Each option is the workload's full architecture estimated on a chip (`tpubench estimate`, calibrated on "
         "published rows; docs/estimate.md), taken at its cheapest load that meets the service level, and sized for "
         "the traffic above as the measured options are: replicas of its chips in whole instances of the price row "
         "it is priced at, at the plan's price. Monthly cost with its 90% prediction interval (from the "
         "throughput's). Ranked among estimates only: never in a measured total, a buying mix or a saving. To budget "
         "one as a measurement, measure it: `tpubench launch WORKLOAD.yaml --on CHIP`.")


def _at_slo(r) -> str:
    """'load 264 (interpolated: TPOT at its bound) I=1,024 O=256'."""
    return f"{r['operating_point']} I={f.number(r['input_length'])} O={f.number(r['output_length'])}"


def _rows(options, split: bool, max_rows: int) -> list[list[str]]:
    rows = []
    for _, r in options.head(max_rows).iterrows():
        rate = f.with_ci(r["tokens_per_s_per_chip"], r["tokens_per_s_per_chip_low"], r["tokens_per_s_per_chip_high"])
        rows.append([f.workload_label(r), str(r["rank_overall"]), "estimate", str(r["option"]),
                     f"{r['cloud']} {r['instance_type']} ({r['region']})", f.plan_label(r["plan"]),
                     f.with_ci(r["monthly_usd"], r["monthly_usd_low"], r["monthly_usd_high"], f.usd_whole),
                     f"{r['instances']} ({r['rented_chips']})",
                     rate + ("" if split else f" at {f.share(r['point_output_share'])} output"), _at_slo(r),
                     f"p{f.number(r['percentile'])} {f.ms(r['ttft_s'])} / {f.ms(r['tpot_s'])}",
                     f"${f.sig(r['usd_per_chip_hour'])}", str(r["price_as_of"])])
    return rows


def estimates_markdown(result, table, max_rows: int) -> list[str]:
    """The section of a BudgetResult's estimates (none without --on or --workload)."""
    est = result.estimates
    if est is None:
        return []
    split = result.sizing == "split"
    out = [HEADING, "", INTRO, ""]
    out += [f"- Service level for {workload}: {slo.words() or 'none'} ({slo.source})." for workload, slo in est.slos.items()]
    out += [f"- {n}" for n in est.notes + f.flagged_price_notes(est.options) + stale_notes(est.options)]
    out += [""]
    if len(est.options):
        headers = ["Workload", "#", "Source", "Option", "Priced as", "Plan", "Monthly (90% interval)",
                   "Instances (chips)", "Tokens/s/chip (split)" if split else "Tokens/s/chip (blended)", "At the SLO",
                   "TTFT / TPOT ms", "Price per chip-h", "Price as of"]
        out += [table(headers, _rows(est.options, split, max_rows)), ""]
    else:
        out += ["No estimate could be sized (below, why).", ""]
    return out + not_sized_markdown(est.not_sized)


def not_sized_markdown(not_sized) -> list[str]:
    """One line per estimate not sized: why (a refusal, a miss of the service level), or each plan's
    price gap ('no 1-year commitment price for H100 [n1]') with its reason numbered once below, as
    the answer numbers its gaps."""
    if not len(not_sized):
        return []
    reasons: dict[str, int] = {}
    lines = []
    for (workload, option), rows in not_sized.groupby(["workload", "option"], sort=False):
        gaps = []
        rows = rows.sort_values("plan", key=lambda plans: plans != "", kind="stable")   # what holds for every plan first
        for plan, why in zip(rows["plan"], rows["why"]):
            head, _, reason = str(why).partition(": ")
            gaps.append(f"{head} [n{reasons.setdefault(reason, len(reasons) + 1)}]" if plan and reason else str(why))
        lines.append(f"- {workload} · {option}: {'; '.join(gaps)}.")
    notes = [f"- [n{n}] {reason}" for reason, n in reasons.items()]
    return ["### Estimates not sized, and why", ""] + lines + [""] + (notes + [""] if notes else [])


__all__ = ["HEADING", "estimates_markdown", "not_sized_markdown"]
