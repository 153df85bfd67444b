"""django-filter FilterSets for the API; tenant filters come as ``tenant_id`` / ``tenant`` (namespace)."""

from __future__ import annotations

import django_filters as filters

from tenants.models import (
    AccessKey,
    AclPolicy,
    AuditEvent,
    BrokerCluster,
    BrokerGroup,
    BrokerNode,
    ConsumerGroup,
    Membership,
    Plan,
    Quota,
    Tenant,
    Topic,
)

__all__ = (
    "AccessKeyFilterSet",
    "AclPolicyFilterSet",
    "AuditEventFilterSet",
    "BrokerClusterFilterSet",
    "BrokerGroupFilterSet",
    "BrokerNodeFilterSet",
    "ConsumerGroupFilterSet",
    "MembershipFilterSet",
    "PlanFilterSet",
    "QuotaFilterSet",
    "TenantFilterSet",
    "TopicFilterSet",
)


class TenantOwnedFilterSet(filters.FilterSet):
    # A plain number/namespace (not a choice among tenants) so a filter never reveals a tenant exists.
    tenant_id = filters.NumberFilter(field_name="tenant_id")
    tenant = filters.CharFilter(field_name="tenant__namespace")


class TenantFilterSet(filters.FilterSet):
    class Meta:
        model = Tenant
        fields = {
            "namespace": ["exact"],
            "name": ["exact", "icontains"],
            "status": ["exact"],
            "plan": ["exact"],
        }


class MembershipFilterSet(TenantOwnedFilterSet):
    user = filters.CharFilter(field_name="user__username")

    class Meta:
        model = Membership
        fields = ("role",)


class PlanFilterSet(filters.FilterSet):
    class Meta:
        model = Plan
        fields = {"name": ["exact"], "is_default": ["exact"]}


class AccessKeyFilterSet(TenantOwnedFilterSet):
    class Meta:
        model = AccessKey
        fields = ("access_key", "key_status", "status")


class TopicFilterSet(TenantOwnedFilterSet):
    class Meta:
        model = Topic
        fields = {
            "name": ["exact", "startswith"],
            "message_type": ["exact"],
            "status": ["exact"],
            "cluster": ["exact"],
        }


class ConsumerGroupFilterSet(TenantOwnedFilterSet):
    class Meta:
        model = ConsumerGroup
        fields = {
            "name": ["exact", "startswith"],
            "fifo": ["exact"],
            "broadcast": ["exact"],
            "status": ["exact"],
        }


class AclPolicyFilterSet(TenantOwnedFilterSet):
    class Meta:
        model = AclPolicy
        fields = ("principal", "resource_type", "resource_pattern", "decision", "status")


class QuotaFilterSet(TenantOwnedFilterSet):
    class Meta:
        model = Quota
        fields = ("topic", "group", "status")


class BrokerClusterFilterSet(filters.FilterSet):
    class Meta:
        model = BrokerCluster
        fields = ("name", "is_default")


class BrokerGroupFilterSet(filters.FilterSet):
    cluster_id = filters.NumberFilter(field_name="cluster_id")
    cluster = filters.CharFilter(field_name="cluster__name")

    class Meta:
        model = BrokerGroup
        fields = ("name",)


class BrokerNodeFilterSet(filters.FilterSet):
    group_id = filters.NumberFilter(field_name="group_id")
    group = filters.CharFilter(field_name="group__name")

    class Meta:
        model = BrokerNode
        fields = ("name", "health", "enabled", "broker_id")


class AuditEventFilterSet(TenantOwnedFilterSet):
    actor = filters.CharFilter(field_name="actor_name")
    since = filters.IsoDateTimeFilter(field_name="created", lookup_expr="gte")
    until = filters.IsoDateTimeFilter(field_name="created", lookup_expr="lt")

    class Meta:
        model = AuditEvent
        fields = ("action", "object_type", "object_id")
