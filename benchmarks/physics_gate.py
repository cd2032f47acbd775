"""The shipped published rows against the physics gate (tpubench/estimate/physics.py, gate.py): the
figures behind its tolerance in docs/estimate.md ("A row that beats physics").

Per class of row (single node with a stated load: the full roofline; single node without one: the
full roofline at the largest batch that fits; speculative, disaggregated or multi-node: the compute
roofline), the distribution of efficiency = roofline time / observed time, how many rows sit above
1 and above the limit, and which; then the share of rows a rate slipped by 2x, 8x and 1,000x would
put above the limit, and the CPU the gate takes over all the rows.

    python benchmarks/physics_gate.py
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _classes(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(efficiency by the full roofline, by the compute roofline alone, whether the full one
    describes the row's system), per row; NaN where the estimate has no roofline for it."""
    from tpubench.estimate import gate
    from tpubench.estimate.calibration import observations
    from tpubench.estimate.features import roofline

    distinct, of_row = gate._per_configuration(gate._asked(rows))
    obs = observations(distinct)
    at = np.full(len(distinct), -1)
    at[obs.rows["source"].astype(int).to_numpy()] = np.arange(len(obs.rows))
    mine = at[of_row]
    scale = gate.claimed_rates(rows) / gate.ASKED_RATE
    compute_cycle = np.array([roofline(p, s.peak_flops, math.inf).cycle_s for p, s in zip(obs.points, obs.specs)])
    observed = obs.rows["observed_cycle_s"].to_numpy(float)
    full, compute = np.full(len(rows), np.nan), np.full(len(rows), np.nan)
    known = mine >= 0
    full[known] = obs.rows["efficiency"].to_numpy(float)[mine[known]] * scale[known]
    compute[known] = compute_cycle[mine[known]] / observed[mine[known]] * scale[known]
    modelled = np.array([gate._modelled(r) for r in rows.to_dict("records")])
    return full, compute, modelled


def main() -> None:
    from tpubench.estimate.gate import efficiencies
    from tpubench.estimate.physics import EFFICIENCY_LIMIT
    from tpubench.output.published.store import shipped_published

    rows = shipped_published()
    full, compute, modelled = _classes(rows)
    load = rows["concurrency"].notna().to_numpy()
    print(f"{len(rows)} shipped rows, {np.isfinite(full).sum()} with a roofline; limit {EFFICIENCY_LIMIT:g}\n")
    print("| rows | n | median | 90th pct | 99th pct | max | above 1 | above the limit |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    judged = np.where(modelled, full, compute)
    for name, pick, values in (("single node, load stated (full roofline)", modelled & load, full),
                               ("single node, no load stated (full, largest batch)", modelled & ~load, full),
                               ("speculative, disaggregated, multi-node (compute roofline)", ~modelled, compute),
                               ("the same, by the full roofline (not used)", ~modelled, full)):
        x = values[pick & np.isfinite(values)]
        print(f"| {name} | {len(x):,} | {np.median(x):.2f} | {np.quantile(x, .9):.2f} | {np.quantile(x, .99):.2f} | "
              f"{x.max():.2f} | {(x > 1).sum()} | {(x > EFFICIENCY_LIMIT).sum()} |")
    above = rows[modelled & (full > 1)]
    print("\nrows above 1 by the full roofline:")
    print(above.groupby(["publisher", "model", "accelerator", "precision"], dropna=False).size().to_string())
    print("\nkv_cache_dtype stated on them:", sorted(set(above["kv_cache_dtype"].dropna().astype(str))) or "none")
    for slip in (2, 8, 1000):
        print(f"a rate slipped by {slip}x is above the limit on {(judged * slip > EFFICIENCY_LIMIT).mean():.1%} of rows")
    start = time.process_time()
    efficiencies(rows)
    print(f"\nthe gate over all {len(rows)} rows: {time.process_time() - start:.2f} s CPU")


if __name__ == "__main__":
    main()
