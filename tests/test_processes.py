"""One process-group helper (tpubench.processes) for servers, worlds and benchmark phases: SIGTERM to
the whole group, a grace period, SIGKILL to what is left; a zombie nobody reaps counts as gone."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

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


def test_a_group_that_ignores_sigterm_is_killed_after_the_grace_period():
    proc, child = _start(_STUBBORN)
    assert os.getpgid(child) == proc.pid        # the child is in the leader's new group
    t0 = time.monotonic()
    stop_group(proc, 1.0)
    waited = time.monotonic() - t0
    deadline = time.monotonic() + 5
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.returncode is not None and _gone(child)
    assert 1.0 <= waited < 5


def test_a_group_that_leaves_on_sigterm_is_not_kept_for_the_grace_period():
    proc, child = _start(_POLITE)
    t0 = time.monotonic()
    stop_group(proc, 30.0)
    assert time.monotonic() - t0 < 5 and proc.returncode == -15
    assert _gone(child)


def test_a_zombie_is_not_a_live_member_of_its_group():
    # The leader starts a child that exits at once and never reaps it: a zombie in the group.
    code = ("import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', 'pass']); "
            "print(c.pid, flush=True); time.sleep(60)")
    proc, child = _start(code)
    try:
        deadline = time.monotonic() + 10
        while not _gone(child) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _gone(child) and Path(f"/proc/{child}").exists()   # a zombie, still listed
        assert live_group_members(proc.pid) == [proc.pid]
    finally:
        stop_group(proc, 1.0)
    assert live_group_members(proc.pid) == []
