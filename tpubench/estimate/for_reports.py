"""The estimates a report's answer holds (output/answer): those kept as records by
`tpubench estimate --out` under the report's folders (estimate/records.py), and those made now for
each workload whose results name a workload file that says `compare_on` (or for every workload
with `tpubench report --on`), calibrated on the published rows the report knows and your measured
rows under its folders. Estimates made now replace a record's rows of the same workload, chip and
operating point; they never enter a table of measurements.

A result names the workload file it was run from (`workload_file`, as given to `tpubench run`);
the file is looked for as written (from the current folder), then beside the results folder.

The report does not import this (a workload file is read with its full checks, which need
transformers; reports stay free of frameworks): the command, or `tpubench.answer`, hands
`estimates_for_report` to output.report.build_report as its `estimator`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from tpubench.errors import UserError
from tpubench.estimate.chips import parse_target
from tpubench.estimate.predict import Calibration

# What makes two estimate rows the same estimate (a newer one replaces an older one).
_SAME = ["workload", "target", "concurrency", "input_length", "output_length", "precision", "plan"]


def _workload_files(results: pd.DataFrame, roots: Sequence[Path]) -> dict[str, Path | str]:
    """Per workload of the measured results: its workload file, or why none was found. One result
    file is read per workload (the DataFrame does not carry the file's name)."""
    out: dict[str, Path | str] = {}
    if results.empty or "file" not in results:
        return out
    for workload, files in results.groupby("workload", sort=True)["file"]:
        named = None
        for f in files:
            try:
                named = json.loads(Path(f).read_text(encoding="utf-8")).get("workload_file")
            except (OSError, ValueError, AttributeError):
                continue
            if named:
                break
        if not named:
            out[str(workload)] = "its results name no workload file"
            continue
        candidates = [Path(named)] + [root.parent / named for root in roots] + [root / named for root in roots]
        found = next((c for c in candidates if c.is_file()), None)
        out[str(workload)] = found if found else f"workload file {named} not found (run the report where it is)"
    return out


def _roots(source) -> list[Path]:
    paths = [source] if isinstance(source, (str, Path)) else source
    return [Path(p) if Path(p).is_dir() else Path(p).parent for p in paths]


@dataclass
class ReportEstimates:
    """What a report's answer gets of the estimate (estimates_for_report)."""

    rows: pd.DataFrame = field(default_factory=pd.DataFrame)
    # Per workload whose file was found: (that file, its estimate.points.WorkloadPoints: the full
    # architecture, its loads, service level and volume, which the answer's published rows are matched on).
    contexts: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)     # workloads that could not be estimated
    # The calibration made (its held-out pairs give two estimates' shared ratio interval, its tails
    # a published row's missing 99th percentile); None where none was made.
    calibration: Calibration | None = None


def estimates_for_report(source, results: pd.DataFrame, *, on: Sequence[str], prices: pd.DataFrame,
                         published: pd.DataFrame, plans=None, warn: Callable[[str], None] | None = None,
                         workloads: Sequence[Path] | None = None) -> ReportEstimates:
    """The estimates of a report over `source` (paths; a DataFrame source has no folders: records
    and workload files are not looked for): one row per estimate and plan as
    estimate.render.flat_rows gives them, with their `workload_file`, each chip's whole sweep of loads
    (estimate.command.load_sweep) for the answer's operating point; and the rest of ReportEstimates.
    `workloads` (a budget's --workload) names the workload files to estimate instead of those the
    results name; their contexts and notes are keyed by the file as given."""
    from tpubench.estimate.records import read_records

    if isinstance(source, pd.DataFrame):
        return ReportEstimates()
    for spec in on:      # every --on checked before any work: a bad one is the command's error
        parse_target(spec, prices)
    warn = warn or (lambda msg: None)
    frames, contexts, notes, cal = [read_records(source, warn=warn)], {}, [], None
    named = (_workload_files(results, _roots(source)) if workloads is None
             else {str(path): Path(path) for path in workloads})
    for workload, path in named.items():
        if isinstance(path, str):
            if on:
                notes.append(f"{workload}: no estimate: {path}")
            continue
        try:
            wl, made, cal = _estimate_now(path, on, prices, published, source, plans, cal, warn)
            contexts[workload] = (str(path), wl)
        except UserError as exc:
            if exc.field == "compare_on":   # the workload names a chip wrongly: bad input, not a gap
                raise
            notes.append(f"{workload}: no estimate: {exc}")
            continue
        frames.append(made)
    frames = [f for f in frames if len(f)]
    if not frames:
        return ReportEstimates(pd.DataFrame(), contexts, notes, cal)
    rows = pd.concat(frames, ignore_index=True)
    # Records first, then what was made now: the last of each estimate stays.
    rows = rows.drop_duplicates([c for c in _SAME if c in rows], keep="last").reset_index(drop=True)
    return ReportEstimates(rows, contexts, notes, cal)


def _estimate_now(path: Path, on, prices, published, source, plans, cal, warn):
    """(the workload's points, its estimate rows (empty when it names no chip and `on` is empty),
    the calibration to reuse: made once, on the published rows that pass the physics gate)."""
    from tpubench.estimate.command import calibration, run_estimate
    from tpubench.estimate.gate import gate, once
    from tpubench.estimate.points import workload_points
    from tpubench.estimate.render import flat_rows

    wl = workload_points(path)
    if not on and not wl.compare_on:
        return wl, pd.DataFrame(), cal
    cal = cal or calibration(gate(published, once(warn)), list(_roots(source)))   # the answer may meet a row too
    report = run_estimate(path, list(on), prices=prices, published=published, plans=plans, cal=cal, wl=wl,
                          sweep=True)
    return wl, pd.DataFrame(flat_rows(report)).assign(workload_file=str(path), file=""), cal


__all__ = ["ReportEstimates", "estimates_for_report"]
