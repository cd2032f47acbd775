"""Leave-one-out validation of `tpubench estimate` over the shipped published rows (DESIGN s24):
each row asked of the estimate exactly as the command would ask it, with a fit and an interval
built without it (tpubench.estimate.validate). Prints, per chip and per chip family, n, the median
absolute % error of output tokens/s per chip (and so of $/Mtok) and the share of rows inside their
90% interval, then overall; then the same with each sweep (publisher, model, chip) held out whole.
Targets: median error <= 15%, coverage >= 85%.

    python benchmarks/estimate_loo.py [--ridge 4] [--markdown]
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ridge", type=float, default=None, help="pooling weight (default: the shipped one)")
    parser.add_argument("--markdown", action="store_true", help="print markdown tables (for docs/estimate.md)")
    args = parser.parse_args()

    from tpubench.estimate.calibration import observations
    from tpubench.estimate.fit import DEFAULT_RIDGE
    from tpubench.estimate.validate import held_out, summary
    from tpubench.output.published.store import shipped_published

    rows = shipped_published()
    obs = observations(rows.assign(source="published"))
    print(f"{len(rows)} shipped published rows; {len(obs.y)} calibrate; left out: "
          + ", ".join(f"{n} {why}" for why, n in obs.left_out.most_common()))
    for by, title in (("row", "leave one row out"), ("sweep", "leave one sweep (publisher, model, chip) out")):
        start = time.perf_counter()
        per_row = held_out(obs, ridge=args.ridge or DEFAULT_RIDGE, by=by)
        took = time.perf_counter() - start
        print(f"\n== {title}")
        for column in ("accelerator", "family"):
            _print(summary(per_row, column), column, args.markdown)
        overall = summary(per_row).iloc[-1]
        print(f"\n{title}: median |error| {overall.median_abs_error_pct:.1f}% (target <= 15%), "
              f"90% interval coverage {100 * overall.coverage_90:.0f}% (target >= 85%) over {overall.n} rows"
              f"{f', {overall.refused} refused' if overall.refused else ''}; {took:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
