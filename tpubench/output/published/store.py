"""Where imported published results live: CSV files in a `published/` folder inside a results
folder (`results/published/inferencex-dsr1.csv`), so `tpubench report results/` finds them beside
the measurements without taking them for measurements (results are `*.json`; these are not).

One CSV per imported file, written atomically; importing the same file again is refused unless
asked to replace it (a second copy would count every published point twice). Text cells a
spreadsheet would run as formulas are neutralised (records.csv_safety): the rows come from others.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Callable, Iterable

import pandas as pd

from tpubench.errors import UserError
from tpubench.output.published.rows import COLUMNS, published_frame
from tpubench.records.csv_safety import neutralize_frame
from tpubench.records.files import folder_files, replace_file

FOLDER = "published"
# The reference rows shipped with tpubench (data/published/*.csv, sources in its SOURCES.md).
SHIPPED_DIR = Path(__file__).resolve().parent.parent.parent / "data" / "published"
_REQUIRED = {"publisher", "model", "accelerator", "chips", "output_tokens_per_s_per_chip"}


def store_name(publisher: str, source: Path) -> str:
    """`inferencex-dsr1.csv` for publisher InferenceX and file dsr1.json (a folder keeps its whole
    name): a sanitised, stable name, so importing the same source again finds the earlier import."""
    source = Path(source).resolve()
    base = source.name if source.is_dir() else source.stem   # inference_results_v5.1 keeps its .1
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{publisher}-{base}").strip("-.").lower()
    return f"{stem or 'published'}.csv"


def write_published(df: pd.DataFrame, into: Path, name: str, *, replace: bool = False) -> Path:
    """`df` as `into/published/name`, atomically; an existing import is replaced only when asked."""
    target = Path(into) / FOLDER / name
    if target.exists() and not replace:
        raise UserError("already imported; pass --replace to import it again", where=str(target))
    data = neutralize_frame(df.reindex(columns=COLUMNS)).to_csv(index=False, float_format="%.9g")
    return replace_file(target, data.encode("utf-8"))


def published_files(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    """The stored imports under `paths`: every `published/*.csv` in a folder (at any depth), or a
    CSV named directly that sits in a `published/` folder."""
    return folder_files(paths, FOLDER, ".csv")


def read_published(paths, *, warn: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Every stored import under `paths` as one DataFrame (COLUMNS plus `file`); a file that is not
    an import is skipped with a warning naming it."""
    warn = warn or (lambda msg: None)
    frames = []
    for f in published_files(paths):
        try:
            df = pd.read_csv(f)
        except (OSError, ValueError) as exc:
            warn(f"skipping {f}: not a readable published-results file ({type(exc).__name__})")
            continue
        missing = sorted(_REQUIRED - set(df.columns))
        if missing:
            warn(f"skipping {f}: not a published-results file (no column {', '.join(missing)})")
            continue
        frame = published_frame(df)
        frame.insert(0, "file", str(f))
        frames.append(frame)
    if not frames:
        return published_frame([]).assign(file=pd.Series(dtype=object))
    return pd.concat(frames, ignore_index=True)


def shipped_published(*, warn: Callable[[str], None] | None = None) -> pd.DataFrame:
    """The reference published rows shipped with tpubench (data/published/*.csv: real public
    operating points, each naming its publisher, date and reference), as read_published gives
    them: COLUMNS plus `file` (the shipped CSV it came from). Read once per process while the
    files stay as they are (2,700 rows took 0.4 s a read; a report, its estimate and a notebook
    each want them): a copy each call, so a caller may change its own."""
    files = sorted(SHIPPED_DIR.glob("*.csv"))
    stamp = tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files)
    rows, notes = _read_shipped(stamp)
    for note in notes:
        (warn or (lambda msg: None))(note)
    return rows.copy()


@functools.lru_cache(maxsize=2)
def _read_shipped(stamp: tuple) -> tuple[pd.DataFrame, tuple[str, ...]]:
    notes: list[str] = []
    return read_published([Path(path) for path, _, _ in stamp], warn=notes.append), tuple(notes)


def all_published(paths, *, warn: Callable[[str], None] | None = None, shipped: bool = True) -> pd.DataFrame:
    """The imports stored under `paths` and, with `shipped`, the reference rows shipped with
    tpubench: every published row a report or an estimate knows."""
    imported = read_published(paths or [], warn=warn)
    if not shipped:
        return imported
    reference = shipped_published(warn=warn)
    return pd.concat([imported, reference], ignore_index=True) if len(imported) else reference
