"""Process groups of the servers tpubench starts, read from /proc (Linux)."""

from __future__ import annotations

from pathlib import Path

PROC = Path("/proc")


def live_group_members(pgid: int) -> list[int] | None:
    """The PIDs of the live (not zombie) processes of group `pgid`; None where there is no /proc.
    Zombies nobody reaps (a container's init may not) count as gone."""
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
