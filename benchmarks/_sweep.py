"""Run a variant of a shipped workload through tpubench itself and collect the results."""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml
from _common import ROOT


def run_variant(workload: str, edit, *, backend: str = "torch", scale: str = "small", out: Path | None = None):
    """Apply `edit(dict)` to the workload YAML, run it with tpubench, return the RunResults."""
    from tpubench.run.runner import run_sweep

    data = yaml.safe_load((ROOT / workload).read_text())
    edit(data)
    tmp = Path(tempfile.mkdtemp(prefix="tpubench-bench-"))
    path = tmp / Path(workload).name
    path.write_text(yaml.safe_dump(data))
    outcomes = run_sweep(path, backend=backend, scale=scale, out_dir=out or tmp / "results")
    return [o.result for o in outcomes if o.result is not None]
