"""The run table of scenario `generate`: latency, throughput, roofline use, memory, compile time."""

from __future__ import annotations

import math

from tpubench.scenarios.run_table import (
    energy_cells,
    energy_columns,
    human_bytes,
    measured,
    p50_p99,
    percent,
    rate_with_ci,
    run_table,
    valid_cell,
)


def generate_table(outcomes: list, label):
    energy = energy_columns(outcomes, "joules_per_token", "J/token")
    table = run_table("tpubench run", ("point", "TTFT p50/p99 ms", "TPOT p50/p99 ms", "output tok/s (95% CI)",
                                       "prefill tok/s", "MFU / MBU", "peak mem", "compile s", *energy, "valid"))
    for o, r, m in measured(table, outcomes, label):
        table.add_row(label(o.point), p50_p99(m, "ttft"), p50_p99(m, "tpot"), rate_with_ci(m, "output_tokens_per_s"),
                      f"{m.get('prefill_tokens_per_s', math.nan):,.0f}",
                      f"{percent(m.get('prefill_mfu'))} / {percent(m.get('decode_mbu'))}",
                      human_bytes(m.get("peak_memory_bytes")), f"{r.timing.get('compile_s', math.nan):.2f}",
                      *energy_cells(energy, r, "joules_per_token"), valid_cell(r))
    return table
