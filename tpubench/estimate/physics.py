"""The physics gate: what a row of throughput must satisfy before it calibrates the estimate, is
imported, or enters an answer or a budget (DESIGN section 25, "A row that beats physics").

A row is refused when a figure it states is not a finite positive number, or when it claims more
than its chip can do: efficiency = roofline time / observed time (estimate/features.py: `roofline`
and `observed_cycle_s`) above EFFICIENCY_LIMIT. The limit is 1 widened by two things the roofline
is known to get wrong in the row's favour, never by how far honest rows usually sit below it:

- PEAK_ROUNDING: vendors round their peaks ("989 TFLOPS", "3.35 TB/s"), a few percent;
- UNSTATED_FACTOR: where a row does not state them, the roofline assumes a 16-bit KV cache and runs
  fp4 matmuls at the fp8 peak (docs/estimate.md#calibration-data). An engine that caches in fp8 reads
  at most half the cache bytes modelled, and fp4 units run at twice the fp8 peak: either makes the
  roofline up to 2x too long, and max(compute, bytes) of two terms each at most 2x too long is at most
  2x too long, so an honest row can read an efficiency of up to 2.

On the shipped rows (2,749, as of 2026-12-06) the highest efficiency is 1.76 (MLPerf v6.0 DeepSeek-R1
fp4 Offline on B300, held at the largest batch its memory holds), 1.52 among rows that state their
load; 38 of the 1,904 rows the full roofline holds read above 1, all fp4 rows on Blackwell or RTX
PRO that do not state their KV cache's dtype. docs/estimate.md ("A row that beats physics") gives
the figures.

These are pure functions of numbers and a row's cells; estimate/gate.py asks the estimate's
calibration for each row's efficiency and applies them to published rows.
"""

from __future__ import annotations

import math
from typing import Mapping

PEAK_ROUNDING = 0.05
UNSTATED_FACTOR = 2.0
EFFICIENCY_LIMIT = UNSTATED_FACTOR * (1 + PEAK_ROUNDING)
BEYOND_ROOFLINE = f"faster than its chip's roofline allows (efficiency above {EFFICIENCY_LIMIT:g})"

# A published row's figures (output/published/rows.py): these two every row must state; the others
# are optional (blank = not stated), but a stated one must be a finite positive number too.
REQUIRED_FIGURES = ("output_tokens_per_s_per_chip", "chips")
STATED_FIGURES = ("input_length", "output_length", "concurrency", "running_batch", "decode_chips",
                  "total_tokens_per_s_per_chip", "interactivity_tokens_per_s", "ttft_p50_s", "ttft_mean_s",
                  "ttft_p99_s", "tpot_p50_s", "tpot_mean_s", "tpot_p99_s", "e2e_p50_s", "publisher_usd_per_mtok")


def number(value) -> float | None:
    """`value` as a float when it is a number (not a bool, not text), else None; a number no float
    holds (an int of 400 digits) is inf."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf


def finite_positive(value) -> bool:
    x = number(value)
    return x is not None and math.isfinite(x) and x > 0


def _stated(value) -> bool:
    """Whether a cell states a figure: a blank cell (None, NaN, empty text) does not."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    return not (isinstance(value, str) and not value.strip())


def figures_refusal(row: Mapping) -> str | None:
    """Why `row`'s figures cannot be used (a required one missing, or a stated one not a finite
    positive number), or None."""
    for name in REQUIRED_FIGURES:
        if not finite_positive(row.get(name)):
            return f"{name} {_shown(row.get(name))} is not a finite positive number"
    for name in STATED_FIGURES:
        value = row.get(name)
        if _stated(value) and not finite_positive(value):
            return f"{name} {_shown(value)} is not a finite positive number"
    return None


def efficiency_refusal(efficiency: float, row: Mapping | None = None) -> str | None:
    """BEYOND_ROOFLINE (naming `row` when given: row_name) when `efficiency` is above
    EFFICIENCY_LIMIT or not a number, else None."""
    if efficiency <= EFFICIENCY_LIMIT:      # NaN compares False: refused
        return None
    return f"{row_name(row)}: {BEYOND_ROOFLINE}" if row is not None else BEYOND_ROOFLINE


def row_name(row: Mapping) -> str:
    """Where a row came from, for a warning: 'FILE row N' (N counts a CSV's rows below its header from
    1) when it was read from a published-results file, else its file or reference."""
    where = next((str(row[k]) for k in ("file", "reference") if _stated(row.get(k))), "a row with no file")
    line = row.get("file_row")
    return f"{where} row {int(line)}" if finite_positive(line) else where


def beyond_roofline(row: Mapping) -> str:
    """Why a row whose efficiency is above the limit is refused: what it claims, and BEYOND_ROOFLINE."""
    return (f"{_shown(row.get('output_tokens_per_s_per_chip'))} output tokens/s per chip on {_shown(row.get('chips'))} x "
            f"{row.get('accelerator') or 'an unnamed chip'} is {BEYOND_ROOFLINE}")


def refusal_warning(name: str, why: str) -> str:
    """The one line a refused row gets: where it is and why it is left out."""
    return f"{name}: {why}; left out"


def _shown(value) -> str:
    x = number(value)
    return f"{x:.6g}" if x is not None else repr(value) if _stated(value) else "(blank)"


__all__ = ["BEYOND_ROOFLINE", "EFFICIENCY_LIMIT", "PEAK_ROUNDING", "REQUIRED_FIGURES", "STATED_FIGURES",
           "UNSTATED_FACTOR", "beyond_roofline", "efficiency_refusal", "figures_refusal", "finite_positive", "number",
           "refusal_warning", "row_name"]
