"""Prometheus metrics of one broker node (served by ``prometheus_client`` on metrics_listen)."""

from __future__ import annotations

from typing import Any

from prometheus_client import Counter, Histogram

__all__ = (
    "BYTES_IN",
    "BYTES_OUT",
    "MESSAGES_IN",
    "MESSAGES_OUT",
    "RPC_LATENCY",
    "TRAFFIC_IN",
    "TRAFFIC_OUT",
    "TopicTraffic",
)

MESSAGES_IN = Counter("mq_broker_messages_in", "Messages stored", ["topic"])
BYTES_IN = Counter("mq_broker_bytes_in", "Body bytes stored", ["topic"])
MESSAGES_OUT = Counter("mq_broker_messages_out", "Messages delivered", ["topic"])
BYTES_OUT = Counter("mq_broker_bytes_out", "Body bytes delivered", ["topic"])
RPC_LATENCY = Histogram("mq_broker_rpc_seconds", "RPC handling time", ["method"])


class TopicTraffic:
    """Messages and bytes per topic with the labelled children cached (``labels()`` is not cheap)."""

    def __init__(self, messages: Counter, size: Counter) -> None:
        self._messages = messages
        self._bytes = size
        self._children: dict[str, tuple[Any, Any]] = {}

    def add(self, topic: str, count: int, size: int) -> None:
        pair = self._children.get(topic)
        if pair is None:
            pair = self._children[topic] = (self._messages.labels(topic), self._bytes.labels(topic))
        pair[0].inc(count)
        pair[1].inc(size)


TRAFFIC_IN = TopicTraffic(MESSAGES_IN, BYTES_IN)
TRAFFIC_OUT = TopicTraffic(MESSAGES_OUT, BYTES_OUT)
