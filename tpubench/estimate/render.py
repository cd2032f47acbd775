"""Estimates as flat rows (for --format json/csv) and as table cells; numbers are computed once in
estimate.predict and estimate.pricing, these only lay them out. Every row says `source: estimate`.

The rows an estimate is calibrated on are its citations: a few hundred published rows. The
terminal gets one line saying how many, from how many sources, and where the list is; the JSON
output and `--sources FILE` (sources_document) carry every one; a CSV row counts its sources
instead of repeating the list in one cell."""

from __future__ import annotations

import json
import math

from tpubench.estimate.command import EstimateReport
from tpubench.estimate.predict import COVERAGE, LABEL

_TRIPLES = ("output_tokens_per_s_per_chip", "ttft_s", "tpot_s")


def flat_rows(report: EstimateReport) -> list[dict]:
    """One row per estimate and purchase plan (one row with plan '' when refused or unpriced)."""
    out = []
    for est, plans in zip(report.estimates, report.prices):
        base = {"source": LABEL, "workload": report.workload, "target": est.target,
                "accelerator": est.accelerator, "chip_family": est.family, "chips": est.chips,
                "concurrency": est.concurrency, "input_length": est.input_length,
                "output_length": est.output_length, "precision": est.precision, "refused": est.refused or "",
                "efficiency": est.efficiency, "decode_bound": est.decode_bound,
                "interval_coverage": COVERAGE, "interval_nominal": est.interval_nominal,
                "interval_basis": est.interval_basis, "calibration_rows": est.calibration_rows,
                "calibration_rows_same_chip": est.calibration_chip_rows, "own_rows": est.own_rows,
                "calibrated_by": " | ".join(est.calibrated_by), "notes": "; ".join(est.notes),
                "arrival": est.arrival, "ttft_tail": est.ttft_tail, "tpot_tail": est.tpot_tail,
                "stack_date": est.stack_date}
        for name in _TRIPLES:
            value, low, high = getattr(est, name)
            base[name], base[f"{name}_low"], base[f"{name}_high"] = value, low, high
        for plan in plans or [{"plan": ""}]:
            out.append({**base, **plan})
    return out


def fmt(value: float, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:,.{digits}g}" if abs(value) < 10 ** digits else f"{value:,.0f}"


def band(triple, scale: float = 1.0, digits: int = 3) -> str:
    value, low, high = (v * scale for v in triple)
    return f"{fmt(value, digits)} [{fmt(low, digits)}-{fmt(high, digits)}]"


def payload(report: EstimateReport) -> dict:
    """The JSON output's content: every estimate x plan as a flat row (non-finite numbers as None),
    and the calibration summary."""
    return {"source": LABEL, "workload": report.workload, "workload_file": report.workload_file,
            "interval_coverage": COVERAGE, "calibration": calibration_summary(report),
            "estimates": [{k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                           for k, v in row.items()} for row in flat_rows(report)]}


def as_json(report: EstimateReport) -> str:
    return json.dumps(payload(report), indent=2) + "\n"


def as_csv(report: EstimateReport) -> str:
    """The flat rows for a spreadsheet: `calibration_sources` counts the distinct sources of each
    row's calibration (the rows themselves: --format json or --sources FILE)."""
    import pandas as pd

    from tpubench.records.csv_safety import neutralize_frame

    sources = {family: len(info["sources"]) for family, info in calibration_summary(report)["families"].items()}
    rows = [{**{k: v for k, v in row.items() if k != "calibrated_by"},
             "calibration_sources": sources.get(str(row["chip_family"]), 0)} for row in flat_rows(report)]
    return neutralize_frame(pd.DataFrame(rows)).to_csv(index=False, float_format="%.6g")


def calibration_summary(report: EstimateReport) -> dict:
    """Per chip family asked about: rows, rows per chip, the distinct sources (publisher, reference);
    and the rows left out of the calibration, by reason."""
    rows = report.calibration.obs.rows
    families = {}
    for family in dict.fromkeys(e.family for e in report.estimates):
        mine = rows[rows["family"] == family] if len(rows) else rows
        families[str(family)] = {
            "rows": len(mine),
            "rows_per_chip": {str(k): int(v) for k, v in mine["accelerator"].value_counts().items()} if len(mine) else {},
            "sources": sorted({f"{r.publisher} ({r.date}): {r.reference}" for r in mine.itertuples()}),
        }
    return {"families": families, "rows_total": len(rows),
            "left_out": dict(report.calibration.obs.left_out.most_common()),
            "fit_terms": list(report.calibration.fit.terms)}


