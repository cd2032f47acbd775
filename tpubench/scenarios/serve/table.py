"""The run table of scenario `serve`: latency percentiles, throughput and goodput under load."""

from __future__ import annotations

from tpubench.scenarios.run_table import measured, ms, number, p50_p99, rate_with_ci, run_table, valid_cell


def serve_table(outcomes: list, label):
    server = next((o.result.environment.get("server_name") for o in outcomes
                   if o.result is not None and o.result.status == "ok"), None)
    table = run_table(f"tpubench run: serving{f' ({server})' if server else ''}",
                      ("point", "TTFT p50/p99 ms", "TPOT p50/p99 ms", "ITL p50 ms", "output tok/s (95% CI)",
                       "req/s", "goodput req/s", "failed", "valid"))
    for o, r, m in measured(table, outcomes, label):
        table.add_row(label(o.point), p50_p99(m, "ttft"), p50_p99(m, "tpot"), ms(m.get("itl_p50_s")),
                      rate_with_ci(m, "output_tokens_per_s"), number(m.get("requests_per_s"), ".2f"),
                      number(m.get("goodput_requests_per_s"), ".2f"), number(m.get("requests_failed"), ".0f"),
                      valid_cell(r))
    return table
