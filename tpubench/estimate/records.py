"""Estimate records: what `tpubench estimate --out DIR` keeps (DIR/estimates/<workload>-<time>.json,
`source: estimate`), so a report made later, or on another machine, puts those estimates in its
answer (output/answer) beside the measured and published rows, and nowhere else.

A record is the command's JSON output (estimate.render.as_json: every estimate x plan as a flat
row, its calibration summary, the workload file) plus when it was made and by which tpubench.
Written atomically and never overwritten (records.result.write_new_file); the walk for result
files never enters an `estimates` folder (records.files.ESTIMATES_FOLDER).
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import pandas as pd

from tpubench.records.files import ESTIMATES_FOLDER, folder_files
from tpubench.version import __version__

LABEL = "estimate"   # what an estimate, its rows and its records say they are (`source`)


def write_record(payload: dict, workload: str, out_dir: str | Path, *, now: datetime | None = None) -> Path:
    """An estimate's JSON payload (estimate.render.as_json's) as a record under out_dir/estimates/
    (module notes), with when it was made and by which tpubench."""
    from tpubench.records.result import write_new_file

    now = now or datetime.now(timezone.utc)
    payload = {**payload, "made_at": now.isoformat(timespec="seconds"), "tpubench_version": __version__}
    name = f"{workload}-{now.strftime('%Y%m%dT%H%M%SZ')}.json"
    return write_new_file(Path(out_dir) / ESTIMATES_FOLDER, name, (json.dumps(payload, indent=2) + "\n").encode())


def record_files(paths) -> list[Path]:
    """The records under `paths`: every estimates/*.json in a folder (at any depth), or a file named
    directly that sits in an estimates folder."""
    return folder_files(paths, ESTIMATES_FOLDER, ".json")


def read_records(paths, *, warn: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Every estimate row of the records under `paths`, one row per estimate and plan, with the
    record's `file`, `made_at` and `workload_file`; a file that is not a record is skipped with a
    warning naming it."""
    warn = warn or (lambda msg: None)
    frames = []
    for f in record_files(paths):
        try:
            payload = json.loads(f.read_text(encoding="utf-8"))
            if payload.get("source") != LABEL or not isinstance(payload.get("estimates"), list):
                raise ValueError("no `source: estimate` with a list of estimates")
            rows = pd.DataFrame([{k: (math.nan if v is None else v) for k, v in row.items()}
                                 for row in payload["estimates"] if isinstance(row, dict)])
        except (OSError, ValueError, AttributeError) as exc:
            warn(f"skipping {f}: not a tpubench estimate record ({exc})")
            continue
        if rows.empty:
            continue
        frames.append(rows.assign(file=str(f), made_at=payload.get("made_at", ""),
                                  workload_file=payload.get("workload_file", "")))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


__all__ = ["read_records", "record_files", "write_record"]