def sources_document(report: EstimateReport, as_json_file: bool = False) -> str:
    """Every row the estimate is calibrated on, per chip family: its distinct sources and each row
    ("publisher: model on chips x accelerator, concurrency (date; reference)"); Markdown, or JSON."""
    summary = calibration_summary(report)
    rows = {str(e.family): list(e.calibrated_by) for e in reversed(report.estimates)}
    if as_json_file:
        families = {f: {**info, "calibration_rows": rows.get(f, [])} for f, info in summary["families"].items()}
        return json.dumps({"source": LABEL, "workload": report.workload, "families": families,
                           "rows_total": summary["rows_total"], "left_out": summary["left_out"]}, indent=2) + "\n"
    out = [f"# What calibrated the estimate of {report.workload}", ""]
    for family, info in summary["families"].items():
        chips = ", ".join(f"{k}: {v}" for k, v in info["rows_per_chip"].items()) or "none"
        out += [f"## {family}: {info['rows']} row(s) ({chips})", "", f"{len(info['sources'])} source(s):", ""]
        out += [f"- {src}" for src in info["sources"]] + ["", "Rows:", ""]
        out += [f"- {row}" for row in rows.get(family, [])] + [""]
    left = ", ".join(f"{n} {why}" for why, n in summary["left_out"].items()) or "none"
    out.append(f"Fit over {summary['rows_total']} rows of every family; left out: {left}.")
    return "\n".join(out) + "\n"


def sources_line(report: EstimateReport, sources_file: str | None = None) -> str:
    """The one line the terminal gets about the estimate's citations."""
    families = calibration_summary(report)["families"]
    parts = [f"{info['rows']} {family} row(s) from {len(info['sources'])} source(s)" for family, info in families.items()]
    where = f"listed in {sources_file}" if sources_file else "listed by --sources FILE or --format json"
    return f"calibrated on {'; '.join(parts) or 'no rows'} ({where})."


def print_table(console, report: EstimateReport, sources_file: str | None = None) -> None:
    """The rich table: one row per target and load, $/Mtok blended per plan, then one line on the
    rows it is calibrated on (and where they are listed) and one on the fit."""
    from rich.markup import escape
    from rich.table import Table

    plans = list(dict.fromkeys(p["plan"] for plans in report.prices for p in plans))
    stacks = sorted({e.stack_date for e in report.estimates if e.stack_date})
    stack = f"; serving stacks as of {', '.join(stacks)}" if stacks else ""
    table = Table(title=f"{report.workload}: ESTIMATE (not measured; {COVERAGE:.0%} prediction intervals{stack})",
                  title_justify="left")
    for name in ("target", "chips", "load", "precision", "tok/s/chip", "TTFT s", "TPOT ms", "bound",
                 *[f"$/Mtok {p}" for p in plans]):
        table.add_column(name, justify="left" if name == "target" else "right")
    for est, priced in zip(report.estimates, report.prices):
        load = f"{est.concurrency:g}"
        if est.refused:
            table.add_row(escape(est.target), str(est.chips), load, escape(est.precision),
                          f"[yellow]no estimate: {escape(est.refused)}[/yellow]", *[""] * (3 + len(plans)))
            continue
        by_plan = {p["plan"]: p for p in priced}
        cost = [band((by_plan[p]["blended_usd_per_mtok"], by_plan[p]["blended_usd_per_mtok_low"],
                      by_plan[p]["blended_usd_per_mtok_high"])) if p in by_plan else "-" for p in plans]
        mark = " *" if est.notes else ""
        table.add_row(escape(est.target) + mark, str(est.chips), load, escape(est.precision),
                      band(est.output_tokens_per_s_per_chip),
                      band(est.ttft_s), band(est.tpot_s, 1e3), est.decode_bound, *cost)
    console.print(table)
    for est in report.estimates:
        if est.notes and not est.refused:
            console.print(f"* {escape(est.target)}, load {est.concurrency:g}: {escape('; '.join(est.notes))}")
    summary = calibration_summary(report)
    console.print(escape(f"estimate {sources_line(report, sources_file)}"))
    left = ", ".join(f"{n} {why}" for why, n in summary["left_out"].items())
    console.print(f"fit over {summary['rows_total']} rows of every family (shared slopes, pooled per family); "
                  f"left out: {escape(left) or 'none'}. $/Mtok: blended (all chip-seconds / all tokens), "
                  "cheapest price row per plan. Estimates never enter measured tables.")


__all__ = ["as_csv", "as_json", "band", "calibration_summary", "flat_rows", "fmt", "payload", "print_table",
           "sources_document", "sources_line"]
