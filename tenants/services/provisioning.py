"""Provisioning: push desired state to every broker node concerned, and repair drift.

State machine of a provisioned row (``ProvisionedModel``)::

    create/change -> provisioning --apply ok--> active
                                  --broker error--> error (status_message; task retries, reconcile repairs)
    delete -> deleting --removed from every broker--> (row deleted)
                       --broker error--> deleting + status_message (retried the same way)

``provision(kind, pk)`` is idempotent and safe to run concurrently with edits: it applies whatever
the row says now and marks it active only if ``generation`` did not move meanwhile.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial
from typing import Any

from django.db import models, transaction
from django.utils import timezone

from tenants.choices import AccessKeyStatus, BrokerHealth, ProvisioningStatus
from tenants.constants import NAMESPACE_SEPARATOR
from tenants.crypto import decrypt_secret
from tenants.errors import BrokerUnavailable
from tenants.models import (
    AccessKey,
    AclPolicy,
    BrokerGroup,
    BrokerNode,
    ConsumerGroup,
    ProvisionedModel,
    Quota,
    Tenant,
    Topic,
    TopicPlacement,
)
from tenants.services.gateway import (
    AccessKeySpec,
    AclSpec,
    BrokerGateway,
    GroupSpec,
    GrpcBrokerGateway,
    QuotaSpec,
    TopicSpec,
)
from tenants.services.limits import effective_limits, overlay
from tenants.services.placement import cluster_for, place_topic

__all__ = (
    "BrokerGateway",
    "ProvisionResult",
    "ReconcileReport",
    "ResourceKind",
    "enqueue_provision",
    "enqueue_tenant_quotas",
    "get_gateway",
    "provision",
    "push_tenant_quotas",
    "reconcile_brokers",
    "reconcile_node",
    "set_gateway",
)

logger = logging.getLogger(__name__)

# Names the control plane owns on a broker: "{namespace}%{name}". Retry/DLQ/system names start
# with "%" or carry no namespace and are left alone.
MANAGED_NAME = re.compile(r"^[a-z0-9_-]+%[A-Za-z0-9_-]+$")
# Keys, ACLs and quotas always carry a namespace; those in tenant-shaped namespaces are ours.
MANAGED_NAMESPACE = re.compile(r"^[a-z0-9_-]+$")


class ResourceKind(StrEnum):
    TOPIC = "topic"
    CONSUMER_GROUP = "consumer_group"
    ACCESS_KEY = "access_key"
    ACL_POLICY = "acl_policy"
    QUOTA = "quota"


class ProvisionResult(StrEnum):
    ACTIVE = "active"
    DELETED = "deleted"
    SUPERSEDED = "superseded"  # applied, but a newer change is queued behind it
    GONE = "gone"  # the row no longer exists: nothing to do


MODELS: dict[ResourceKind, type[ProvisionedModel]] = {
    ResourceKind.TOPIC: Topic,
    ResourceKind.CONSUMER_GROUP: ConsumerGroup,
    ResourceKind.ACCESS_KEY: AccessKey,
    ResourceKind.ACL_POLICY: AclPolicy,
    ResourceKind.QUOTA: Quota,
}

#
# The gateway
#

_gateway: BrokerGateway | None = None


def get_gateway() -> BrokerGateway:
    """The process-wide gateway: the gRPC one unless a test or embedding set another."""
    global _gateway
    if _gateway is None:
        _gateway = GrpcBrokerGateway()
    return _gateway


def set_gateway(gateway: BrokerGateway | None) -> None:
    global _gateway
    _gateway = gateway


#
# Enqueueing (after commit, so a worker never reads a row that is not there yet)
#


def enqueue_provision(kind: ResourceKind, pk: int) -> None:
    from tenants.tasks import provision_resource_task

    transaction.on_commit(lambda: provision_resource_task.delay(str(kind), pk))


def enqueue_tenant_quotas(tenant_ids: Iterable[int]) -> None:
    from tenants.tasks import push_tenant_quotas_task

    for tenant_id in tenant_ids:
        transaction.on_commit(partial(push_tenant_quotas_task.delay, tenant_id))


#
# Specs from rows
#


def _topic_spec(topic: Topic, queue_count: int) -> TopicSpec:
    return TopicSpec(
        name=topic.qualified_name,
        queue_count=queue_count,
        message_type=topic.message_type,
        retention_hours=topic.retention_hours,
        tiered_retention_hours=topic.tiered_retention_hours,
        max_message_bytes=topic.max_message_bytes,
    )


def _group_spec(group: ConsumerGroup) -> GroupSpec:
    return GroupSpec(
        name=group.qualified_name,
        fifo=group.fifo,
        broadcast=group.broadcast,
        max_delivery_attempts=group.max_delivery_attempts,
        retry_policy=group.retry_policy,
        retry_initial_backoff_ms=group.retry_initial_backoff_ms,
        retry_max_backoff_ms=group.retry_max_backoff_ms,
    )


def _key_spec(key: AccessKey) -> AccessKeySpec:
    return AccessKeySpec(
        namespace=key.tenant.namespace,
        access_key=key.access_key,
        secret=decrypt_secret(key.secret_encrypted),
        expires_at_ms=int(key.expires_at.timestamp() * 1000) if key.expires_at else 0,
    )


def _acl_spec(policy: AclPolicy) -> AclSpec:
    """The policy in the form brokers store it (deduplicated actions, networks, "" for "*")."""
    cidrs = (str(ipaddress.ip_network(c.strip(), strict=False)) for c in policy.source_cidrs)
    return AclSpec(
        namespace=policy.tenant.namespace,
        policy_id=str(policy.pk),
        principal=policy.principal,
        resource_type=policy.resource_type,
        resource_pattern=policy.resource_pattern,
        resource_name="" if policy.resource_name == "*" else policy.resource_name,
        actions=tuple(dict.fromkeys(policy.actions)),
        source_cidrs=tuple(dict.fromkeys(cidrs)),
        decision=policy.decision,
    )


def _quota_spec(quota: Quota) -> QuotaSpec:
    tenant_limits = effective_limits(quota.tenant)
    if quota.topic_id is not None:
        return QuotaSpec(
            quota.tenant.namespace, "topic", _qualified(quota.tenant, quota.topic), overlay({}, quota)
        )
    if quota.group_id is not None:
        return QuotaSpec(
            quota.tenant.namespace, "group", _qualified(quota.tenant, quota.group), overlay({}, quota)
        )
    return QuotaSpec(quota.tenant.namespace, "tenant", "", tenant_limits)


def _qualified(tenant: Tenant, obj: Topic | ConsumerGroup | None) -> str:
    return f"{tenant.namespace}{NAMESPACE_SEPARATOR}{obj.name if obj is not None else ''}"


#
# Which nodes are concerned
#


def _nodes(**filters: Any) -> list[BrokerNode]:
    return list(BrokerNode.objects.filter(enabled=True, **filters).select_related("group"))


def _tenant_nodes(tenant: Tenant) -> list[BrokerNode]:
    """Every node of every cluster that holds (or would hold) something of the tenant."""
    cluster_ids = set(Topic.objects.filter(tenant=tenant).values_list("cluster_id", flat=True))
    cluster_ids |= set(ConsumerGroup.objects.filter(tenant=tenant).values_list("cluster_id", flat=True))
    home = cluster_for(tenant)
    if home is not None:
        cluster_ids.add(home.pk)
    cluster_ids.discard(None)
    return _nodes(group__cluster_id__in=cluster_ids)


def _require(nodes: list[BrokerNode], what: str) -> list[BrokerNode]:
    if not nodes:
        raise BrokerUnavailable(f"No broker node is registered to serve {what}.")
    return nodes


#
# Apply / remove per kind
#


def _apply_topic(gw: BrokerGateway, topic: Topic) -> None:
    if not place_topic(topic):
        raise BrokerUnavailable("No broker cluster with broker groups is available for the topic.")
    placements = dict(
        TopicPlacement.objects.filter(topic=topic).values_list("broker_group_id", "queue_count")
    )
    nodes = _require(_nodes(group__cluster_id=topic.cluster_id), f"cluster {topic.cluster}")
    for node in nodes:
        count = placements.get(node.group_id)
        if count:
            gw.upsert_topic(node.endpoint, _topic_spec(topic, count))
        else:  # placement moved away from this group (queue count lowered)
            gw.delete_topic(node.endpoint, topic.qualified_name)


def _remove_topic(gw: BrokerGateway, topic: Topic) -> None:
    for node in _nodes(group__cluster_id=topic.cluster_id) if topic.cluster_id else []:
        gw.delete_topic(node.endpoint, topic.qualified_name)


def _apply_group(gw: BrokerGateway, group: ConsumerGroup) -> None:
    if group.cluster_id is None:
        group.cluster = cluster_for(group.tenant)
        if group.cluster is None:
            raise BrokerUnavailable("No broker cluster is available for the consumer group.")
        ConsumerGroup.objects.filter(pk=group.pk).update(cluster=group.cluster)
    for node in _require(_nodes(group__cluster_id=group.cluster_id), f"cluster {group.cluster}"):
        gw.upsert_group(node.endpoint, _group_spec(group))


def _remove_group(gw: BrokerGateway, group: ConsumerGroup) -> None:
    for node in _nodes(group__cluster_id=group.cluster_id) if group.cluster_id else []:
        gw.delete_group(node.endpoint, group.qualified_name)


def _apply_key(gw: BrokerGateway, key: AccessKey) -> None:
    nodes = _tenant_nodes(key.tenant)
    for node in nodes:
        if key.is_usable:
            gw.put_access_key(node.endpoint, _key_spec(key))
        else:
            gw.delete_access_key(node.endpoint, key.tenant.namespace, key.access_key)


def _remove_key(gw: BrokerGateway, key: AccessKey) -> None:
    for node in _tenant_nodes(key.tenant):
        gw.delete_access_key(node.endpoint, key.tenant.namespace, key.access_key)


def _apply_acl(gw: BrokerGateway, policy: AclPolicy) -> None:
    for node in _tenant_nodes(policy.tenant):
        gw.put_acl(node.endpoint, _acl_spec(policy))


def _remove_acl(gw: BrokerGateway, policy: AclPolicy) -> None:
    for node in _tenant_nodes(policy.tenant):
        gw.delete_acl(node.endpoint, policy.tenant.namespace, str(policy.pk))


def _apply_quota(gw: BrokerGateway, quota: Quota) -> None:
    spec = _quota_spec(quota)
    for node in _tenant_nodes(quota.tenant):
        gw.put_quota(node.endpoint, spec)


def _remove_quota(gw: BrokerGateway, quota: Quota) -> None:
    spec = _quota_spec(quota)  # a deleting tenant quota no longer counts: the plan's limits
    for node in _tenant_nodes(quota.tenant):
        if spec.scope == "tenant":
            gw.put_quota(node.endpoint, spec)
        else:
            gw.delete_quota(node.endpoint, spec.namespace, spec.scope, spec.name)


@dataclass(frozen=True, slots=True)
class _Handler:
    apply: Callable[[BrokerGateway, Any], None]
    remove: Callable[[BrokerGateway, Any], None]
    related: tuple[str, ...] = ("tenant",)


HANDLERS: dict[ResourceKind, _Handler] = {
    ResourceKind.TOPIC: _Handler(_apply_topic, _remove_topic, ("tenant", "cluster")),
    ResourceKind.CONSUMER_GROUP: _Handler(_apply_group, _remove_group, ("tenant", "cluster")),
    ResourceKind.ACCESS_KEY: _Handler(_apply_key, _remove_key),
    ResourceKind.ACL_POLICY: _Handler(_apply_acl, _remove_acl),
    ResourceKind.QUOTA: _Handler(_apply_quota, _remove_quota, ("tenant", "topic", "group")),
}


def provision(kind: ResourceKind | str, pk: int, gateway: BrokerGateway | None = None) -> ProvisionResult:
    """Apply one row's desired state to every broker node concerned (or remove it when deleting).

    Raises BrokerUnavailable (after recording the reason on the row) so the caller can retry.
    """
    kind = ResourceKind(kind)
    model = MODELS[kind]
    handler = HANDLERS[kind]
    gw = gateway or get_gateway()
    obj = model._default_manager.select_related(*handler.related).filter(pk=pk).first()
    if obj is None:
        return ProvisionResult.GONE
    generation = obj.generation
    current = model._default_manager.filter(pk=pk, generation=generation)
    deleting = obj.status == ProvisioningStatus.DELETING
    try:
        if deleting:
            handler.remove(gw, obj)
        else:
            handler.apply(gw, obj)
    except BrokerUnavailable as exc:
        status = ProvisioningStatus.DELETING if deleting else ProvisioningStatus.ERROR
        current.update(status=status, status_message=str(exc)[:2000], updated=timezone.now())
        logger.warning("provisioning %s %s failed: %s", kind, pk, exc, extra={"kind": str(kind), "pk": pk})
        raise
    if deleting:
        if current.delete()[0]:
            return ProvisionResult.DELETED
        return ProvisionResult.SUPERSEDED
    updated = current.exclude(status=ProvisioningStatus.DELETING).update(
        status=ProvisioningStatus.ACTIVE,
        status_message="",
        applied_generation=generation,
        updated=timezone.now(),
    )
    return ProvisionResult.ACTIVE if updated else ProvisionResult.SUPERSEDED


def push_tenant_quotas(tenant_id: int, gateway: BrokerGateway | None = None) -> int:
    """Push the tenant's effective limits and every override to its nodes; returns nodes reached."""
    gw = gateway or get_gateway()
    tenant = Tenant.objects.select_related("plan", "cluster").filter(pk=tenant_id).first()
    if tenant is None:
        return 0
    limits = effective_limits(tenant)
    overrides = [
        _quota_spec(q)
        for q in Quota.objects.filter(tenant=tenant)
        .exclude(topic__isnull=True, group__isnull=True)
        .exclude(status=ProvisioningStatus.DELETING)
        .select_related("tenant", "topic", "group")
    ]
    nodes = _tenant_nodes(tenant)
    for node in nodes:
        gw.put_quota(node.endpoint, QuotaSpec(tenant.namespace, "tenant", "", limits))
        for spec in overrides:
            gw.put_quota(node.endpoint, spec)
    return len(nodes)


