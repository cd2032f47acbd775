"""Result files on disk, without their schema: finding them under folders and writing files
atomically. Apart from records/result.py so that what only lists or writes files (the results
cache, price files) does not import pydantic and build the result models (0.1 s of a report)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterable

from tpubench.errors import UserError


def replace_file(path: str | Path, data: bytes) -> Path:
    """Write `data` to `path` atomically, replacing what was there: a reader sees the old file or
    the new one, never half of one."""
    path = Path(path)
    with temp_copy(path.parent, path.suffix, data) as tmp:
        os.replace(tmp, path)
    return path


@contextlib.contextmanager
def temp_copy(folder: Path, suffix: str, data: bytes):
    """`data` in a synced temporary file in `folder` (readable as results are), removed on leaving
    unless it was renamed; a folder that cannot be written is one line naming it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=folder)
    except OSError as exc:
        raise UserError(f"cannot write here: {exc.strerror or exc}", where=str(folder)) from None
    try:
        readable_by_all(fd)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        yield tmp
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def readable_by_all(fd: int) -> None:
    """mkstemp creates files 0600; results are shared data, so give them the umask's mode."""
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)


# Where `tpubench estimate --out DIR` writes its records (DIR/estimates/*.json): not results, so the
# walk for result files never enters a folder of this name (a report reads them apart).
ESTIMATES_FOLDER = "estimates"
# Where `tpubench import` keeps published rows beside results (DIR/published/*.csv).
PUBLISHED_FOLDER = "published"


def record_files(paths) -> list[Path]:
    """The estimate records under `paths`: every estimates/*.json in a folder (at any depth), or a
    file named directly that sits in an estimates folder."""
    return folder_files(paths, ESTIMATES_FOLDER, ".json")


def published_files(paths) -> list[Path]:
    """The stored imports under `paths`: every `published/*.csv` in a folder (at any depth), or a
    CSV named directly that sits in a `published/` folder."""
    return folder_files(paths, PUBLISHED_FOLDER, ".csv")


def folder_files(paths: str | Path | Iterable[str | Path], folder: str, suffix: str) -> list[Path]:
    """The `*{suffix}` files kept in folders named `folder` under `paths` (at any depth), or such a
    file named directly: imports beside results (`published/*.csv`), estimate records
    (`estimates/*.json`). Temporary files of an atomic write are not listed."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(map(Path, _kept_files(str(p), folder, suffix))))
        elif p.is_file() and p.suffix == suffix and p.parent.name == folder:
            files.append(p)
    return files


def _kept_files(root: str, folder: str, suffix: str) -> list[str]:
    """The files `Path(root).rglob(f"*{suffix}")` finds in folders named `folder` (symlinked folders
    not entered, unreadable ones skipped), regular files only, less temporary files. One scandir per
    folder and no Path per file: a report asks this of a folder of 10,000 results three times, and
    rglob made a Path of every one of them each time."""
    found: list[str] = []
    stack = [_child_prefix(root)]
    while stack:
        prefix = stack.pop()
        keep = os.path.basename(prefix.rstrip(os.sep)) == folder
        try:
            with os.scandir(prefix or ".") as it:
                entries = list(it)
        except (PermissionError, FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(prefix + entry.name + os.sep)
                elif keep and entry.name.endswith(suffix) and not entry.name.startswith(".tmp-") and entry.is_file():
                    found.append(prefix + entry.name)
            except OSError:
                continue
    return found


def iter_result_files(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    """The result files under `paths` (see result_file_names), as Paths."""
    return [Path(f) for f in result_file_names(paths)]


def result_file_names(paths: str | Path | Iterable[str | Path]) -> list[str]:
    """The result files under `paths` as strings (each `str(Path(...))` of the file): a file named
    as it is, a folder's *.json files sorted by their path parts, as Paths compare on POSIX. Strings,
    not Paths: making, sorting, stat'ing and resolving 10,000 Paths cost a warm report ~0.06 s of
    CPU more than their strings do (results_cache.py)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files: list[str] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(_json_files(str(p)))
        elif p.is_file():
            files.append(str(p))
        elif p.exists():
            raise UserError("not a regular file (a FIFO, socket or device is never read as a result)", where=str(p))
        else:
            raise UserError("no such file or folder", where=str(p))
    return files


def _json_files(folder: str) -> list[str]:
    """The *.json files under `folder` as `Path(folder).rglob("*.json")` finds them (symlinked folders
    not entered, unreadable ones skipped), less temporary files and anything not a regular file:
    reading a FIFO (or a socket, a device) named *.json would wait forever, and estimate records
    (folders named ESTIMATES_FOLDER). One scandir per folder,
    which knows an entry's type without a stat: half the time of rglob + is_file over 10,000 files.

    In the order of their path parts: walking each folder's entries sorted by name, entering a
    folder where its name falls, lists the files in exactly that order (a file is never a prefix of
    another's parts), with no key made per file. The walk keeps a stack of iterators, not recursion,
    so a deep tree cannot reach Python's recursion limit."""
    found: list[str] = []
    stack = [(_child_prefix(folder), iter(_sorted_entries(folder)))]
    while stack:
        prefix, entries = stack[-1]
        for entry in entries:
            name = entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                if not is_dir and name.endswith(".json") and not name.startswith(".tmp-") and entry.is_file():
                    found.append(prefix + name)
            except OSError:
                continue
            if is_dir and name != ESTIMATES_FOLDER:   # enter it now; this folder's remaining entries resume after it
                stack.append((prefix + name + os.sep, iter(_sorted_entries(prefix + name))))
                break
        else:
            stack.pop()
    return found


def _child_prefix(folder: str) -> str:
    """What `str(Path(folder) / name)` puts before `name`: nothing under ".", the root as it is."""
    if folder == ".":
        return ""
    return folder if folder.endswith(os.sep) else folder + os.sep


def _sorted_entries(folder: str) -> list[os.DirEntry]:
    """`folder`'s entries by name; none for a folder that cannot be read."""
    try:
        with os.scandir(folder) as it:
            entries = list(it)
    except PermissionError:
        return []
    entries.sort(key=lambda entry: entry.name)
    return entries
