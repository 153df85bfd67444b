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

``auto`` (the default) keeps them on the CPU the fewest other nodes of the host keep their loops on,
the one the loop's thread is on when the node starts among those; a CPU number names one; empty
turns it off. With one CPU to run on there is nothing to do. Linux only; elsewhere it is off.

The nodes of one host (brokers, HA replicas, the bench's servers) note their loops' CPUs in one
small file (:class:`Placements`, under ``/dev/shm`` by default), each line a process and its CPU,
read and rewritten under a lock; a process that is gone (killed, not stopped) no longer counts.
Placed where the kernel had started each, the three nodes of an HA group on a 2-CPU host could all
keep their loops on one CPU; placed so, the group's rate with two nodes in sync was 6-16% higher in
every round of docs/benchmarks.md ("Each node's loop on a CPU of its own").
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import fcntl
import logging
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

__all__ = (
    "POLLER_THREAD",
    "SWEEP_SECONDS",
    "LoopCpu",
    "Placements",
    "apply_loop_cpu",
    "choose_cpu",
    "default_placements",
    "parse_loop_cpu",
    "process_started",
)

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


def _stat_field(stat: Path, number: int) -> int:
    """Field ``number`` (1-based, as proc(5) counts) of a ``/proc/.../stat`` file; the fields after
    the command name, which may hold spaces and parentheses, are counted from its closing one."""
    return int(stat.read_text().rpartition(")")[2].split()[number - 3])


def current_cpu() -> int:
    """The CPU the calling thread ran on last (``/proc/thread-self/stat``, field 39)."""
    return _stat_field(Path("/proc/thread-self/stat"), 39)


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


def process_started(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot, ``/proc/PID/stat`` field 22), or None when
    there is no such process: with the pid it names one process, whatever pid is reused later."""
    try:
        return _stat_field(Path(f"/proc/{pid}/stat"), 22)
    except OSError:
        return None


def default_placements() -> Path:
    """The file the nodes of this host and user share (:class:`Placements`): in ``/dev/shm`` (memory,
    gone at reboot with the processes it names), else the temporary directory."""
    shm = Path("/dev/shm")
    where = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    return where / f"mqcloud-loop-cpus-{os.getuid()}"


class Placements:
    """The loop CPUs of the nodes of one host: a file of ``pid start cpu`` lines, read and rewritten
    under an exclusive lock (``flock``), so nodes starting together see each other's choice."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextlib.contextmanager
    def _locked(self) -> Iterator[int]:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield fd
        finally:
            os.close(fd)  # (lets go of the lock)

    @staticmethod
    def _live(fd: int) -> list[tuple[int, int, int]]:
        """The lines of processes still running; damaged lines are dropped."""
        text = os.pread(fd, 1 << 20, 0).decode(errors="replace")
        live = []
        for line in text.splitlines():
            fields = line.split()
            if len(fields) == 3 and all(f.isdigit() for f in fields):
                pid, started, cpu = map(int, fields)
                if process_started(pid) == started:
                    live.append((pid, started, cpu))
        return live

    @staticmethod
    def _write(fd: int, lines: list[tuple[int, int, int]]) -> None:
        data = "".join(f"{pid} {started} {cpu}\n" for pid, started, cpu in lines).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)

    def claim(self, allowed: set[int], preferred: int, fixed: bool = False) -> int:
        """The CPU of ``allowed`` that the fewest other nodes keep their loops on (``preferred`` when
        it is one of those, else the lowest), noted for this process; with ``fixed``, ``preferred``
        itself (a CPU the settings name), noted so that the others keep away from it."""
        me = os.getpid()
        with self._locked() as fd:
            others = [line for line in self._live(fd) if line[0] != me]
            if fixed:
                cpu = preferred
            else:
                taken = collections.Counter(line[2] for line in others)
                fewest = min(taken[c] for c in allowed)
                least = {c for c in allowed if taken[c] == fewest}
                cpu = preferred if preferred in least else min(least)
            self._write(fd, [*others, (me, process_started(me) or 0, cpu)])
        return cpu

    def release(self) -> None:
        """This process's line taken out (a node stopping)."""
        me = os.getpid()
        with self._locked() as fd:
            self._write(fd, [line for line in self._live(fd) if line[0] != me])


class LoopCpu:
    """Keeps the calling thread (the event loop's) and grpc.aio's polling thread on ``cpu``, and
    every other thread of the process on the CPUs the process had when this was made."""

    def __init__(self, cpu: int, placements: Placements | None = None) -> None:
        self.cpu = cpu
        self.placements = placements  # where this process's CPU is noted, taken out at stop()
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
        if self.placements is not None:
            with contextlib.suppress(OSError):
                self.placements.release()
            self.placements = None


def apply_loop_cpu(
    setting: str, loop: asyncio.AbstractEventLoop, placements: Path | None = None
) -> LoopCpu | None:
    """Start :class:`LoopCpu` for the ``loop_cpu`` setting on the calling thread (the loop's), once
    grpc.aio is in use (a server made); None when off. The CPU is noted in the host's
    :class:`Placements` (``placements``, default :func:`default_placements`); ``auto`` takes the
    CPU the fewest other nodes noted there. Without that file (not writable) ``auto`` is the CPU
    the loop is on."""
    cpu = choose_cpu(setting)
    if cpu is None:
        return None
    host = Placements(placements or default_placements())
    noted: Placements | None = host
    try:
        cpu = host.claim(os.sched_getaffinity(0), cpu, fixed=parse_loop_cpu(setting) != "auto")
    except OSError as exc:
        logger.info("loop_cpu: the host's placements (%s) not used: %s", host.path, exc)
        noted = None
    keeper = LoopCpu(cpu, noted)
    if keeper.start(loop):
        return keeper
    keeper.stop()
    return None
