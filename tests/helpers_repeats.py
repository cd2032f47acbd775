"""Results folders where some points were measured more than once, made by copying result files (a
plain module: import it, no fixtures). No model runs: a copy with a later `started_at` under a new
file name is exactly what measuring the same point again on the same environment leaves behind."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REPO_RESULTS = REPO / "examples" / "results"   # the committed example results (docs/project.md)


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


def copy_as_other_machine(src: str | Path, out_dir: str | Path, *, host: str = "other-vm") -> Path:
    """A copy of result file `src` as if measured later on another machine: another host and
    environment, so it is a point of its own, not a repeat."""
    src = Path(src)
    data = json.loads(src.read_bytes())
    data["environment"] = {**data.get("environment", {}), "hostname": host}
    data["environment_key"] = f"{data.get('environment_key', '')}-{host}"
    target = copy_as_later_run(src, out_dir, hours=3, tag=host)
    later = json.loads(target.read_bytes())
    data["started_at"], data["finished_at"] = later.get("started_at"), later.get("finished_at")
    target.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return target


def _same_point(data: dict) -> tuple:
    return data["point_key"], data.get("environment_key", ""), data["backend"], data["device"]


def repo_results_with_repeats(out_dir: str | Path) -> dict:
    """Copy the committed examples/results/ into `out_dir`, then measure two of its points "again": the first
    file (by name) twice more, the last file once more; and two torch points once more on another
    machine. Returns what load_results should see (counted from the files themselves, so a
    examples/results/ that already holds repeats counts right)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = sorted(REPO_RESULTS.glob("*.json"))
    assert len(files) >= 2, "the committed examples/results/ needs two result files"
    for f in files:
        shutil.copy2(f, out_dir / f.name)
    torch_files = [f for f in files if json.loads(f.read_bytes())["backend"] == "torch"][:2]
    copies = [copy_as_later_run(files[0], out_dir, hours=1, tag="again1"),
              copy_as_later_run(files[0], out_dir, hours=2, tag="again2"),
              copy_as_later_run(files[-1], out_dir, hours=1, tag="again1"),
              *[copy_as_other_machine(f, out_dir) for f in torch_files]]
    counts: dict[tuple, int] = {}
    for f in out_dir.glob("*.json"):
        key = _same_point(json.loads(f.read_bytes()))
        counts[key] = counts.get(key, 0) + 1
    return {"originals": len(counts), "files": sum(counts.values()), "left_out": sum(counts.values()) - len(counts),
            "repeated_points": sum(1 for n in counts.values() if n > 1), "copies": copies}
