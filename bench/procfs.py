"""CPU time and context switches of another process, and the machine's stolen CPU time, from ``/proc``
(Linux), for the benches that weigh a server's work."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ("context_switches", "cpu_seconds", "machine_cpu_times", "steal_share")


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


def machine_cpu_times() -> list[int]:
    """The machine's CPU time so far by kind (``/proc/stat``'s ``cpu`` line, in clock ticks: user,
    nice, system, idle, iowait, irq, softirq, steal, ...); empty where there is no ``/proc/stat``."""
    try:
        return [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return []


def steal_share(before: list[int], after: list[int]) -> float:
    """Of the CPU time the machine's vCPUs wanted between two :func:`machine_cpu_times` readings (all
    but idle and iowait), the share the hypervisor gave to others instead (steal). On a shared VM a
    slow stretch shows here, for our runs and the peers' alike. Taken over wanted time, not over all
    time: a busier run would otherwise show more steal for being busier."""
    if len(before) < 8 or len(after) < 8:
        return 0.0
    spent = [b - a for a, b in zip(before, after, strict=False)]
    wanted = sum(spent[:8]) - spent[3] - spent[4]  # guest time is counted in user and nice already
    return spent[7] / wanted if wanted > 0 else 0.0
