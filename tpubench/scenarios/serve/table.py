"""The run table of scenario `serve`: latency percentiles, throughput and goodput under load, and
what the engine reported where it did (the share of input served from its prefix cache, its peak
KV-cache usage) and the served-model check, each column shown only when some point has it."""

from __future__ import annotations

from tpubench.scenarios.run_table import (
    MISSING,
    measured,
    ms,
    number,
    p50_p99,
    percent,
    rate_with_ci,
    run_table,
    valid_cell,
)

# Optional columns: (header, the cell of a result), shown when some ok point has a value.
_ENGINE_COLUMNS = (
    ("cached input", lambda r: percent(r.metrics.get("cached_input_share"))),
    ("KV peak", lambda r: percent(r.metrics.get("engine_kv_cache_usage_peak"))),
    ("model check", lambda r: (getattr(r, "served_model_check", None) or {}).get("status") or MISSING),
)

# The steady-state window, the saturation flag and the capacity search (serving/saturation.py,
# scenarios/serve/capacity.py), shown likewise.
_WINDOW_COLUMNS = (
    ("steady tok/s", lambda r: number(r.metrics.get("steady_output_tokens_per_s"), ".1f")),
    ("over-saturated", lambda r: {1: "[red]yes[/red]", 0: "no"}.get(r.metrics.get("over_saturated"), MISSING)),
    ("capacity", lambda r: "[bold]capacity[/bold]" if r.metrics.get("capacity_point") == 1 else
     {1: "probe: met", 0: "probe: missed"}.get(r.metrics.get("capacity_probe_passed"), MISSING)),
)


def serve_table(outcomes: list, label):
    server = next((o.result.environment.get("server_name") for o in outcomes
                   if o.result is not None and o.result.status == "ok"), None)
    ok = [o.result for o in outcomes if o.result is not None and o.result.status == "ok"]
    extra = [(h, cell) for h, cell in _ENGINE_COLUMNS + _WINDOW_COLUMNS if any(cell(r) != MISSING for r in ok)]
    table = run_table(f"tpubench run: serving{f' ({server})' if server else ''}",
                      ("point", "TTFT p50/p99 ms", "TPOT p50/p99 ms", "ITL p50 ms", "output tok/s (95% CI)",
                       "req/s", "goodput req/s", "failed", *(h for h, _ in extra), "valid"))
    for o, r, m in measured(table, outcomes, label):
        table.add_row(label(o.point), p50_p99(m, "ttft"), p50_p99(m, "tpot"), ms(m.get("itl_p50_s")),
                      rate_with_ci(m, "output_tokens_per_s"), number(m.get("requests_per_s"), ".2f"),
                      number(m.get("goodput_requests_per_s"), ".2f"), number(m.get("requests_failed"), ".0f"),
                      *(cell(r) for _, cell in extra), valid_cell(r))
    return table
