"""Bring launched results home: fetch bucket folders, then merge them into the local results folder
keeping one copy per point and environment.

A result's identity is the one `load_results` groups by (point_key, environment_key, backend,
device). From everything fetched, only the latest result of each identity is a candidate; it is
copied (bytes unchanged, under its own file name) unless the local folder already holds a result of
that identity at least as recent. So collecting twice, or a job that uploaded a point twice, adds
nothing; a newer measurement of a point is added beside the older one (nothing measured is deleted).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from tpubench.errors import ExternalFailure, UserError
from tpubench.output.frames import SAME_POINT_KEYS
from tpubench.records.result import RunResult, read_results, write_new_file

_OLDEST = datetime.min.replace(tzinfo=timezone.utc)


@dataclass
class MergeSummary:
    found: int = 0                                    # readable results in the sources
    added: list[Path] = field(default_factory=list)   # files written to the results folder
    already_here: int = 0                             # identities the folder holds as recent or newer
    older_copies: int = 0                             # fetched duplicates left out (an identity's older runs)


def identity(result: RunResult) -> tuple:
    return tuple(getattr(result, key) for key in SAME_POINT_KEYS)


def _started(result: RunResult) -> datetime:
    try:
        t = datetime.fromisoformat(result.started_at)
    except (TypeError, ValueError):
        return _OLDEST
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def local_index(out_dir: Path, *, warn: Callable[[str], None] | None = None) -> dict[tuple, datetime]:
    """Identity -> start of the most recent result of it in `out_dir`."""
    local: dict[tuple, datetime] = {}
    if Path(out_dir).is_dir():
        for _, r in read_results(out_dir, warn=warn):
            key = identity(r)
            local[key] = max(local.get(key, _OLDEST), _started(r))
    return local


def merge_results(sources: list[Path], out_dir: Path, *, local: dict[tuple, datetime] | None = None,
                  warn: Callable[[str], None] | None = None) -> MergeSummary:
    """Merge the results under `sources` into `out_dir` (see the module's rule). `local` is
    `local_index(out_dir)` when the caller merges several times (it is kept up to date)."""
    out_dir = Path(out_dir)
    if local is None:
        local = local_index(out_dir, warn=warn)
    fetched: dict[tuple, list[tuple[datetime, str, Path]]] = {}
    summary = MergeSummary()
    for source in sources:
        for path, r in read_results(source, warn=warn):
            summary.found += 1
            fetched.setdefault(identity(r), []).append((_started(r), path.name, path))
    for key, copies in fetched.items():
        copies.sort()
        started, name, path = copies[-1]
        summary.older_copies += len(copies) - 1
        if key in local and local[key] >= started:
            summary.already_here += 1
            continue
        summary.added.append(write_new_file(out_dir, name, path.read_bytes()))
        local[key] = started
    return summary


def fetch_command(url: str, dest: Path) -> list[str]:
    """The cloud CLI that copies a bucket folder here (the one SkyPilot's credentials already serve)."""
    if url.startswith("gs://"):
        if shutil.which("gcloud"):
            return ["gcloud", "storage", "rsync", "--recursive", url, str(dest)]
        if shutil.which("gsutil"):
            return ["gsutil", "-m", "rsync", "-r", url, str(dest)]
        raise UserError(f"cannot fetch {url}: neither gcloud nor gsutil is on PATH (or copy the folder yourself "
                        "and run `tpubench collect FOLDER`)")
    if url.startswith("s3://"):
        if shutil.which("aws"):
            return ["aws", "s3", "sync", "--only-show-errors", url, str(dest)]
        raise UserError(f"cannot fetch {url}: the aws CLI is not on PATH (or copy the folder yourself and run "
                        "`tpubench collect FOLDER`)")
    raise UserError(f"cannot fetch {url}: copy the folder yourself and run `tpubench collect FOLDER`")


def fetch(url: str, dest: Path) -> Path:
    """Copy a bucket folder to `dest` (incrementally: a second collect copies only what is new)."""
    from tpubench.processes import start_in_new_group, stop_group

    dest.mkdir(parents=True, exist_ok=True)
    cmd = fetch_command(url, dest)
    process = start_in_new_group(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _, err = process.communicate()
    finally:
        if process.poll() is None:
            stop_group(process, 5)
    if process.returncode != 0:
        last = next((line for line in reversed((err or "").splitlines()) if line.strip()), "")
        raise ExternalFailure(f"{cmd[0]} could not copy {url} (exit {process.returncode}): {last.strip()[:300]}")
    return dest
