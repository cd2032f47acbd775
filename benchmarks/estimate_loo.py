"""Leave-one-out validation of `tpubench estimate` over the shipped published rows (DESIGN s24):
each row asked of the estimate exactly as the command would ask it, with a fit and an interval
built without it (tpubench.estimate.validate). Prints, per chip and per chip family, n, the median
absolute % error of output tokens/s per chip (and so of $/Mtok) and the share of rows inside their
90% interval, then overall, with each sweep (publisher, model, chip) held out whole; then what 0, 1
and 3 of your own rows of a held-out sweep do to the error of its other rows.
Targets: median error <= 15%, coverage >= 85%.

    python benchmarks/estimate_loo.py [--ridge 4] [--markdown] [--rows]

--rows also holds out single rows (a row's neighbours in its sweep stay in; slower).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _print(table, by: str, markdown: bool) -> None:
    if markdown:
        print(f"\n| {by} | n | median abs error | 90% interval coverage |\n|---|---:|---:|---:|")
        for r in table.itertuples():
            refused = f" ({r.refused} refused)" if r.refused else ""
            error, coverage = ((f"{r.median_abs_error_pct:.1f}%", f"{100 * r.coverage_90:.0f}%") if r.n else ("-", "-"))
            print(f"| {getattr(r, by)} | {r.n}{refused} | {error} | {coverage} |")
    else:
        print()
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


def _held_out(obs, ridge: float, by: str, title: str, markdown: bool) -> None:
    from tpubench.estimate.validate import held_out, summary

    start = time.perf_counter()
    per_row = held_out(obs, ridge=ridge, by=by)
    took = time.perf_counter() - start
    print(f"\n== {title}")
    for column in ("accelerator", "family"):
        _print(summary(per_row, column), column, markdown)
    overall = summary(per_row).iloc[-1]
    print(f"\n{title}: median |error| {overall.median_abs_error_pct:.1f}% (target <= 15%), "
          f"90% interval coverage {100 * overall.coverage_90:.0f}% (target >= 85%) over {overall.n} rows"
          f"{f', {overall.refused} refused' if overall.refused else ''}; {took:.1f} s")


def _own_rows(obs, ridge: float, markdown: bool) -> None:
    import pandas as pd

    from tpubench.estimate.validate import OWN_CANDIDATES, summary, with_own_rows

    per_row = with_own_rows(obs, ridge=ridge)
    print(f"\n== your own rows: each sweep of more than {OWN_CANDIDATES} rows held out, 0, 1 or 3 of its rows handed "
          "back as yours, its other rows scored")
    parts = []
    for own, df in per_row.groupby("own_rows", sort=True):
        parts.append(summary(df, "family").assign(own_rows=own))
    table = pd.concat(parts, ignore_index=True)
    if markdown:
        print("\n| your rows | family | n | median abs error | 90% interval coverage |\n|---:|---|---:|---:|---:|")
        for r in table.itertuples():
            print(f"| {r.own_rows} | {r.family} | {r.n} | {r.median_abs_error_pct:.1f}% | {100 * r.coverage_90:.0f}% |")
    else:
        print(table[["own_rows", "family", "n", "median_abs_error_pct", "coverage_90"]]
              .to_string(index=False, float_format=lambda v: f"{v:.3f}"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ridge", type=float, default=None, help="pooling weight (default: the shipped one)")
    parser.add_argument("--markdown", action="store_true", help="print markdown tables (for docs/estimate.md)")
    parser.add_argument("--rows", action="store_true", help="also hold out single rows")
    args = parser.parse_args()

    from tpubench.estimate.calibration import observations
    from tpubench.estimate.fit import DEFAULT_RIDGE
    from tpubench.output.published.store import shipped_published

    ridge = args.ridge or DEFAULT_RIDGE
    rows = shipped_published()
    obs = observations(rows.assign(source="published"))
    print(f"{len(rows)} shipped published rows; {len(obs.y)} calibrate over {obs.rows['accelerator'].nunique()} chips; "
          "left out: " + ", ".join(f"{n} {why}" for why, n in obs.left_out.most_common()))
    if args.rows:
        _held_out(obs, ridge, "row", "leave one row out", args.markdown)
    _held_out(obs, ridge, "sweep", "leave one sweep (publisher, model, chip) out", args.markdown)
    _own_rows(obs, ridge, args.markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
