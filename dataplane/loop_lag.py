"""How late the broker's event loop runs: every call in flight waits as long as the loop is late.

The node's work runs on one event loop, so anything that holds it (a long callback, a collection of
the garbage collector, a thread holding the GIL) delays every call at once. :class:`LoopLagProbe`
asks the loop to wake it every ``interval`` and records how late each wake-up came in
``mq_event_loop_lag_seconds``; the garbage collector's share is in ``mq_gc_pause_seconds``
(dataplane/heap.py). A stall of :data:`STALL_S` or more is logged, once per stall.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from prometheus_client import Histogram

__all__ = ("LOOP_LAG", "STALL_S", "LoopLagProbe")

logger = logging.getLogger(__name__)

LOOP_LAG = Histogram(
    "mq_event_loop_lag_seconds",
    "How late the broker's event loop ran a timer that was due (every call in flight waited as long)",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0),
)
STALL_S = 0.5


class LoopLagProbe:
    """A task on the running loop that measures its lag every ``interval`` seconds."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="loop-lag-probe")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        interval, observe = self.interval, LOOP_LAG.observe
        while True:
            due = loop.time() + interval
            await asyncio.sleep(interval)
            lag = max(loop.time() - due, 0.0)
            observe(lag)
            if lag >= STALL_S:
                logger.warning("event loop stalled for %.0f ms: every call in flight waited", lag * 1000)