#
# Reconcile
#


@dataclass(slots=True)
class ReconcileReport:
    """What one reconcile pass did, for logs and tests."""

    nodes_ok: int = 0
    nodes_unreachable: int = 0
    repaired: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    retried: int = 0
    expired_keys: int = 0


def _desired_on_group(broker_group: BrokerGroup) -> tuple[dict[str, TopicSpec], dict[str, GroupSpec]]:
    topics = {
        spec.name: spec
        for spec in (
            _topic_spec(p.topic, p.queue_count)
            for p in TopicPlacement.objects.filter(broker_group=broker_group)
            .exclude(topic__status=ProvisioningStatus.DELETING)
            .select_related("topic__tenant")
        )
    }
    groups = {
        g.qualified_name: _group_spec(g)
        for g in ConsumerGroup.objects.filter(cluster_id=broker_group.cluster_id)
        .exclude(status=ProvisioningStatus.DELETING)
        .select_related("tenant")
    }
    return topics, groups


def reconcile_node(
    node: BrokerNode, gateway: BrokerGateway | None = None, report: ReconcileReport | None = None
) -> ReconcileReport:
    """Make one node hold exactly the desired topics, groups, access keys, ACLs and quotas.

    A broker rebuilt empty gets everything back; what differs is repaired; extra managed objects
    (deleted, revoked or expired while it was away) are removed.
    """
    gw = gateway or get_gateway()
    report = report if report is not None else ReconcileReport()
    desired_topics, desired_groups = _desired_on_group(node.group)
    try:
        actual_topics = gw.list_topics(node.endpoint)
        for name, spec in desired_topics.items():
            if name not in actual_topics or spec.drifted_from(actual_topics[name]):
                gw.upsert_topic(node.endpoint, spec)
                report.repaired.append(f"{node.name}:topic:{name}")
        for name in actual_topics.keys() - desired_topics.keys():
            if MANAGED_NAME.match(name):
                gw.delete_topic(node.endpoint, name)
                report.removed.append(f"{node.name}:topic:{name}")
        actual_groups = gw.list_groups(node.endpoint)
        for name, gspec in desired_groups.items():
            if name not in actual_groups or gspec.drifted_from(actual_groups[name]):
                gw.upsert_group(node.endpoint, gspec)
                report.repaired.append(f"{node.name}:group:{name}")
        for name in actual_groups.keys() - desired_groups.keys():
            if MANAGED_NAME.match(name):
                gw.delete_group(node.endpoint, name)
                report.removed.append(f"{node.name}:group:{name}")
        _reconcile_security(gw, node, report)
    except BrokerUnavailable as exc:
        report.nodes_unreachable += 1
        BrokerNode.objects.filter(pk=node.pk).update(
            health=BrokerHealth.UNREACHABLE, health_message=str(exc)[:2000], last_reconciled=timezone.now()
        )
        logger.warning("reconcile of %s failed: %s", node.name, exc, extra={"node": node.name})
        return report
    now = timezone.now()
    BrokerNode.objects.filter(pk=node.pk).update(
        health=BrokerHealth.HEALTHY, health_message="", last_seen=now, last_reconciled=now
    )
    report.nodes_ok += 1
    return report


