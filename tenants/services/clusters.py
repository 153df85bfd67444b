"""The broker registry; a newly registered or re-enabled node is reconciled at once."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from tenants.models import BrokerCluster, BrokerGroup, BrokerNode
from tenants.services.audit import Actor, create_audited, delete_audited, update_audited

__all__ = ("create_registry_object", "delete_registry_object", "update_registry_object")

RegistryObject = BrokerCluster | BrokerGroup | BrokerNode


def _reconcile_soon(obj: RegistryObject) -> None:
    if isinstance(obj, BrokerNode) and obj.enabled:
        from tenants.tasks import reconcile_node_task

        node_id = obj.pk
        transaction.on_commit(lambda: reconcile_node_task.delay(node_id))


@transaction.atomic
def create_registry_object(actor: Actor, obj: RegistryObject) -> RegistryObject:
    if isinstance(obj, BrokerCluster) and obj.is_default:
        BrokerCluster.objects.filter(is_default=True).update(is_default=False)
    create_audited(actor, obj)
    _reconcile_soon(obj)
    return obj


@transaction.atomic
def update_registry_object(actor: Actor, obj: RegistryObject, changes: dict[str, Any]) -> RegistryObject:
    if isinstance(obj, BrokerCluster) and changes.get("is_default"):
        BrokerCluster.objects.filter(is_default=True).exclude(pk=obj.pk).update(is_default=False)
    update_audited(actor, obj, changes)
    _reconcile_soon(obj)
    return obj


@transaction.atomic
def delete_registry_object(actor: Actor, obj: RegistryObject) -> None:
    delete_audited(actor, obj)
