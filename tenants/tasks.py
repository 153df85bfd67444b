"""Celery tasks of the control plane: thin wrappers that take ids and call services.provisioning."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task

from tenants.constants import PROVISION_MAX_RETRIES, PROVISION_RETRY_BACKOFF_MAX_S, PROVISION_RETRY_BACKOFF_S
from tenants.errors import BrokerUnavailable
from tenants.services import provisioning

__all__ = (
    "provision_resource_task",
    "push_tenant_quotas_task",
    "reconcile_brokers_task",
    "reconcile_node_task",
)

logger = logging.getLogger(__name__)


def _backoff(retries: int) -> int:
    return int(min(PROVISION_RETRY_BACKOFF_MAX_S, PROVISION_RETRY_BACKOFF_S * 2**retries))


@shared_task(bind=True, name="tenants.provision_resource", max_retries=PROVISION_MAX_RETRIES, trail=False)
def provision_resource_task(self: Any, kind: str, pk: int) -> str:
    """Apply one topic/group/key/ACL/quota to its brokers; retried with exponential backoff."""
    try:
        return str(provisioning.provision(kind, pk))
    except BrokerUnavailable as exc:
        if self.request.retries >= self.max_retries:
            logger.warning(
                "giving up on %s %s; reconcile will retry", kind, pk, extra={"kind": kind, "pk": pk}
            )
            return "error"
        raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc


@shared_task(bind=True, name="tenants.push_tenant_quotas", max_retries=PROVISION_MAX_RETRIES, trail=False)
def push_tenant_quotas_task(self: Any, tenant_id: int) -> int:
    """Re-push a tenant's effective limits (after a plan or quota change)."""
    try:
        return provisioning.push_tenant_quotas(tenant_id)
    except BrokerUnavailable as exc:
        if self.request.retries >= self.max_retries:
            return 0
        raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc


@shared_task(name="tenants.reconcile_node", trail=False)
def reconcile_node_task(node_id: int) -> int:
    """Reconcile one node now (e.g. right after it is registered)."""
    from tenants.models import BrokerNode

    node = BrokerNode.objects.select_related("group").filter(pk=node_id, enabled=True).first()
    if node is None:
        return 0
    return provisioning.reconcile_node(node).nodes_ok


@shared_task(name="tenants.reconcile_brokers", trail=False)
def reconcile_brokers_task() -> dict[str, int]:
    """The periodic repair (Celery beat, ``MQ_RECONCILE_INTERVAL_S``): desired vs actual on every node."""
    report = provisioning.reconcile_brokers()
    return {
        "nodes_ok": report.nodes_ok,
        "nodes_unreachable": report.nodes_unreachable,
        "repaired": len(report.repaired),
        "removed": len(report.removed),
        "retried": report.retried,
    }