def _tenant_ids_on_cluster(cluster_id: int) -> set[int]:
    """Tenants whose keys, ACLs and quotas the cluster's nodes hold (as ``_tenant_nodes``)."""
    ids = set(Topic.objects.filter(cluster_id=cluster_id).values_list("tenant_id", flat=True))
    ids |= set(ConsumerGroup.objects.filter(cluster_id=cluster_id).values_list("tenant_id", flat=True))
    ids |= set(Tenant.objects.filter(cluster_id=cluster_id).values_list("pk", flat=True))
    fallback = cluster_for(Tenant())  # where tenants without a cluster of their own go
    if fallback is not None and fallback.pk == cluster_id:
        ids |= set(Tenant.objects.filter(cluster__isnull=True).values_list("pk", flat=True))
    return ids


def _desired_security(
    cluster_id: int,
) -> tuple[dict[str, AccessKeySpec], dict[tuple[str, str], AclSpec], dict[tuple[str, str, str], QuotaSpec]]:
    tenant_ids = _tenant_ids_on_cluster(cluster_id)
    live = ~models.Q(status=ProvisioningStatus.DELETING)
    keys = {
        key.access_key: _key_spec(key)
        for key in AccessKey.objects.filter(live, tenant_id__in=tenant_ids).select_related("tenant")
        if key.is_usable
    }
    acls = {
        (policy.tenant.namespace, str(policy.pk)): _acl_spec(policy)
        for policy in AclPolicy.objects.filter(live, tenant_id__in=tenant_ids).select_related("tenant")
    }
    quotas: dict[tuple[str, str, str], QuotaSpec] = {}
    for tenant in Tenant.objects.filter(pk__in=tenant_ids).select_related("plan"):
        spec = QuotaSpec(tenant.namespace, "tenant", "", effective_limits(tenant))
        quotas[spec.key] = spec
    overrides = Quota.objects.filter(live, tenant_id__in=tenant_ids).exclude(
        topic__isnull=True, group__isnull=True
    )
    for quota in overrides.select_related("tenant", "topic", "group"):
        spec = _quota_spec(quota)
        quotas[spec.key] = spec
    return keys, acls, quotas


