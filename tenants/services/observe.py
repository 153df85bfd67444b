"""Read-only data-plane views of a topic or a consumer group, gathered from the brokers that serve it:
queue statistics, connected producers and consumers, consumer lag (docs/control-plane.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tenants.constants import NAMESPACE_SEPARATOR
from tenants.models import BrokerNode, ConsumerGroup, Topic, TopicPlacement
from tenants.services.gateway_views import ClientInfo
from tenants.services.provisioning import get_gateway

__all__ = (
    "cluster_nodes",
    "group_clients",
    "group_lag",
    "group_nodes",
    "iso_ms",
    "relative",
    "topic_nodes",
    "topic_producers",
    "topic_stats",
)


def iso_ms(ms: int) -> str | None:
    """Epoch milliseconds as ISO-8601 UTC (``None`` for 0: unknown)."""
    if ms <= 0:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def relative(qualified: str) -> str:
    """``ns%name`` -> ``name`` (what tenants see)."""
    return qualified.partition(NAMESPACE_SEPARATOR)[2] or qualified


def _serving(broker_group_ids: set[int]) -> list[BrokerNode]:
    """One node per broker group: its master (lowest enabled broker id)."""
    chosen: dict[int, BrokerNode] = {}
    nodes = BrokerNode.objects.filter(enabled=True, group_id__in=broker_group_ids).select_related("group")
    for node in nodes.order_by("group_id", "broker_id"):
        chosen.setdefault(node.group_id, node)
    return sorted(chosen.values(), key=lambda n: n.group.name)


def cluster_nodes(cluster_id: int) -> list[BrokerNode]:
    """The serving node (master) of every broker group of a cluster."""
    from tenants.models import BrokerGroup

    return _serving(set(BrokerGroup.objects.filter(cluster_id=cluster_id).values_list("pk", flat=True)))


def topic_nodes(topic: Topic) -> list[BrokerNode]:
    """The nodes holding the topic's queues (one per broker group it is placed on)."""
    groups = set(TopicPlacement.objects.filter(topic=topic).values_list("broker_group_id", flat=True))
    return _serving(groups)


def group_nodes(group: ConsumerGroup) -> list[BrokerNode]:
    """The nodes a consumer group lives on (every broker group of its cluster)."""
    if group.cluster_id is None:
        return []
    from tenants.models import BrokerGroup

    return _serving(set(BrokerGroup.objects.filter(cluster_id=group.cluster_id).values_list("pk", flat=True)))


def topic_stats(topic: Topic) -> dict[str, Any]:
    """Per queue (on each broker): min/max offset and the last store time; the messages held."""
    gw = get_gateway()
    queues: list[dict[str, Any]] = []
    for node in topic_nodes(topic):
        for q in gw.topic_stats(node.endpoint, topic.qualified_name):
            queues.append(
                {
                    "broker": node.group.name,
                    "queue_id": q.queue_id,
                    "min_offset": q.min_offset,
                    "max_offset": q.max_offset,
                    "last_store_time": iso_ms(q.last_store_ms),
                }
            )
    total = sum(q["max_offset"] - q["min_offset"] for q in queues)
    return {"topic": topic.name, "queues": queues, "messages_total": total}


def _client_row(c: ClientInfo, broker: str) -> dict[str, Any]:
    return {
        "client_id": c.client_id,
        "language": c.language,
        "version": c.version,
        "address": c.address,
        "broker": broker,
        "last_seen": iso_ms(c.last_seen_ms),
    }


def topic_producers(topic: Topic) -> list[dict[str, Any]]:
    """Producers connected to the topic's brokers that publish to it."""
    gw = get_gateway()
    rows = []
    for node in topic_nodes(topic):
        for c in gw.list_clients(node.endpoint, topic.tenant.namespace):
            if c.client_type == "PRODUCER" and topic.qualified_name in c.topics:
                rows.append(_client_row(c, node.group.name))
    return rows


def group_clients(group: ConsumerGroup) -> list[dict[str, Any]]:
    """Consumers of the group connected to its brokers."""
    gw = get_gateway()
    rows = []
    for node in group_nodes(group):
        for c in gw.list_clients(node.endpoint, group.tenant.namespace, group.qualified_name):
            rows.append(_client_row(c, node.group.name))
    return rows


def group_lag(group: ConsumerGroup) -> dict[str, Any]:
    """Per topic queue: committed offset, max offset, lag in messages and ms, messages in flight."""
    gw = get_gateway()
    prefix = f"{group.tenant.namespace}{NAMESPACE_SEPARATOR}"
    queues = []
    for node in group_nodes(group):
        for q in gw.group_lag(node.endpoint, group.qualified_name):
            if not q.topic.startswith(prefix):  # retry/DLQ/system topics are not the tenant's
                continue
            queues.append(
                {
                    "topic": relative(q.topic),
                    "broker": node.group.name,
                    "queue_id": q.queue_id,
                    "committed_offset": q.committed_offset,
                    "max_offset": q.max_offset,
                    "lag": q.lag,
                    "inflight": q.inflight,
                    "lag_ms": q.lag_ms,
                }
            )
    return {"group": group.name, "total_lag": sum(q["lag"] for q in queues), "queues": queues}
