"""Work shared by forked workers (output/forked.py): the same results, in the same order, as doing
it in this process."""

from __future__ import annotations

import os
import sys

import pytest

from tpubench.output import forked

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux only")
THREADS_AS_THEY_ARE = forked.other_threads_running


# A worker process of the suite may have imported JAX for an earlier test, and JAX warns at any fork.
pytestmark = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")


@pytest.fixture(autouse=True)
def _no_other_threads(monkeypatch):
    """Workers as in a process of one thread, whatever threads earlier tests of this process left."""
    monkeypatch.setattr(forked, "other_threads_running", lambda: False)


def _pid_and_square(x: int) -> tuple[int, int]:
    return os.getpid(), x * x


@linux_only
def test_forked_map_keeps_order_and_works_in_other_processes():
    out = forked.forked_map(_pid_and_square, list(range(23)), workers=2, chunks_per_worker=3)
    assert [square for _, square in out] == [x * x for x in range(23)]
    assert os.getpid() not in {pid for pid, _ in out}
    assert forked._job is None      # nothing of the job is kept once it is done


def test_one_worker_or_few_items_work_here(monkeypatch):
    monkeypatch.setattr(forked, "usable_cpus", lambda: 1)
    assert forked.workers_for(10_000, 10) == 0
    monkeypatch.setattr(forked, "usable_cpus", lambda: 64)
    assert forked.workers_for(9, 10) == 0
    assert forked.workers_for(10, 10) == (forked.MAX_WORKERS if sys.platform.startswith("linux") else 0)
    assert [pid for pid, _ in forked.forked_map(_pid_and_square, [1, 2], workers=0)] == [os.getpid()] * 2


@linux_only
def test_no_workers_are_forked_while_another_thread_runs(monkeypatch):
    import threading

    monkeypatch.setattr(forked, "usable_cpus", lambda: 2)
    assert forked.workers_for(100, 10) == 2
    monkeypatch.setattr(forked, "other_threads_running", THREADS_AS_THEY_ARE)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert forked.workers_for(100, 10) == 0
    finally:
        stop.set()
        other.join()


@linux_only
def test_a_worker_error_reaches_the_caller_and_the_pool_is_gone():
    def fails(x):
        if x == 5:
            raise ValueError("five")
        return x

    with pytest.raises(ValueError, match="five"):
        forked.forked_map(fails, list(range(8)), workers=2)
    assert forked._job is None


@linux_only
def test_work_behind_runs_in_a_child_that_is_waited_for(tmp_path):
    mark = tmp_path / "written"
    forked.behind(lambda: mark.write_text(str(os.getpid())), fork=True)
    assert forked._behind                    # a child, by its PID
    forked.wait_behind()
    assert not forked._behind and int(mark.read_text()) != os.getpid()


def test_work_behind_runs_here_unless_a_fork_is_asked_and_safe(tmp_path, monkeypatch):
    pids = []
    forked.behind(lambda: pids.append(os.getpid()), fork=False)
    monkeypatch.setattr(forked, "other_threads_running", lambda: True)
    forked.behind(lambda: pids.append(os.getpid()), fork=True)
    assert pids == [os.getpid()] * 2 and not forked._behind


@linux_only
def test_meanwhile_runs_once_here_while_the_workers_work():
    seen = []
    out = forked.forked_map(_pid_and_square, list(range(6)), workers=2, meanwhile=lambda: seen.append(os.getpid()))
    assert seen == [os.getpid()] and [square for _, square in out] == [x * x for x in range(6)]
    seen.clear()
    forked.forked_map(_pid_and_square, [1], workers=0, meanwhile=lambda: seen.append("first"))
    assert seen == ["first"]


@linux_only
def test_a_result_ahead_is_computed_in_a_child_and_read_once():
    with forked.ahead(lambda: (os.getpid(), [1, 2, 3]), fork=True) as pending:
        assert pending._pid is not None            # a child, by its PID, started at once
        pid, value = pending.result()
        assert pid != os.getpid() and value == [1, 2, 3]
        assert pending.result() == (pid, [1, 2, 3]) and pending._pid is None     # reaped, kept


def test_a_result_ahead_is_computed_here_unless_a_fork_is_asked_and_safe(monkeypatch):
    assert forked.ahead(os.getpid, fork=False).result() == os.getpid()
    monkeypatch.setattr(forked, "other_threads_running", lambda: True)
    assert forked.ahead(os.getpid, fork=True).result() == os.getpid()
    monkeypatch.setattr(forked, "other_threads_running", lambda: False)
    monkeypatch.setattr(forked, "usable_cpus", lambda: 1)      # no second CPU to run it beside this one
    assert forked.ahead(os.getpid, fork=True).result() == os.getpid()


@linux_only
def test_a_child_that_fails_leaves_the_error_to_be_raised_here():
    calls = []

    def fails():
        calls.append(os.getpid())
        raise ValueError("no figures")

    pending = forked.ahead(fails, fork=True)
    with pytest.raises(ValueError, match="no figures"):
        pending.result()
    assert calls == [os.getpid()]        # the child's own call appended to the child's copy of the list


@linux_only
def test_a_child_whose_result_is_never_asked_for_is_stopped_by_its_pid():
    import time

    # An hour's sleep: a close() that waited for the child instead of stopping it would hang here.
    pending = forked.ahead(lambda: time.sleep(3600), fork=True)
    pid = pending._pid
    os.kill(pid, 0)                             # alive, and ours
    pending.close()
    assert pending._pid is None
    with pytest.raises(ChildProcessError):      # reaped: no longer a child of this process
        os.waitpid(pid, 0)
