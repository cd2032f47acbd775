"""The report's "published results beside yours" section: the matched comparison
(output/published/match.py) as a table of cells, once, for the markdown and HTML renderers.

Published rows (imported with `tpubench import`, kept in a `published/` folder of the results, and
the reference rows shipped with tpubench, data/published/) are only compared here and listed by
report/published_list.py: they are split off the results before anything is priced, so no cost table,
summary or figure of the report counts them.
"""

from __future__ import annotations

from typing import Callable

import pandas as pd

from tpubench.output.published import SOURCE_PUBLISHED, compare_published, read_published, shipped_published
from tpubench.output.published.match import DEFAULT_TOLERANCE
from tpubench.units import MISSING, number, sig

HEADERS = ["Workload", "Accelerator × chips", "In/out tokens", "Load", "Your stack",
           "Interactivity (tok/s/user)", "Yours: out tok/s/chip", "Publisher", "Published (interpolated)",
           "Front: points, interactivity", "Deviation", "Verdict"]
NUMERIC = {5, 6, 8, 10}
NOTE = ("Published: the publisher's Pareto front of output tokens/s per chip against interactivity "
        "(1 / median TPOT), at the same model, lengths, accelerator and precision, interpolated linearly "
        "at your point's interactivity; deviation = yours / published - 1. Published rows are never priced.")


def split_published(results: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(measured rows, published rows) of a DataFrame from load_results(include_published=...)."""
    if "source" not in results or results.empty:
        return results, results.iloc[0:0]
    published = results["source"] == SOURCE_PUBLISHED
    measured = results[~published].reset_index(drop=True)
    measured.attrs = dict(results.attrs)
    return measured, results[published]


def gather_published(source, results: pd.DataFrame, warn: Callable[[str], None] | None,
                     shipped: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(results without published rows, every published row the report knows): the stored imports
    under `source` (paths), or those a DataFrame from load_results(include_published=True) carries,
    plus, with `shipped`, the reference rows shipped with tpubench (data/published/) not already in
    it. Either way the published rows are never priced."""
    measured, published = split_published(results)
    if not isinstance(source, pd.DataFrame):   # a DataFrame carries its own published rows, if any
        published = read_published(source, warn=warn)
    if shipped:
        reference = shipped_published(warn=warn)
        if len(published) and "file" in published:
            reference = reference[~reference["file"].isin(set(published["file"].astype(str)))]
        published = pd.concat([published, reference], ignore_index=True) if len(published) else reference
    return measured, published.reset_index(drop=True)


def published_beside(source, results: pd.DataFrame, warn: Callable[[str], None] | None,
                     tolerance: float = DEFAULT_TOLERANCE,
                     shipped: bool = True) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(results without published rows, the comparison, every published row: gather_published)."""
    measured, published = gather_published(source, results, warn, shipped)
    if published.empty:
        return measured, pd.DataFrame(), published
    return measured, compare_published(measured, published, tolerance), published


def _pct(x) -> str:
    return f"{x:+.1%}" if pd.notna(x) else MISSING


def cells(r) -> list[str]:
    """One comparison row as the table shows it."""
    load = (f"conc {number(r['concurrency'])}" if pd.notna(r.get("concurrency"))
            else f"batch {number(r['batch_size'])}" if pd.notna(r.get("batch_size")) else MISSING)
    return [str(r["workload"]), f"{r['accelerator']} ×{number(r['chips'])}",
            f"{number(r['input_length'])}/{number(r['output_length'])}", load, str(r["stack"] or MISSING),
            sig(r["interactivity_tokens_per_s"]), sig(r["output_tokens_per_s_per_chip"]),
            f"{r['publisher']} ({r['published_accelerator']}, {r['published_frameworks'] or MISSING})",
            sig(r["published_tokens_per_s_per_chip"]),
            f"{number(r['front_points'])}, {sig(r['front_interactivity_low'])}–{sig(r['front_interactivity_high'])}",
            _pct(r["deviation"]), str(r["verdict"])]


def empty_note(published_rows: int) -> str:
    return (f"{published_rows} published row(s) (shipped with tpubench or imported), none at the model, lengths, "
            "accelerator and precision of a measured point (see docs/published.md on naming the model at import).")
