"""What result paths hold, checked before a report or a budget is made of them: a folder that is
empty, cannot be read, or holds only files that are no tpubench result is one line naming it
(exit 2), never an empty report, a blank answer table or a budget that "found no point"."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from tpubench.errors import UserError
from tpubench.records.files import published_files, record_files, result_file_names


@dataclass(frozen=True)
class Holdings:
    """What `paths` hold, by kind of file: the question a report or a budget asks first."""

    where: str                 # the paths as the user named them
    result_files: int          # *.json files a result could be in (records/files.result_file_names)
    published_files: int       # imported published rows (tpubench import: published/*.csv)
    estimate_records: int      # estimate records (tpubench estimate --out: estimates/*.json)


def holdings(paths: Iterable[str | Path], *, empty_ok: bool = False) -> Holdings:
    """What `paths` hold; a UserError for a path that does not exist or a folder that cannot be read,
    and, unless `empty_ok` (a budget that estimates a workload named to it needs no result), for paths
    that hold nothing a report could show."""
    paths = [Path(p) for p in paths]
    where = ", ".join(map(str, paths))
    for p in paths:
        if p.is_dir():
            _readable(p)
    found = Holdings(where, len(result_file_names(paths)), len(published_files(paths)), len(record_files(paths)))
    if not (found.result_files or found.published_files or found.estimate_records) and not empty_ok:
        raise UserError("no tpubench result files here: `tpubench run WORKLOAD --out FOLDER` writes them "
                        "(`tpubench run` alone writes to results/)", where=where)
    return found


def _readable(folder: Path) -> None:
    try:
        with os.scandir(folder):
            pass
    except PermissionError:
        raise UserError("cannot read this folder (permission denied)", where=str(folder)) from None
    except OSError as exc:
        raise UserError(f"cannot read this folder ({exc.strerror or exc})", where=str(folder)) from None


def require_readable(found: Holdings, measured_rows: int, *, published_used: bool = True) -> None:
    """After loading: a UserError when result files were there but none could be read and nothing
    else (published rows, estimate records, where `published_used`) is there to show instead."""
    if measured_rows:
        return
    others = published_used and (found.published_files or found.estimate_records)
    if found.result_files and not others:
        raise UserError(f"none of the {found.result_files} *.json file(s) here is a readable tpubench result "
                        "(each is named in a warning above)", where=found.where)
    if not found.result_files and not published_used:
        raise UserError(f"no measured results here, only {found.published_files} imported published file(s) "
                        "and estimate records: --include-published sizes on the published rows", where=found.where)


__all__ = ["Holdings", "holdings", "require_readable"]
