"""Where imported published results live: CSV files in a `published/` folder inside a results
folder (`results/published/inferencex-dsr1.csv`), so `tpubench report results/` finds them beside
the measurements without taking them for measurements (results are `*.json`; these are not).

One CSV per imported file, written atomically; importing the same file again is refused unless
asked to replace it (a second copy would count every published point twice). Text cells a
spreadsheet would run as formulas are neutralised (records.csv_safety): the rows come from others.

Every row read passes the physics gate (estimate/gate.py) or is left out with one warning naming
its file and row (`file_row`: 1 is the first row below the header). An import's rows are held to
their figures and their chip's roofline as they are read, so nothing a report, an estimate or a
budget does meets them. The shipped rows are held to their figures when read, and to the roofline
where they can move a figure: `tpubench estimate` and a budget read them `checked`, a report's
estimate gates what it calibrates on (estimate/for_reports.py) and its answer the rows it shows
(output/answer/published.py). The roofline of all 2,749 takes about 0.4 s, which every report
would pay only to list rows that tests/test_published_shipped.py already holds to it.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from tpubench.errors import UserError
from tpubench.estimate.gate import gate
from tpubench.output.published.rows import COLUMNS, published_frame
from tpubench.output.python_strings import python_strings
from tpubench.records.csv_safety import neutralize_frame
from tpubench.records.files import PUBLISHED_FOLDER, published_files, replace_file

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
    target = Path(into) / PUBLISHED_FOLDER / name
    if target.exists() and not replace:
        raise UserError("already imported; pass --replace to import it again", where=str(target))
    data = neutralize_frame(df.reindex(columns=COLUMNS)).to_csv(index=False, float_format="%.9g")
    return replace_file(target, data.encode("utf-8"))


def read_published(paths, *, warn: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Every stored import under `paths` as one DataFrame (COLUMNS plus `file`, `file_row`); a file
    that is not an import is skipped with a warning naming it, a row that fails the physics gate
    (estimate/gate.py) with one naming its file and row."""
    return _read_files(published_files(paths), warn, roofline_too=True)


@python_strings    # the same frame whichever caller reads the shipped rows first (they are kept)
def _read_files(files: list[Path], warn: Callable[[str], None] | None, *, roofline_too: bool) -> pd.DataFrame:
    warn = warn or (lambda msg: None)
    frames = []
    for f in files:
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
        frame.insert(1, "file_row", np.arange(1, len(frame) + 1))
        frames.append(gate(frame, warn, roofline_too=roofline_too))
    if not frames:
        return published_frame([]).assign(file=pd.Series(dtype=object), file_row=pd.Series(dtype="int64"))[
            ["file", "file_row", *COLUMNS]]
    return pd.concat(frames, ignore_index=True)


def shipped_published(*, warn: Callable[[str], None] | None = None, checked: bool = False) -> pd.DataFrame:
    """The reference published rows shipped with tpubench (data/published/*.csv: real public
    operating points, each naming its publisher, date and reference), as read_published gives
    them: COLUMNS plus `file` (the shipped CSV it came from) and `file_row`; held to their figures,
    and with `checked` to their chips' roofline too (module notes). Read once per process while the
    files stay as they are (2,700 rows took 0.4 s a read; a report, its estimate and a notebook
    each want them): a copy each call, so a caller may change its own."""
    files = sorted(SHIPPED_DIR.glob("*.csv"))
    stamp = tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files)
    rows, notes = _read_shipped(stamp, checked)
    for note in notes:
        (warn or (lambda msg: None))(note)
    return rows.copy()


@functools.lru_cache(maxsize=4)
def _read_shipped(stamp: tuple, checked: bool) -> tuple[pd.DataFrame, tuple[str, ...]]:
    notes: list[str] = []
    return _read_files([Path(path) for path, _, _ in stamp], notes.append, roofline_too=checked), tuple(notes)


def all_published(paths, *, warn: Callable[[str], None] | None = None, shipped: bool = True,
                  checked: bool = False) -> pd.DataFrame:
    """The imports stored under `paths` and, with `shipped`, the reference rows shipped with
    tpubench (held to the roofline with `checked`: shipped_published): every published row a report
    or an estimate knows."""
    imported = read_published(paths or [], warn=warn)
    if not shipped:
        return imported
    reference = shipped_published(warn=warn, checked=checked)
    return pd.concat([imported, reference], ignore_index=True) if len(imported) else reference
