"""The rows of many result files, cached so that a report over thousands of them does not parse
them all again (docs/commands.md#report-cache).

`read_table(paths, flatten)` gives the flattened row of every usable result under `paths` as
columns, each row from the cache where its file is unchanged (same inode, size, mtime and ctime in
nanoseconds), parsed and flattened otherwise. The cache is one file per set of input paths in the
cache folder (`TPUBENCH_CACHE_DIR`, else `$XDG_CACHE_HOME/tpubench`, else `~/.cache/tpubench`;
`TPUBENCH_CACHE_DIR=off` turns it off), never beside the results (a reader of `*.json` would take it
for one), written atomically. It holds no pickle: a JSON header with the text and integer columns,
then the float columns as raw float64, with a BLAKE2b checksum over both. A cache that is corrupt,
truncated, from another tpubench (its code fingerprint) or for other files is ignored and rewritten;
a cache problem never fails a report.

Rows come out exactly as `flatten` makes them: a cached value is the JSON round trip of a value
that came from JSON (floats by repr, so exactly), and a key a row lacks is stored as NaN, which is
what pandas puts there when it builds a frame from the row dicts.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tpubench.records.files import iter_result_files, replace_file

_MAGIC = b"TPBROWS1"
_HEADER = struct.Struct("<8sQ32s")        # magic, JSON length, BLAKE2b-256 of the JSON and float bytes
# Fewer files than this parse in well under a second: no cache file is worth writing for them.
MIN_FILES = 200
# The modules whose code shapes a row: a cache written by other code is not used.
_ROW_MODULES = ("output/frames.py", "output/results_cache.py", "records/result.py", "records/sanity.py",
                "records/energy_verdict.py", "workload_spec/point.py", "version.py")


@dataclass
class Table:
    """Columns (name -> list or float64 array) aligned with `files` and `environment_keys`."""

    files: list[Path] = field(default_factory=list)
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


def _stat_key(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    # A result is written once and never rewritten in place; a file replaced or touched gets a new
    # inode or ctime, so these four tell an unchanged file without reading it.
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _resolved(files: list[Path]) -> list[str]:
    """Each file's path with its folder resolved (once a folder, not once a file: 10,000 files)."""
    folders: dict[str, str] = {}
    out = []
    for f in map(str, files):
        folder, _, name = f.rpartition(os.sep)
        real = folders.get(folder)
        if real is None:
            real = folders[folder] = os.path.realpath(folder or ".")
        out.append(os.path.join(real, name))
    return out


def read_table(paths, flatten: Callable[..., dict], *, warn: Callable[[str], None]) -> Table:
    """Every usable result under `paths` (records.result.read_results' files, order and warnings),
    flattened by `flatten(result)` into columns; see the module docstring for the cache."""
    files = iter_result_files(paths)
    where = cache_file(paths) if len(files) >= MIN_FILES else None
    stats = [_stat_key(f) for f in files] if where is not None else [None] * len(files)
    cached = _read_cache(where) if where is not None else None
    hits: list[int | None] = [None] * len(files)
    if cached:
        for i, (name, st) in enumerate(zip(_resolved(files), stats)):
            h = cached.index.get(name)
            if h is not None and st is not None and cached.stats[h] == st:
                hits[i] = h
    parsed: dict[int, tuple[dict, str]] = {}
    if None in hits:      # a file to parse: only then the result schema (pydantic's models, 0.1 s to build)
        from tpubench.records.result import read_usable_result
    for i, (f, h) in enumerate(zip(files, hits)):
        if h is None:
            result = read_usable_result(f, warn)
            if result is not None:
                parsed[i] = (flatten(result, str(f)), result.environment_key)
    if cached and not parsed:        # every usable file unchanged: the cache as it is (no rewrite)
        kept = [i for i, h in enumerate(hits) if h is not None]
        return cached.take([files[i] for i in kept], [hits[i] for i in kept])

    kept = [i for i in range(len(files)) if hits[i] is not None or i in parsed]
    # Each kept file's parsed row (None: from the cache), looked up once, not once a column.
    rows = [parsed[i][0] if i in parsed else None for i in kept]
    first_seen: dict = {}
    for row, _ in parsed.values():
        first_seen.update(row)          # the names in the order rows first have them (values unused)
    names = list(first_seen)
    if cached:
        seen = set(names)
        names += [n for n in cached.columns if n not in seen]
    kept_hits = [hits[i] for i in kept]
    columns: dict[str, list] = {}
    for name in names:
        from_cache = cached.column_list(name) if cached else None
        if from_cache is None:
            columns[name] = [math.nan if row is None else row.get(name, math.nan) for row in rows]
        else:
            columns[name] = [from_cache[h] if row is None else row.get(name, math.nan)
                             for row, h in zip(rows, kept_hits)]
    columns["file"] = [str(files[i]) for i in kept]
    keys = [parsed[i][1] if i in parsed else cached.environment_keys[hits[i]] for i in kept]
    table = Table([files[i] for i in kept], keys, columns)
    if where is not None:
        _write_cache(where, table, [stats[i] for i in kept])
    return table


