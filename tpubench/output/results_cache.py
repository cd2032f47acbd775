"""The rows of many result files, cached so that a report over thousands of them does not parse
them all again (docs/commands.md#report-cache).

`read_table(paths, flatten)` gives the flattened row of every usable result under `paths` as
columns, each row from the cache where its file is unchanged (same inode, size, mtime and ctime in
nanoseconds), parsed and flattened otherwise. The cache is one file per set of input paths in the
cache folder (`TPUBENCH_CACHE_DIR`, else `$XDG_CACHE_HOME/tpubench`, else `~/.cache/tpubench`;
`TPUBENCH_CACHE_DIR=off` turns it off), never beside the results (a reader of `*.json` would take it
for one), written atomically. It holds no pickle: JSON and raw numbers with a checksum, laid out by
output/rows_file.py. A cache that is corrupt, truncated, from another tpubench (its code
fingerprint) or for other files is ignored and rewritten; a cache problem never fails a report.

Rows come out as the same frame `flatten`'s rows make: a cached value is the JSON round trip of a
value that came from JSON (floats by repr, so exactly), a key a row lacks is stored as NaN, which is
what pandas puts there when it builds a frame from the row dicts, and a column of ints and floats
(a count, NaN where a run failed) comes back as the floats pandas makes of it.
"""

from __future__ import annotations

import hashlib
import math
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tpubench.output import forked, rows_file
from tpubench.output.parse_pool import ParsedRows, as_list, parse_files
from tpubench.records.files import replace_file, result_file_names

# Fewer files than this parse in well under a second: no cache file is worth writing for them.
MIN_FILES = 200
# The modules whose code shapes a row: a cache written by other code is not used.
_ROW_MODULES = ("output/frames.py", "output/parse_pool.py", "output/results_cache.py", "output/rows_file.py", "records/result.py",
                "records/sanity.py", "records/usable.py", "records/energy_verdict.py", "workload_spec/point.py", "version.py")


@dataclass
class Table:
    """Columns (name -> list, or float64 or int64 array, read-only where it came from the cache)
    aligned with `files` (as `str(path)`) and `environment_keys`."""

    files: list[str] = field(default_factory=list)
    environment_keys: list[str] = field(default_factory=list)
    columns: dict[str, Any] = field(default_factory=dict)


def cache_dir() -> Path | None:
    """Where caches live; None when `TPUBENCH_CACHE_DIR=off`."""
    chosen = os.environ.get("TPUBENCH_CACHE_DIR")
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "off", "0", "none") else Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tpubench"


def _fingerprint() -> str:
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    # pydantic's version (it parses the files) from its version module, not an import of pydantic.
    spec = importlib.util.find_spec("pydantic")
    version = Path(spec.origin).with_name("version.py") if spec and spec.origin else None
    try:
        digest = hashlib.blake2b(version.read_bytes() if version else b"no pydantic", digest_size=16)
    except OSError:
        digest = hashlib.blake2b(b"unreadable pydantic version", digest_size=16)
    for name in _ROW_MODULES:
        try:
            digest.update((root / name).read_bytes())
        except OSError:
            digest.update(name.encode())
    return digest.hexdigest()


def cache_file(paths) -> Path | None:
    """The cache of this set of input paths (files or folders, in any order)."""
    folder = cache_dir()
    if folder is None:
        return None
    if isinstance(paths, (str, Path)):
        paths = [paths]
    key = "\0".join(sorted(str(Path(p).resolve()) for p in paths))
    return folder / f"results-{hashlib.blake2b(key.encode(), digest_size=12).hexdigest()}.rows"


