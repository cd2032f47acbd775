"""Text columns held as Python strings in the frames a report builds, whether or not pyarrow is
installed (docs/commands.md#report-cache).

pandas 3 stores text columns in pyarrow when pyarrow is importable, else as Python strings. The
values are the same either way, but a report takes and filters its frames thousands of times, and
each take of a pyarrow column is a call into pyarrow's compute: over 10,000 results that cost about
0.5 s of a 3 s report (benchmarks/report_10k.py). A base install has no pyarrow, so this is also
what most users already had; now the report's speed no longer depends on an unrelated package.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Callable, Iterator, TypeVar

F = TypeVar("F", bound=Callable)


@contextlib.contextmanager
def python_strings_here() -> Iterator[None]:
    """pandas' text columns stored as Python strings within the block (its option restored after)."""
    import pandas as pd

    with pd.option_context("mode.string_storage", "python"):
        yield


def python_strings(fn: F) -> F:
    """`fn`, run with pandas' text columns stored as Python strings (python_strings_here)."""

    @functools.wraps(fn)
    def with_python_strings(*args, **kwargs):
        with python_strings_here():
            return fn(*args, **kwargs)

    return with_python_strings  # type: ignore[return-value]
