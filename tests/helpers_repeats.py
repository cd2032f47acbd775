"""Results folders where some points were measured more than once, made by copying result files (a
plain module: import it, no fixtures). No model runs: a copy with a later `started_at` under a new
file name is exactly what measuring the same point again on the same environment leaves behind."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REPO_RESULTS = REPO / "results"


def copy_as_later_run(src: str | Path, out_dir: str | Path, *, hours: float = 1.0, tag: str = "again") -> Path:
    """A copy of result file `src` in `out_dir`, started (and finished) `hours` later, named
    `<src stem>-<tag>.json`."""
    src = Path(src)
    data = json.loads(src.read_bytes())
    for key in ("started_at", "finished_at"):
        if data.get(key):
            data[key] = (datetime.fromisoformat(data[key]) + timedelta(hours=hours)).isoformat(timespec="seconds")
    target = Path(out_dir) / f"{src.stem}-{tag}.json"
    target.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return target


def repo_results_with_repeats(out_dir: str | Path) -> dict:
    """Copy the committed results/ into `out_dir`, then measure two of its points "again": the first
    file (by name) twice more, the last file once more. Returns what load_results should see."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = sorted(REPO_RESULTS.glob("*.json"))
    assert len(files) >= 2, "the committed results/ needs two result files"
    for f in files:
        shutil.copy2(f, out_dir / f.name)
    copies = [copy_as_later_run(files[0], out_dir, hours=1, tag="again1"),
              copy_as_later_run(files[0], out_dir, hours=2, tag="again2"),
              copy_as_later_run(files[-1], out_dir, hours=1, tag="again1")]
    return {"originals": len(files), "files": len(files) + len(copies), "left_out": len(copies),
            "repeated_points": 2, "copies": copies}
