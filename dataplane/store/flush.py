"""Flushing the CommitLog: group commit for SYNC_FLUSH, a periodic flusher for ASYNC_FLUSH.

Both run on their own daemon thread and call ``flush()``, which fsyncs every written byte and returns
the flushed offset (RocketMQ ``GroupCommitService`` / ``FlushRealTimeService``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ("FlushManager", "FlushRealTimeService", "GroupCommitService")

logger = logging.getLogger(__name__)

# Blocked threads (``wait_flushed``) are woken all at once and append one by one, each fighting for
# the GIL; when several waited last round, the flusher waits in GATHER_STEP_S steps while their
# requests keep arriving, at most GATHER_MAX_S, so one fsync covers them. Asyncio writers never need
# this: the store appends a loop's writers as one batch before its request.
GATHER_STEP_S = 0.0002
GATHER_MAX_S = 0.002


class FlushManager(Protocol):
    """What the store needs from a flush policy."""

    def start(self) -> None: ...

    def shutdown(self) -> None: ...

    def wake_up(self, written_offset: int) -> None: ...

    def wait_flushed(self, offset: int, timeout_s: float) -> bool: ...

    def flushed_future(
        self, offset: int, loop: asyncio.AbstractEventLoop, timeout_s: float
    ) -> asyncio.Future[bool]: ...

    def reset(self, offset: int) -> None: ...


class _LoopGroup:
    """Asyncio writers of one event loop waiting for the same fsync: one timeout timer for all.

    Every put on the loop appends and then joins the loop's open group, raising ``offset`` to its own
    end; the flusher closes the group before its fsync, so that fsync covers every member. Each
    member keeps its own future, so cancelling one caller never touches the others.
    """

    __slots__ = ("futures", "loop", "offset", "resolved", "timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, offset: int, timeout_s: float):
        self.loop = loop
        self.offset = offset
        self.futures: list[asyncio.Future[bool]] = []
        self.resolved = False  # set on the loop's thread; a resolved group takes no new members
        # FLUSH_DISK_TIMEOUT for the whole group, counted from its first member
        self.timer = loop.call_later(timeout_s, self.resolve, False)

    def resolve(self, value: bool) -> None:
        """On the group's loop: resolve every member still waiting."""
        self.resolved = True
        self.timer.cancel()
        for future in self.futures:
            if not future.done():
                future.set_result(value)


def _resolve_groups(groups: list[_LoopGroup], value: bool) -> None:
    for group in groups:
        group.resolve(value)


