"""Consumer groups: admission against the tenant's limits, provisioning."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from tenants.errors import AlreadyExists, QuotaExceeded
from tenants.models import ConsumerGroup, Tenant
from tenants.services.audit import Actor
from tenants.services.limits import effective_limits
from tenants.services.placement import cluster_for
from tenants.services.provisioning import ResourceKind
from tenants.services.resources import create_resource, delete_resource, lock_tenant, update_resource

__all__ = ("create_group", "delete_group", "update_group")


@transaction.atomic
def create_group(actor: Actor, tenant: Tenant, **fields: Any) -> ConsumerGroup:
    """Create a consumer group if the tenant's plan allows one more; queued for provisioning."""
    tenant = lock_tenant(tenant)
    limits = effective_limits(tenant)
    count = ConsumerGroup.objects.filter(tenant=tenant).count()
    if count >= limits["max_groups"]:
        raise QuotaExceeded(
            f"Tenant '{tenant.namespace}' already has {count} consumer groups, the most its quota allows "
            f"({limits['max_groups']}); delete a group or ask for a larger plan."
        )
    if ConsumerGroup.objects.filter(tenant=tenant, name=fields["name"]).exists():
        raise AlreadyExists(
            f"A consumer group named '{fields['name']}' exists in tenant '{tenant.namespace}'.",
            {"name": ["A consumer group with this name exists in the tenant."]},
        )
    group = ConsumerGroup(tenant=tenant, **fields)
    group.cluster = group.cluster or cluster_for(tenant)
    return create_resource(actor, group, ResourceKind.CONSUMER_GROUP)


def update_group(actor: Actor, group: ConsumerGroup, **changes: Any) -> ConsumerGroup:
    with transaction.atomic():
        lock_tenant(group.tenant)
        return update_resource(actor, group, changes, ResourceKind.CONSUMER_GROUP)


def delete_group(actor: Actor, group: ConsumerGroup) -> ConsumerGroup:
    return delete_resource(actor, group, ResourceKind.CONSUMER_GROUP)
