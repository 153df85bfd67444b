"""Prometheus metrics of one broker node (served by ``prometheus_client`` on metrics_listen)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from prometheus_client import REGISTRY, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from dataplane.loop_metrics import CounterChild, LoopCounter, LoopHistogram

__all__ = (
    "BYTES_IN",
    "BYTES_OUT",
    "MESSAGES_IN",
    "MESSAGES_OUT",
    "RECEIVE_WRITE",
    "REPLICA_READ_FALLBACKS",
    "REPLICA_READ_MESSAGES",
    "RPC_LATENCY",
    "TRACE_EVENTS_DROPPED",
    "TRAFFIC_IN",
    "TRAFFIC_OUT",
    "HACollector",
    "TopicTraffic",
    "watch_ha",
)

# updated per RPC on the event loop's thread: lock-free (dataplane/loop_metrics.py)
MESSAGES_IN = LoopCounter("mq_broker_messages_in", "Messages stored", ["topic"])
BYTES_IN = LoopCounter("mq_broker_bytes_in", "Body bytes stored", ["topic"])
MESSAGES_OUT = LoopCounter("mq_broker_messages_out", "Messages delivered", ["topic"])
BYTES_OUT = LoopCounter("mq_broker_bytes_out", "Body bytes delivered", ["topic"])
RPC_LATENCY = LoopHistogram("mq_broker_rpc_seconds", "RPC handling time", ["method"])
# A receive's delivery: from its messages taken to its stream's last response handed to gRPC, which
# takes one response at a time, each after a round trip through the event loop: how long it takes
# says how busy the loop is, and it is most of a message's end-to-end time under load.
RECEIVE_WRITE = LoopHistogram(
    "mq_broker_receive_write_seconds",
    "ReceiveMessage: from the messages taken to the last response handed to gRPC",
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0),
)
# Pulls far behind answered with records read from a replica (docs/ha.md), and the tries that fell
# back to this node's own disk.
REPLICA_READ_MESSAGES = Counter("mq_broker_replica_read_messages", "Messages read from a replica")
REPLICA_READ_FALLBACKS = Counter("mq_broker_replica_read_fallbacks", "Replica reads that fell back")
# Trace events lost: past the tracer's bound, or refused by the store (dataplane/trace.py).
TRACE_EVENTS_DROPPED = Counter("mq_broker_trace_events_dropped", "Trace events dropped, not stored")


class TopicTraffic:
    """Messages and bytes per topic (event loop thread only), with the labelled children cached."""

    def __init__(self, messages: LoopCounter, size: LoopCounter) -> None:
        self._messages = messages
        self._bytes = size
        self._children: dict[str, tuple[CounterChild, CounterChild]] = {}

    def add(self, topic: str, count: int, size: int) -> None:
        pair = self._children.get(topic)
        if pair is None:
            pair = self._children[topic] = (self._messages.labels(topic), self._bytes.labels(topic))
        pair[0].value += count  # counts and sizes are never negative: no inc() check needed
        pair[1].value += size


TRAFFIC_IN = TopicTraffic(MESSAGES_IN, BYTES_IN)
TRAFFIC_OUT = TopicTraffic(MESSAGES_OUT, BYTES_OUT)


#
# Replication health (HA, docs/ha.md): read from the HA node at scrape time, so a replica that
# disconnected disappears from the series instead of keeping its last value.
#


class HACollector(Collector):
    """Role and epoch of this node; on a master, per replica: lag in bytes, confirmed offset, in sync."""

    def __init__(self) -> None:
        self.node: Any = None  # dataplane.ha.HANode
        self.registered = False

    def collect(self) -> Iterator[Metric]:
        node = self.node
        if node is None:
            return
        status = node.status()
        group, name = status["group"], status["node"]
        labels = ["group", "node"]
        epoch = GaugeMetricFamily("mq_ha_epoch", "Last epoch in this node's epoch file", labels=labels)
        epoch.add_metric([group, name], status["epoch"])
        master = GaugeMetricFamily("mq_ha_master", "1 while this node is a writable master", labels=labels)
        master.add_metric([group, name], 1 if status["role"] == "MASTER" and status["writable"] else 0)
        offset = GaugeMetricFamily("mq_ha_max_offset_bytes", "CommitLog max offset", labels=labels)
        offset.add_metric([group, name], status["max_offset"])
        failures = GaugeMetricFamily(
            "mq_ha_auth_failures", "Replication peers refused for failing authentication", labels=labels
        )
        failures.add_metric([group, name], node.service.auth_failures)
        per_replica = ["group", "node", "replica"]
        lag = GaugeMetricFamily(
            "mq_ha_replica_lag_bytes",
            "Master max offset minus the replica's confirmed offset",
            labels=per_replica,
        )
        in_sync = GaugeMetricFamily(
            "mq_ha_replica_in_sync",
            "1 when the replica's confirmations count for SEND_OK",
            labels=per_replica,
        )
        confirmed = GaugeMetricFamily(
            "mq_ha_replica_confirmed_offset_bytes", "Replica's confirmed CommitLog offset", labels=per_replica
        )
        lag_p99 = GaugeMetricFamily(
            "mq_ha_replica_lag_p99_seconds", "p99 send-to-confirm time of DATA frames", labels=per_replica
        )
        for replica in status["replicas"]:
            key = [group, name, replica["node"]]
            lag.add_metric(key, replica["lag_bytes"])
            lag_p99.add_metric(key, replica["lag_p99_ms"] / 1000)
            in_sync.add_metric(key, 1 if replica["in_sync"] else 0)
            confirmed.add_metric(key, replica["confirmed_offset"])
        yield from (epoch, master, offset, failures, lag, in_sync, confirmed, lag_p99)


_HA_COLLECTOR = HACollector()
_ha_registered = threading.Lock()


def watch_ha(node: Any) -> None:
    """Expose ``node``'s replication health (one HA node per process; the latest call wins)."""
    with _ha_registered:
        if not _HA_COLLECTOR.registered:
            REGISTRY.register(_HA_COLLECTOR)
            _HA_COLLECTOR.registered = True
        _HA_COLLECTOR.node = node
