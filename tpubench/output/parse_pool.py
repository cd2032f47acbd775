"""Result files parsed and flattened, in forked workers when there are many (output/forked.py),
for a report over many new files (docs/commands.md#report-cache).

Parsing is most of a cold report's load: 10,000 files of 12 KiB each (their raw samples) take about
2 s of pydantic and flattening on one core. What the workers give back is exactly what parsing the
files here would give, in the same order, and every warning is said here, in file order. Rows come
back as columns (ParsedRows), built where they were parsed: a few long lists cross the process
boundary, not thousands of dicts, and each column of floats as a float64 array (the column pandas
makes of the list), which crosses it and becomes a frame's column in a fraction of a list's time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from tpubench.output import forked

# Fewer files than this parse in ~0.25 s: a worker's start and the rows' way back would not pay.
PARALLEL_MIN_FILES = 1000
# Chunks per worker: small enough that the workers finish together, large enough that each chunk's
# round trip is a small part of its parsing.
CHUNKS_PER_WORKER = 4


@dataclass
class ParsedRows:
    """The usable files among those given: their positions (`at`, ascending), environment keys,
    and flattened rows as columns aligned with `at`, named in the order the rows first have them,
    NaN where a row lacks a name (what pandas puts there when it builds a frame from the rows)."""

    at: list[int] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    columns: dict[str, Any] = field(default_factory=dict)      # a list, or a float64 array (_as_arrays)
    by_workers: bool = False        # parsed by forked workers (parse_files)

    @classmethod
    def of_rows(cls, at: list[int], keys: list[str], rows: list[dict]) -> ParsedRows:
        # Rows come in a few shapes (the same names in the same order: every ok result of a
        # scenario, every failed one): each shape's rows are transposed at once, in C, where a
        # lookup of every name in every row (1.3 million over 10,000 results) took 0.2 s.
        shapes: dict[tuple, list[int]] = {}
        for i, row in enumerate(rows):
            shapes.setdefault(tuple(row), []).append(i)
        first_seen: dict = {}
        for shape in shapes:        # in the order of each shape's first row: the order rows first have the names
            first_seen.update(dict.fromkeys(shape))
        if len(shapes) == 1:
            (shape,) = shapes
            return cls(at, keys, dict(zip(shape, map(list, zip(*(row.values() for row in rows))))))
        return cls(at, keys, _scattered(rows, shapes, list(first_seen)))

    def extend(self, other: ParsedRows, offset: int) -> None:
        """`other`'s rows after these; its positions counted from `offset`."""
        before, after = len(self.at), len(other.at)
        for name, values in self.columns.items():
            self.columns[name] = _joined(values, other.columns.get(name, _missing(after)))
        for name, values in other.columns.items():
            if name not in self.columns:
                self.columns[name] = _joined(_missing(before), values)
        self.at.extend(offset + i for i in other.at)
        self.keys.extend(other.keys)


def _missing(n: int):
    """A column of `n` rows that lack the name: NaN, as a float array (floats joined to it stay one)."""
    import numpy as np

    return np.full(n, math.nan)


def _joined(first, second):
    """Two columns one after the other: a float64 array where both are (NaN is a float), else a list."""
    import numpy as np

    if isinstance(first, np.ndarray) and isinstance(second, np.ndarray):
        return np.concatenate([first, second])
    return as_list(first) + as_list(second)


def as_list(values) -> list:
    """A column as a list (a float array's values as Python floats)."""
    return values.tolist() if hasattr(values, "tolist") else values


def _as_arrays(columns: dict[str, list]) -> dict:
    """`columns` with each column whose every value is a float as a float64 array: the column pandas
    makes of that list, made where the rows were parsed (a worker), and far cheaper to send back."""
    import numpy as np

    return {name: np.array(values, dtype=float) if values and set(map(type, values)) == {float} else values
            for name, values in columns.items()}


def _scattered(rows: list[dict], shapes: dict[tuple, list[int]], names: list) -> dict[str, list]:
    """The columns `names` of `rows`, grouped by shape (of_rows), each shape's values set at its
    rows' positions (NaN where a row lacks a name), as lists, as of_rows makes one shape's."""
    columns = {name: [math.nan] * len(rows) for name in names}
    for shape, at in shapes.items():
        for name, values in zip(shape, zip(*(rows[i].values() for i in at))):
            column = columns[name]
            for i, value in zip(at, values):
                column[i] = value
    return columns


def _parse(paths: list[str], flatten: Callable, warn: Callable[[str], None]) -> ParsedRows:
    from tpubench.records.result import read_usable_result

    at, keys, rows = [], [], []
    for i, path in enumerate(paths):
        result = read_usable_result(path, warn)
        if result is not None:
            at.append(i)
            keys.append(result.environment_key)
            rows.append(flatten(result, path))
    parsed = ParsedRows.of_rows(at, keys, rows)
    parsed.columns = _as_arrays(parsed.columns)
    return parsed


def parse_files(paths: list[str], flatten: Callable, warn: Callable[[str], None],
                meanwhile: Callable[[], object] | None = None) -> ParsedRows:
    """Every usable file of `paths` read and flattened by `flatten(result, path)`. The warnings are
    said from here whichever process parsed the file (the same stack level for `warnings.warn`).
    `meanwhile()` runs here while the workers parse (forked.forked_map)."""
    workers = forked.workers_for(len(paths), PARALLEL_MIN_FILES)
    if workers:     # imported once here, inherited by every worker (numpy's start costs each ~0.1 s of CPU)
        import numpy  # noqa: F401

        from tpubench.records.result import RunResult  # noqa: F401 - built once here
    size = -(-len(paths) // (workers * CHUNKS_PER_WORKER)) if workers else max(1, len(paths))
    starts = range(0, len(paths), size)

    def chunk(start: int) -> tuple[ParsedRows, list[str]]:
        said: list[str] = []
        return _parse(paths[start:start + size], flatten, said.append), said

    out = ParsedRows(by_workers=workers > 0)
    for start, (parsed, said) in zip(starts, forked.forked_map(chunk, starts, workers, meanwhile=meanwhile)):
        for message in said:
            warn(message)
        out.extend(parsed, start)
    return out