def _reconcile_security(gw: BrokerGateway, node: BrokerNode, report: ReconcileReport) -> None:
    """Make the node hold exactly the usable keys, ACLs and quotas of the tenants it serves.

    The broker is listed before the desired state is read: anything on it was committed first, so
    a key created meanwhile is never taken for an extra.
    """
    actual_keys = gw.list_access_keys(node.endpoint)
    actual_acls = gw.list_acls(node.endpoint)
    actual_quotas = gw.list_quotas(node.endpoint)
    keys, acls, quotas = _desired_security(node.group.cluster_id)
    for ak, kspec in keys.items():
        current_key = actual_keys.get(ak)
        if current_key is None or not kspec.matches(current_key):
            gw.put_access_key(node.endpoint, kspec)
            report.repaired.append(f"{node.name}:access_key:{ak}")
    for ak in actual_keys.keys() - keys.keys():
        if MANAGED_NAMESPACE.match(actual_keys[ak].namespace):
            gw.delete_access_key(node.endpoint, actual_keys[ak].namespace, ak)
            report.removed.append(f"{node.name}:access_key:{ak}")
    for acl_key, aspec in acls.items():
        if actual_acls.get(acl_key) != aspec:
            gw.put_acl(node.endpoint, aspec)
            report.repaired.append(f"{node.name}:acl:{'/'.join(acl_key)}")
    for ns, policy_id in actual_acls.keys() - acls.keys():
        if MANAGED_NAMESPACE.match(ns):
            gw.delete_acl(node.endpoint, ns, policy_id)
            report.removed.append(f"{node.name}:acl:{ns}/{policy_id}")
    for quota_key, qspec in quotas.items():
        current = actual_quotas.get(quota_key)
        if current is None or dict(current.limits) != dict(qspec.limits):
            gw.put_quota(node.endpoint, qspec)
            report.repaired.append(f"{node.name}:quota:{'/'.join(quota_key)}")
    for ns, scope, name in actual_quotas.keys() - quotas.keys():
        if MANAGED_NAMESPACE.match(ns):
            gw.delete_quota(node.endpoint, ns, scope, name)
            report.removed.append(f"{node.name}:quota:{ns}/{scope}/{name}")


