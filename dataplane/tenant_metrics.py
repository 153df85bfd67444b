"""Prometheus metrics per tenant, topic and group (the per-topic broker totals stay in ``metrics``).

Counters and histograms are updated on the data path with their labelled children cached (those of
every call lock-free, ``dataplane.loop_metrics``: the guard runs on the event loop's thread); gauges
(lag, connected clients, store health) are computed when Prometheus scrapes, by a collector.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import REGISTRY, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from dataplane.loop_metrics import LoopCounter, LoopHistogram

__all__ = ("TenantMetrics",)

logger = logging.getLogger(__name__)

_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

MESSAGES_IN = LoopCounter("mq_tenant_messages_in", "Messages accepted", ["tenant", "topic"])
BYTES_IN = LoopCounter("mq_tenant_bytes_in", "Body bytes accepted", ["tenant", "topic"])
MESSAGES_OUT = LoopCounter("mq_tenant_messages_out", "Messages delivered", ["tenant", "topic", "group"])
BYTES_OUT = LoopCounter("mq_tenant_bytes_out", "Body bytes delivered", ["tenant", "topic", "group"])
SEND_LATENCY = LoopHistogram(
    "mq_tenant_send_seconds", "SendMessage handling time", ["tenant"], buckets=_LATENCY_BUCKETS
)
RECEIVE_LATENCY = LoopHistogram(
    "mq_tenant_receive_seconds",
    "ReceiveMessage/PullMessage handling time of calls that delivered messages",
    ["tenant"],
    buckets=_LATENCY_BUCKETS,
)
THROTTLED = Counter("mq_tenant_throttled", "Requests refused by a quota", ["tenant", "kind"])
REFUSED = Counter("mq_broker_auth_refused", "Requests refused by authentication/authorization", ["code"])


class _Gauges(Collector):
    def __init__(self) -> None:
        self.sources: list[Callable[[], Iterator[GaugeMetricFamily]]] = []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for source in list(self.sources):
            try:
                yield from source()
            except Exception:
                logger.exception("metrics source failed")


_GAUGES = _Gauges()
REGISTRY.register(_GAUGES)


class TenantMetrics:
    """Cached labelled children; one per broker process."""

    def __init__(self) -> None:
        self._in: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._out: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self._send: dict[str, Any] = {}
        self._receive: dict[str, Any] = {}

    def messages_in(self, tenant: str, topic: str, count: int, size: int) -> None:
        pair = self._in.get((tenant, topic))
        if pair is None:
            pair = self._in[(tenant, topic)] = (
                MESSAGES_IN.labels(tenant, topic),
                BYTES_IN.labels(tenant, topic),
            )
        pair[0].inc(count)
        pair[1].inc(size)

    def messages_out(self, tenant: str, topic: str, group: str, count: int, size: int) -> None:
        key = (tenant, topic, group)
        pair = self._out.get(key)
        if pair is None:
            pair = self._out[key] = (MESSAGES_OUT.labels(*key), BYTES_OUT.labels(*key))
        pair[0].inc(count)
        pair[1].inc(size)

    def send_latency(self, tenant: str, seconds: float) -> None:
        child = self._send.get(tenant)
        if child is None:
            child = self._send[tenant] = SEND_LATENCY.labels(tenant)
        child.observe(seconds)

    def receive_latency(self, tenant: str, seconds: float) -> None:
        child = self._receive.get(tenant)
        if child is None:
            child = self._receive[tenant] = RECEIVE_LATENCY.labels(tenant)
        child.observe(seconds)

    def throttled(self, tenant: str, kind: str) -> None:
        THROTTLED.labels(tenant, kind).inc()

    def refused(self, code: int) -> None:
        REFUSED.labels(str(code)).inc()

    def add_gauges(self, source: Callable[[], Iterator[GaugeMetricFamily]]) -> None:
        _GAUGES.sources.append(source)

    def remove_gauges(self, source: Callable[[], Iterator[GaugeMetricFamily]]) -> None:
        if source in _GAUGES.sources:
            _GAUGES.sources.remove(source)
