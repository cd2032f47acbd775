"""Estimate records: what `tpubench estimate --out DIR` keeps (DIR/estimates/<workload>-<time>.json,
`source: estimate`), so a report made later, or on another machine, puts those estimates in its
answer (output/answer) beside the measured and published rows, and nowhere else.

A record is the command's JSON output (estimate.render.as_json: every estimate x plan as a flat
row, its calibration summary, the workload file) plus when it was made and by which tpubench.
Written atomically and never overwritten (records.result.write_new_file); the walk for result
files never enters an `estimates` folder (records.files.ESTIMATES_FOLDER). Read back, a record is
checked against what its writer writes (check_record: types, finite numbers, positive figures,
each estimate within its interval) and skipped whole, with one warning, when it is not.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import pandas as pd

from tpubench.estimate.physics import number
from tpubench.records.files import ESTIMATES_FOLDER, record_files
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


def read_records(paths, *, warn: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Every estimate row of the records under `paths`, one row per estimate and plan, with the
    record's `file`, `made_at` and `workload_file`. A file that is not a record, or a record that
    fails check_record (a figure not finite or not positive, a bound on the wrong side of its
    estimate, a value of another type than the writer writes), is skipped whole with one warning
    naming it and the first field at fault: a record is read back by a report, perhaps on another
    machine and long after, and none of its figures is trusted further than its check."""
    warn = warn or (lambda msg: None)
    frames = []
    for f in record_files(paths):
        try:
            payload = json.loads(f.read_text(encoding="utf-8"))
            check_record(payload)
        except (OSError, ValueError, RecursionError) as exc:
            why = "JSON nested too deeply" if isinstance(exc, RecursionError) else " ".join(str(exc).split())
            warn(f"skipping {f}: not a tpubench estimate record ({why})")
            continue
        if not payload["estimates"]:
            continue
        rows = pd.DataFrame([{k: (math.nan if v is None else v) for k, v in row.items()} for row in payload["estimates"]])
        frames.append(rows.assign(file=str(f), made_at=payload.get("made_at") or "",
                                  workload_file=payload.get("workload_file") or ""))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


# What a record's rows hold (estimate/render.flat_rows with estimate/pricing.priced's plan columns),
# checked as the writer writes them: text or null; a number or null (null where the estimate had
# none: a refused one, an unpriced plan); whole counts; true/false.
TEXT = ("source", "workload", "target", "accelerator", "chip_family", "precision", "refused", "decode_bound",
        "interval_basis", "calibrated_by", "notes", "plan", "cloud", "region", "instance_type", "price_as_of")
FLAGS = ("interval_nominal",)
COUNTS = ("calibration_rows", "calibration_rows_same_chip", "own_rows")
# Numbers that are positive when stated (every $ figure is too: any key naming usd).
POSITIVE = ("chips", "concurrency", "input_length", "output_length", "efficiency", "interval_coverage",
            "output_tokens_per_s_per_chip", "ttft_s", "tpot_s")
REQUIRED = ("workload", "target", "accelerator", "chips", "concurrency", "input_length", "output_length")
_HEAD = {"source": str, "workload": str, "workload_file": str, "made_at": str, "tpubench_version": str}


def check_record(payload) -> None:
    """Raise ValueError naming the first field of `payload` (a record's parsed JSON) that is not as
    the writer writes it (module notes; read_records)."""
    if not isinstance(payload, dict) or payload.get("source") != LABEL or not isinstance(payload.get("estimates"), list):
        raise ValueError("no `source: estimate` with a list of estimates")
    for key, kind in _HEAD.items():
        if payload.get(key) is not None and not isinstance(payload[key], kind):
            raise ValueError(f"{key}: expected text, got {_kind(payload[key])}")
    for i, row in enumerate(payload["estimates"]):
        why = row_problem(row)
        if why:
            raise ValueError(f"estimates[{i}]{why}")


def row_problem(row) -> str | None:
    """What is wrong with one estimate row, as '.field: problem' (or ': problem'), or None."""
    if not isinstance(row, dict):
        return f": expected an object, got {_kind(row)}"
    for key in REQUIRED:
        if row.get(key) is None:
            return f".{key}: missing"
    for key, value in row.items():
        why = _value_problem(str(key), value)
        if why:
            return f".{key}: {why}"
    for key in row:
        low, high = row.get(f"{key}_low"), row.get(f"{key}_high")
        if number(row[key]) is not None and number(low) is not None and number(high) is not None \
                and not low <= row[key] <= high:
            return f".{key}: {row[key]!r} is not within its interval [{low!r}, {high!r}]"
    return None


def _value_problem(key: str, value) -> str | None:
    """What is wrong with one value of a row: its type against the writer's (module notes), a number
    not finite, a count not whole, a figure not positive; None when nothing is."""
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        return f"expected a single value, got {_kind(value)}"
    if key in TEXT or key in FLAGS:
        kind = str if key in TEXT else bool
        return None if isinstance(value, kind) else f"expected {'text' if kind is str else 'true or false'}, got {_kind(value)}"
    stem = key.removesuffix("_low").removesuffix("_high")
    figure = key in COUNTS or stem in POSITIVE or "usd" in key
    x = number(value)
    if x is None:         # text or true/false: a field this reader does not know may hold them
        return f"expected a number, got {_kind(value)}" if figure else None
    if not math.isfinite(x):
        return f"{value!r} is not a finite number"
    if key in COUNTS:
        return None if x >= 0 and x == int(x) else f"{value!r} is not a count"
    return f"{value!r} is not a positive number" if figure and not x > 0 else None


def _kind(value) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false"}.get(type(value), type(value).__name__)


__all__ = ["check_record", "read_records", "record_files", "row_problem", "write_record"]
