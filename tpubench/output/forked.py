"""A function mapped over items in forked worker processes, for the report's CPU-bound step over
many inputs: parsing thousands of new result files (output/parse_pool.py).

Fork, not spawn: a forked worker starts in milliseconds with what this process has already
imported and built (pydantic's models), where a spawned one would
import them again (about 0.3 s each). The function and its items are inherited, not pickled: only
positions go to a worker and only results come back. Fork is used on Linux only (macOS' system
libraries are not fork-safe; elsewhere there is no fork), so other platforms work in this process.
Workers ignore Ctrl-C: an interrupted report stops here, with no worker tracebacks, and the pool
is shut down (every worker joined) before the interrupt goes on.

Two smaller helpers share the rules: `behind` runs work whose result nobody waits for (writing a
cache) in a child, and `ahead` computes a result in a child while this process goes on (the HTML
report's figures while the rest of the page is written).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Callable, Generic, Sequence, TypeVar

from tpubench.hardware.environment import cpu_chips

T = TypeVar("T")
R = TypeVar("R")

MAX_WORKERS = 8
_job: tuple[Callable, Sequence] | None = None     # what the workers run: set before they are forked
_behind: list[int] = []       # children of behind() not yet waited for


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask: the rule a CPU's chips follow)."""
    return cpu_chips()


# Frameworks that run threads of their own, native ones threading does not count (JAX warns at a fork).
_THREADED_FRAMEWORKS = ("jax", "torch", "tensorflow")


def other_threads_running() -> bool:
    """Whether this process runs threads besides this one: Python's, or a loaded framework's."""
    return threading.active_count() > 1 or any(name in sys.modules for name in _THREADED_FRAMEWORKS)


def workers_for(items: int, min_items: int) -> int:
    """How many worker processes share `items` items: 0 (work here) below `min_items`, on one CPU,
    where workers are not forked, or while this process runs other threads (a notebook's kernel, a
    framework's pools; `tpubench report` imports none):
    a child forked while another thread holds a lock (the allocator's, a logger's) can wait on it
    for ever, which is why Python 3.12 warns of such forks."""
    if items < max(2, min_items) or not sys.platform.startswith("linux") or other_threads_running():
        return 0
    workers = min(usable_cpus(), MAX_WORKERS, items)
    return workers if workers > 1 else 0


def _run(start: int, stop: int) -> list:
    fn, items = _job
    return [fn(item) for item in items[start:stop]]


def _ignore_interrupts() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def forked_map(fn: Callable[[T], R], items: Sequence[T], workers: int, chunks_per_worker: int = 1,
               meanwhile: Callable[[], object] | None = None) -> list[R]:
    """[fn(item) for item in items], the items shared by `workers` forked processes in contiguous
    chunks (`chunks_per_worker` each, so that uneven items still finish together). `meanwhile()`
    runs here once the workers are forked, while they work (without workers: first)."""
    global _job
    if workers < 2:
        if meanwhile is not None:
            meanwhile()
        return [fn(item) for item in items]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    size = -(-len(items) // (workers * chunks_per_worker))
    starts = list(range(0, len(items), size))
    stops = [min(start + size, len(items)) for start in starts]
    _job = (fn, items)
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"), initializer=_ignore_interrupts)
    try:
        chunks = pool.map(_run, starts, stops)     # every worker forked, every chunk sent
        if meanwhile is not None:
            meanwhile()
        return [result for chunk in chunks for result in chunk]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _job = None


def behind(fn: Callable[[], object], *, fork: bool) -> None:
    """fn() in a forked child while this process goes on, with `fork` (the caller has just used
    workers: a fork is safe, and a core is free now that only this process computes); else here.
    fn's result and errors stay in the child, so give it work whose failure costs nothing (writing
    a cache). The child ignores Ctrl-C, so an interrupted report still finishes its few tenths of a
    second of writing; every child is waited for by its PID before this process exits, or before
    wait_behind() returns."""
    if not (fork and sys.platform.startswith("linux") and not other_threads_running()):
        fn()
        return
    pid = os.fork()
    if pid == 0:        # the child: its work, then out, with none of the parent's exit handlers or buffers
        try:
            _ignore_interrupts()
            fn()
        finally:
            os._exit(0)
    if not _behind:
        import atexit

        atexit.register(wait_behind)
    _behind.append(pid)


def wait_behind() -> None:
    """Wait for every child behind() started (its work done: a cache written)."""
    while _behind:
        pid = _behind.pop()
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:      # already reaped
            pass


_UNSET = object()


class Ahead(Generic[R]):
    """fn()'s result, computed in a forked child (ahead()) or here when it is asked for. `result()`
    waits for the child and reads what it sent; where the child failed, fn() runs again here, so
    its error is raised, with its traceback, where the result was wanted. `close()` (or leaving a
    `with` block) stops a child whose result was never asked for, by its PID, and reaps it."""

    def __init__(self, fn: Callable[[], R], pid: int | None = None, reader: int | None = None):
        self._fn, self._pid, self._reader, self._value = fn, pid, reader, _UNSET

    def result(self) -> R:
        if self._pid is not None:
            import pickle

            chunks = []
            while chunk := os.read(self._reader, 1 << 20):
                chunks.append(chunk)
            self._reap()
            try:
                done, value = pickle.loads(b"".join(chunks))
            except Exception:       # nothing or part of it came (the child was killed): computed here
                done, value = False, None
            if done:
                self._value = value
        if self._value is _UNSET:
            self._value = self._fn()
        return self._value

    def close(self) -> None:
        if self._pid is not None:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:      # already gone (it has not been reaped, so it is ours)
                pass
            self._reap()

    def _reap(self) -> None:
        os.close(self._reader)
        os.waitpid(self._pid, 0)
        self._pid = self._reader = None

    def __enter__(self) -> Ahead[R]:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def ahead(fn: Callable[[], R], *, fork: bool) -> Ahead[R]:
    """fn() started in a forked child now, with `fork` where a fork is safe and a second CPU can run
    it beside this process (the same rules as the workers'); else an Ahead that computes it here
    when asked. The result comes back pickled through a pipe, so give the child work whose result
    is small beside its cost (text)."""
    if not (fork and sys.platform.startswith("linux") and usable_cpus() > 1 and not other_threads_running()):
        return Ahead(fn)
    import pickle

    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:        # the child: the result or (False, None), then out, with none of the parent's exit handlers
        try:
            os.close(reader)
            _ignore_interrupts()
            try:
                payload = pickle.dumps((True, fn()), protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException:       # the parent computes it again and raises the error there
                payload = pickle.dumps((False, None))
            view = memoryview(payload)
            while view:
                view = view[os.write(writer, view):]
        finally:
            os._exit(0)
    os.close(writer)
    return Ahead(fn, pid, reader)
