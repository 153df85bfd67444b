"""The CPUs a broker process runs on (the ``cpu_affinity`` setting).

A grpc.aio server hands every completion from gRPC's polling thread to the event loop's thread and
back: a call is several such hand-overs, a streamed message one or two. When the two threads sit on
different CPUs of a VM, each hand-over wakes a sleeping CPU (an inter-processor interrupt and a
return from the hypervisor's halt), and that costs more than the work handed over. With the broker's
threads on one CPU the hand-overs are plain context switches: on the 2-vCPU VMs of our benchmarks
the bare grpc.aio server then consumed about 1.5x as fast and the broker about 1.2x, and the
end-to-end p99s fell (docs/benchmarks.md, "The POP state out of the collector's walks; the servers'
threads on one CPU"). The cost: the broker gets one CPU's worth of time, so a broker whose load needs
more (single-message sends, whose per-call work is larger) gains nothing there.

Off by default: which CPUs suit a host is the operator's call (one per broker, away from the clients
of the same host). Linux only (``os.sched_setaffinity``).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ("apply_cpu_affinity", "format_cpu_list", "parse_cpu_list")


def parse_cpu_list(text: str) -> set[int]:
    """The CPUs of a Linux CPU list (``0``, ``0-3``, ``0,2,4-5``); raises ValueError with a line for
    people when ``text`` is not one."""
    cpus: set[int] = set()
    for part in text.replace(" ", "").split(","):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(f"cpu_affinity {text!r}: expected CPU numbers and ranges such as 0 or 0-1,4")
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise ValueError(f"cpu_affinity {text!r}: the range {part} runs backwards")
        cpus.update(range(first, last + 1))
    return cpus


def format_cpu_list(cpus: set[int]) -> str:
    """``cpus`` as a CPU list with ranges (``0-2,5``)."""
    runs: list[str] = []
    for cpu in sorted(cpus):
        if runs and runs[-1].rpartition("-")[2] == str(cpu - 1):
            runs[-1] = f"{runs[-1].partition('-')[0]}-{cpu}"
        else:
            runs.append(str(cpu))
    return ",".join(runs)


def apply_cpu_affinity(text: str) -> set[int] | None:
    """Keep this process on the CPUs ``text`` lists (every thread it has now; threads started later
    inherit it from their starter). Empty: nothing changes, None. Raises ValueError when ``text`` is
    not a CPU list or names a CPU this process may not run on."""
    if not text.strip():
        return None
    cpus = parse_cpu_list(text)
    if not hasattr(os, "sched_setaffinity"):
        raise ValueError("cpu_affinity is supported on Linux only")
    allowed = os.sched_getaffinity(0)
    if not cpus <= allowed:
        raise ValueError(
            f"cpu_affinity {text!r}: CPU {format_cpu_list(cpus - allowed)} is not one this process may "
            f"run on ({format_cpu_list(allowed)})"
        )
    for task in Path("/proc/self/task").iterdir():  # threads an import may have started already
        try:
            os.sched_setaffinity(int(task.name), cpus)
        except ProcessLookupError:  # it ended meanwhile
            continue
    return cpus
