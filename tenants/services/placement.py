"""Where things live: which cluster serves a tenant, and how a topic's queues spread over groups."""

from __future__ import annotations

from django.db.models import Sum

from tenants.models import BrokerCluster, BrokerGroup, Tenant, Topic, TopicPlacement

__all__ = ("cluster_for", "place_topic", "spread_queues")


def cluster_for(tenant: Tenant) -> BrokerCluster | None:
    """The tenant's own cluster, else the default one, else the only one; None when none fits."""
    if tenant.cluster_id is not None:
        return tenant.cluster
    default = BrokerCluster.objects.filter(is_default=True).first()
    if default is not None:
        return default
    clusters = list(BrokerCluster.objects.all()[:2])
    return clusters[0] if len(clusters) == 1 else None


def spread_queues(queue_count: int, group_ids: list[int]) -> dict[int, int]:
    """Spread queues round-robin over groups given in order of preference (least loaded first).

    8 queues over 3 groups give 3, 3, 2; 2 queues over 3 groups give 1, 1 (the third gets none).
    """
    if not group_ids:
        return {}
    base, extra = divmod(queue_count, len(group_ids))
    spread = {gid: base + (1 if i < extra else 0) for i, gid in enumerate(group_ids)}
    return {gid: n for gid, n in spread.items() if n > 0}


def place_topic(topic: Topic) -> bool:
    """(Re)compute the topic's placement over its cluster's groups; False when there is no group.

    Groups already holding the topic are preferred, then the least loaded, so a queue-count change
    moves as little as possible.
    """
    if topic.cluster_id is None:
        topic.cluster = cluster_for(topic.tenant)
        if topic.cluster is None:
            return False
        Topic.objects.filter(pk=topic.pk).update(cluster=topic.cluster)
    groups = list(
        BrokerGroup.objects.filter(cluster_id=topic.cluster_id).annotate(load=Sum("placements__queue_count"))
    )
    if not groups:
        return False
    current = dict(TopicPlacement.objects.filter(topic=topic).values_list("broker_group_id", "queue_count"))
    if sum(current.values()) == topic.queue_count and all(g in {x.pk for x in groups} for g in current):
        return True
    groups.sort(key=lambda g: (g.pk not in current, (g.load or 0) - current.get(g.pk, 0), g.name))
    spread = spread_queues(topic.queue_count, [g.pk for g in groups])
    TopicPlacement.objects.filter(topic=topic).exclude(broker_group_id__in=spread).delete()
    for group_id, count in spread.items():
        TopicPlacement.objects.update_or_create(
            topic=topic, broker_group_id=group_id, defaults={"queue_count": count}
        )
    return True
