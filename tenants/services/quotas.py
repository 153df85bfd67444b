"""Quota overrides: create/change/delete with provisioning; plans' changes re-push every tenant."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from tenants.errors import AlreadyExists, ControlPlaneError
from tenants.models import ConsumerGroup, Quota, Tenant, Topic
from tenants.services.audit import Actor
from tenants.services.provisioning import ResourceKind
from tenants.services.resources import create_resource, delete_resource, lock_tenant, update_resource

__all__ = ("create_quota", "delete_quota", "update_quota")


def _check_scope(tenant: Tenant, topic: Topic | None, group: ConsumerGroup | None) -> None:
    if topic is not None and group is not None:
        raise ControlPlaneError(
            "A quota overrides a topic or a group, not both.", {"group": ["Leave empty."]}
        )
    if topic is not None and topic.tenant_id != tenant.pk:
        raise ControlPlaneError("The topic belongs to another tenant.", {"topic": ["Not in this tenant."]})
    if group is not None and group.tenant_id != tenant.pk:
        raise ControlPlaneError("The group belongs to another tenant.", {"group": ["Not in this tenant."]})


@transaction.atomic
def create_quota(actor: Actor, tenant: Tenant, **fields: Any) -> Quota:
    """One override per tenant, topic or group; limits left empty inherit from the plan."""
    tenant = lock_tenant(tenant)
    topic, group = fields.get("topic"), fields.get("group")
    _check_scope(tenant, topic, group)
    clash = Quota.objects.filter(tenant=tenant, topic=topic, group=group)
    if clash.exists():
        raise AlreadyExists(
            "This scope already has a quota; change it instead.", {"non_field_errors": ["Exists."]}
        )
    return create_resource(actor, Quota(tenant=tenant, **fields), ResourceKind.QUOTA)


def update_quota(actor: Actor, quota: Quota, **changes: Any) -> Quota:
    changes.pop("topic", None)
    changes.pop("group", None)
    with transaction.atomic():
        lock_tenant(quota.tenant)
        return update_resource(actor, quota, changes, ResourceKind.QUOTA)


def delete_quota(actor: Actor, quota: Quota) -> Quota:
    return delete_resource(actor, quota, ResourceKind.QUOTA)
