"""Latency-based fault avoidance, modelled on RocketMQ's ``LatencyFaultToleranceImpl``.

After each send the producer reports the endpoint and how long the call took (or that it failed).
A slow or failed endpoint is put out of service for a while that grows with its latency; the queue
selector then prefers queues on endpoints that are in service and, on a retry, on a different broker
than the one that just failed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

__all__ = ("LatencyFaultTolerance", "select_queue")

# (latency at least, ms) -> out of service for (ms); RocketMQ's defaults.
LATENCY_MAX_MS = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_MS = (0, 0, 30000, 60000, 120000, 180000, 600000)
FAILURE_ISOLATION_MS = 30000

Q = TypeVar("Q")


@dataclass
class _Item:
    endpoint: str
    latency_ms: float
    start_timestamp: float  # monotonic seconds when it is back in service


class LatencyFaultTolerance:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._items: dict[str, _Item] = {}
        self._lock = threading.Lock()
        self._clock = clock

    @staticmethod
    def isolation_ms(latency_ms: float) -> int:
        for i in range(len(LATENCY_MAX_MS) - 1, -1, -1):
            if latency_ms >= LATENCY_MAX_MS[i]:
                return NOT_AVAILABLE_MS[i]
        return 0

    def update(self, endpoint: str, latency_ms: float, failed: bool = False) -> None:
        """Record one call. A failure isolates the endpoint for ``FAILURE_ISOLATION_MS``."""
        pause = FAILURE_ISOLATION_MS if failed else self.isolation_ms(latency_ms)
        with self._lock:
            self._items[endpoint] = _Item(endpoint, latency_ms, self._clock() + pause / 1000)

    def is_available(self, endpoint: str) -> bool:
        with self._lock:
            item = self._items.get(endpoint)
        return item is None or self._clock() >= item.start_timestamp

    def best_endpoint(self, endpoints: Sequence[str]) -> str | None:
        """Among unavailable endpoints, the one that returns to service first (lowest latency next)."""
        with self._lock:
            known = [self._items[e] for e in endpoints if e in self._items]
        if not known:
            return endpoints[0] if endpoints else None
        known.sort(key=lambda i: (i.start_timestamp, i.latency_ms))
        return known[0].endpoint


def select_queue(
    queues: Sequence[Q],
    start: int,
    endpoint_of: Callable[[Q], str],
    broker_of: Callable[[Q], str],
    fault: LatencyFaultTolerance,
    avoid_broker: str | None = None,
) -> Q:
    """Pick a queue round-robin from ``start``, preferring (1) an available endpoint on a broker other
    than ``avoid_broker``, (2) any available endpoint, (3) the endpoint expected back soonest."""
    if not queues:
        raise ValueError("no queues")
    n = len(queues)
    ordered = [queues[(start + i) % n] for i in range(n)]
    for q in ordered:
        if fault.is_available(endpoint_of(q)) and broker_of(q) != avoid_broker:
            return q
    for q in ordered:
        if fault.is_available(endpoint_of(q)):
            return q
    if avoid_broker is not None:
        for q in ordered:
            if broker_of(q) != avoid_broker:
                return q
    best = fault.best_endpoint([endpoint_of(q) for q in ordered])
    for q in ordered:
        if endpoint_of(q) == best:
            return q
    return ordered[0]
