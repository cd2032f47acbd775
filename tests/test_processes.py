"""One process-group helper (tpubench.processes) for servers, worlds and benchmark phases: SIGTERM to
the whole group, a grace period, SIGKILL to what is left; a zombie nobody reaps counts as gone."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tpubench import processes
from tpubench.processes import live_group_members, start_in_new_group, stop_group

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="process groups read from /proc (Linux)")

# Leader and child both ignore SIGTERM; the leader prints the child's PID.
_STUBBORN = ("import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
             "c = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
             "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)']); "
             "print(c.pid, flush=True); time.sleep(60)")
# Leader and child both leave on SIGTERM.
_POLITE = ("import subprocess, sys, time; "
           "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
           "print(c.pid, flush=True); time.sleep(60)")


def _start(code: str) -> tuple[subprocess.Popen, int]:
    proc = start_in_new_group([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    return proc, int(proc.stdout.readline())


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


class PollClock:
    """stop_group's clock: the seconds it has waited, counted by its own polls. Each poll really
    sleeps, so the processes move on; a busy machine makes the polls slower, never more of them."""

    def __init__(self):
        self.waited_s = 0.0

    def monotonic(self) -> float:
        return self.waited_s

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)
        self.waited_s += seconds


@pytest.fixture
def poll_clock(monkeypatch) -> PollClock:
    clock = PollClock()
    monkeypatch.setattr(processes, "time", clock)
    return clock


def _wait_gone(pid: int) -> bool:
    """Whether `pid` is gone, waiting for it (a liveness wait: generous, never a measured bound)."""
    deadline = time.monotonic() + 60
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return _gone(pid)


def test_a_group_that_ignores_sigterm_is_killed_after_the_grace_period(poll_clock):
    proc, child = _start(_STUBBORN)
    assert os.getpgid(child) == proc.pid        # the child is in the leader's new group
    stop_group(proc, 1.0)
    assert proc.returncode == -9 and _wait_gone(child)                     # SIGKILL: it ignored SIGTERM
    assert 1.0 <= poll_clock.waited_s < 1.0 + 2 * processes._POLL_S      # the whole grace period, then no more


def test_a_group_that_leaves_on_sigterm_is_not_kept_for_the_grace_period(poll_clock):
    proc, child = _start(_POLITE)
    stop_group(proc, 30.0)
    assert proc.returncode == -15 and _wait_gone(child)                    # SIGTERM was enough
    assert poll_clock.waited_s < 30.0                                      # it stopped waiting once the group left


def test_a_zombie_is_not_a_live_member_of_its_group():
    # The leader starts a child that exits at once and never reaps it: a zombie in the group.
    code = ("import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', 'pass']); "
            "print(c.pid, flush=True); time.sleep(60)")
    proc, child = _start(code)
    try:
        assert _wait_gone(child) and Path(f"/proc/{child}").exists()   # a zombie, still listed
        assert live_group_members(proc.pid) == [proc.pid]
    finally:
        stop_group(proc, 1.0)
    assert live_group_members(proc.pid) == []
