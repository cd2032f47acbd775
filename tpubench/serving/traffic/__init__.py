"""The user's own traffic for scenario `serve` (docs/scenarios/serve.md, "Traffic"): one module per
mode (dataset, shared_prefix, multi_turn, trace), what they share in common.py, and in plan.py
the entries the scenario calls: the mode named by the workload's `traffic` section checked on
load and planned for one point. What a plan holds and how the load generator sends it:
common.TrafficPlan, load.py. Here only what names a mode, importable without numpy (the
scenario's labels are made at CLI start-up).
"""

from __future__ import annotations

from pathlib import Path

MODES = ("dataset", "shared_prefix", "multi_turn", "trace")


def mode_of(traffic: dict) -> tuple[str, dict]:
    """(mode, its settings) of a `traffic` section (exactly one mode is set; the schema checks)."""
    for mode in MODES:
        if traffic.get(mode) is not None:
            return mode, traffic[mode]
    raise ValueError(f"a traffic section names one of {', '.join(MODES)}")


def traffic_words(traffic: dict | None) -> str:
    """The traffic in a point's label: '' for the plain lengths of input_length/output_length."""
    if not traffic:
        return ""
    mode, cfg = mode_of(traffic)
    if mode == "dataset":
        return f"dataset {Path(cfg['path']).name}"
    if mode == "shared_prefix":
        return (f"shared-prefix {cfg['num_prefixes']}x{cfg['prefix_length']}+{cfg['suffix_length']}"
                f" share {cfg.get('prefix_share', 1.0):g}")
    if mode == "multi_turn":
        return f"multi-turn {cfg['turns']} turns think {cfg.get('think_time_s', 0.0):g}s"
    return f"trace {Path(cfg['path']).name}"
