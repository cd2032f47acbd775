"""Shared set-up for the benchmark scripts: one workload point, its model and its prompt."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def small_point(workload: str = "workloads/qwen3_moe.yaml", batch: int = 8, **overrides):
    from dataclasses import replace

    from tpubench.run.sweep import expand
    from tpubench.run.workload import load_workload

    points = [p for p in expand(load_workload(ROOT / workload), "small") if p.batch_size == batch]
    return replace(points[0], **overrides)


def session_for(point, device: str = "cpu"):
    from tpubench.backends import get_backend
    from tpubench.scenarios.generate.measure import _vocab_size, make_prompt

    be = get_backend("torch", device)
    built = be.build(point)
    prompt = make_prompt(point.measurement["seed"], point.batch_size, point.input_length, _vocab_size(point))
    return be.session(built, point, prompt), prompt