def _stat_key(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    # A result is written once and never rewritten in place; a file replaced or touched gets a new
    # inode or ctime, so these four tell an unchanged file without reading it.
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _resolved(files: list[str]) -> list[str]:
    """Each file's path with its folder resolved (once a folder, not once a file: 10,000 files)."""
    folders: dict[str, str] = {}
    out = []
    for f in files:
        folder, _, name = f.rpartition(os.sep)
        real = folders.get(folder)
        if real is None:      # the folder resolved, with the separator os.path.join would add
            real = folders[folder] = os.path.join(os.path.realpath(folder or "."), "")
        out.append(real + name)
    return out


def read_table(paths, flatten: Callable[..., dict], *, warn: Callable[[str], None],
               meanwhile: Callable[[], object] | None = None) -> Table:
    """Every usable result under `paths` (records.result.read_results' files, order and warnings),
    flattened by `flatten(result)` into columns; see the module docstring for the cache.
    `meanwhile()` runs while files are parsed (parse_pool.parse_files), or once nothing need be."""
    files = result_file_names(paths)
    where = cache_file(paths) if len(files) >= MIN_FILES else None
    forked.wait_behind()        # a cache still being written by an earlier read (below) is read whole
    stats = [_stat_key(f) for f in files] if where is not None else [None] * len(files)
    cached = _read_cache(where) if where is not None else None
    hits = _cache_hits(cached, files, stats) if cached else [None] * len(files)
    # The files to parse, on every usable CPU when there are many (output/parse_pool.py).
    missing = [i for i, h in enumerate(hits) if h is None]
    if missing:
        parsed = parse_files([files[i] for i in missing], flatten, warn, meanwhile)
    else:
        parsed = ParsedRows()
        if meanwhile is not None:
            meanwhile()
    parsed_at = [missing[j] for j in parsed.at]
    if cached and not parsed_at:        # every usable file unchanged: the cache as it is (no rewrite)
        kept = [i for i, h in enumerate(hits) if h is not None]
        return cached.take([files[i] for i in kept], [hits[i] for i in kept])

    if cached:
        kept, keys, columns = _merged(cached, hits, parsed, parsed_at)
    else:       # a cold read: the parsed columns as they are
        kept, keys, columns = parsed_at, parsed.keys, parsed.columns
    columns["file"] = [files[i] for i in kept]
    table = Table([files[i] for i in kept], keys, columns)
    if where is not None:
        # Written by a forked child where the parse used workers: the report goes on pricing on one
        # core meanwhile (0.1 s of a first report over 10,000 files).
        stats_kept = [stats[i] for i in kept]
        forked.behind(lambda: _write_cache(where, table, stats_kept), fork=parsed.by_workers)
    return table


def _merged(cached: _Cached, hits: list[int | None], parsed: ParsedRows, parsed_at: list[int]):
    """(kept file positions, their environment keys, their columns) of the files found in the cache
    (`hits`) and those parsed (`parsed`, of the files at `parsed_at`): the parsed names first, in
    the order rows first have them, then the cache's others; NaN where a row lacks a name."""
    slot = {i: j for j, i in enumerate(parsed_at)}      # a parsed file's row in `parsed`
    kept = [i for i in range(len(hits)) if hits[i] is not None or i in slot]
    # Per kept file: its row in the cache or among the parsed ones, looked up once, not once a column.
    where = [(True, slot[i]) if i in slot else (False, hits[i]) for i in kept]
    nan_column = [math.nan] * len(parsed_at)
    columns: dict[str, list] = {}
    for name in [*parsed.columns, *(n for n in cached.columns if n not in parsed.columns)]:
        from_parsed = parsed.columns.get(name, nan_column)
        from_parsed = as_list(from_parsed)
        from_cache = cached.column_list(name)
        if from_cache is None:
            columns[name] = [from_parsed[r] if is_parsed else math.nan for is_parsed, r in where]
        else:
            columns[name] = [from_parsed[r] if is_parsed else from_cache[r] for is_parsed, r in where]
    keys = [parsed.keys[r] if is_parsed else cached.environment_keys[r] for is_parsed, r in where]
    return kept, keys, columns


def _cache_hits(cached: _Cached, files: list[str], stats: list) -> list[int | None]:
    """Per file, its row in the cache when the file is unchanged (same resolved path and stat key),
    else None."""
    names = _resolved(files)
    if names == cached.files and stats == cached.stats:    # the usual warm report: every file, in order
        return list(range(len(files)))
    index = {name: i for i, name in enumerate(cached.files)}
    hits: list[int | None] = [None] * len(files)
    for i, (name, st) in enumerate(zip(names, stats)):
        h = index.get(name)
        if h is not None and st is not None and cached.stats[h] == st:
            hits[i] = h
    return hits


@dataclass
class _Cached:
    files: list[str]      # resolved paths (_resolved)
    stats: list[list[int]]
    environment_keys: list[str]
    columns: dict[str, Any]

    def column_list(self, name: str) -> list | None:
        values = self.columns.get(name)
        return values if values is None or isinstance(values, list) else values.tolist()

    def take(self, files: list[str], hits: list[int]) -> Table:
        if hits == list(range(len(self.stats))):
            columns = self.columns
            keys = self.environment_keys
        else:
            columns = {name: [values[h] for h in hits] if isinstance(values, list) else values[hits]
                       for name, values in self.columns.items()}
            keys = [self.environment_keys[h] for h in hits]
        return Table(list(files), list(keys), {"file": list(files), **columns})


def _read_cache(where: Path) -> _Cached | None:
    """The cache in `where`, or None when it is missing, corrupt, truncated or from other code."""
    try:
        decoded = rows_file.decode(where.read_bytes())
        if decoded is None:
            return None
        meta, columns = decoded
        n = meta["rows"]
        if meta.get("fingerprint") != _fingerprint() or not (
                len(meta["files"]) == len(meta["stats"]) == len(meta["environment_keys"]) == n):
            return None
        return _Cached(meta["files"], meta["stats"], meta["environment_keys"], columns)
    except (OSError, ValueError, KeyError, TypeError, IndexError, struct.error):
        return None


def _write_cache(where: Path, table: Table, stats: list) -> None:
    """Write the cache of `table`; files that cannot be stat'ed are left out. Never raises."""
    keep = [i for i, st in enumerate(stats) if st is not None]
    names = _resolved(table.files)
    everything = len(keep) == len(stats)     # the usual case: no copy of 10,000 rows' columns

    def kept(values):
        if everything:
            return values
        return values[keep] if hasattr(values, "dtype") else [values[i] for i in keep]

    columns = {name: kept(values) for name, values in table.columns.items() if name != "file"}
    meta = {"fingerprint": _fingerprint(), "rows": len(keep), "files": kept(names), "stats": kept(stats),
            "environment_keys": kept(table.environment_keys)}
    try:
        replace_file(where, rows_file.encode(meta, columns))
    except Exception:   # noqa: BLE001 - an unwritable cache (full disk, read-only home) only costs speed
        return