@dataclass
class _Cached:
    index: dict[str, int]
    stats: list[list[int]]
    environment_keys: list[str]
    columns: dict[str, Any]

    def column_list(self, name: str) -> list | None:
        values = self.columns.get(name)
        return values if values is None or isinstance(values, list) else values.tolist()

    def take(self, files: list[Path], hits: list[int]) -> Table:
        if hits == list(range(len(self.stats))):
            columns = self.columns
            keys = self.environment_keys
        else:
            columns = {name: [values[h] for h in hits] if isinstance(values, list) else values[hits]
                       for name, values in self.columns.items()}
            keys = [self.environment_keys[h] for h in hits]
        return Table(list(files), list(keys), {"file": [str(f) for f in files], **columns})


def _read_cache(where: Path) -> _Cached | None:
    """The cache in `where`, or None when it is missing, corrupt, truncated or from other code."""
    import numpy as np  # here, not at the top: frames imports this module and must stay light to import

    try:
        blob = where.read_bytes()
        magic, size, checksum = _HEADER.unpack_from(blob)
        if magic != _MAGIC or _HEADER.size + size > len(blob):
            return None
        body = memoryview(blob)[_HEADER.size:]
        if hashlib.blake2b(body, digest_size=32).digest() != checksum:
            return None
        meta = json.loads(bytes(body[:size]))
        if meta.get("fingerprint") != _fingerprint():
            return None
        n = len(meta["files"])
        floats = np.frombuffer(body[size:], dtype="<f8")
        names = meta["float_columns"]
        if floats.size != n * len(names) or len(meta["stats"]) != n or len(meta["environment_keys"]) != n:
            return None
        floats = floats.reshape(len(names), n) if n else floats.reshape(len(names), 0)
        columns = dict(meta["columns"])
        if any(len(v) != n for v in columns.values()):
            return None
        columns.update(zip(names, floats.copy()))      # writable, as a parsed column is
        order = meta["order"]
        if sorted(order) != sorted(columns):
            return None
        return _Cached({f: i for i, f in enumerate(meta["files"])}, meta["stats"], meta["environment_keys"],
                       {name: columns[name] for name in order})
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None


def _is_float_column(values: list) -> bool:
    return all(type(v) is float for v in values)


def _write_cache(where: Path, table: Table, stats: list) -> None:
    """Write the cache of `table`; files that cannot be stat'ed are left out. Never raises."""
    import numpy as np

    keep = [i for i, st in enumerate(stats) if st is not None]
    names = _resolved(table.files)
    columns = {name: [values[i] for i in keep] for name, values in table.columns.items() if name != "file"}
    floats = [name for name, values in columns.items() if _is_float_column(values)]
    meta = {"fingerprint": _fingerprint(), "files": [names[i] for i in keep],
            "stats": [stats[i] for i in keep], "environment_keys": [table.environment_keys[i] for i in keep],
            "order": list(columns), "float_columns": floats,
            "columns": {name: values for name, values in columns.items() if name not in set(floats)}}
    try:
        head = json.dumps(meta, separators=(",", ":")).encode()
        body = np.asarray([columns[name] for name in floats], dtype="<f8").reshape(len(floats), len(keep)).tobytes()
        checksum = hashlib.blake2b(head + body, digest_size=32).digest()
        replace_file(where, _HEADER.pack(_MAGIC, len(head), checksum) + head + body)
    except Exception:   # noqa: BLE001 - an unwritable cache (full disk, read-only home) only costs speed
        return
