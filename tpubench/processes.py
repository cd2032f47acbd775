"""Processes tpubench starts and must always stop: servers, worlds of ranks, a benchmark's phases.

Each is started in a session of its own, so it leads a new process group whose id is its PID, and
is stopped by that group, never by name: SIGTERM to the group, a grace period for the leader to
exit and the group to empty, then SIGKILL to whatever is left, and the leader reaped. Whether a
group still has members is read from /proc (Linux), where a zombie nobody reaps (a container's
init may not) counts as gone: it must not hold a stop for its whole grace period.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

PROC = Path("/proc")
# How often a stop looks whether the group has gone.
_POLL_S = 0.05


def start_in_new_group(argv: list[str], **popen_kwargs) -> subprocess.Popen:
    """subprocess.Popen in a new session: the process leads a group of its own (pgid = its PID),
    which its children join unless they make their own."""
    return subprocess.Popen(argv, start_new_session=True, **popen_kwargs)


def live_group_members(pgid: int) -> list[int] | None:
    """The PIDs of the live (not zombie) processes of group `pgid`; None where there is no /proc."""
    if not PROC.is_dir():
        return None
    members = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the command name (which may hold spaces and parentheses): state, ppid, pgrp.
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def group_alive(pgid: int) -> bool:
    """Whether a live process is left in group `pgid` (zombies do not count where /proc tells)."""
    members = live_group_members(pgid)
    if members is not None:
        return bool(members)
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(pgid: int, sig: int) -> None:
    """Send `sig` to group `pgid`; a group already gone (or no longer ours) is left alone."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL to whatever is left of the group `process` leads (a finished leader's stragglers),
    or to the process alone where there are no process groups."""
    if hasattr(os, "killpg"):
        signal_group(process.pid, signal.SIGKILL)
    elif process.poll() is None:
        process.kill()


def stop_group(process: subprocess.Popen, grace_s: float, *, reap_s: float | None = 10.0) -> None:
    """Stop `process` (started by start_in_new_group) and its whole group: SIGTERM to the group,
    up to `grace_s` for the leader to exit and the group to empty, then SIGKILL to whatever is
    left, and reap the leader (waiting up to `reap_s`; None: until it is gone). A Ctrl-C while
    waiting skips to SIGKILL and is raised again once the group is killed."""
    if not hasattr(os, "killpg"):   # no process groups (Windows): the process alone
        _stop_alone(process, grace_s, reap_s)
        return
    pgid = process.pid
    interrupted: BaseException | None = None
    signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None and not group_alive(pgid):
                break
            time.sleep(_POLL_S)
    except KeyboardInterrupt as exc:
        interrupted = exc
    signal_group(pgid, signal.SIGKILL)
    _reap(process, reap_s)
    if interrupted is not None:
        raise interrupted


def _stop_alone(process: subprocess.Popen, grace_s: float, reap_s: float | None) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
    _reap(process, reap_s)


def _reap(process: subprocess.Popen, timeout_s: float | None) -> None:
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:   # pragma: no cover - SIGKILL is not refused
        pass
