"""Encoded figures, cached by what the figure holds, so that a report drawn again (another format,
a few more results, the same folder tomorrow) does not rasterise or write out unchanged figures.

Drawing is most of a report's figure time; describing a figure is not: pickling a matplotlib
Figure (its artists, data arrays, texts, transforms and properties: what matplotlib itself saves to
restore a figure) takes 5-40 ms where drawing takes 100-400 ms. The key is a BLAKE2b hash of that
description, the output kind, matplotlib's version and its rcParams: the same key draws the same
bytes. The pickle is only hashed, never stored or loaded. Two things in it would differ between two
runs for the same figure, and are written in a stable form instead: the transforms' parent links
(keyed by id()) and functions (tick formatters), which are written as their module, name, code and
closure values.

Entries live in `figures/` under the results cache folder (output/results_cache.cache_dir; off with
`TPUBENCH_CACHE_DIR=off`), one file each, written atomically, each with its key and a checksum; a
damaged or foreign entry is drawn again. At most MAX_ENTRIES are kept, the least recently used go.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import struct
import types
from pathlib import Path
from typing import Callable

from tpubench.output.results_cache import cache_dir
from tpubench.records.result import replace_file

MAX_ENTRIES = 400
_MAGIC = b"TPBFIG01"
_HEADER = struct.Struct("<8s32s32sH")     # magic, key, BLAKE2b-256 of the rest, MIME length


class _Describer(pickle.Pickler):
    """A pickler whose output depends only on what is drawn (see the module docstring)."""

    def reducer_override(self, obj):
        from matplotlib.transforms import TransformNode

        if isinstance(obj, types.FunctionType):
            code = obj.__code__
            cells = tuple(c.cell_contents for c in obj.__closure__ or ())
            return (str, (f"{obj.__module__}.{obj.__qualname__}",), (code.co_code, code.co_consts, code.co_names, cells))
        if isinstance(obj, types.CodeType):    # a lambda defined inside a formatter's function
            return (str, (obj.co_name,), (obj.co_code, obj.co_consts, obj.co_names))
        if isinstance(obj, TransformNode):
            state = obj.__getstate__()
            # {id(child): child}: the ids differ from run to run, the children (in order) do not.
            state["_parents"] = list(state.get("_parents", {}).values())
            return (str, (type(obj).__qualname__,), state)
        return NotImplemented


def figure_key(fig, kind: str) -> bytes | None:
    """32 bytes naming what `fig` draws as `kind`, or None when it cannot be described."""
    import matplotlib

    digest = hashlib.blake2b(digest_size=32)
    digest.update(f"{kind}\0{matplotlib.__version__}\0".encode())
    digest.update(repr(sorted((k, repr(v)) for k, v in matplotlib.rcParams.items())).encode())
    buf = io.BytesIO()
    try:
        _Describer(buf, protocol=5).dump(fig)
    except Exception:   # noqa: BLE001 - an artist that cannot be pickled: draw it, uncached
        return None
    digest.update(buf.getbuffer())
    return digest.digest()


def _folder() -> Path | None:
    base = cache_dir()
    return None if base is None else base / "figures"


def cached_encoding(fig, kind: str, encode: Callable[[object, str], tuple[str, bytes]]) -> tuple[str, bytes]:
    """encode(fig, kind), or the bytes it gave before for a figure that draws the same."""
    folder = _folder()
    key = figure_key(fig, kind) if folder is not None else None
    if key is None:
        return encode(fig, kind)
    path = folder / f"{key.hex()}.fig"
    hit = _read(path, key)
    if hit is not None:
        return hit
    mime, blob = encode(fig, kind)
    _write(folder, path, key, mime, blob)
    return mime, blob


def _read(path: Path, key: bytes) -> tuple[str, bytes] | None:
    try:
        data = path.read_bytes()
        magic, stored_key, checksum, mime_len = _HEADER.unpack_from(data)
        rest = memoryview(data)[_HEADER.size:]
        if magic != _MAGIC or stored_key != key or hashlib.blake2b(rest, digest_size=32).digest() != checksum:
            return None
        mime = bytes(rest[:mime_len]).decode("ascii")
        os.utime(path)          # recently used: kept when the folder is pruned
        return mime, bytes(rest[mime_len:])
    except (OSError, ValueError, struct.error):
        return None


def _write(folder: Path, path: Path, key: bytes, mime: str, blob: bytes) -> None:
    try:
        rest = mime.encode("ascii") + blob
        checksum = hashlib.blake2b(rest, digest_size=32).digest()
        replace_file(path, _HEADER.pack(_MAGIC, key, checksum, len(mime)) + rest)
        _prune(folder)
    except Exception:   # noqa: BLE001 - an unwritable cache only costs time
        return


def _prune(folder: Path) -> None:
    entries = []
    with os.scandir(folder) as it:
        for entry in it:
            if entry.name.endswith(".fig"):
                entries.append((entry.stat().st_mtime_ns, entry.path))
    for _, stale in sorted(entries)[:max(0, len(entries) - MAX_ENTRIES)]:
        try:
            os.unlink(stale)
        except OSError:
            pass
