"""CPU time and context switches of another process, from ``/proc`` (Linux), for the benches that
weigh a server's work."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ("context_switches", "cpu_seconds")


def cpu_seconds(pid: int | None) -> float:
    """CPU seconds (user + system, all threads) used so far by process ``pid`` (0 when it is gone)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def context_switches(pid: int | None) -> int:
    """Context switches (voluntary and not, summed over the live threads) of process ``pid`` so far.

    A thread that has exited takes its count with it: compare two readings over a stretch in which
    the process keeps its threads (a server under load does)."""
    if pid is None:
        return 0
    total = 0
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            text = status.read_text()
        except OSError:  # the thread exited meanwhile
            continue
        for line in text.splitlines():
            if "ctxt_switches:" in line:
                total += int(line.split()[1])
    return total
