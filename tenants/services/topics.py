"""Topics: admission against the tenant's limits, placement, provisioning."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from tenants.errors import AlreadyExists, QuotaExceeded
from tenants.models import Tenant, Topic
from tenants.services.audit import Actor
from tenants.services.limits import effective_limits
from tenants.services.placement import cluster_for, place_topic
from tenants.services.provisioning import ResourceKind
from tenants.services.resources import create_resource, delete_resource, lock_tenant, update_resource

__all__ = ("check_message_size", "create_topic", "delete_topic", "update_topic")


def check_message_size(tenant: Tenant, max_message_bytes: int, limits: dict[str, int] | None = None) -> None:
    limits = limits if limits is not None else effective_limits(tenant)
    allowed = limits["max_message_bytes"]
    if max_message_bytes > allowed:
        raise QuotaExceeded(
            f"max_message_bytes {max_message_bytes} exceeds the tenant's limit of {allowed} bytes.",
            {"max_message_bytes": [f"Ensure this value is at most {allowed}."]},
        )


@transaction.atomic
def create_topic(actor: Actor, tenant: Tenant, **fields: Any) -> Topic:
    """Create a topic if the tenant's plan allows one more; it is placed and queued for provisioning."""
    tenant = lock_tenant(tenant)
    limits = effective_limits(tenant)
    count = Topic.objects.filter(tenant=tenant).count()
    if count >= limits["max_topics"]:
        raise QuotaExceeded(
            f"Tenant '{tenant.namespace}' already has {count} topics, the most its quota allows "
            f"({limits['max_topics']}); delete a topic or ask for a larger plan."
        )
    if Topic.objects.filter(tenant=tenant, name=fields["name"]).exists():
        raise AlreadyExists(
            f"A topic named '{fields['name']}' exists in tenant '{tenant.namespace}'.",
            {"name": ["A topic with this name exists in the tenant."]},
        )
    topic = Topic(tenant=tenant, **fields)
    check_message_size(tenant, topic.max_message_bytes, limits)
    topic.cluster = topic.cluster or cluster_for(tenant)
    create_resource(actor, topic, ResourceKind.TOPIC)
    place_topic(topic)
    return topic


def update_topic(actor: Actor, topic: Topic, **changes: Any) -> Topic:
    """Change a topic; a new queue count re-spreads its queues over the cluster's groups."""
    if "max_message_bytes" in changes:
        check_message_size(topic.tenant, changes["max_message_bytes"])
    with transaction.atomic():
        lock_tenant(topic.tenant)
        update_resource(actor, topic, changes, ResourceKind.TOPIC)
        if "queue_count" in changes:
            place_topic(topic)
    return topic


def delete_topic(actor: Actor, topic: Topic) -> Topic:
    return delete_resource(actor, topic, ResourceKind.TOPIC)
