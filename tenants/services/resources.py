"""The common life cycle of provisioned rows: save desired state, audit, queue the apply."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from django.db import transaction

from tenants.choices import AuditAction, ProvisioningStatus, TenantStatus
from tenants.errors import InvalidState
from tenants.models import ProvisionedModel, Tenant
from tenants.services.audit import Actor, record_event, snapshot
from tenants.services.provisioning import ResourceKind, enqueue_provision

__all__ = ("create_resource", "delete_resource", "lock_tenant", "update_resource")

M = TypeVar("M", bound=ProvisionedModel)


def lock_tenant(tenant: Tenant) -> Tenant:
    """Lock the tenant row for the transaction (serialises admission checks); refuse suspended tenants."""
    locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
    if locked.status == TenantStatus.SUSPENDED:
        raise InvalidState(f"Tenant '{locked.namespace}' is suspended; its resources cannot change.")
    return locked


def create_resource(actor: Actor, obj: M, kind: ResourceKind) -> M:
    """Insert the row as ``provisioning``, audit it and queue the apply (caller holds the transaction)."""
    obj.status = ProvisioningStatus.PROVISIONING
    obj.save()
    record_event(actor, AuditAction.CREATE, obj, after=snapshot(obj))
    enqueue_provision(kind, obj.pk)
    return obj


@transaction.atomic
def update_resource(
    actor: Actor,
    obj: M,
    changes: Mapping[str, Any],
    kind: ResourceKind,
    action: AuditAction = AuditAction.UPDATE,
) -> M:
    """Change desired state: bump the generation, back to ``provisioning``, audit, queue the apply."""
    locked = type(obj)._default_manager.select_for_update().get(pk=obj.pk)
    if locked.status == ProvisioningStatus.DELETING:
        raise InvalidState(f"{obj._meta.verbose_name} '{obj}' is being deleted.")
    before = snapshot(obj)
    for name, value in changes.items():
        setattr(obj, name, value)
    obj.generation = locked.generation + 1
    obj.status = ProvisioningStatus.PROVISIONING
    obj.status_message = ""
    obj.save()
    record_event(actor, action, obj, before=before, after=snapshot(obj))
    enqueue_provision(kind, obj.pk)
    return obj


@transaction.atomic
def delete_resource(actor: Actor, obj: M, kind: ResourceKind) -> M:
    """Mark the row ``deleting`` and queue its removal from brokers; the row goes once they confirm."""
    locked = type(obj)._default_manager.select_for_update().get(pk=obj.pk)
    if locked.status == ProvisioningStatus.DELETING:
        return obj  # already on its way out: idempotent
    before = snapshot(obj)
    obj.generation = locked.generation + 1
    obj.status = ProvisioningStatus.DELETING
    obj.save(update_fields=("generation", "status", "updated"))
    record_event(actor, AuditAction.DELETE, obj, before=before, after=snapshot(obj))
    enqueue_provision(kind, obj.pk)
    return obj
