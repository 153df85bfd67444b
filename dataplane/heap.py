"""The process heap and Python's cyclic garbage collector: start-up objects frozen, pauses measured.

A full (generation 2) collection walks every tracked container object, and the event loop, with every
call in flight, waits for it. A broker carries about 60,000 such objects from start-up (modules,
protobuf descriptors, settings, the store's tables), alive for the whole life of the process, so under
load each full collection stalled it for tens of milliseconds, several times a minute
(docs/benchmarks.md, "Garbage-collector pauses").
:func:`freeze_startup_heap` moves them into the permanent generation the collector never walks;
whatever the process allocates later is collected as before. Objects freed by reference counting
(nearly all) are freed as before too: only a cycle made of frozen objects alone would never be
reclaimed, and start-up objects live as long as the process.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from prometheus_client import Gauge, Histogram

__all__ = ("FROZEN_OBJECTS", "GC_PAUSE", "freeze_startup_heap", "watch_gc_pauses")

GC_PAUSE = Histogram(
    "mq_gc_pause_seconds",
    "Pauses of Python's cyclic garbage collector (the event loop waits for each)",
    ["generation"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
)
FROZEN_OBJECTS = Gauge("mq_gc_frozen_objects", "Start-up objects kept out of the collector's walks")


class _PauseTimer:
    """A ``gc.callbacks`` entry: times each collection into :data:`GC_PAUSE`."""

    def __init__(self) -> None:
        self._started = 0.0
        self._by_generation = [GC_PAUSE.labels(str(g)) for g in range(3)]

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self._by_generation[info["generation"]].observe(time.perf_counter() - self._started)


_timer: _PauseTimer | None = None


def watch_gc_pauses() -> None:
    """Time every collection of this process into ``mq_gc_pause_seconds`` (idempotent)."""
    global _timer
    if _timer is None:
        _timer = _PauseTimer()
        gc.callbacks.append(_timer)


def freeze_startup_heap() -> int:
    """Collect once, then freeze every object alive now; returns how many are frozen.

    Call when start-up is over (the server listens), not before: what is created later and dies
    later must stay collectable.
    """
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    FROZEN_OBJECTS.set(frozen)
    return frozen
