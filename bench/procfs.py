"""CPU time of another process, from ``/proc`` (Linux), for the benches that weigh a server's work."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ("cpu_seconds",)


def cpu_seconds(pid: int | None) -> float:
    """CPU seconds (user + system, all threads) used so far by process ``pid`` (0 when it is gone)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
