"""Encoded figures, cached by what they are drawn from, so that a report drawn again (another
format, the same folder tomorrow) neither builds nor rasterises an unchanged figure, and a report
whose figures are all cached never imports matplotlib.

A figure reaches the report as a `Drawing`: the function that draws it and the arguments it is
drawn from (a few columns of the report's frames, titles, prices). The key is a BLAKE2b hash of
the output kind, the function's name, the source of every tpubench module (a change to any code
that could draw differently draws again), what decides matplotlib's look without importing it
(its version file and the matplotlibrc files it would read; in a process that did import it, the
rcParams changed since) and the arguments, pickled in a canonical form (`_InputPickler`: a frame
as its columns' names, dtypes and values, whatever its internal layout, with no memo, so two equal
inputs pickle alike in any process). Equal keys mean the same function on equal inputs under the
same code and matplotlib settings: the same bytes. Fonts installed or removed are not in the key
(matplotlib's font cache is its own); `TPUBENCH_CACHE_DIR=off` draws everything.

Entries live in `figures/` under the results cache folder (output/results_cache.cache_dir), one
file each, written atomically, each with its key and a checksum; a damaged or foreign entry is
drawn again. At most MAX_ENTRIES are kept, the least recently used go.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import pickle
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tpubench.output import forked
from tpubench.output.results_cache import cache_dir
from tpubench.records.files import replace_file

MAX_ENTRIES = 400
_MAGIC = b"TPBFIG02"
_HEADER = struct.Struct("<8s32s32sH")     # magic, key, BLAKE2b-256 of the rest, MIME length


@dataclass(frozen=True)
class Drawing:
    """A figure not drawn yet: `figure()` is `draw(*args, **kwargs)`, a matplotlib Figure. `draw`
    must depend on nothing but its arguments, tpubench's code and matplotlib's settings."""

    draw: Callable[..., Any]
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)

    def figure(self):
        return self.draw(*self.args, **self.kwargs)


def _frame_state(frame) -> tuple:
    """A DataFrame as its content, whatever its blocks: column names, dtypes and index, then the
    values, a dtype at a time (a column at a time took most of a warm report's figure time)."""
    import numpy as np

    dtypes = list(frame.dtypes)
    groups: dict[str, list[int]] = {}
    for i, dtype in enumerate(dtypes):
        numeric = isinstance(dtype, np.dtype) and dtype.kind in "biufc"
        groups.setdefault(dtype.str if numeric else "object", []).append(i)
    values = []
    for kind, positions in groups.items():
        block = frame.iloc[:, positions]
        if kind == "object":      # text and anything else: the Python objects (boxed as pandas boxes them)
            values.append((kind, positions, block.to_numpy(dtype=object).tolist()))
        else:                     # numbers and booleans of one dtype: their bytes
            values.append((kind, positions, np.ascontiguousarray(block.to_numpy()).tobytes()))
    return ("DataFrame", list(map(str, frame.columns)), [str(t) for t in dtypes], _values(frame.index), values)


def _values(column) -> tuple:
    """A Series' or Index's values: raw bytes for numbers and booleans, else the Python objects."""
    import numpy as np

    dtype = column.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "biufc":
        return (str(column.name), dtype.str, np.ascontiguousarray(column.to_numpy()).tobytes())
    return (str(column.name), str(dtype), column.to_numpy(dtype=object).tolist())


class _InputPickler(pickle.Pickler):
    """Pickles a drawing's arguments in a form that depends only on their values (module docstring)."""

    def __init__(self, file):
        super().__init__(file, protocol=5)
        self.fast = True        # no memo: equal values pickle alike whether or not they are one object

    def reducer_override(self, obj):
        import pandas as pd

        if isinstance(obj, pd.DataFrame):
            return (str, ("DataFrame",), _frame_state(obj))
        if isinstance(obj, (pd.Series, pd.Index)):
            return (str, (type(obj).__name__,), _values(obj))
        import numpy as np

        if isinstance(obj, np.ndarray) and obj.dtype.kind in "biufc":
            return (str, ("ndarray",), (obj.dtype.str, obj.shape, np.ascontiguousarray(obj).tobytes()))
        return NotImplemented


def _matplotlib_files() -> list[str]:
    """The files that decide matplotlib's version and default settings, found as matplotlib would
    (matplotlib.matplotlib_fname), without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("matplotlib")
    package = next(iter(spec.submodule_search_locations or []), "") if spec else ""
    home = os.environ.get("MPLCONFIGDIR") or os.path.join(
        os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config"), "matplotlib")
    chosen = os.environ.get("MATPLOTLIBRC", "")
    return [os.path.join(package, "_version.py"), chosen, os.path.join(chosen, "matplotlibrc"),
            os.path.join(os.getcwd(), "matplotlibrc"), os.path.join(home, "matplotlibrc"),
            os.path.join(package, "mpl-data", "matplotlibrc")]


def _rc_changes() -> bytes:
    """rcParams changed in this process since matplotlib read them (a notebook's style); nothing
    when matplotlib is not imported, where none can have changed."""
    matplotlib = sys.modules.get("matplotlib")
    if matplotlib is None or not hasattr(matplotlib, "rcParamsOrig"):
        return b""
    original = matplotlib.rcParamsOrig
    changed = sorted((k, repr(v)) for k, v in matplotlib.rcParams.items() if repr(original.get(k)) != repr(v))
    return repr(changed).encode() if changed else b""     # unchanged: the key of a process without matplotlib


@functools.lru_cache(maxsize=1)
def _code_fingerprint() -> bytes:
    """Every tpubench source file (names and text): a figure is drawn again after any code change."""
    root = Path(__file__).resolve().parents[2]
    digest = hashlib.blake2b(digest_size=32)
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"\1unreadable")
    for name in _matplotlib_files():
        try:
            digest.update(Path(name).read_bytes() if name and os.path.isfile(name) else b"\1absent")
        except OSError:
            digest.update(b"\1unreadable")
    return digest.digest()


def drawing_key(drawing: Drawing, kind: str) -> bytes | None:
    """32 bytes naming what `drawing` draws as `kind`, or None when its arguments cannot be pickled."""
    digest = hashlib.blake2b(digest_size=32)
    draw = drawing.draw
    digest.update(f"{kind}\0{draw.__module__}.{draw.__qualname__}\0".encode())
    digest.update(_code_fingerprint())
    digest.update(_rc_changes())
    buf = io.BytesIO()
    try:
        _InputPickler(buf).dump((drawing.args, sorted(drawing.kwargs.items())))
    except (pickle.PicklingError, TypeError, ValueError, AttributeError, RecursionError):
        return None            # an argument that cannot be pickled (a lambda): draw it, uncached
    digest.update(buf.getbuffer())
    return digest.digest()


def _folder() -> Path | None:
    base = cache_dir()
    return None if base is None else base / "figures"


def cached_drawing(drawing: Drawing, kind: str, encode: Callable[[object, str], tuple[str, bytes]]) -> tuple[str, bytes]:
    """encode(drawing.figure(), kind), or the bytes it gave before for the same drawing."""
    return cached_drawings([(drawing, kind)], encode)[0]


# Fewer figures to draw than this are drawn here: a figure takes ~0.1-0.3 s, a worker ~0.01 s to fork.
PARALLEL_MIN_FIGURES = 2


def cached_drawings(items: list[tuple[Drawing, str]], encode: Callable[[object, str], tuple[str, bytes]],
                    before_workers: Callable[[], None] | None = None) -> list[tuple[str, bytes]]:
    """cached_drawing of each (drawing, kind): those not cached drawn in forked workers when there
    are several (output/forked.py), after `before_workers()` (imports the workers then inherit)."""
    folder = _folder()
    keys = [drawing_key(drawing, kind) if folder is not None else None for drawing, kind in items]
    out: list = [None if key is None else _read(folder / f"{key.hex()}.fig", key) for key in keys]
    todo = [i for i, hit in enumerate(out) if hit is None]
    workers = forked.workers_for(len(todo), PARALLEL_MIN_FIGURES)
    if workers and before_workers is not None:
        before_workers()

    def draw(i: int) -> tuple[str, bytes]:
        drawing, kind = items[i]
        return encode(drawing.figure(), kind)

    for i, (mime, blob) in zip(todo, forked.forked_map(draw, todo, workers)):
        out[i] = (mime, blob)
        if keys[i] is not None:
            _write(folder, folder / f"{keys[i].hex()}.fig", keys[i], mime, blob)
    return out


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
