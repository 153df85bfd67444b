"""The event loop's thread and gRPC's polling thread kept on one CPU (the ``loop_cpu`` setting).

grpc.aio hands every completion from gRPC's polling thread (grpc.aio's ``_poll_wrapper`` thread,
which also does a server's socket I/O: dataplane/grpc_core.py) to the event loop's thread, and the
loop hands the next operation back: a unary call is several such hand-overs, a streamed response
one round trip each. When the two threads sit on different CPUs of a VM, each hand-over wakes the
other CPU (an inter-processor interrupt and a return from the hypervisor's halt), which costs more
than the work handed over; on one CPU it is a plain context switch. On the 2-vCPU Xeon VM of
docs/benchmarks.md ("The event loop and gRPC's polling thread on one CPU") a receive's 16 responses
went out in half the time (the bare relay's in a quarter), the end-to-end p99 at 5,000 msgs/s fell
by about a quarter (the relay's by half) and consume rose by a sixth (the bare server's by half).

Only those two threads are kept there. Every other thread (the store's flush and commit services,
the timer wheel, the executor's workers, gRPC's own) may run on every CPU of the process, the loop's
included: the whole node on one CPU (``cpu_affinity``, dataplane/cpu_affinity.py) starves the
store's threads of a second CPU. A thread inherits the CPUs of the thread that starts it, so one the
loop starts would be kept to the loop's CPU as well: the default executor's workers widen their own
CPUs as they start, and :class:`LoopCpu` looks at the process's threads every :data:`SWEEP_SECONDS`
and gives any other thread that was kept to one CPU every CPU of the process again.

``auto`` (the default) keeps them on the CPU the loop's thread is on when the node starts, so
several nodes on one host spread as the kernel placed them; a CPU number names one; empty turns it
off. With one CPU to run on there is nothing to do. Linux only; elsewhere it is off.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
from pathlib import Path

__all__ = ("POLLER_THREAD", "SWEEP_SECONDS", "LoopCpu", "apply_loop_cpu", "choose_cpu", "parse_loop_cpu")

logger = logging.getLogger(__name__)

#: How often other threads kept to the loop's CPU (by inheritance) are given every CPU again.
SWEEP_SECONDS = 1.0
#: The target of grpc.aio's completion-queue polling thread (its thread is named "Thread-N (...)").
POLLER_THREAD = "_poll_wrapper"


def parse_loop_cpu(text: str) -> str:
    """``text`` as a ``loop_cpu`` setting ("", "auto" or a CPU number); raises ValueError with a line
    for people otherwise."""
    value = text.strip().lower()
    if value in ("", "auto") or value.isdigit():
        return value
    raise ValueError(f"loop_cpu {text!r}: expected auto, a CPU number such as 0, or empty (off)")


def current_cpu() -> int:
    """The CPU the calling thread ran on last (``/proc/thread-self/stat``, field 39)."""
    stat = Path("/proc/thread-self/stat").read_text()
    return int(stat.rpartition(")")[2].split()[36])


def choose_cpu(setting: str, allowed: set[int] | None = None) -> int | None:
    """The CPU the ``loop_cpu`` setting names among ``allowed`` (default: the CPUs this process may
    run on), for the calling thread; None when off, when there is only one CPU, or where CPUs cannot
    be chosen (not Linux). Raises ValueError for a CPU the process may not run on."""
    value = parse_loop_cpu(setting)
    if not value or not hasattr(os, "sched_setaffinity"):
        return None
    if allowed is None:
        allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        return None
    if value == "auto":
        cpu = current_cpu()
        return cpu if cpu in allowed else min(allowed)
    cpu = int(value)
    if cpu not in allowed:
        raise ValueError(f"loop_cpu {cpu} is not a CPU this process may run on ({sorted(allowed)})")
    return cpu


class LoopCpu:
    """Keeps the calling thread (the event loop's) and grpc.aio's polling thread on ``cpu``, and
    every other thread of the process on the CPUs the process had when this was made."""

    def __init__(self, cpu: int) -> None:
        self.cpu = cpu
        self.everywhere = os.sched_getaffinity(0)
        self.loop_thread = threading.get_native_id()
        self._timer: asyncio.TimerHandle | None = None

    def pollers(self) -> set[int]:
        """The native ids of grpc.aio's polling threads (one per process once grpc.aio is in use)."""
        return {
            t.native_id
            for t in threading.enumerate()
            if t.name.endswith(f"({POLLER_THREAD})") and t.native_id is not None
        }

    def keep(self) -> set[int]:
        """Put every thread where it belongs now; returns the threads kept on :attr:`cpu`."""
        hot = {self.loop_thread} | self.pollers()
        for task in Path("/proc/self/task").iterdir():
            tid = int(task.name)
            wanted = {self.cpu} if tid in hot else self.everywhere
            try:
                if os.sched_getaffinity(tid) != wanted:
                    os.sched_setaffinity(tid, wanted)
            except ProcessLookupError:  # it ended meanwhile
                continue
        return hot

    def start(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Keep the threads (and go on doing so on ``loop``); False, and nothing changed, when
        grpc.aio's polling thread is not there (a grpcio that names it otherwise): the loop alone
        on one CPU gains nothing."""
        if not self.pollers():
            logger.warning("loop_cpu: gRPC's polling thread (%s) not found; not applied", POLLER_THREAD)
            return False
        everywhere = self.everywhere
        # the executor's workers are started by the loop's thread: they widen their CPUs themselves
        loop.set_default_executor(
            concurrent.futures.ThreadPoolExecutor(
                thread_name_prefix="broker-worker", initializer=os.sched_setaffinity, initargs=(0, everywhere)
            )
        )
        self.keep()
        self._timer = loop.call_later(SWEEP_SECONDS, self._sweep, loop)
        return True

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        self.keep()
        self._timer = loop.call_later(SWEEP_SECONDS, self._sweep, loop)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def apply_loop_cpu(setting: str, loop: asyncio.AbstractEventLoop) -> LoopCpu | None:
    """Start :class:`LoopCpu` for the ``loop_cpu`` setting on the calling thread (the loop's), once
    grpc.aio is in use (a server made); None when off."""
    cpu = choose_cpu(setting)
    if cpu is None:
        return None
    keeper = LoopCpu(cpu)
    return keeper if keeper.start(loop) else None
