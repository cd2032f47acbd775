"""Python's cyclic garbage collector paused while a report reads, prices and writes its results.

A report over 10,000 results builds millions of objects (parsed rows, frames' text, answer and
chart tables) that mostly live until the report is written. The collector runs after every few
hundred new objects and walks the young ones, and now and then every object: about 0.2 s of a
first report (benchmarks/report_10k.py), with almost nothing to free, since reference counting
already frees what a report drops. Paused for a call and restored after it (a notebook's process
goes on collecting as before, the objects still alive included); the workers forked meanwhile
(output/forked.py) inherit the pause, so they also leave the pages they share with this process
unwritten by the collector.
"""

from __future__ import annotations

import contextlib
import functools
import gc
from typing import Callable, Iterator, TypeVar

F = TypeVar("F", bound=Callable)


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """No cyclic collection within the block; the collector as it was after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def paused_collection(fn: F) -> F:
    """`fn`, run with the cyclic collector paused (collection_paused)."""

    @functools.wraps(fn)
    def without_collection(*args, **kwargs):
        with collection_paused():
            return fn(*args, **kwargs)

    return without_collection  # type: ignore[return-value]
