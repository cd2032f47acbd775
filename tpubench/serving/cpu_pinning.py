"""CPUs of their own for a server tpubench starts and for tpubench's client, when both run on the
CPUs of one host (a server on its CPU backend).

Why: vLLM's CPU backend busy-polls its cores. Measured here on 2 vCPUs with server and client on the
same CPUs, the client's event loop lagged 116-195 ms at p99 and every point was invalid; pinned
apart (server CPU 0, client CPU 1) the same points were valid with exact token counts.

The split: of the CPUs tpubench may run on, the client keeps `client_share(n)` (a quarter, at least
one) and the server gets the rest, unless `launch.cpus` names the server's ("0-5,8"); the client
then gets the others. The server is started with its CPUs (inherited from the thread that starts
it, so no process of its group ever runs elsewhere), and priced as those CPUs
(server_chips.process_group_cpus). tpubench's threads keep the client's CPUs until the server stops.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tpubench.errors import UserError

FIELD = "scenario.server.launch.cpus"


@dataclass(frozen=True)
class CpuSplit:
    server: tuple[int, ...]
    client: tuple[int, ...]
    how: str          # "auto" or "launch.cpus"

    def describe(self) -> dict:
        return {"server_cpus": cpu_list(self.server), "client_cpus": cpu_list(self.client), "how": self.how}


def parse_cpus(text: str) -> set[int]:
    """The CPUs of a list like "0-3,6" (taskset's and cgroups' syntax); UserError when malformed."""
    cpus: set[int] = set()
    for part in str(text).split(","):
        first, dash, last = part.strip().partition("-")
        try:
            lo = int(first)
            hi = int(last) if dash else lo
        except ValueError:
            raise UserError(f"{text!r} is not a CPU list (like \"0-3,6\")", field=FIELD) from None
        if lo < 0 or hi < lo:
            raise UserError(f"{text!r} is not a CPU list (like \"0-3,6\")", field=FIELD)
        cpus.update(range(lo, hi + 1))
    return cpus


def cpu_list(cpus) -> str:
    """"0-3,6" for {0, 1, 2, 3, 6}."""
    out, run = [], []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def client_share(n: int) -> int:
    """CPUs the client keeps out of n: a quarter, at least one (it sends and reads streams; the
    server computes the model)."""
    return max(1, n // 4)


def split_cpus(available: set[int], server: str | None = None) -> CpuSplit | None:
    """The server's and the client's CPUs out of `available` (module docstring); None when there
    is only one CPU (nothing to split). `server`: launch.cpus, the server's own list."""
    cpus = sorted(available)
    if server:
        wanted = parse_cpus(server)
        outside = wanted - available
        if outside:
            raise UserError(f"CPUs {cpu_list(outside)} are not among those tpubench may use ({cpu_list(available)})",
                            field=FIELD)
        rest = tuple(c for c in cpus if c not in wanted)
        if not rest:
            raise UserError(f"launch.cpus {server!r} leaves no CPU for tpubench's client (of {cpu_list(available)})",
                            field=FIELD)
        return CpuSplit(tuple(sorted(wanted)), rest, "launch.cpus")
    if len(cpus) < 2:
        return None
    keep = client_share(len(cpus))
    return CpuSplit(tuple(cpus[:-keep]), tuple(cpus[-keep:]), "auto")


def own_cpus() -> set[int]:
    return os.sched_getaffinity(0)


@contextmanager
def this_thread_on(cpus) -> Iterator[None]:
    """The calling thread runs on `cpus` inside the block (a process it starts inherits them)."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(cpus))
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@contextmanager
def process_on(cpus) -> Iterator[None]:
    """Every thread of tpubench runs on `cpus` inside the block (threads started in it inherit
    them); each thread's own set is put back after."""
    before = {}
    for tid in _threads():
        try:
            before[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, set(cpus))
        except OSError:
            continue     # a thread that ended meanwhile
    try:
        yield
    finally:
        for tid, mask in before.items():
            try:
                os.sched_setaffinity(tid, mask)
            except OSError:
                continue
        # Threads started inside the block keep the client's CPUs: they end with it.


def _threads() -> list[int]:
    task = Path("/proc/self/task")
    try:
        return [int(t.name) for t in task.iterdir() if t.name.isdigit()]
    except OSError:
        return [0]
