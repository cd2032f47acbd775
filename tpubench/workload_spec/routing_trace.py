"""The routing trace file a workload's `model.routing: {trace: FILE}` names: per-layer expert
histograms, read and checked when the workload loads (models/routing.py turns them into a schedule).

    {"layers": [[count or share per expert, ...], ...]}   one row per MoE layer, or one for all

A tpubench result's `moe.expert_load` has this shape, so a run's measured load can be replayed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path


def read_trace(path: Path) -> list[list[float]]:
    """The `layers` of a trace file: a JSON object {"layers": [[count or share per expert], ...]}.
    Raises ValueError with a one-line reason naming the file and the field inside it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"trace file {path} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"trace file {path} is not readable JSON ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
    # A tpubench result file replays its measured load (moe.expert_load).
    layers = (data.get("layers") or (data.get("moe") or {}).get("expert_load")) if isinstance(data, dict) else None
    if not isinstance(layers, list) or not layers:
        raise ValueError(f"trace file {path}: 'layers' must be a non-empty list of per-expert histograms")
    width = None
    for i, row in enumerate(layers):
        if not isinstance(row, list) or not row or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0 for x in row):
            raise ValueError(f"trace file {path}: layers[{i}] must be a list of non-negative numbers")
        if sum(row) <= 0:
            raise ValueError(f"trace file {path}: layers[{i}] is all zeros")
        if width is not None and len(row) != width:
            raise ValueError(f"trace file {path}: layers[{i}] has {len(row)} experts, layers[0] has {width}")
        width = len(row)
    return [[float(x) for x in row] for row in layers]