def _expire_access_keys() -> int:
    """Revoke keys whose rotation overlap ended; brokers drop them on the re-push that follows."""
    expired = AccessKey.objects.filter(key_status=AccessKeyStatus.ACTIVE, expires_at__lte=timezone.now())
    count = 0
    for key in expired:
        with transaction.atomic():
            AccessKey.objects.filter(pk=key.pk).update(
                key_status=AccessKeyStatus.REVOKED,
                revoked_at=timezone.now(),
                status=ProvisioningStatus.PROVISIONING,
                generation=models.F("generation") + 1,
            )
            enqueue_provision(ResourceKind.ACCESS_KEY, key.pk)
        count += 1
    return count


def reconcile_brokers(gateway: BrokerGateway | None = None) -> ReconcileReport:
    """One pass over every enabled node, then a retry of every row not yet active."""
    gw = gateway or get_gateway()
    report = ReconcileReport(expired_keys=_expire_access_keys())
    for node in BrokerNode.objects.filter(enabled=True).select_related("group"):
        reconcile_node(node, gw, report)
    for kind, model in MODELS.items():
        pending = model._default_manager.exclude(status=ProvisioningStatus.ACTIVE).values_list(
            "pk", flat=True
        )
        for pk in list(pending):
            report.retried += 1
            try:
                provision(kind, pk, gw)
            except BrokerUnavailable:
                continue  # recorded on the row; the next pass tries again
    logger.info("reconcile: %s", describe(report))
    return report


def describe(report: ReconcileReport) -> str:
    """A reconcile's counts and what it repaired and removed, as its log line gives them."""
    return (
        f"{report.nodes_ok} nodes ok, {report.nodes_unreachable} unreachable, {len(report.repaired)} "
        f"repaired, {len(report.removed)} removed, {report.retried} retried{_named(report)}"
    )


def _named(report: ReconcileReport, most: int = 10) -> str:
    """What a pass repaired and removed, by name (the first ``most`` of each): drift an operator
    should be able to trace to its cause."""
    parts = []
    for what, names in (("repaired", report.repaired), ("removed", report.removed)):
        if names:
            more = f" and {len(names) - most} more" if len(names) > most else ""
            parts.append(f"{what}: {', '.join(names[:most])}{more}")
    return "; " + "; ".join(parts) if parts else ""