def _wake_loops(groups: list[_LoopGroup], value: bool) -> None:
    """One ``call_soon_threadsafe`` per event loop (one self-pipe write), not one per writer."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_LoopGroup]] = {}
    for group in groups:
        by_loop.setdefault(group.loop, []).append(group)
    for loop, loop_groups in by_loop.items():
        try:
            loop.call_soon_threadsafe(_resolve_groups, loop_groups, value)
        except RuntimeError:  # loop closed: nobody is waiting any more
            pass


class GroupCommitService:
    """SYNC_FLUSH: writers wait until their offset is fsynced; one fsync covers every waiter.

    RocketMQ's GroupCommitService: requests queue up while an fsync runs and the next fsync covers
    all of them, so appends overlap the fsync. Asyncio waiters of one loop form a group with one
    timeout timer (:class:`_LoopGroup`); only blocked threads get a short gathering wait.

    Guarantees: ``wait_flushed(o)`` returns True, and a future from :meth:`flushed_future` resolves
    True, only after every byte below ``o`` was fsynced (``flushed_offset >= o``); futures are
    resolved on their own loop via ``call_soon_threadsafe``.
    """

    def __init__(self, flush: Callable[[], int], initial_flushed: int):
        self._flush = flush
        # two conditions on one lock: writers wake only the flusher, the flusher wakes the writers
        lock = threading.Lock()
        self._cv = threading.Condition(lock)
        self._flusher_cv = threading.Condition(lock)
        self._flushed = initial_flushed
        self._requested = initial_flushed
        # groups still taking members, by loop; and closed groups waiting for an fsync to cover them
        self._open: dict[asyncio.AbstractEventLoop, _LoopGroup] = {}
        self._closed: list[_LoopGroup] = []
        self._running = False
        self._thread: threading.Thread | None = None
        self._blocked = 0  # threads inside wait_flushed
        self.fsync_count = 0

    @property
    def flushed_offset(self) -> int:
        return self._flushed

    def reset(self, offset: int) -> None:
        """The log was truncated to ``offset``: nothing beyond it counts as flushed."""
        with self._cv:
            self._flushed = min(self._flushed, offset)
            self._requested = min(self._requested, offset)

    def start(self) -> None:
        self._running = True
        self._thread = threading.Thread(target=self._run, name="GroupCommitService", daemon=True)
        self._thread.start()

    def wake_up(self, written_offset: int) -> None:
        with self._cv:
            if written_offset > self._requested:
                self._requested = written_offset
                self._flusher_cv.notify()

    def wait_flushed(self, offset: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with self._cv:
            if offset > self._requested:
                self._requested = offset
                self._flusher_cv.notify()
            self._blocked += 1
            try:
                while self._flushed < offset:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not self._running:
                        return self._flushed >= offset
                    self._cv.wait(remaining)
                return True
            finally:
                self._blocked -= 1

    def flushed_future(
        self, offset: int, loop: asyncio.AbstractEventLoop, timeout_s: float
    ) -> asyncio.Future[bool]:
        """A future that resolves True once ``offset`` is fsynced, False on timeout or shutdown.

        Call on ``loop``'s thread after the append that ends at ``offset`` returned; writers of one
        loop between two fsyncs get the same future.
        """
        with self._cv:
            if self._flushed >= offset:
                future: asyncio.Future[bool] = loop.create_future()
                future.set_result(True)
                return future
            if not self._running:
                future = loop.create_future()
                future.set_result(False)
                return future
            group = self._open.get(loop)
            if group is None or group.resolved:
                group = self._open[loop] = _LoopGroup(loop, offset, timeout_s)
            elif offset > group.offset:
                group.offset = offset
            future = loop.create_future()
            group.futures.append(future)
            if offset > self._requested:
                self._requested = offset
                self._flusher_cv.notify()
            return future

    def _gather(self) -> None:
        """Several threads waited last round: let the rest of them append first (lock held)."""
        deadline = time.monotonic() + GATHER_MAX_S
        seen = self._requested
        while self._running and time.monotonic() < deadline:
            self._flusher_cv.wait(GATHER_STEP_S)
            if self._requested == seen:
                return
            seen = self._requested

    def _run(self) -> None:
        threads_last_round = 0
        while True:
            with self._cv:
                while self._running and self._requested <= self._flushed:
                    self._flusher_cv.wait(1.0)
                if not self._running and self._requested <= self._flushed:
                    break
                if threads_last_round > 1:
                    self._gather()
                # close the open groups: every member appended before this point, so the fsync
                # below (which covers all bytes written when it starts) covers them
                if self._open:
                    self._closed.extend(self._open.values())
                    self._open = {}
            try:
                flushed = self._flush()
                self.fsync_count += 1
            except OSError:
                logger.exception("group commit fsync failed")
                time.sleep(0.01)
                continue
            with self._cv:
                self._flushed = max(self._flushed, flushed)
                threads_last_round = self._blocked
                # open groups too: the fsync may have covered writers that joined while it ran
                waiting = self._closed + list(self._open.values()) if self._open else self._closed
                ready = [g for g in waiting if g.offset <= self._flushed]
                if len(ready) != len(waiting):
                    self._closed = [g for g in self._closed if g.offset > self._flushed]
                    self._open = {g.loop: g for g in self._open.values() if g.offset > self._flushed}
                else:
                    self._closed, self._open = [], {}
                self._cv.notify_all()
            if ready:
                _wake_loops(ready, True)

    def shutdown(self) -> None:
        with self._cv:
            self._running = False
            self._cv.notify_all()
            self._flusher_cv.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._cv:
            groups = self._closed + list(self._open.values())
            self._closed, self._open = [], {}
        _wake_loops(groups, False)


class FlushRealTimeService:
    """ASYNC_FLUSH: fsync every ``interval_ms``, or sooner once ``least_bytes`` are unflushed.

    Guarantees: nothing to callers beyond "soon"; ``wait_flushed`` only reports the current state.
    """

    def __init__(self, flush: Callable[[], int], initial_flushed: int, interval_ms: int, least_bytes: int):
        self._flush = flush
        self._flushed = initial_flushed
        self._interval = interval_ms / 1000
        self._least_bytes = least_bytes
        self._event = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def flushed_offset(self) -> int:
        return self._flushed

    def reset(self, offset: int) -> None:
        self._flushed = min(self._flushed, offset)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="FlushRealTimeService", daemon=True)
        self._thread.start()

    def wake_up(self, written_offset: int) -> None:
        if written_offset - self._flushed >= self._least_bytes and not self._event.is_set():
            self._event.set()

    def wait_flushed(self, offset: int, timeout_s: float) -> bool:
        return self._flushed >= offset

    def flushed_future(
        self, offset: int, loop: asyncio.AbstractEventLoop, timeout_s: float
    ) -> asyncio.Future[bool]:
        future: asyncio.Future[bool] = loop.create_future()
        future.set_result(True)
        return future

    def _run(self) -> None:
        while not self._stop.is_set():
            self._event.wait(self._interval)
            self._event.clear()
            try:
                self._flushed = self._flush()
            except OSError:
                logger.exception("periodic flush failed")

    def shutdown(self) -> None:
        self._stop.set()
        self._event.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._flushed = self._flush()
